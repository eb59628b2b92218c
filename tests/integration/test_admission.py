"""The validating admission webhook on the real API server: a bad Workload is refused at
``kubectl apply`` (and ``--dry-run=server``) with one line naming the field, by the same rules
that make a stored one ``Invalid`` (issue 29).

``orca run --webhook-host 127.0.0.1 --webhook-port P`` serves the webhook and registers it by
URL, as against the dev cluster. The table holds the mistakes only orca can see (CEL that does
not compile, is ill-typed or too costly, an unknown runtime alias or PriorityClass), refused by
the webhook, and, for the complete picture, those the CRD's schema refuses before any webhook
is asked. Then what happens around it: an update that breaks a valid Workload, an update that
leaves the spec alone, the operator down (failurePolicy Ignore: stored, and Invalid once the
operator decides it, with the webhook's very message), and what the webhook port survives.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from tests.support.factories import admission_review as review
from tests.support.factories import workload_obj
from tests.support.harness import OperatorProcess, free_port, phase, plain_http

pytestmark = pytest.mark.controlplane

RESOURCE = "workloads.orca.cloudinit.dev"
DENIED = 'admission webhook "validate-workloads.orca.cloudinit.dev" denied the request: '


@dataclass(frozen=True)
class Mistake:
    """A bad Workload spec, who refuses it (``webhook`` or the CRD ``schema``), and what the
    refusal must say: the field and the words a user acts on."""

    id: str
    spec: dict[str, Any]
    by: str
    says: tuple[str, ...]


def service(**spec: Any) -> dict[str, Any]:
    return {"kind": "Service", "count": 2, **spec}


OVER_COST = (
    "node.labels.all(a, node.labels.all(b, node.labels.all(c, "
    'node.tags.all(d, a + b + c + d != ""))))'
)

MISTAKES = [
    # What only orca can see: the webhook refuses it.
    Mistake(
        "cel-typo",
        service(constraints=['"ssd" in node.tagz']),
        "webhook",
        ("spec.constraints[0]", "node has no field 'tagz'", "did you mean 'tags'"),
    ),
    Mistake(
        "unknown-field-node.tag",
        service(constraints=['"ssd" in node.tag']),
        "webhook",
        ("spec.constraints[0]", "node has no field 'tag'"),
    ),
    Mistake(
        "unknown-variable",
        service(constraints=['"ssd" in nodes.tags']),
        "webhook",
        ("spec.constraints[0]", "undeclared reference to 'nodes'"),
    ),
    Mistake(
        "syntax-error",
        service(constraints=["node.kind == "]),
        "webhook",
        ("spec.constraints[0]", "syntax error"),
    ),
    Mistake(
        "single-equals",
        service(constraints=['node.kind = "linux"']),
        "webhook",
        ("spec.constraints[0]", "syntax error", "'='"),
    ),
    Mistake(
        "constraint-not-bool",
        service(constraints=["node.cpu"]),
        "webhook",
        ("spec.constraints[0]", "must evaluate to a bool, not int"),
    ),
    Mistake(
        "string-vs-int",
        service(constraints=["node.kind == 3"]),
        "webhook",
        ("spec.constraints[0]", "no matching overload for '_==_'", "(string, int)"),
    ),
    Mistake(
        "quantity-as-string",
        service(constraints=['node.memory > "1Gi"']),
        "webhook",
        ("spec.constraints[0]", "(int, string)"),
    ),
    Mistake(
        "unknown-function",
        service(constraints=['node.tags.exists_two(t, t == "a")']),
        "webhook",
        ("spec.constraints[0]", "unknown function 'exists_two'"),
    ),
    Mistake(
        "second-constraint",
        service(constraints=['"ssd" in node.tags', "node.labels.zone"]),
        "webhook",
        ("spec.constraints[1]", "must evaluate to a bool, not string"),
    ),
    Mistake(
        "affinity-ill-typed",
        service(affinity=[{"target": "node.cpu + 1", "weight": 10}]),
        "webhook",
        ("spec.affinity[0].target", "must evaluate to a bool, not int"),
    ),
    Mistake(
        "affinity-unknown-field",
        service(affinity=[{"target": 'node.zone == "a"', "weight": 10}]),
        "webhook",
        ("spec.affinity[0].target", "node has no field 'zone'"),
    ),
    Mistake(
        "over-cost",
        service(constraints=[OVER_COST]),
        "webhook",
        ("spec.constraints[0]", "exceeds the budget"),
    ),
    Mistake(
        "unknown-runtime-alias",
        service(runtime={"oneOf": ["pve-lxc"]}),
        "webhook",
        ("spec.runtime.oneOf[0]", "unknown runtime alias"),
    ),
    Mistake(
        "unknown-priorityclass",
        service(priorityClassName="gold-not-there"),
        "webhook",
        ("spec.priorityClassName", "no PriorityClass with name gold-not-there was found"),
    ),
    # What the CRD's schema refuses: the API server, before any webhook.
    Mistake(
        "count-on-job",
        {"kind": "Job", "count": 3},
        "schema",
        ("spec.count", "count is only allowed when kind is Service"),
    ),
    Mistake("unknown-kind", {"kind": "Deployment"}, "schema", ("spec.kind", "Unsupported value")),
    Mistake("count-zero", service(count=0), "schema", ("spec.count", "should be greater than")),
    Mistake(
        "weight-out-of-range",
        service(affinity=[{"target": "redis", "weight": 500}]),
        "schema",
        ("spec.affinity[0].weight", "should be less than or equal to 100"),
    ),
    Mistake(
        "schedule-on-service",
        service(schedule={"mode": "EveryNode"}),
        "schema",
        ("spec", "schedule"),
    ),
    Mistake(
        "bad-strategy", service(strategy="Pack"), "schema", ("spec.strategy", "Unsupported value")
    ),
    Mistake("bad-quantity", service(resources={"cpu": "lots"}), "schema", ("spec.resources.cpu",)),
    Mistake(
        "constraint-too-long",
        service(constraints=["true || " * 200 + "true"]),
        "schema",
        ("spec.constraints[0]", "Too long"),
    ),
    Mistake(
        "spread-on-job",
        {"kind": "Job", "topologySpread": [{"topologyKey": "zone", "maxSkew": 1}]},
        "schema",
        ("spec", "topologySpread"),
    ),
    Mistake(
        "bad-toleration-operator",
        service(tolerations=[{"key": "a", "operator": "Maybe", "effect": "NoSchedule"}]),
        "schema",
        ("spec.tolerations[0].operator", "Unsupported value"),
    ),
]


@pytest.fixture(scope="module")
def webhook(
    control_plane: ControlPlane,
    kubectl: KubectlRunner,
    installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, OperatorProcess]]:
    """A namespace and an operator serving the webhook for it, registered by URL."""
    namespace = f"adm-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace, check=True)
    op = start_webhook(control_plane, namespace, tmp_path_factory.mktemp("admission"))
    try:
        yield namespace, op
    finally:
        op.stop()
        kubectl(
            "delete",
            "validatingwebhookconfiguration",
            configuration_of(namespace),
            "--ignore-not-found",
        )
        kubectl("delete", RESOURCE, "--all", "-n", namespace, "--wait=false")


def configuration_of(namespace: str) -> str:
    return f"orca-test-{namespace}"


def start_webhook(
    plane: ControlPlane, namespace: str, workdir: Path, port: int | None = None
) -> OperatorProcess:
    port = port or free_port()
    op = OperatorProcess(
        plane.kubeconfig_path,
        workdir / f"operator-{uuid.uuid4().hex[:4]}.log",
        namespaces=[namespace],
        lease_namespace=namespace,
        extra=[
            "--webhook-host=127.0.0.1",
            f"--webhook-port={port}",
            "--webhook-bind-address=127.0.0.1",
            f"--webhook-configuration={configuration_of(namespace)}",
        ],
    )
    op.webhook_port = port  # type: ignore[attr-defined]
    try:
        op.wait_live()
        wait_ready(op)
        # Registered, and the API server (whose webhook informer follows the configuration)
        # calls it: a bad Workload's dry run is refused.
        probe = workload_obj("probe", namespace, kind="Job", constraints=["node.cpu"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tried = apply(plane.kubectl, probe, "--dry-run=server")
            if DENIED in tried.stderr:
                return op
            time.sleep(0.3)
        raise AssertionError(f"webhook not called after 30 s:\n{op.log()}")
    except BaseException:
        op.stop()  # never left running past a failed start
        raise


def wait_ready(op: OperatorProcess, timeout: float = 60.0) -> None:
    url = f"http://127.0.0.1:{op.metrics_port}/readyz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"operator not ready:\n{op.log()}")


def apply(
    kubectl: KubectlRunner, obj: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    return kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(obj))


def denial(stderr: str) -> str:
    """The webhook's refusal in kubectl's output: one line (kubectl may wrap it in lines of
    its own, as for an apply that patches)."""
    (line,) = [line for line in stderr.splitlines() if DENIED in line]
    return line.split(DENIED, 1)[1]


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"not one line:\n{stderr}"
    return lines[0]


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_a_bad_workload_is_refused_at_apply(
    mistake: Mistake, webhook: tuple[str, OperatorProcess], kubectl: KubectlRunner
) -> None:
    namespace, _ = webhook
    name = f"bad-{mistake.id}"[:50].rstrip("-.").lower()
    obj = {**workload_obj(name, namespace), "spec": mistake.spec}
    for extra in (("--dry-run=server",), ()):
        result = apply(kubectl, obj, *extra)
        assert result.returncode != 0, f"{mistake.id} {extra}: accepted\n{result.stdout}"
        # The webhook's refusal is one line; the schema's are the API server's own list.
        line = one_line(result.stderr) if mistake.by == "webhook" else result.stderr
        print(f"{mistake.id} {' '.join(extra) or 'apply'}: {' '.join(line.split())}")
        for words in mistake.says:
            assert words in line, f"{mistake.id}: {words!r} not in {line!r}"
        assert (DENIED in line) == (mistake.by == "webhook"), line
    stored = kubectl("get", RESOURCE, name, "-n", namespace)
    assert stored.returncode != 0 and "NotFound" in stored.stderr, "refused, yet stored"


def test_a_valid_workload_passes_and_an_update_that_breaks_it_is_refused(
    webhook: tuple[str, OperatorProcess], kubectl: KubectlRunner
) -> None:
    namespace, _ = webhook
    good = workload_obj(
        "good", namespace, kind="Service", count=2, constraints=['"ssd" in node.tags']
    )
    created = apply(kubectl, good)
    assert created.returncode == 0, created.stderr
    broken = workload_obj(
        "good", namespace, kind="Service", count=2, constraints=['"ssd" in node.tag']
    )
    refused = apply(kubectl, broken)
    assert refused.returncode != 0
    assert denial(refused.stderr).startswith("spec.constraints[0]")
    stored = json.loads(
        kubectl("get", RESOURCE, "good", "-n", namespace, "-o", "json", check=True).stdout
    )
    assert stored["spec"]["constraints"] == ['"ssd" in node.tags'], "the bad update was stored"
    # kubectl scale is an update of the scale subresource: not a webhook matter.
    scaled = kubectl("scale", RESOURCE, "good", "-n", namespace, "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr


def test_an_update_that_leaves_the_spec_alone_is_never_refused(
    webhook: tuple[str, OperatorProcess],
    kubectl: KubectlRunner,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """A Workload stored while the webhook was away (here: created with the webhook's
    configuration pointing elsewhere) can still be labelled and deleted."""
    namespace, _ = webhook
    bad = workload_obj("stored-bad", namespace, kind="Job", constraints=["node.cpu"])
    dry = apply(kubectl, bad, "--dry-run=server")
    assert dry.returncode != 0  # the webhook would refuse it...
    create_bypassing_webhook(kubectl, namespace, bad)  # ...but it was stored
    labelled = kubectl("label", RESOURCE, "stored-bad", "-n", namespace, "team=blue")
    assert labelled.returncode == 0, labelled.stderr
    deleted = kubectl("delete", RESOURCE, "stored-bad", "-n", namespace, "--wait=false")
    assert deleted.returncode == 0, deleted.stderr


def create_bypassing_webhook(kubectl: KubectlRunner, namespace: str, obj: dict[str, Any]) -> None:
    """Store ``obj`` as if no webhook had answered: the configuration's namespace selector
    is pointed elsewhere for the moment."""
    name = configuration_of(namespace)
    original = json.loads(
        kubectl("get", "validatingwebhookconfiguration", name, "-o", "json", check=True).stdout
    )
    away = json.loads(json.dumps(original))
    away["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] = ["elsewhere"]
    kubectl("replace", "-f", "-", input=json.dumps(away), check=True)
    try:
        apply(kubectl, obj).check_returncode()
    finally:
        current = json.loads(
            kubectl("get", "validatingwebhookconfiguration", name, "-o", "json", check=True).stdout
        )
        current["webhooks"] = original["webhooks"]
        kubectl("replace", "-f", "-", input=json.dumps(current), check=True)


def test_operator_down_stores_and_the_operator_marks_it_invalid_with_the_same_message(
    control_plane: ControlPlane, kubectl: KubectlRunner, installed: None, tmp_path: Path
) -> None:
    """failurePolicy Ignore: with nobody answering the webhook, the apply goes through (the
    API server's call is refused at once); once an operator decides the Workload it is
    Invalid, and its message is the one the webhook gives for the same spec."""
    namespace = f"adm-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace, check=True)
    port = free_port()
    op = start_webhook(control_plane, namespace, tmp_path, port)
    try:
        spec_bad = {
            "kind": "Service",
            "count": 2,
            "constraints": ['"ssd" in node.tag'],
            "runtime": {"oneOf": ["pve-lxc"]},
        }
        refused = apply(
            kubectl, {**workload_obj("probe", namespace), "spec": spec_bad}, "--dry-run=server"
        )
        webhook_says = denial(refused.stderr)
        op.stop()
        # The configuration stays; the API server's call is refused; Ignore lets it through.
        stored = apply(kubectl, {**workload_obj("while-down", namespace), "spec": spec_bad})
        assert stored.returncode == 0, stored.stderr
        op = start_webhook(control_plane, namespace, tmp_path, port)
        deadline = time.monotonic() + 60
        obj: dict[str, Any] = {}
        while time.monotonic() < deadline:
            obj = json.loads(
                kubectl(
                    "get", RESOURCE, "while-down", "-n", namespace, "-o", "json", check=True
                ).stdout
            )
            if phase(obj) == "Invalid":
                break
            time.sleep(0.5)
        assert phase(obj) == "Invalid", obj.get("status")
        assert obj["status"]["message"] == webhook_says
        # A hung operator (SIGSTOP: the connection is accepted, nothing answers): the API
        # server waits out timeoutSeconds (5 s) and lets the apply through.
        op.freeze()
        try:
            started = time.monotonic()
            hung = apply(kubectl, {**workload_obj("while-hung", namespace), "spec": spec_bad})
            waited = time.monotonic() - started
        finally:
            op.thaw()
        assert hung.returncode == 0, hung.stderr
        print(f"apply while the webhook hung took {waited:.1f}s (timeoutSeconds: 5)")
    finally:
        op.stop()
        kubectl(
            "delete",
            "validatingwebhookconfiguration",
            configuration_of(namespace),
            "--ignore-not-found",
        )
        kubectl("delete", RESOURCE, "--all", "-n", namespace, "--wait=false")


# -- what the webhook port survives -----------------------------------------------------------


def post(
    port: int,
    body: bytes,
    content_type: str = "application/json",
    path: str = "/validate-workloads",
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=body,
        method="POST",
        headers={"Content-Type": content_type, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_what_the_webhook_is_sent_cannot_crash_or_stall_it(
    webhook: tuple[str, OperatorProcess], kubectl: KubectlRunner
) -> None:
    namespace, op = webhook
    port = op.webhook_port  # type: ignore[attr-defined]
    bad = workload_obj("direct", namespace, kind="Job", constraints=["node.cpu"])
    status, text = post(port, review(bad))
    answer = json.loads(text)["response"]
    assert (status, answer["allowed"], answer["uid"]) == (200, False, "u-1")
    assert "spec.constraints[0]" in answer["status"]["message"]
    cases = {
        "wrong content type": (post(port, review(bad), "text/plain"), 415),
        "not JSON": (post(port, b"{not json"), 400),
        "JSON, not a review": (post(port, b'{"kind": "Pod"}'), 400),
        "a review without a request": (post(port, b'{"kind": "AdmissionReview"}'), 400),
        "a review without an object": (post(port, review(None)), 400),
        "deeply nested JSON": (post(port, b"[" * 100_000 + b"]" * 100_000), 400),
        "an unknown resource": (
            post(
                port,
                review(bad, resource={"group": "apps", "version": "v1", "resource": "deployments"}),
            ),
            404,
        ),
        "an oversized body (9 MiB)": (post(port, b" " * (9 * 1024 * 1024)), 413),
    }
    for what, ((got, text), want) in cases.items():
        assert got == want, f"{what}: {got} {text!r}"
        assert len(text.strip().splitlines()) == 1, f"{what}: not one line: {text!r}"
    # Plain HTTP to the HTTPS port: no HTTP answer, at most a TLS alert, then closed.
    assert plain_http(port) == "closed"
    # A flood of idle connections (a TLS handshake never started) does not stall it: the
    # API server's next review is answered while they are open.
    flood = []
    try:
        for _ in range(300):
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        started = time.monotonic()
        refused = apply(kubectl, bad, "--dry-run=server")
        print(
            f"a review answered with 300 idle connections open: {time.monotonic() - started:.2f}s"
        )
        assert denial(refused.stderr).startswith("spec.constraints[0]")
    finally:
        for s in flood:
            s.close()
    assert op.process.poll() is None, op.log()
    assert "Traceback" not in op.log(), op.log()


def test_a_webhook_port_in_use_is_one_line_and_exit_2(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller.cli",
                "run",
                f"--kubeconfig={control_plane.kubeconfig_path}",
                "--liveness=none",
                f"--metrics-port={free_port()}",
                f"--webhook-port={port}",
                "--webhook-host=127.0.0.1",
                "-n",
                "default",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"error: webhook port {port} on 0.0.0.0: Address already in use"
    )
    assert "Traceback" not in result.stderr


def test_the_shipped_webhook_with_no_pod_behind_it_fails_open_locally(
    control_plane: ControlPlane, kubectl: KubectlRunner, installed: None
) -> None:
    """``manifests/default`` installs the configuration calling the Service ``orca-webhook``;
    with no operator Pod behind it (this cluster runs none) the API server finds no endpoint,
    lets the apply through (Ignore) and sends nothing anywhere: the dev control plane routes
    webhook calls to endpoints, never to a ClusterIP, which has no network here."""
    namespace = f"adm-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace, check=True)
    created = apply(kubectl, workload_obj("through", namespace, kind="Job"))
    assert created.returncode == 0, created.stderr
    log = (control_plane.directory / "kube-apiserver.log").read_text(errors="replace")
    calls = [line for line in log.splitlines() if "orca-webhook.orca-system.svc" in line]
    assert calls, "the API server never called the shipped webhook"
    assert all("no endpoints available for service" in c for c in calls), calls[-1]
    kubectl("delete", RESOURCE, "--all", "-n", namespace, "--wait=false")
