"""``controller.cli.cluster``: the live cluster as ``orca plan --from-cluster``, ``orca
rebalance --from-cluster`` and ``orca explain`` read it, through the operator's client against
``FakeApiServer``: what is listed, what a refusal or no answer becomes (one line), how
kube-controller-manager's Lease decides how NotReady Nodes read (docs/workloads.md, "Node
lifecycle"), and which credentials, context and namespace are used (docs/usage.md)."""

from __future__ import annotations

import argparse
import errno
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientConnectorError
from aiohttp.client_reqrep import ConnectionKey

from controller.cli.cluster import _read, _why, namespace_of, read_cluster
from controller.inputs.fromcluster import ClusterError, ClusterView
from controller.operator import tls
from controller.operator.kube import TransportError
from controller.scheduler.nodes import TAINT_NOT_READY, NodeInfo, rfc3339_to_epoch
from controller.scheduler.status import rfc3339_now
from tests.support import fakeapi
from tests.support.factories import job, node_object
from tests.unit.test_kube_credentials import kubeconfig

NODES = "/api/v1/nodes"
WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1/workloads"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
SINCE = "2026-12-01T09:00:00Z"  # when the NotReady Node's Ready condition last changed


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def populate(server: fakeapi.FakeApiServer) -> None:
    """Two Nodes (``down`` NotReady, with no taint), a Job of 1 cpu placed on ``up``, one
    PriorityClass."""
    server.put("nodes", node_object("up", cpu="4"))
    server.put("nodes", node_object("down", cpu="4", ready=False, since=SINCE))
    server.put("workloads", job("web", cpu="1", node="up"))
    server.put("priorityclasses", priority_class("high", 1000))


def lease(holder: str, renewed: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-controller-manager", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "renewTime": renewed},
    }


def read(prepare: Any) -> ClusterView | ClusterError:
    """``_read`` through the server's client after ``prepare(server)``: the view, or the
    ``ClusterError`` it raised."""
    got: list[ClusterView | ClusterError] = []

    async def scenario(server: fakeapi.FakeApiServer) -> None:
        prepare(server)
        try:
            got.append(await _read(server.client()))
        except ClusterError as exc:
            got.append(exc)

    fakeapi.run(scenario)
    return got[0]


def implied_taints(node: NodeInfo) -> list[tuple[str, str, float | None]]:
    return [(t.key, t.effect.value, t.time_added) for t in node.taints]


def test_nodes_workloads_and_priority_classes_are_listed_and_placements_booked() -> None:
    view = read(populate)
    assert isinstance(view, ClusterView)
    assert sorted(n.hostname for n in view.nodes) == ["down", "up"]
    assert [w["metadata"]["name"] for w in view.workloads] == ["web"]
    assert sorted(view.parsed) == ["ns/web"]
    assert view.classes.by_name["high"].value == 1000
    assert view.warnings == []  # no Lease (404): no controller manager, nothing to warn of
    free = dict(zip([n.hostname for n in view.nodes], view.ledger().free()[0], strict=True))
    assert int(free["up"]) == 3000  # 4 cpu, web's 1 booked from its status
    assert int(free["down"]) == 4000


def test_without_the_controller_managers_lease_a_not_ready_node_reads_as_tainted() -> None:
    """No Lease: no node lifecycle controller, so a NotReady Node without a lifecycle taint
    counts as carrying ``not-ready:NoExecute`` since its Ready condition changed."""
    view = read(populate)
    assert isinstance(view, ClusterView)
    down = next(n for n in view.nodes if n.hostname == "down")
    assert implied_taints(down) == [(TAINT_NOT_READY, "NoExecute", rfc3339_to_epoch(SINCE))]


def test_with_a_fresh_lease_only_the_controllers_taints_count() -> None:
    """kube-controller-manager holds its Lease (renewed just now): it taints NotReady Nodes
    itself, so none is implied, and nothing is warned of."""

    def prepare(server: fakeapi.FakeApiServer) -> None:
        populate(server)
        server.put("leases", lease("kcm-1", rfc3339_now()))

    view = read(prepare)
    assert isinstance(view, ClusterView)
    down = next(n for n in view.nodes if n.hostname == "down")
    assert implied_taints(down) == []
    assert view.warnings == []


