"""The operator against a real kube-apiserver + etcd (docs/design.md 5, issue 4).

Each test runs ``orca run`` in a subprocess scoped to a fresh namespace, creates Nodes as plain
API objects and applies Workloads with kubectl, then reads back what a user would see.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane
from tests.support.factories import node_object, workload_obj
from tests.support.harness import (
    REPO_ROOT,
    Cluster,
    OperatorProcess,
    observed,
    phase,
    placed,
    placements,
    reasons,
    usage_per_node,
)

pytestmark = pytest.mark.controlplane


def nodes(cluster: Cluster, *specs: tuple[str, dict[str, Any]]) -> None:
    cluster.apply(*(node_object(name, **kw) for name, kw in specs))


def unchanged_decisions(operator: OperatorProcess) -> float:
    """Decisions that found the status already right (every kind and result)."""
    samples = operator.metrics().items()
    return sum(v for k, v in samples if k.startswith("orca_schedule_unchanged_total"))


# -- kinds: create, update, delete ----------------------------------------------------------------


def test_job_service_and_daemonset_are_placed(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {}), ("b", {}), ("c", {"runtimes": ("wasmtime",)}))
    cluster.apply(
        workload_obj("job", namespace, kind="Job", runtime={"oneOf": ["wasm"]}),
        workload_obj("svc", namespace, kind="Service", count=5, resources={"cpu": "100m"}),
        workload_obj("ds", namespace, kind="DaemonSet"),
    )
    job = placed(cluster, namespace, "job", 1)
    assert placements(job) == [(f"{namespace}/job-0", "c")]
    svc = placed(cluster, namespace, "svc", 5)
    assert sorted(Counter(n for _, n in placements(svc)).values()) == [1, 2, 2]
    assert phase(svc) == "Scheduled"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in svc["status"]["conditions"]}
    assert conditions["Ready"] == conditions["Scheduled"] == ("True", "AllPlaced")
    assert "Reconciling" not in conditions and "Stalled" not in conditions  # only while True
    ds = placed(cluster, namespace, "ds", 3)
    assert sorted(n for _, n in placements(ds)) == ["a", "b", "c"]
    deadline = time.monotonic() + 30  # the gauges refresh every 5 s
    while True:
        samples = operator.metrics()
        gauges = (
            samples.get(f'orca_workloads{{namespace="{namespace}",phase="Scheduled"}}'),
            samples.get('orca_nodes{eligible="true"}'),
        )
        if gauges == (3.0, 3.0) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert gauges == (3.0, 3.0)
    # kubectl shows it: printer columns from the CRD.
    table = cluster.run("get", "orcawl", "-n", namespace, "svc")
    header, row = table.split("\n")[:2]
    assert header.split() == ["NAME", "KIND", "DESIRED", "PLACED", "READY", "PHASE", "AGE"]
    assert row.split()[:6] == ["svc", "Service", "5", "5", "True", "Scheduled"]


def test_count_up_and_down_keeps_existing_replicas(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {}), ("b", {}), ("c", {}))
    cluster.apply(workload_obj("web", namespace, kind="Service", count=2))
    two = placements(placed(cluster, namespace, "web", 2))
    cluster.apply(workload_obj("web", namespace, kind="Service", count=4))
    four = placements(placed(cluster, namespace, "web", 4))
    assert four[:2] == two
    cluster.apply(workload_obj("web", namespace, kind="Service", count=1))
    one = placements(placed(cluster, namespace, "web", 1))
    assert one == two[:1]


def test_delete_frees_capacity_for_a_pending_workload(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {"cpu": "1"}))
    cluster.apply(workload_obj("first", namespace, kind="Job", resources={"cpu": "800m"}))
    placed(cluster, namespace, "first", 1)
    cluster.apply(workload_obj("second", namespace, kind="Job", resources={"cpu": "800m"}))
    waiting = cluster.wait_for(
        namespace, "second", lambda w: phase(w) == "Unschedulable", what="Unschedulable"
    )
    assert waiting["status"]["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert waiting["status"]["unschedulable"] == [
        {"reason": "Insufficient cpu", "count": 1, "nodes": ["a"], "plugin": "ResourcesFit"}
    ]
    cluster.run("delete", "workload", "-n", namespace, "first")
    assert placements(placed(cluster, namespace, "second", 1)) == [(f"{namespace}/second-0", "a")]


def test_scale_down_frees_capacity_for_a_pending_workload(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {"cpu": "2"}))
    cluster.apply(workload_obj("web", namespace, kind="Service", count=2, resources={"cpu": "1"}))
    placed(cluster, namespace, "web", 2)
    cluster.apply(workload_obj("job", namespace, kind="Job", resources={"cpu": "1"}))
    cluster.wait_for(namespace, "job", lambda w: phase(w) == "Unschedulable", what="pending")
    cluster.apply(workload_obj("web", namespace, kind="Service", count=1, resources={"cpu": "1"}))
    assert placements(placed(cluster, namespace, "job", 1)) == [(f"{namespace}/job-0", "a")]


def test_relabelled_node_loses_replicas_whose_constraint_it_no_longer_meets(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {"tags": ("ssd",)}), ("b", {"tags": ("ssd",)}))
    ssd = ['"ssd" in node.tags']
    cluster.apply(workload_obj("db", namespace, kind="Job", constraints=ssd))
    first = placements(placed(cluster, namespace, "db", 1))[0][1]
    other = "b" if first == "a" else "a"
    cluster.run("label", "node", first, "tag.orca.cloudinit.dev/ssd-")
    moved = cluster.wait_for(
        namespace, "db", lambda w: [n for _, n in placements(w)] == [other], what="moved"
    )
    assert placements(moved) == [(f"{namespace}/db-0", other)]  # same replica, new node


def test_constraint_change_moves_only_the_replicas_that_no_longer_pass(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {"tags": ("ssd",)}), ("b", {}), ("c", {"tags": ("ssd",)}))
    cluster.apply(workload_obj("web", namespace, kind="Service", count=2))
    before = dict(placements(placed(cluster, namespace, "web", 2)))
    assert sorted(before.values()) == ["a", "b"]
    cluster.apply(
        workload_obj("web", namespace, kind="Service", count=2, constraints=['"ssd" in node.tags'])
    )
    after = cluster.wait_for(
        namespace,
        "web",
        lambda w: observed(w) and "b" not in [n for _, n in placements(w)],
        what="replica moved off b",
    )
    moved = dict(placements(after))
    stayed = [k for k, n in before.items() if n == "a"]
    assert all(moved[k] == "a" for k in stayed)
    assert sorted(moved.values()) == ["a", "c"]


# -- node changes -----------------------------------------------------------------------------


def test_node_added_grows_a_daemonset_and_deleted_node_shrinks_it(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {}), ("b", {}))
    cluster.apply(workload_obj("agent", namespace, kind="DaemonSet"))
    placed(cluster, namespace, "agent", 2)
    nodes(cluster, ("c", {}))
    grown = placed(cluster, namespace, "agent", 3)
    assert sorted(n for _, n in placements(grown)) == ["a", "b", "c"]
    cluster.run("delete", "node", "a")
    shrunk = placed(cluster, namespace, "agent", 2)
    assert sorted(n for _, n in placements(shrunk)) == ["b", "c"]


@pytest.mark.parametrize("change", ["cordon", "not-ready", "delete"])
def test_replicas_on_a_lost_node_are_rescheduled(
    cluster: Cluster, namespace: str, operator: OperatorProcess, change: str
) -> None:
    nodes(cluster, ("a", {}), ("b", {}), ("c", {}))
    # Not-ready for 0 s: it moves at once (the default, 300 s, is tests/integration/
    # test_node_lifecycle.py's).
    at_once = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    tolerations = [{**at_once, "tolerationSeconds": 0}]
    cluster.apply(workload_obj("web", namespace, kind="Service", count=2, tolerations=tolerations))
    before = dict(placements(placed(cluster, namespace, "web", 2)))
    lost = before[f"{namespace}/web-1"]
    if change == "cordon":
        cluster.run("cordon", lost)
    elif change == "not-ready":
        cluster.set_ready(lost, False)
    else:
        cluster.run("delete", "node", lost)
    after = cluster.wait_for(
        namespace,
        "web",
        lambda w: len(placements(w)) == 2 and lost not in [n for _, n in placements(w)],
        what=f"replica moved off {lost}",
    )
    now = dict(placements(after))
    assert now[f"{namespace}/web-0"] == before[f"{namespace}/web-0"]  # untouched
    assert now[f"{namespace}/web-1"] not in (lost, now[f"{namespace}/web-0"])


def test_name_affinity_pulls_replicas_next_to_another_workload(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {"cpu": "8"}), ("b", {"cpu": "8"}), ("c", {"cpu": "8"}))
    cluster.apply(workload_obj("redis", namespace, kind="Job", resources={"cpu": "4"}))
    redis_node = placements(placed(cluster, namespace, "redis", 1))[0][1]
    cluster.apply(
        workload_obj("web", namespace, kind="Job", affinity=[{"target": "redis", "weight": 100}])
    )
    assert placements(placed(cluster, namespace, "web", 1))[0][1] == redis_node


# -- load, restarts, invalid input, idempotence ---------------------------------------------------


def test_fifty_workloads_onto_room_for_thirty(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, *((f"n{i}", {"cpu": "3"}) for i in range(10)))  # 10 x 3 slots of 1 cpu
    cluster.create(
        *(
            workload_obj(f"w{i:02d}", namespace, kind="Job", resources={"cpu": "1"})
            for i in range(50)
        )
    )

    def settled() -> list[dict[str, Any]]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            items = cluster.workloads(namespace)
            if all(phase(w) for w in items) and len(items) == 50:
                return items
            time.sleep(0.5)
        raise AssertionError("not every Workload got a decision")

    items = settled()
    assert sum(1 for w in items if phase(w) == "Scheduled") == 30
    assert sum(1 for w in items if phase(w) == "Unschedulable") == 20
    assert all(cpu <= 3000 for cpu, _ in usage_per_node(items).values())
    nodes(cluster, ("extra", {"cpu": "20"}))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        items = cluster.workloads(namespace)
        if all(phase(w) == "Scheduled" for w in items):
            break
        time.sleep(0.5)
    assert all(phase(w) == "Scheduled" for w in items)
    usage = usage_per_node(items)
    assert usage["extra"][0] == 20_000
    assert all(cpu <= 3000 for node, (cpu, _) in usage.items() if node != "extra")


def test_sigkill_mid_burst_loses_and_doubles_nothing(
    cluster: Cluster, namespace: str, start_operator: Any
) -> None:
    nodes(cluster, *((f"n{i}", {"cpu": "4"}) for i in range(10)))  # 40 slots of 1 cpu
    first: OperatorProcess = start_operator()
    batch = [
        workload_obj(f"w{i:02d}", namespace, kind="Service", count=2, resources={"cpu": "1"})
        for i in range(30)
    ]  # 60 replicas wanted, 40 fit
    creator = threading.Thread(target=cluster.create, args=tuple(batch))
    creator.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # kill it once it has written some decisions
        if first.written() >= 3:
            break
        time.sleep(0.01)
    first.kill()
    at_kill = cluster.workloads(namespace)  # nothing decides now: the state at the kill
    decided_at_kill = sum(1 for w in at_kill if phase(w))
    creator.join()
    # Provably mid-flight: some decisions were written, not all (else this tests a restart).
    assert 3 <= decided_at_kill < 30, decided_at_kill
    snapshot = {w["metadata"]["name"]: placements(w) for w in cluster.workloads(namespace)}
    start_operator(lease_name="orca-test")  # the old Lease must expire first (15 s)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        items = cluster.workloads(namespace)
        decided = len(items) == 30 and all(phase(w) and observed(w) for w in items)
        if decided and sum(len(placements(w)) for w in items) == 40:
            break
        time.sleep(0.5)
    items = cluster.workloads(namespace)
    replicas = [p for w in items for p in placements(w)]
    assert len(replicas) == 40  # everything that fits, once
    assert len({alloc for alloc, _ in replicas}) == 40  # no alloc id twice
    assert all(cpu <= 4000 for cpu, _ in usage_per_node(items).values())
    for w in items:  # placements written before the kill were kept, not moved
        before = snapshot.get(w["metadata"]["name"], [])
        assert set(before) <= set(placements(w)), (w["metadata"]["name"], before)


def test_invalid_cel_is_reported_as_invalid(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {}))
    cluster.apply(workload_obj("bad", namespace, kind="Job", constraints=["node.tags.("]))
    bad = cluster.wait_for(namespace, "bad", lambda w: phase(w) == "Invalid", what="Invalid")
    cluster.apply(
        workload_obj("zone", namespace, kind="Job", constraints=['node.labels["z"] == "1"'])
    )
    zone = cluster.wait_for(namespace, "zone", lambda w: phase(w) == "Unschedulable", what="failed")
    assert "failed to evaluate" in zone["status"]["message"]  # a missing label is an error
    assert operator.metrics()["orca_cel_evaluation_errors_total"] >= 1.0
    message = bad["status"]["message"]
    assert "spec.constraints[0]" in message and "node.tags.(" in message
    conditions = {c["type"]: c for c in bad["status"]["conditions"]}
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == (
        "False",
        "InvalidSpec",
    )
    assert (conditions["Stalled"]["status"], conditions["Stalled"]["message"]) == ("True", message)
    deadline = time.monotonic() + 30  # Events are posted after the status, asynchronously
    while "FailedScheduling" not in reasons(cluster, namespace, "bad"):
        assert time.monotonic() < deadline, cluster.events(namespace)
        time.sleep(0.2)


DIGITS = "[0,1,2,3,4,5,6,7,8,9]"
DEPTH3 = f'{DIGITS}.all(a, {DIGITS}.all(b, {DIGITS}.all(c, node.hostname != "")))'


def test_costly_or_misspelt_cel_is_invalid_and_the_loop_goes_on(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    """The issue's 112-character constraint stalled planning for minutes: now it is refused at
    compile time (as a constraint and as an affinity target), unknown names too, and an
    ordinary Job created right after them is decided."""
    nodes(cluster, ("a", {}), ("b", {}))
    cluster.apply(
        workload_obj("costly", namespace, kind="Job", constraints=[DEPTH3]),
        workload_obj(
            "costly-aff", namespace, kind="Job", affinity=[{"target": DEPTH3, "weight": 5}]
        ),
        workload_obj("typo", namespace, kind="Job", constraints=['nodes.kind == "linux"']),
        workload_obj("plain", namespace, kind="Job", constraints=["node.cpu > 0"]),
    )
    expected = {
        "costly": ("spec.constraints[0]", "exceeds the budget 20000"),
        "costly-aff": ("spec.affinity[0].target", "exceeds the budget 20000"),
        "typo": ("spec.constraints[0]", "undeclared reference to 'nodes' at column 1"),
    }
    for name, (field, text) in expected.items():
        w = cluster.wait_for(namespace, name, lambda w: phase(w) == "Invalid", what="Invalid")
        assert field in w["status"]["message"] and text in w["status"]["message"], name
    cluster.wait_for(namespace, "plain", lambda w: phase(w) == "Scheduled", what="Scheduled")


def test_an_unchanged_workload_is_not_rewritten(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    nodes(cluster, ("a", {}), ("b", {}))
    cluster.apply(workload_obj("web", namespace, kind="Service", count=2))
    placed(cluster, namespace, "web", 2)
    # Settle: wait until the Scheduled Event is posted, so every write of the decision is done.
    deadline = time.monotonic() + 30
    while "Scheduled" not in reasons(cluster, namespace, "web") and time.monotonic() < deadline:
        time.sleep(0.2)
    first = cluster.workload(namespace, "web")
    samples = operator.metrics()
    written = 'orca_status_writes_total{outcome="written"}'
    writes_before, unchanged_before = samples[written], unchanged_decisions(operator)
    # Things that change nothing the decision depends on: a status patch of a Node that leaves
    # what orca reads of it as it was, and a label on the Workload.
    cluster.set_ready("a", True)
    cluster.run("label", "workload", "-n", namespace, "web", "team=blue")
    labelled = cluster.workload(namespace, "web")["metadata"]["resourceVersion"]
    # The label is an event the operator decides on: wait until it has (an "unchanged"
    # decision), then a sentinel Workload created after both changes is placed, so the
    # operator has caught up with everything sent before it.
    deadline = time.monotonic() + 30
    while unchanged_decisions(operator) <= unchanged_before:
        assert time.monotonic() < deadline, "the label change was never decided"
        time.sleep(0.1)
    cluster.apply(workload_obj("sentinel", namespace, kind="Job"))
    placed(cluster, namespace, "sentinel", 1)
    again = cluster.workload(namespace, "web")
    assert again["status"] == first["status"]
    assert again["metadata"]["resourceVersion"] == labelled  # no status write after the label
    assert operator.metrics()[written] == writes_before + 1  # the sentinel's, only
    events = reasons(cluster, namespace, "web")
    assert "Scheduled" in events
    assert all(n == 1 for n in Counter(events).values()), events  # one per transition
    # kopf stored nothing on the objects: no annotations, no finalizers, on Nodes or Workloads.
    for obj in [again, *cluster.nodes()]:
        annotations = obj["metadata"].get("annotations") or {}
        assert not [k for k in annotations if "kopf" in k or k.startswith("orca.")], annotations
        assert not obj["metadata"].get("finalizers")


def test_standby_replica_takes_over(cluster: Cluster, namespace: str, start_operator: Any) -> None:
    nodes(cluster, ("a", {}))
    leader: OperatorProcess = start_operator()
    standby: OperatorProcess = start_operator()
    cluster.apply(workload_obj("one", namespace, kind="Job"))
    placed(cluster, namespace, "one", 1)
    deadline = time.monotonic() + 30
    while True:  # the standby has started and stands by
        lead = [op.metrics().get("orca_leader", 0.0) for op in (leader, standby)]
        if sorted(lead) == [0.0, 1.0] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted(lead) == [0.0, 1.0]
    active, passive = (leader, standby) if lead[0] == 1.0 else (standby, leader)
    assert active.stop() == 0  # graceful: the Lease is handed back
    cluster.apply(workload_obj("two", namespace, kind="Job"))
    placed(cluster, namespace, "two", 1, timeout=30)
    assert passive.metrics()["orca_leader"] == 1.0


def test_plan_from_cluster_is_a_dry_run_against_the_live_ledger(
    cluster: Cluster,
    namespace: str,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    nodes(cluster, ("a", {"cpu": "2"}), ("b", {"cpu": "2"}))
    cluster.apply(workload_obj("big", namespace, kind="Job", resources={"cpu": "2"}))
    big = placed(cluster, namespace, "big", 1)
    taken = placements(big)[0][1]
    request = tmp_path / "w.yaml"
    request.write_text(
        yaml.safe_dump_all(
            [
                workload_obj("next", namespace, kind="Job", resources={"cpu": "2"}),
                workload_obj("third", namespace, kind="Job", resources={"cpu": "2"}),
            ]
        )
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "plan",
            "--from-cluster",
            f"--kubeconfig={control_plane.kubeconfig_path}",
            f"--workloads={request}",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 1, result.stderr  # the third does not fit
    first, second = json.loads(result.stdout)["results"]
    assert [p["node"] for p in first["placements"]] == [n for n in "ab" if n != taken]
    assert second["phase"] == "Unschedulable"
    # Nothing was written: no such Workloads, and the live one is untouched.
    assert [w["metadata"]["name"] for w in cluster.workloads(namespace)] == ["big"]
    assert (
        cluster.workload(namespace, "big")["metadata"]["resourceVersion"]
        == (big["metadata"]["resourceVersion"])
    )
