"""``orca rebalance --from-cluster`` in-process against ``FakeApiServer`` (a thread of its own:
the command runs its own event loop): the cluster's Nodes and placements are the starting
point, ``-n`` / ``-A`` / the context's namespace choose whose replicas move while capacity is
counted cluster-wide, warnings are lines on stderr (docs/usage.md, docs/workloads.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fakeapi
from tests.support.cli import Orca
from tests.support.factories import node_object
from tests.unit.test_kube_credentials import kubeconfig
from tests.unit.test_plan_from_cluster import CLASSES, nowhere
from tests.unit.test_rebalance_cli import placed_service

#: The Workloads' toleration of the ``maintenance`` NoExecute taint: an hour from its timeAdded.
AN_HOUR = {
    "key": "maintenance",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 3600,
}


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[fakeapi.FakeApiServer]:
    """Two full nodes, two empty ones and one whose NoExecute taint the Workloads tolerated
    for an hour in 2020; a Spread Service in ``shop`` and one in ``ci``, each with two replicas
    on each full node. No other credentials than ``--kubeconfig`` lead anywhere."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with fakeapi.in_thread() as served:
        for name in ("old-0", "old-1", "new-0", "new-1"):
            served.put("nodes", node_object(name))
        taint = {"key": "maintenance", "effect": "NoExecute", "timeAdded": "2020-01-01T00:00:00Z"}
        served.put("nodes", node_object("new-2", taints=[taint]))
        for namespace, name in (("shop", "web"), ("ci", "build")):
            served.put("workloads", in_namespace(namespace, name))
        yield served


def in_namespace(namespace: str, name: str) -> dict[str, Any]:
    """``placed_service`` (four replicas over old-0 and old-1) in ``namespace``."""
    obj = placed_service(name, ["old-0", "old-1", "old-0", "old-1"])
    obj["metadata"]["namespace"] = namespace
    obj["spec"]["tolerations"] = [AN_HOUR]
    for i, placement in enumerate(obj["status"]["placements"]):
        placement["allocId"] = f"{namespace}/{name}-{i}"
    return obj


@pytest.fixture
def config(server: fakeapi.FakeApiServer, tmp_path: Path) -> str:
    """A kubeconfig whose current context points nowhere; context ``live`` is the server, with
    namespace ``ci``."""
    return kubeconfig(
        tmp_path / "kubeconfig", ("dead", nowhere(), None), ("live", server.host, "ci")
    )


def rebalance(orca: Orca, config: str, *args: str) -> tuple[list[dict[str, Any]], str]:
    code, out, err = orca(
        "rebalance", "--from-cluster", "--kubeconfig", config, "--context", "live", *args,
        "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)["moves"], err


def test_without_n_the_contexts_namespace_moves(orca: Orca, config: str) -> None:
    """As kubectl: the context's namespace (``ci``); shop's replicas stay where they are."""
    moves, err = rebalance(orca, config)
    assert err == ""
    assert {m["workload"] for m in moves} == {"ci/build"}
    assert {m["from"] for m in moves} == {"old-0", "old-1"}


def test_n_moves_that_namespace_only(orca: Orca, config: str) -> None:
    moves, _ = rebalance(orca, config, "-n", "shop")
    assert {m["workload"] for m in moves} == {"shop/web"}


def test_a_moves_every_namespace(orca: Orca, config: str) -> None:
    moves, _ = rebalance(orca, config, "-A")
    assert {m["workload"] for m in moves} == {"ci/build", "shop/web"}


def test_a_toleration_run_out_by_now_keeps_replicas_off_the_node(orca: Orca, config: str) -> None:
    """The plan is made at the clock's time: new-2's taint was tolerated for an hour from
    2020, so only new-0 and new-1 take replicas."""
    moves, _ = rebalance(orca, config, "-A")
    assert {m["to"] for m in moves} == {"new-0", "new-1"}


def test_the_clusters_warnings_are_lines_on_stderr(
    orca: Orca, server: fakeapi.FakeApiServer, config: str
) -> None:
    """PriorityClasses refused (403): the plan goes on, and says so in one ``warning:`` line
    on stderr (stdout stays the JSON document)."""
    server.refuse("GET", CLASSES, 403, "Forbidden", times=None)
    moves, err = rebalance(orca, config)
    assert {m["workload"] for m in moves} == {"ci/build"}
    assert err == (
        "warning: PriorityClasses cannot be listed (403 Forbidden): Workloads naming one are "
        "Invalid in this plan\n"
    )