@pytest.mark.parametrize(
    ("code", "reason", "warning"),
    [
        (
            403,
            "Forbidden",
            "node lifecycle: cannot read Lease kube-system/kube-controller-manager (403 "
            "Forbidden; grant get on it, or pass --node-lifecycle=taints): a NotReady Node "
            "without a lifecycle taint counts as tainted from its Ready change",
        ),
        (
            500,
            "InternalError",
            "node lifecycle: cannot read the controller manager's Lease: 500 InternalError: "
            "injected 500",
        ),
    ],
    ids=["403", "500"],
)
def test_an_unreadable_lease_is_a_warning_and_not_ready_nodes_read_as_tainted(
    code: int, reason: str, warning: str
) -> None:
    """The Lease refused (403) or the server failing on it: the plan goes on as
    ``--node-lifecycle=ready`` would, and says so in a warning."""

    def prepare(server: fakeapi.FakeApiServer) -> None:
        populate(server)
        server.put("leases", lease("kcm-1", "2099-01-01T00:00:00Z"))
        server.refuse("GET", LEASE, code, reason, times=None)

    view = read(prepare)
    assert isinstance(view, ClusterView)
    assert view.warnings == [warning]
    down = next(n for n in view.nodes if n.hostname == "down")
    assert implied_taints(down) == [(TAINT_NOT_READY, "NoExecute", rfc3339_to_epoch(SINCE))]
    assert sorted(view.parsed) == ["ns/web"]  # the rest read as usual


def test_priority_classes_refused_are_a_warning_and_the_plan_goes_on() -> None:
    def prepare(server: fakeapi.FakeApiServer) -> None:
        populate(server)
        server.refuse("GET", CLASSES, 403, "Forbidden", times=None)

    view = read(prepare)
    assert isinstance(view, ClusterView)
    assert view.warnings == [
        "PriorityClasses cannot be listed (403 Forbidden): Workloads naming one are Invalid "
        "in this plan"
    ]
    assert view.classes.by_name == {}
    assert sorted(n.hostname for n in view.nodes) == ["down", "up"]
    assert sorted(view.parsed) == ["ns/web"]


def test_workloads_not_found_names_the_crd_to_install() -> None:
    """A 404 on the Workloads' list: the CRD is not installed; the line says which and how
    (the CRD's name as crds/ ships it)."""
    crd = next(Path("crds").glob("workloads.*.yaml")).name.removesuffix(".yaml")

    def prepare(server: fakeapi.FakeApiServer) -> None:
        populate(server)
        server.refuse("GET", WORKLOADS, 404, "NotFound", times=None)

    error = read(prepare)
    assert isinstance(error, ClusterError)
    assert str(error) == (
        f"404 NotFound: injected 404 (is the Workload CRD, {crd}, installed? "
        "kubectl apply -k crds/)"
    )


@pytest.mark.parametrize("path", [NODES, WORKLOADS], ids=["nodes", "workloads"])
def test_any_other_refusal_is_status_reason_and_message(path: str) -> None:
    def prepare(server: fakeapi.FakeApiServer) -> None:
        populate(server)
        server.refuse("GET", path, 403, "Forbidden", times=None)

    error = read(prepare)
    assert isinstance(error, ClusterError)
    assert str(error) == "403 Forbidden: injected 403"


def test_an_answer_that_is_not_json_is_one_line_in_the_errors_words() -> None:
    """A proxy's HTML page with a 200 where the list should be: no socket error to name, so
    the decoder's own words, and the server's address."""
    host: list[str] = []

    def prepare(server: fakeapi.FakeApiServer) -> None:
        populate(server)
        host.append(server.host)
        server.add(fakeapi.Fault("GET", NODES, "garbage", times=None))

    error = read(prepare)
    assert isinstance(error, ClusterError)
    message = str(error)
    assert message.startswith("cannot reach the API server: ")
    assert message.endswith(f" ({host[0]})")
    why = message.removeprefix("cannot reach the API server: ").removesuffix(f" ({host[0]})")
    assert "JSON" in why and "\n" not in why  # the decoder's text, not its type's name


