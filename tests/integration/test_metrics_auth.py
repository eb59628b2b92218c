"""``/metrics`` over HTTPS for who may read it, on the real API server (issue 29).

``orca run`` by default serves its metrics as kube-scheduler does: HTTPS, the bearer token
checked with a TokenReview, ``get`` on ``/metrics`` with a SubjectAccessReview (the
``orca-controller-metrics-reader`` ClusterRole grants it), the probes open. The scrape matrix:
no token, a token the API server does not know, a token for another audience, a token without
the role, a token with it, plain HTTP; then the caches (kube's 10 s), the probes, readiness,
and what the port survives.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from tests.support.harness import REPO_ROOT, OperatorProcess, plain_http

pytestmark = pytest.mark.controlplane

READER_ROLE = REPO_ROOT / "manifests" / "rbac" / "metrics-reader.yaml"


def https_get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=15, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@dataclass
class Secured:
    namespace: str
    op: OperatorProcess
    reader: str  # a token of a ServiceAccount bound to the metrics-reader role
    nobody: str  # a token of one without it
    other_audience: str  # the reader's, minted for another audience

    def scrape(self, token: str | None, path: str = "/metrics") -> tuple[int, str]:
        return https_get(self.op.metrics_port, path, token)


def token(kubectl: KubectlRunner, namespace: str, account: str, *extra: str) -> str:
    return kubectl("create", "token", account, "-n", namespace, *extra, check=True).stdout.strip()


@pytest.fixture(scope="module")
def secured(
    control_plane: ControlPlane,
    kubectl: KubectlRunner,
    installed: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Secured]:
    namespace = f"met-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace, check=True)
    kubectl("apply", "-f", str(READER_ROLE), check=True)
    for account in ("reader", "nobody"):
        kubectl("create", "serviceaccount", account, "-n", namespace, check=True)
    binding = f"orca-metrics-reader-{namespace}"
    kubectl(
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=orca-controller-metrics-reader",
        f"--serviceaccount={namespace}:reader",
        check=True,
    )
    op = OperatorProcess(
        control_plane.kubeconfig_path,
        tmp_path_factory.mktemp("metrics") / "operator.log",
        namespaces=[namespace],
        lease_namespace=namespace,
        metrics_insecure=False,
    )
    try:
        op.wait_live()
        deadline = time.monotonic() + 60
        while https_get(op.metrics_port, "/readyz")[0] != 200:
            assert time.monotonic() < deadline, op.log()
            time.sleep(0.3)
        yield Secured(
            namespace,
            op,
            reader=token(kubectl, namespace, "reader"),
            nobody=token(kubectl, namespace, "nobody"),
            other_audience=token(kubectl, namespace, "reader", "--audience=not-the-api-server"),
        )
    finally:
        op.stop()
        kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")


def test_the_scrape_matrix(secured: Secured) -> None:
    """Each kind of caller, what it gets: the status and the one line (printed for the
    report)."""
    account = f"system:serviceaccount:{secured.namespace}"
    matrix = {
        "no token": (secured.scrape(None), 401, "Unauthorized: no bearer token"),
        "a token nobody issued": (secured.scrape("not-a-token"), 401, "Unauthorized: "),
        "a token for another audience": (
            secured.scrape(secured.other_audience),
            401,
            "Unauthorized: ",
        ),
        "a token without the role": (
            secured.scrape(secured.nobody),
            403,
            f'Forbidden: user "{account}:nobody" cannot get path "/metrics"',
        ),
        "a token with the role": (secured.scrape(secured.reader), 200, "orca_leader"),
    }
    for what, ((status, text), want_status, want_text) in matrix.items():
        first = text.strip().splitlines()[0] if text.strip() else ""
        print(f"{what}: {status} {first[:120]}")
        assert status == want_status, f"{what}: {status} {text[:200]!r}"
        assert want_text in text, f"{what}: {text[:300]!r}"
        if status != 200:
            assert len(text.strip().splitlines()) == 1, f"{what}: not one line: {text!r}"
    got = plain_http(secured.op.metrics_port)
    print(f"plain HTTP to the HTTPS port: {got}")
    assert got == "closed"
    for probe in ("/healthz", "/livez", "/readyz"):
        assert secured.scrape(None, probe) == (200, "ok\n"), probe


def api_server_reviews(kubectl: KubectlRunner) -> dict[str, float]:
    """TokenReviews and SubjectAccessReviews the API server has answered (its own metric)."""
    text = kubectl("get", "--raw", "/metrics", check=True).stdout
    counts = {"tokenreviews": 0.0, "subjectaccessreviews": 0.0}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'verb="POST"' in line:
            for resource in counts:
                if f'resource="{resource}"' in line:
                    counts[resource] += float(line.rsplit(" ", 1)[1])
    return counts


def test_reviews_are_cached_for_ten_seconds_and_shared(
    secured: Secured, kubectl: KubectlRunner
) -> None:
    """A fresh token: 40 scrapes, 20 of them at once, make one TokenReview; after 10 s the
    answer is asked for again (kube's delegating authenticator's CacheTTL)."""
    fresh = token(kubectl, secured.namespace, "reader")
    before = api_server_reviews(kubectl)
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(secured.scrape(fresh)[0])) for _ in range(20)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results += [secured.scrape(fresh)[0] for _ in range(20)]
    assert results == [200] * 40
    during = api_server_reviews(kubectl)
    assert during["tokenreviews"] - before["tokenreviews"] == 1
    assert during["subjectaccessreviews"] - before["subjectaccessreviews"] <= 1
    time.sleep(10.5)
    assert secured.scrape(fresh)[0] == 200
    after = api_server_reviews(kubectl)
    assert after["tokenreviews"] - during["tokenreviews"] == 1, "cached beyond its 10 s"


def test_what_the_metrics_port_is_sent_cannot_crash_or_stall_it(secured: Secured) -> None:
    port = secured.op.metrics_port
    # A token larger than a header may be (aiohttp's bound, 8190 bytes): refused unread,
    # never sent to a TokenReview.
    status, text = secured.scrape("x" * 20_000)
    assert status == 400, (status, text[:200])
    assert https_get(port, "/nothing-here")[0] == 404
    # A flood of idle connections and of bad tokens: the next good scrape is answered.
    flood = []
    try:
        for _ in range(300):
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        distinct = [secured.scrape(f"bad-{i}")[0] for i in range(50)]
        assert set(distinct) == {401}
        assert secured.scrape(secured.reader)[0] == 200
        assert secured.scrape(None, "/livez")[0] == 200
    finally:
        for s in flood:
            s.close()
    assert secured.op.process.poll() is None
    assert "Traceback" not in secured.op.log(), secured.op.log()


def test_readyz_waits_for_the_informers_and_livez_does_not(
    control_plane: ControlPlane, kubectl: KubectlRunner, installed: None, tmp_path: Path
) -> None:
    """An operator whose credentials may not list Nodes never syncs: live, never ready, and
    /readyz names what it waits for. A standby replica (the Lease held by another) that has
    synced is ready (it serves the webhook from its warm cache)."""
    namespace = f"rdy-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace, check=True)
    blind = control_plane.mint_kubeconfig("nobody-at-all", [], tmp_path / "blind.kubeconfig")
    op = OperatorProcess(
        blind, tmp_path / "blind.log", namespaces=[namespace], lease_namespace=namespace
    )
    leader = OperatorProcess(
        control_plane.kubeconfig_path,
        tmp_path / "leader.log",
        namespaces=[namespace],
        lease_namespace=namespace,
    )
    standby = None
    try:
        op.wait_live()
        url = f"http://127.0.0.1:{op.metrics_port}"
        for _ in range(5):
            time.sleep(1)
            status, text = get(url + "/readyz")
            assert status == 503, text
        assert "informers not synced: /api/v1/nodes" in text
        assert get(url + "/livez") == (200, "ok\n")
        leader.wait_live()
        wait_for_status(f"http://127.0.0.1:{leader.metrics_port}/readyz", 200)
        wait_for(lambda: leader.metrics().get("orca_leader") == 1.0, "leader elected")
        standby = OperatorProcess(
            control_plane.kubeconfig_path,
            tmp_path / "standby.log",
            namespaces=[namespace],
            lease_namespace=namespace,
        )
        standby.wait_live()
        wait_for_status(f"http://127.0.0.1:{standby.metrics_port}/readyz", 200)
        assert standby.metrics().get("orca_leader") == 0.0
    finally:
        for process in (op, leader, standby):
            if process is not None:
                process.stop()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_for_status(url: str, want: int, timeout: float = 60.0) -> None:
    wait_for(lambda: get(url)[0] == want, f"{url} -> {want}", timeout)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout}s: {what}")
