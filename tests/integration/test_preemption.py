"""Priority and preemption with the operator on a real kube-apiserver + etcd (docs/design.md 4,
issue 12): PriorityClasses created through the API (and the two the API server creates
itself), a full cluster, a high-priority Job that preempts the lowest-priority replica, the
victim's status, Event and requeue, and a SIGKILL between the victims' writes and the
preemptor's write."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from controller.devcluster.controlplane import ControlPlane
from tests.support.factories import node_object, workload_obj
from tests.support.harness import (
    Cluster,
    OperatorProcess,
    orca_explain,
    phase,
    placed,
    placements,
    usage_per_node,
)

pytestmark = pytest.mark.controlplane


@pytest.fixture
def classes(cluster: Cluster, namespace: str) -> Iterator[dict[str, str]]:
    """PriorityClasses named after the test's namespace (they are cluster-scoped): low 10,
    mid 100, high 1000, polite 1000 with ``preemptionPolicy: Never``."""
    values = {"low": 10, "mid": 100, "high": 1000, "polite": 1000}
    names = {role: f"{role}-{namespace}" for role in values}
    cluster.apply(
        *(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": names[role]},
                "value": value,
                **({"preemptionPolicy": "Never"} if role == "polite" else {}),
            }
            for role, value in values.items()
        )
    )
    yield names
    cluster.run("delete", "priorityclass", *names.values(), "--ignore-not-found")


def service(name: str, ns: str, count: int, priority_class: str, **spec: Any) -> dict[str, Any]:
    return workload_obj(
        name,
        ns,
        kind="Service",
        count=count,
        resources={"cpu": "1"},
        priorityClassName=priority_class,
        **spec,
    )


def job(name: str, ns: str, priority_class: str) -> dict[str, Any]:
    return workload_obj(
        name, ns, kind="Job", resources={"cpu": "1"}, priorityClassName=priority_class
    )


def within_capacity(cluster: Cluster, ns: str, cpu: dict[str, int]) -> None:
    usage = usage_per_node(cluster.workloads(ns))
    assert all(used <= cpu[node] for node, (used, _) in usage.items()), usage


def test_a_high_priority_job_preempts_the_lowest_priority_replica_which_lands_elsewhere(
    cluster: Cluster,
    namespace: str,
    operator: OperatorProcess,
    classes: dict[str, str],
    control_plane: ControlPlane,
) -> None:
    cpu = {"a": 2000, "b": 2000, "c": 1000}
    cluster.apply(node_object("a", cpu="2"), node_object("b", cpu="2"))
    cluster.apply(service("mid", namespace, 2, classes["mid"]))
    assert sorted(n for _, n in placements(placed(cluster, namespace, "mid", 2))) == ["a", "b"]
    toleration = {"key": "spare", "operator": "Exists", "effect": "NoSchedule"}
    cluster.apply(service("low", namespace, 2, classes["low"], tolerations=[toleration]))
    low = placed(cluster, namespace, "low", 2)
    assert low["status"]["priority"] == 10
    # Room only the victim may use: a node tainted for everyone but ``low``.
    cluster.apply(node_object("c", cpu="1", taints=[{"key": "spare", "effect": "NoSchedule"}]))
    # preemptionPolicy Never: it waits, however high its priority.
    cluster.apply(job("polite", namespace, classes["polite"]))
    polite = cluster.wait_for(
        namespace, "polite", lambda w: phase(w) == "Unschedulable", what="Unschedulable"
    )
    assert polite["status"]["priority"] == 1000
    assert sorted(n for _, n in placements(cluster.workload(namespace, "low"))) == ["a", "b"]

    cluster.apply(job("high", namespace, classes["high"]))
    high = placed(cluster, namespace, "high", 1)
    assert high["status"]["priority"] == 1000 and phase(high) == "Scheduled"
    # The lowest priority goes, on the node with the lowest hostname among equal choices.
    assert placements(high) == [(f"{namespace}/high-0", "a")]
    mid = cluster.workload(namespace, "mid")
    assert sorted(n for _, n in placements(mid)) == ["a", "b"]  # higher than low: untouched
    # The victim: its replica on a removed, a Preempted condition naming the preemptor, an
    # Event; requeued, it lands on the node only it tolerates.
    message = f"1 replica preempted by {namespace}/high (priority 1000) on a"
    low = cluster.wait_for(
        namespace,
        "low",
        lambda w: sorted(n for _, n in placements(w)) == ["b", "c"],
        what="the preempted replica placed again on c",
    )
    # Placed again: Preempted turns False, still naming who preempted it.
    conditions = {c["type"]: c for c in low["status"]["conditions"]}
    again = conditions["Preempted"]
    assert (again["status"], again["reason"], again["message"]) == (
        "False",
        "PlacedAgain",
        message,
    )
    assert conditions["Ready"]["status"] == "True"
    deadline = time.monotonic() + 20
    preempted: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not preempted:
        preempted = [
            e
            for e in cluster.events(namespace)
            if e["reason"] == "Preempted" and e["involvedObject"]["name"] == "low"
        ]
        time.sleep(0.25)
    assert [e["message"] for e in preempted] == [message]
    assert phase(cluster.workload(namespace, "polite")) == "Unschedulable"
    within_capacity(cluster, namespace, cpu)
    samples = operator.metrics()
    assert samples["orca_preemption_attempts_total"] >= 1
    assert samples["orca_preemption_victims_count"] == 1
    assert samples["orca_preemption_victims_sum"] == 1
    # kubectl orca explain says who preempted whom, from either side.
    out = orca_explain(control_plane, "high", "-n", namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    explained = json.loads(out.stdout)
    assert explained["priority"] == 1000
    assert explained["preempted"] == [{"workload": f"{namespace}/low", "message": message}]
    out = orca_explain(control_plane, "low", "-n", namespace)
    assert f"  last preempted: {message}\n" in out.stdout


def test_classes_through_the_api_missing_default_and_system(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.apply(node_object("a", cpu="4"))
    gold = f"gold-{namespace}"
    cluster.apply(
        workload_obj("named", namespace, kind="Job", priorityClassName=gold),
        workload_obj("system", namespace, kind="Job", priorityClassName="system-cluster-critical"),
    )
    # The API server creates the system classes itself; orca reads them like any other.
    assert placed(cluster, namespace, "system", 1)["status"]["priority"] == 2000000000
    invalid = cluster.wait_for(namespace, "named", lambda w: phase(w) == "Invalid", what="Invalid")
    assert invalid["status"]["message"] == (
        f"spec.priorityClassName: no PriorityClass with name {gold} was found"
    )
    default = f"default-{namespace}"
    try:
        cluster.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": gold},
                "value": 500,
            },
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": default},
                "value": 7,
                "globalDefault": True,
            },
        )
        # The class appears: the Workload naming it is decided again (the watch), and placed.
        named = placed(cluster, namespace, "named", 1)
        assert named["status"]["priority"] == 500
        cluster.apply(workload_obj("plain", namespace, kind="Job"))
        assert placed(cluster, namespace, "plain", 1)["status"]["priority"] == 7
        # The globalDefault class goes: a Workload naming none is back to 0.
        cluster.run("delete", "priorityclass", default)
        cluster.wait_for(
            namespace,
            "plain",
            lambda w: (w.get("status") or {}).get("priority") == 0,
            what="priority 0 once the globalDefault class is gone",
        )
    finally:
        cluster.run("delete", "priorityclass", gold, default, "--ignore-not-found")


def test_sigkill_between_the_victims_writes_and_the_preemptors(
    cluster: Cluster, namespace: str, start_operator: Any, classes: dict[str, str]
) -> None:
    cpu = {"a": 2000}
    cluster.apply(node_object("a", cpu="2"))
    env = {**os.environ, "ORCA_TEST_FAILPOINT": "preempt-after-victims"}
    first: OperatorProcess = start_operator(env=env)
    cluster.apply(service("low", namespace, 2, classes["low"]))
    placed(cluster, namespace, "low", 2)
    cluster.apply(job("high", namespace, classes["high"]))
    # The failpoint holds the preemptor's write once the victim's write landed.
    low = cluster.wait_for(
        namespace, "low", lambda w: len(placements(w)) == 1, what="the victim's write"
    )

    def held() -> bool:  # the whole log: its tail (first.log()) could have scrolled past it
        return "failpoint preempt-after-victims" in first.log_path.read_text(errors="replace")

    deadline = time.monotonic() + 20
    while not held() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert held(), first.log()
    first.kill()
    # Between the two writes: the room is free in the statuses, booked by no one.
    assert placements(cluster.workload(namespace, "high")) == []
    within_capacity(cluster, namespace, cpu)
    assert usage_per_node(cluster.workloads(namespace))["a"][0] == 1000
    kept = placements(low)
    start_operator()  # the old Lease must expire first (15 s)
    high = placed(cluster, namespace, "high", 1, timeout=60)
    assert placements(high) == [(f"{namespace}/high-0", "a")]
    low = cluster.workload(namespace, "low")
    assert placements(low) == kept  # the survivor stays; nothing is placed twice
    within_capacity(cluster, namespace, cpu)
