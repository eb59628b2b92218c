"""The what-if against a live cluster: ``orca plan --from-cluster --drain / --add-nodes`` and
``orca explain --drain`` read what the operator placed, answer, and write nothing (issue 26).

Two Nodes, a1 (zone a) and b1 (zone b), 4 cores each; two 3-core Jobs, which the operator
places one per node. By hand: draining zone a displaces the Job on a1; b1 has 1 core left,
so it finds no place (``Insufficient cpu``); one more 4-core Node would take it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane
from controller.scheduler.plugins.resources import REASON_INSUFFICIENT_CPU
from tests.support.factories import node_object, workload_obj
from tests.support.harness import Cluster, OperatorProcess, placed

pytestmark = pytest.mark.controlplane

ZONE = "topology.kubernetes.io/zone"


def orca(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env={**os.environ, "KUBECONFIG": str(plane.kubeconfig_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def versions(cluster: Cluster, namespace: str) -> dict[str, str]:
    return {
        w["metadata"]["name"]: w["metadata"]["resourceVersion"]
        for w in cluster.workloads(namespace)
    }


def test_a_drain_and_the_nodes_to_buy_answered_from_the_live_cluster(
    cluster: Cluster,
    namespace: str,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    cluster.apply(
        node_object("a1", cpu="4", labels={ZONE: "a"}),
        node_object("b1", cpu="4", labels={ZONE: "b"}),
    )
    cluster.apply(
        workload_obj("one", namespace, kind="Job", resources={"cpu": "3"}),
        workload_obj("two", namespace, kind="Job", resources={"cpu": "3"}),
    )
    where = {
        name: placed(cluster, namespace, name, 1)["status"]["placements"][0]["node"]
        for name in ("one", "two")
    }
    assert sorted(where.values()) == ["a1", "b1"]
    [on_a] = [name for name, node in where.items() if node == "a1"]
    before = versions(cluster, namespace)

    out = orca(control_plane, "plan", "--from-cluster", "--drain", f"{ZONE}=a", "-o", "json")
    assert out.returncode == 1, out.stderr
    answer = json.loads(out.stdout)
    assert answer["drained"] == ["a1"]
    mine = [u for u in answer["unplaced"] if u["workload"].startswith(f"{namespace}/")]
    assert [(u["allocId"], u["from"]) for u in mine] == [(f"{namespace}/{on_a}-0", "a1")]
    assert mine[0]["reason"] == f"0/1 nodes are available: 1 {REASON_INSUFFICIENT_CPU}."

    # Why has it no place after the drain? explain, at its turn in that plan.
    out = orca(control_plane, "explain", on_a, "-n", namespace, "--drain", "a1", "-o", "json")
    assert out.returncode == 0, out.stderr
    explained = json.loads(out.stdout)
    assert explained["whatIf"] == "drained a1"
    assert [(n["node"], n.get("reason")) for n in explained["nodes"]] == [
        ("b1", REASON_INSUFFICIENT_CPU)
    ]
    assert [r["why"] for r in explained["replicas"]] == ["moves: the node is gone"]

    # How many 4-core nodes would place it: one.
    template = tmp_path / "big.yaml"
    template.write_text(yaml.safe_dump(node_object("big", cpu="4", labels={ZONE: "c"})))
    out = orca(
        control_plane,
        "plan", "--from-cluster", "--drain", f"{ZONE}=a", "--add-nodes", f"{template}:auto",
        "-o", "json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["nodesToAdd"]["count"] == 1
    moved: dict[str, Any] = {m["allocId"]: (m["from"], m["to"]) for m in answer["moved"]}
    assert moved == {f"{namespace}/{on_a}-0": ("a1", "big-1")}

    # A dry run: nothing was written.
    assert versions(cluster, namespace) == before
    assert sorted(n["metadata"]["name"] for n in cluster.nodes()) == ["a1", "b1"]
