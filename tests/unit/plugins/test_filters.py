"""The small filter plugins: eligibility, runtime, CEL constraints, resources fit."""

from __future__ import annotations

import numpy as np
import pytest

from controller.scheduler.celexpr import CelEvaluator
from controller.scheduler.framework import Code
from controller.scheduler.nodes import unreadable_node_info
from controller.scheduler.plugins.constraints import CelConstraints
from controller.scheduler.plugins.eligibility import NodeEligibility
from controller.scheduler.plugins.resources import ResourcesFit
from controller.scheduler.plugins.runtime import Runtime
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, cycle_for, ledger_for, node, rejected, workload


def test_eligibility_rejects_cordoned_and_not_ready_and_evicts_only_from_cordoned() -> None:
    ledger = ledger_for(node("a"), node("b", cordoned=True), node("c", ready=False))
    plugin = NodeEligibility()
    verdict = plugin.filter(cycle_for(workload(kind="Job"), ledger))
    assert rejected(verdict) == {
        "node(s) could not be read by orca": [],
        "node(s) were unschedulable": [1],
        "node(s) not ready": [2],
    }
    # A NotReady node keeps its replicas here: the not-ready NoExecute taint moves them, on
    # its clock (tests/unit/test_node_lifecycle.py).
    assert verdict.keeps is not None and verdict.keeps.tolist() == [True, False, True]
    assert plugin.code is Code.UNRESOLVABLE


@pytest.mark.parametrize(
    ("wants", "offered", "reason"),
    [
        (["wasm"], [False, True, False, False], "runtime wasm not offered"),
        (["WASMTIME"], [False, True, False, False], "runtime wasm not offered"),
        (["pve-vm"], [False, False, True, False], "runtime pve-vm not offered"),
        (["docker", "process"], [True, False, False, True], "runtime docker|process not offered"),
    ],
    ids=["wasm-alias", "case", "proxmox-kind-only", "any-of"],
)
def test_runtime_matching(wants: list[str], offered: list[bool], reason: str) -> None:
    ledger = ledger_for(
        node("a", runtimes=("docker", "pve-vm")),  # a linux node with a pve-* label
        node("b", runtimes=("wasmtime",)),
        node("c", runtimes=(), kind="proxmox"),
        node("d", runtimes=("process",)),
    )
    verdict = Runtime().filter(cycle_for(workload(kind="Job", runtime={"oneOf": wants}), ledger))
    (rejection,) = verdict.rejections
    assert rejection.passed.tolist() == offered
    assert rejection.reason == reason  # what was asked, normalised, alternatives joined by |


def test_runtime_prefilter_refuses_unknown_proxmox_aliases() -> None:
    cycle = Scheduler().snapshot(
        workload(kind="Job", runtime={"oneOf": ["pve-lxc"]}), ledger_for(), NOW
    )
    (error,) = Runtime().pre_filter(cycle)
    assert error == (
        "spec.runtime.oneOf[0] 'pve-lxc': unknown runtime alias "
        "(proxmox runtimes are proxmox, pve-ct, pve-vm)"
    )


def test_constraints_report_each_expression_and_errors_apart() -> None:
    ledger = ledger_for(
        node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"}), node("c")
    )
    w = workload(kind="Job", constraints=['node.labels["zone"] == "z1"'])
    cycle = cycle_for(w, ledger)
    verdict = CelConstraints(Scheduler().cel).filter(cycle)
    assert rejected(verdict) == {
        'constraint node.labels["zone"] == "z1" failed to evaluate': [2],
        'node(s) didn\'t match constraint node.labels["zone"] == "z1"': [1],
    }
    # A replica stays only where the expression holds: not where it is false, nor where it
    # cannot be evaluated.
    assert verdict.keeps is not None and verdict.keeps.tolist() == [True, False, False]