def key() -> ConnectionKey:
    return ConnectionKey("example.test", 6443, True, True, None, None, None)


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), "Connection refused"),
        # A connect a firewall forbids: EPERM (1), the smallest errno, is the socket's too.
        (ClientConnectorError(key(), PermissionError(errno.EPERM, "x")), "Operation not permitted"),
        (ClientConnectorError(key(), OSError(errno.EHOSTUNREACH, "x")), "No route to host"),
        (OSError(0, "no error"), "[Errno 0] no error"),  # errno 0 is none: the error's text
        (TimeoutError(), "TimeoutError"),  # no errno, no text: the error's type
        (ValueError("  not JSON  "), "not JSON"),
    ],
    ids=["refused", "eperm", "unreachable", "errno-0", "timeout", "text"],
)
def test_why_is_the_sockets_strerror_else_the_errors_text_else_its_type(
    cause: BaseException, expected: str
) -> None:
    assert _why(TransportError("GET /api/v1/nodes", cause)) == expected


def test_a_certificate_that_does_not_verify_is_said_as_tls_says_it(tmp_path: Path) -> None:
    """An API server whose certificate the kubeconfig does not trust: the line says the
    certificate did not verify (OpenSSL's words), not the strerror of OpenSSL's error code."""
    bundle = tls.generate(["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(bundle.cert)
    (tmp_path / "tls.key").write_bytes(bundle.key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    with fakeapi.in_thread(context) as server:
        config = kubeconfig(tmp_path / "k.yaml", ("c", server.host, None))
        with pytest.raises(ClusterError) as raised:
            read_cluster(config)
    message = str(raised.value)
    assert message.startswith("cannot reach the API server: ")
    assert "certificate verify failed" in message and "Operation not permitted" not in message
    assert message.endswith(f"({server.host})") and "\n" not in message


def unreachable() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    return f"https://127.0.0.1:{port}"


def test_an_api_server_out_of_reach_names_its_address(tmp_path: Path) -> None:
    host = unreachable()
    config = kubeconfig(tmp_path / "k.yaml", ("c", host, None))
    with pytest.raises(ClusterError) as raised:
        read_cluster(config)
    assert str(raised.value) == f"cannot reach the API server: Connection refused ({host})"


def test_read_cluster_reads_the_context_asked_for(tmp_path: Path) -> None:
    """The kubeconfig's current context points nowhere; ``--context live`` is the server."""
    with fakeapi.in_thread() as server:
        populate(server)
        config = kubeconfig(
            tmp_path / "k.yaml", ("dead", unreachable(), None), ("live", server.host, None)
        )
        view = read_cluster(config, "live")
        with pytest.raises(ClusterError, match="cannot reach the API server"):
            read_cluster(config)  # the current context
    assert sorted(n.hostname for n in view.nodes) == ["down", "up"]
    assert sorted(view.parsed) == ["ns/web"]
    assert view.classes.by_name["high"].value == 1000
    nodes = [s for s in server.requests if s.path == NODES]
    assert nodes and all(s.token == "token-live" for s in nodes)  # the context's credentials


def test_bad_credentials_are_one_line_naming_them(tmp_path: Path) -> None:
    absent = tmp_path / "absent.yaml"
    with pytest.raises(ClusterError) as raised:
        read_cluster(str(absent))
    assert str(absent) in str(raised.value) and "\n" not in str(raised.value)
    config = kubeconfig(tmp_path / "k.yaml", ("a", unreachable(), None))
    with pytest.raises(ClusterError) as raised:
        read_cluster(config, "nope")
    assert "nope" in str(raised.value) and config in str(raised.value)


def args(kubeconfig: str, namespace: str | None = None, context: str | None = None) -> Any:
    return argparse.Namespace(kubeconfig=kubeconfig, context=context, namespace=namespace)


def test_namespace_is_the_flags_else_the_contexts_else_default(tmp_path: Path) -> None:
    config = kubeconfig(
        tmp_path / "k.yaml",
        ("a", "https://a.test:6443", "ns-a"),
        ("b", "https://b.test:6443", "ns-b"),
        ("bare", "https://bare.test:6443", None),
    )
    assert namespace_of(args(config, namespace="shop")) == "shop"
    assert namespace_of(args(config, namespace="shop", context="b")) == "shop"
    assert namespace_of(args(config)) == "ns-a"  # the current context's
    assert namespace_of(args(config, context="b")) == "ns-b"
    assert namespace_of(args(config, context="bare")) == "default"


def test_namespace_with_bad_credentials_is_one_line(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "k.yaml", ("a", "https://a.test:6443", "ns-a"))
    with pytest.raises(ClusterError) as raised:
        namespace_of(args(config, context="nope"))
    assert "nope" in str(raised.value) and config in str(raised.value)
