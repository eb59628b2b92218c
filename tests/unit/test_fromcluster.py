"""``controller.inputs.fromcluster.view_of``: listed objects as the dry run reads them (no
cluster); and ``controller.cli.cluster.read_cluster``'s one line when there is none."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from controller.cli.cluster import read_cluster
from controller.inputs.fromcluster import ClusterError, view_of
from tests.support.factories import node_object


def workload(name: str, spec: dict[str, Any], placements: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
        "status": {"placements": placements},
    }


def test_unreadable_nodes_are_not_ready_and_refused_workloads_stay_booked() -> None:
    raw_nodes = [
        node_object("a", cpu="4"),
        node_object("huge", cpu="8Ei"),
        {"kind": "Node", "metadata": {"name": ["x"]}},
    ]
    on_a = [{"node": "a", "allocId": "ns/odd-0", "score": 1}]
    raw_workloads = [
        workload("odd", {"kind": "Job", "count": 2, "resources": {"cpu": "3"}}, on_a),
        workload("ok", {"kind": "Job"}, []),
    ]
    view = view_of(raw_nodes, raw_workloads)
    assert [(n.hostname, n.eligible, n.cpu) for n in view.nodes] == [
        ("a", True, 4000),
        ("huge", False, 0),
    ]
    assert sorted(view.parsed) == ["ns/ok"]
    assert int(view.ledger().free()[0][0]) == 1000  # a: 4 cpu, 3 held by the refused Workload
    assert len(view.warnings) == 3
    assert view.warnings[0].startswith("Node huge: status.allocatable.cpu")
    assert view.warnings[0].endswith("treated as not ready")
    assert view.warnings[1].startswith("a Node without a valid name is ignored")
    assert view.warnings[2].startswith("Workload ns/odd: spec: count is only allowed")


def test_an_api_server_out_of_reach_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A server that refuses the connection: ``orca plan/explain/rebalance --from-cluster``
    say so in a line, in the socket's words, not the client's exception."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    with pytest.raises(ClusterError) as raised:
        read_cluster(str(kubeconfig))
    message = str(raised.value)
    assert message.startswith("cannot reach the API server: ")
    assert "Connection refused" in message and "\n" not in message
