"""``kubectl orca explain`` against the real control plane: what a user asks when a Workload is
not where they expect it (issue 10)."""

from __future__ import annotations

import json

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from tests.support.factories import node_object, workload_obj
from tests.support.harness import Cluster, OperatorProcess, orca_explain, phase, placed, placements

pytestmark = pytest.mark.controlplane


def test_explain_names_each_nodes_filter_and_the_winning_scores(
    cluster: Cluster, namespace: str, operator: OperatorProcess, control_plane: ControlPlane
) -> None:
    cluster.apply(
        node_object("a", cpu="2"),
        node_object("b", cpu="2"),
        node_object("w", runtimes=("wasmtime",)),
        node_object("off", cordoned=True),
    )
    cluster.apply(
        workload_obj("web", namespace, kind="Service", count=2, resources={"cpu": "1"}),
        workload_obj(
            "big", namespace, kind="Job", runtime={"oneOf": ["docker"]}, resources={"cpu": "3"}
        ),
    )
    web = placed(cluster, namespace, "web", 2)
    big = cluster.wait_for(namespace, "big", lambda w: phase(w) == "Unschedulable")
    before = (web["metadata"]["resourceVersion"], big["metadata"]["resourceVersion"])

    out = orca_explain(control_plane, "big", "-n", namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["phase"] == "Unschedulable"
    verdicts = {n["node"]: (n["filter"], n["reason"]) for n in result["nodes"]}
    assert verdicts == {
        "a": ("ResourcesFit", "Insufficient cpu"),
        "b": ("ResourcesFit", "Insufficient cpu"),
        "w": ("Runtime", "runtime docker not offered"),
        "off": ("NodeEligibility", "node(s) were unschedulable"),
    }
    for reason in big["status"]["unschedulable"]:  # the same words as the status
        assert all(verdicts[n][1] == reason["reason"] for n in reason["nodes"])

    out = orca_explain(control_plane, "web", "-n", namespace, "-o", "json")
    result = json.loads(out.stdout)
    as_yaml = orca_explain(control_plane, "web", "-n", namespace, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == result  # the same document, as kubectl's -o yaml
    replicas = [(r["allocId"], r["node"], r["score"], r["kept"]) for r in result["replicas"]]
    status = [(p["allocId"], p["node"], p["score"], True) for p in web["status"]["placements"]]
    assert replicas == status
    passing = [n for n in result["nodes"] if n["passes"]]
    assert {n["node"] for n in passing} == {"a", "b", "w"}  # room for a third 1-cpu replica
    for n in passing:
        assert n["total"] == sum(n["scores"].values())
        assert n["replicas"] == sum(1 for _, node, _, _ in status if node == n["node"])
    # Best first: fewest replicas of this Workload (anti-affinity), then the total.
    order = [(n["replicas"], -n["total"], n["node"]) for n in passing]
    assert order == sorted(order)
    assert [n["node"] for n in result["nodes"] if not n["passes"]] == ["off"]

    table = orca_explain(control_plane, "big", "-n", namespace)
    assert table.returncode == 0
    assert "Insufficient cpu (ResourcesFit)" in table.stdout
    # It wrote nothing.
    after = (
        cluster.workload(namespace, "web")["metadata"]["resourceVersion"],
        cluster.workload(namespace, "big")["metadata"]["resourceVersion"],
    )
    assert after == before
    assert placements(cluster.workload(namespace, "web")) == placements(web)


def test_explain_a_missing_workload_is_one_line_and_exit_1(control_plane: ControlPlane) -> None:
    out = orca_explain(control_plane, "nope", "-n", "nowhere")
    assert out.returncode == 1
    assert out.stderr == (
        "error: Workload nowhere/nope not found (kubectl get orcawl -n nowhere lists the "
        "Workloads there)\n"
    )
    assert out.stdout == ""


def test_ill_typed_cel_is_invalid_in_the_operator_and_explain_says_why(
    cluster: Cluster, namespace: str, operator: OperatorProcess, control_plane: ControlPlane
) -> None:
    """The API server cannot type-check CEL over ``node``: it accepts the Workload, the
    operator marks it Invalid at once with the type checker's message, explain prints it."""
    cluster.apply(node_object("a"))
    cluster.apply(
        workload_obj(
            "typo",
            namespace,
            kind="Job",
            affinity=[{"target": 'node.cpu == "x"', "weight": 10}],
        )
    )
    typo = cluster.wait_for(namespace, "typo", lambda w: phase(w) == "Invalid", what="Invalid")
    message = "found no matching overload for '_==_' applied to '(int, string)' at column 1"
    assert message in typo["status"]["message"]
    out = orca_explain(control_plane, "typo", "-n", namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["phase"] == "Invalid"
    assert any(message in e for e in result["errors"])


def test_the_api_server_refuses_a_padded_workload_name_as_affinity_target(
    kubectl: KubectlRunner, cluster: Cluster, namespace: str
) -> None:
    obj = workload_obj("pad", namespace, kind="Job", affinity=[{"target": "web\n", "weight": 1}])
    result = kubectl("apply", "-f", "-", input=json.dumps(obj))
    assert result.returncode != 0, result.stdout
    assert "a Workload name must not have whitespace or a newline around it" in result.stderr
