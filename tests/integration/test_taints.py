"""Taints, tolerations, resizes and capacity-freed requeues, with the operator on a real
kube-apiserver + etcd (docs/design.md 4 and 5; issues 7 and 9). Taints are set with ``kubectl
taint``, as a cluster operator would."""

from __future__ import annotations

import pytest

from controller.devcluster.controlplane import SILENT_LABEL
from tests.support.factories import node_object, workload_obj
from tests.support.harness import (
    Cluster,
    OperatorProcess,
    observed,
    phase,
    placed,
    placements,
    usage_per_node,
)

pytestmark = pytest.mark.controlplane

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
NOT_READY = "node.kubernetes.io/not-ready"


def test_control_plane_taint_and_a_registering_node_keep_workloads_off_until_ready(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.apply(node_object("cp", cpu="64"), node_object("a"), node_object("b"))
    # "new" registers as a kubelet does, NotReady, and its kubelet (kwok) does not report
    # yet: admission has tainted it not-ready, and the node lifecycle controller keeps that
    # taint while the Node is not Ready (it lifts a not-ready taint put on a Ready Node, see
    # pkg/controller/nodelifecycle/node_lifecycle_controller.go doNoScheduleTaintingPass).
    cluster.apply(node_object("new", ready=False, labels={SILENT_LABEL: "true"}))
    assert NOT_READY in cluster.run("get", "node", "new", "-o", "jsonpath={.spec.taints}")
    cluster.run("taint", "nodes", "cp", f"{CONTROL_PLANE}:NoSchedule")
    toleration = {"key": CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"}
    cluster.apply(
        workload_obj("web", namespace, kind="Service", count=4, resources={"cpu": "100m"}),
        workload_obj("agent", namespace, kind="DaemonSet"),
        workload_obj("cp-agent", namespace, kind="DaemonSet", tolerations=[toleration]),
    )
    web = placed(cluster, namespace, "web", 4)
    assert {n for _, n in placements(web)} == {"a", "b"}
    agent = placed(cluster, namespace, "agent", 2)
    assert sorted(n for _, n in placements(agent)) == ["a", "b"]
    reasons = {r["reason"]: r["nodes"] for r in agent["status"]["unschedulable"]}
    assert reasons == {
        f"node(s) had untolerated taint {{{CONTROL_PLANE}: }}": ["cp"],
        "node(s) not ready": ["new"],
    }
    cp_agent = placed(cluster, namespace, "cp-agent", 3)
    assert sorted(n for _, n in placements(cp_agent)) == ["a", "b", "cp"]
    # Its kubelet comes up: kwok reports it Ready, the node lifecycle controller lifts the
    # not-ready taints, and the DaemonSets grow there. A DaemonSet tolerates
    # not-ready:NoExecute (kube's DaemonSet controller adds that toleration), so it may land
    # in the few seconds between Ready and the controller's next pass lifting that taint.
    cluster.revive("new")
    grown = placed(cluster, namespace, "agent", 3, timeout=120)
    assert sorted(n for _, n in placements(grown)) == ["a", "b", "new"]
    cluster.wait_for_node(
        "new",
        lambda node: all(t["key"] != NOT_READY for t in node["spec"].get("taints") or []),
        "the controller lifting the not-ready taints",
    )
    assert placed(cluster, namespace, "cp-agent", 4)


def test_noexecute_moves_only_intolerant_replicas_and_untainting_lets_pending_in(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.apply(node_object("a", cpu="2"), node_object("b", cpu="2"))
    tolerates = [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]
    half = {"cpu": "500m"}
    cluster.apply(
        workload_obj("web", namespace, kind="Service", count=2, resources=half),
        workload_obj(
            "tol", namespace, kind="Service", count=2, resources=half, tolerations=tolerates
        ),
    )
    web = dict(placements(placed(cluster, namespace, "web", 2)))
    tol = placements(placed(cluster, namespace, "tol", 2))
    assert sorted(web.values()) == ["a", "b"]
    on_a = next(alloc for alloc, n in web.items() if n == "a")
    cluster.run("taint", "nodes", "a", "maintenance=now:NoExecute")
    moved = cluster.wait_for(
        namespace,
        "web",
        lambda w: dict(placements(w)).get(on_a) == "b",
        what="the intolerant replica moved off a",
    )
    assert dict(placements(moved)) == {**web, on_a: "b"}  # only that one moved
    # A NoSchedule taint added later moves nothing; a new Job now has nowhere to go.
    cluster.run("taint", "nodes", "b", "maintenance=soon:NoSchedule")
    cluster.apply(workload_obj("late", namespace, kind="Job", resources={"cpu": "1"}))
    late = cluster.wait_for(
        namespace, "late", lambda w: observed(w) and phase(w) == "Unschedulable"
    )
    assert late["status"]["message"] == (
        "0/2 nodes are available: 1 node(s) had untolerated taint {maintenance: now}, "
        "1 node(s) had untolerated taint {maintenance: soon}."
    )
    assert placements(cluster.workload(namespace, "tol")) == tol
    assert dict(placements(cluster.workload(namespace, "web"))) == {**web, on_a: "b"}
    # Untainting a lets the pending Job in, without any change to the Job.
    cluster.run("taint", "nodes", "a", "maintenance=now:NoExecute-")
    assert placements(placed(cluster, namespace, "late", 1)) == [(f"{namespace}/late-0", "a")]


def test_a_resize_never_overcommits_and_lands_when_room_frees(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.apply(node_object("a", cpu="2"), node_object("b", cpu="2"))
    for name in ("j1", "j2", "j3"):  # a, b, a: spread, ties to the lowest hostname
        cluster.apply(workload_obj(name, namespace, kind="Job", resources={"cpu": "1"}))
        placed(cluster, namespace, name, 1)
    assert placements(cluster.workload(namespace, "j1"))[0][1] == "a"
    cluster.apply(workload_obj("j1", namespace, kind="Job", resources={"cpu": "2"}))
    resized = cluster.wait_for(namespace, "j1", lambda w: observed(w) and phase(w) is not None)
    assert phase(resized) == "Unschedulable"
    assert resized["status"]["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    usage = usage_per_node(cluster.workloads(namespace))
    assert all(cpu <= 2000 for cpu, _ in usage.values()), usage
    cluster.run("delete", "workload", "-n", namespace, "j2")
    assert placements(placed(cluster, namespace, "j1", 1)) == [(f"{namespace}/j1-0", "b")]
    assert resized["status"]["resources"] == {"cpu": "2"}


def test_a_daemonset_that_lacked_room_gets_the_node_when_capacity_frees(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    """Level-triggered: a DaemonSet is Scheduled while missing a node for lack of room, and
    freed capacity requeues it (not the 300 s resync)."""
    cluster.apply(node_object("a", cpu="1"), node_object("b", cpu="1"))
    cluster.apply(workload_obj("hog", namespace, kind="Job", resources={"cpu": "1"}))
    hog_node = placements(placed(cluster, namespace, "hog", 1))[0][1]
    cluster.apply(workload_obj("agent", namespace, kind="DaemonSet", resources={"cpu": "500m"}))
    agent = placed(cluster, namespace, "agent", 1)
    assert phase(agent) == "Scheduled"
    assert [r["reason"] for r in agent["status"]["unschedulable"]] == ["Insufficient cpu"]
    cluster.run("delete", "workload", "-n", namespace, "hog")
    grown = placed(cluster, namespace, "agent", 2, timeout=30)
    assert hog_node in {n for _, n in placements(grown)}