def test_a_replica_stays_only_where_every_constraint_holds() -> None:
    ledger = ledger_for(node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"}))
    w = workload(kind="Job", constraints=['node.labels["zone"] == "z1"', "node.cpu > 0"])
    verdict = CelConstraints(Scheduler().cel).filter(cycle_for(w, ledger))
    assert verdict.keeps is not None and verdict.keeps.tolist() == [True, False]


def test_constraints_on_free_capacity_never_move_a_replica() -> None:
    """docs/design.md 5, capacity changes never evict: an expression that reads
    ``node.freeCpu`` rejects nodes for new replicas but keeps the ones placed."""
    ledger = ledger_for(node("a"), node("b"))
    w = workload(kind="Job", constraints=["node.freeCpu < 0"])
    verdict = CelConstraints(Scheduler().cel).filter(cycle_for(w, ledger))
    assert rejected(verdict) == {"node(s) didn't match constraint node.freeCpu < 0": [0, 1]}
    assert verdict.keeps is not None and verdict.keeps.tolist() == [True, True]


def test_constraints_signature_is_what_they_read() -> None:
    plugin = CelConstraints(Scheduler().cel)
    ledger = ledger_for(node("a"))
    plain = cycle_for(workload(kind="Job", constraints=["node.cpu > 1"]), ledger)
    free = cycle_for(workload(kind="Job", constraints=["node.freeCpu > 1"]), ledger)
    every = cycle_for(workload(kind="DaemonSet", constraints=["node.cpu > 1"]), ledger)
    assert plugin.signature(plain) == ("node.cpu > 1",)
    assert plugin.signature(free) is None  # free capacity changes per cycle: never memoised
    assert plugin.signature(every) == ()  # EveryNode DaemonSets ignore constraints
    assert plugin.filter(every).rejections == ()


def test_resources_fit_zero_requests_fit_even_overcommitted_nodes() -> None:
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="4"))
    cycle = cycle_for(workload(kind="Job", resources={"cpu": "2"}), ledger)
    assert rejected(ResourcesFit().filter(cycle)) == {
        "Too many pods": [],
        "Insufficient cpu": [0],
        "Insufficient memory": [],
    }
    zero = cycle_for(workload(kind="Job"), ledger)
    zero.free_cpu[:] = np.array([-1, -1])  # over-committed (nodes that shrank)
    assert all(r.passed.all() for r in ResourcesFit().filter(zero).rejections)


def test_a_node_orca_cannot_read_is_reported_as_such() -> None:
    ledger = ledger_for(node("a"), unreadable_node_info("broken"))
    decision = Scheduler().schedule(workload(kind="Service", count=2), ledger, now=NOW)
    assert [p.node for p in decision.placements] == ["a", "a"]
    verdict = NodeEligibility().filter(cycle_for(workload(kind="Job"), ledger))
    assert rejected(verdict) == {
        "node(s) could not be read by orca": [1],
        "node(s) were unschedulable": [],
        "node(s) not ready": [1],
    }
    job = Scheduler().schedule(workload(kind="Job", resources={"cpu": "64"}), ledger, now=NOW)
    assert job.message == (
        "0/2 nodes are available: 1 node(s) could not be read by orca, 1 Insufficient cpu."
    )


def test_constraints_cut_at_the_cycle_budget_say_so_and_are_not_memoised() -> None:
    """Every node is a distinct value of ``node.hostname``, so memoising cannot help: the
    cycle's CEL budget runs out part-way. The nodes left are rejected for the budget (first,
    so the diagnosis names it), are also failed, keep nothing, and the verdict must not be
    memoised (the next cycle has a full budget); with the budget intact it may be."""
    costly = "node.tags.all(t, t != node.hostname)"
    ledger = ledger_for(*(node(f"n{i:03d}") for i in range(40)))
    cycle = cycle_for(workload(kind="Job", constraints=[costly]), ledger)
    cel = CelEvaluator(cycle_budget=300)
    cel.start_cycle()
    verdict = CelConstraints(cel).filter(cycle)
    assert [r.reason for r in verdict.rejections] == [
        f"constraint {costly} not evaluated (the Workload's CEL budget for one cycle is spent)",
        f"constraint {costly} failed to evaluate",
        f"node(s) didn't match constraint {costly}",
    ]
    evaluated, failed, matched = (r.passed.tolist() for r in verdict.rejections)
    seen = evaluated.count(True)
    assert 0 < seen < 40 and evaluated == [True] * seen + [False] * (40 - seen)  # in order
    assert failed == evaluated  # the nodes left count as failed, and only they
    assert matched == [True] * 40  # a failed node is reported as failed, not as not matching
    assert verdict.keeps is not None and verdict.keeps.tolist() == evaluated
    assert verdict.cacheable is False
    full = CelEvaluator()
    full.start_cycle()
    whole = CelConstraints(full).filter(cycle)
    assert rejected(whole) == {f"node(s) didn't match constraint {costly}": []}
    assert whole.keeps is not None and whole.keeps.all() and whole.cacheable is True
