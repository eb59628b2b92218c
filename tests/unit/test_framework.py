"""The framework: a plugin added to a profile runs, reports, memoises by its own signature."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pytest

from controller.api.models import Phase
from controller.scheduler import framework as framework_module
from controller.scheduler.celexpr import CelEvaluator
from controller.scheduler.framework import (
    Code,
    CycleState,
    Filtered,
    FilterResult,
    Framework,
    Profile,
    Rejection,
    Verdict,
)
from controller.scheduler.ledger import Booking
from controller.scheduler.nodes import NodeInfo
from controller.scheduler.plugins import default_profile
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, GiB, cycle_for, ledger_for, node, workload


class OddCpu:
    """A filter plugin written for the test: rejects nodes whose cpu in cores is odd, unless
    the Workload's strategy is BinPack (so its signature is the strategy)."""

    name = "OddCpu"
    code = Code.UNRESOLVABLE
    evicts = True
    selects = True
    per_replica = False

    def __init__(self) -> None:
        self.calls = 0

    def signature(self, cycle: CycleState) -> Hashable:
        return cycle.spec.strategy

    def filter(self, cycle: CycleState) -> Verdict:
        self.calls += 1
        if cycle.spec.strategy == "BinPack":
            return Verdict(())
        even = (cycle.table.cpu // 1000) % 2 == 0
        return Verdict((Rejection("node(s) had odd cpu", even),))


def profile_with(plugin: object) -> Profile:
    base = default_profile(Scheduler().cel).plugins
    return Profile((*base[:4], (plugin, 0), *base[4:]))  # after constraints, before capacity


def test_a_plugin_in_the_profile_runs_and_its_reason_is_in_the_diagnosis() -> None:
    plugin = OddCpu()
    scheduler = Scheduler(profile=profile_with(plugin))
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="3"), node("c", cpu="2"))
    decision = scheduler.schedule(
        workload(kind="Service", count=2, resources={"cpu": "2"}), ledger, now=NOW
    )
    assert [p.node for p in decision.placements] == ["c"]
    assert decision.phase is Phase.PARTIALLY_SCHEDULED
    assert decision.message == (
        "1/2 replicas placed; 0/3 nodes are available: 2 node(s) had odd cpu, 1 Insufficient cpu."
    )
    assert decision.code is Code.UNSCHEDULABLE  # c could take another one if room freed


def test_memo_is_per_signature_and_does_not_leak_between_specs() -> None:
    plugin = OddCpu()
    scheduler = Scheduler(profile=profile_with(plugin))
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="2"))
    spread = scheduler.schedule(workload(name="s1", kind="Job"), ledger, now=NOW)
    again = scheduler.schedule(
        workload(name="s2", kind="Job", resources={"cpu": "1"}), ledger, now=NOW
    )
    assert plugin.calls == 1  # same signature (strategy), same table: memoised
    binpack = scheduler.schedule(
        workload(name="p", kind="Job", strategy="BinPack"), ledger, now=NOW
    )
    assert plugin.calls == 2  # another signature: its own masks
    assert [p.node for p in spread.placements] == ["b"] == [p.node for p in again.placements]
    assert [p.node for p in binpack.placements] == ["a"]  # not filtered by the Spread masks


def test_a_new_node_table_clears_the_memo() -> None:
    plugin = OddCpu()
    scheduler = Scheduler(profile=profile_with(plugin))
    ledger = ledger_for(node("a", cpu="2"))
    scheduler.schedule(workload(kind="Job"), ledger, now=NOW)
    ledger.rebind(ledger_for(node("a", cpu="3")).table)
    decision = scheduler.schedule(workload(kind="Job"), ledger, now=NOW)
    assert plugin.calls == 2
    assert decision.phase is Phase.UNSCHEDULABLE


class ShapeOnlyOddCpu(OddCpu):
    """The same filter, declared to read only what a table's shape covers (allocatable)."""

    name = "ShapeOnlyOddCpu"
    shape_only = True


def test_a_shape_only_verdict_outlives_a_node_going_not_ready_but_not_a_resize() -> None:
    """A node going NotReady (or cordoned, or tainted) between two decisions gives a new table
    of the same shape: a ``shape_only`` filter is not run again, and the NotReady node is still
    left out (by eligibility, which is run again). A resize is a new shape: run again."""
    plugin = ShapeOnlyOddCpu()
    scheduler = Scheduler(profile=profile_with(plugin))
    ledger = ledger_for(node("a", cpu="2"), node("b", cpu="4"), node("c", cpu="3"))
    first = scheduler.schedule(workload(name="one", kind="Job"), ledger, now=NOW)
    assert [p.node for p in first.placements] == ["a"]  # spread: a and b tie, a's name first
    ledger.rebind(ledger.table.replaced([node("a", cpu="2", ready=False)]))
    flapped = scheduler.schedule(workload(name="two", kind="Job"), ledger, now=NOW)
    assert plugin.calls == 1
    assert [p.node for p in flapped.placements] == ["b"]
    ledger.rebind(ledger.table.replaced([node("b", cpu="5")]))
    resized = scheduler.schedule(workload(name="three", kind="Job"), ledger, now=NOW)
    assert plugin.calls == 2
    assert resized.phase is Phase.UNSCHEDULABLE  # a not ready, b odd now, c odd


def test_cel_outcomes_survive_a_readiness_flap_and_follow_a_relabel() -> None:
    """What CEL reads (labels here) did not change when a node went NotReady: nothing is
    evaluated or grouped again, and the NotReady node is still left out; a relabelled node is
    grouped again and the answer follows its new label."""
    nodes = [node(f"n{i}", labels={"zone": "a" if i % 2 else "b"}) for i in range(6)]
    cel = CelEvaluator()
    scheduler = Scheduler(cel=cel)
    ledger = ledger_for(*nodes)
    spec: dict[str, Any] = {"kind": "Service", "constraints": ['node.labels.zone == "a"']}
    first = scheduler.schedule(workload(name="w1", count=3, **spec), ledger, now=NOW)
    assert sorted(p.node for p in first.placements) == ["n1", "n3", "n5"]
    evaluated, grouped = cel.evaluations, cel.groupings
    ledger.rebind(ledger.table.replaced([node("n3", labels={"zone": "a"}, ready=False)]))
    second = scheduler.schedule(workload(name="w2", count=2, **spec), ledger, now=NOW)
    assert (cel.evaluations, cel.groupings) == (evaluated, grouped)
    assert sorted(p.node for p in second.placements) == ["n1", "n5"]
    ledger.rebind(ledger.table.replaced([node("n0", labels={"zone": "a"})]))
    third = scheduler.schedule(workload(name="w3", count=3, **spec), ledger, now=NOW)
    assert cel.groupings == grouped + 1  # zone "a" was evaluated already (memo by value)
    assert sorted(p.node for p in third.placements) == ["n0", "n1", "n5"]


def full(name: str, cpu: str) -> tuple[NodeInfo, int]:
    """A node of ``cpu`` cores whose cpu another Workload holds entirely."""
    info = node(name, cpu=cpu)
    return info, info.cpu


@pytest.mark.parametrize(
    ("nodes", "spec", "code"),
    [
        ([full("a", cpu="2")], {"kind": "Job", "resources": {"cpu": "2"}}, Code.UNSCHEDULABLE),
        # kube's fitsRequest: a request above the node's allocatable itself is Unresolvable
        ([node("a", cpu="1")], {"kind": "Job", "resources": {"cpu": "2"}}, Code.UNRESOLVABLE),
        (
            [node("a", allocatable={"nvidia.com/gpu": "1"})],
            {"kind": "Job", "resources": {"nvidia.com/gpu": "2"}},
            Code.UNRESOLVABLE,
        ),
        (
            [full("a", cpu="2"), node("b", cpu="1")],
            {"kind": "Job", "resources": {"cpu": "2"}},
            Code.UNSCHEDULABLE,  # room freed on a cures it, though b never can
        ),
        (
            [node("a", runtimes=("docker",))],
            {"kind": "Job", "runtime": {"oneOf": ["wasm"]}},
            Code.UNRESOLVABLE,
        ),
        ([node("a", cordoned=True)], {"kind": "Job"}, Code.UNRESOLVABLE),
        ([], {"kind": "Job"}, Code.UNRESOLVABLE),
        ([node("a")], {"kind": "Job", "constraints": ["node.("]}, Code.INVALID),
        ([node("a")], {"kind": "Job"}, Code.SUCCESS),
        (
            [full("a", cpu="2"), node("b", cpu="4")],
            {"kind": "DaemonSet", "resources": {"cpu": "2"}},
            Code.UNSCHEDULABLE,  # Scheduled, but freed room on a would add a replica there
        ),
        (
            [node("a", cpu="1"), node("b", cpu="4")],
            {"kind": "DaemonSet", "resources": {"cpu": "2"}},
            Code.SUCCESS,  # a is too small for it whatever is freed: nothing to wait for
        ),
    ],
    ids=[
        "capacity",
        "over-allocatable",
        "over-allocatable-gpu",
        "one-node-curable",
        "runtime",
        "cordoned",
        "no-nodes",
        "invalid",
        "placed",
        "daemonset-short",
        "daemonset-too-small",
    ],
)
def test_the_code_says_who_can_cure_a_failure(
    nodes: list[NodeInfo | tuple[NodeInfo, int]], spec: dict[str, Any], code: Code
) -> None:
    """``full`` nodes hold a replica of another Workload that takes all their cpu."""
    ledger = ledger_for(*(n[0] if isinstance(n, tuple) else n for n in nodes))
    for n in nodes:
        if isinstance(n, tuple):
            info, cpu = n
            ledger.load(f"other/{info.hostname}", [Booking(info.hostname, "other/x-0", cpu, 0)])
    assert Scheduler().schedule(workload(**spec), ledger, now=NOW).code is code


class Nothing:
    """A plugin of no extension point."""

    name = "Nothing"

    def __repr__(self) -> str:
        return "Nothing()"


def test_profile_refuses_plugins_without_extension_points_or_names() -> None:
    with pytest.raises(TypeError) as caught:
        Profile(((Nothing(), 0),))
    assert str(caught.value) == "Nothing() implements no extension point"
    with pytest.raises(ValueError) as twice:
        Profile(((OddCpu(), 0), (OddCpu(), 0)))
    assert str(twice.value) == "plugins need distinct names: ['OddCpu', 'OddCpu']"
    with pytest.raises(ValueError) as nameless:
        Profile(((OddCpu(), 0), (object(), 0)))
    assert str(nameless.value) == "plugins need distinct names: ['OddCpu', None]"


# -- the CEL budget per Workload and cycle (issue 7: no one Workload stalls the loop) --------


def test_a_costly_constraint_is_cut_at_the_cycle_budget_and_others_are_unaffected() -> None:
    """Every node is a distinct value of ``node.hostname``, so memoising cannot help; the
    cycle's budget stops evaluating, the nodes left are reported, and the next Workload's
    cycle starts with a full budget. Nothing cut short is memoised."""
    nodes = [node(f"n{i:03d}") for i in range(60)]
    costly = 'node.tags.all(t, t != node.hostname) && node.hostname.startsWith("n")'
    cel = CelEvaluator(cycle_budget=400)
    scheduler = Scheduler(cel=cel)
    ledger = ledger_for(*nodes)
    daemon: dict[str, Any] = {"kind": "DaemonSet", "schedule": {"mode": "Matching"}}
    first = scheduler.schedule(
        workload(name="costly", constraints=[costly], **daemon), ledger, now=NOW
    )
    assert cel.cycle_budget_hits == 1
    evaluated = cel.evaluations
    assert 0 < evaluated < len(nodes)
    # Placed on the nodes evaluated, in order, before the budget ran out (the evaluation that
    # hit it is cut too); the rest are reported.
    placed = len(first.placements)
    assert placed in (evaluated, evaluated - 1) and placed > 0
    assert [p.node for p in first.placements] == [f"n{i:03d}" for i in range(placed)]
    reasons = {r.reason: r.count for r in first.unschedulable}
    budget = f"constraint {costly} not evaluated (the Workload's CEL budget for one cycle is spent)"
    assert reasons == {budget: len(nodes) - placed}
    # An ordinary Workload right after: a full budget, every node answered.
    plain = scheduler.schedule(
        workload(name="plain", kind="Service", count=60, constraints=['node.kind == "linux"']),
        ledger,
        now=NOW,
    )
    assert plain.placed == 60
    assert cel.cycle_budget_hits == 1
    # The costly one again: what was evaluated is memoised, so it gets further each cycle.
    scheduler.schedule(workload(name="costly", constraints=[costly], **daemon), ledger, now=NOW)
    assert cel.evaluations > evaluated + 1


def test_the_cut_short_filter_is_not_memoised_for_the_next_workload() -> None:
    costly = "node.tags.all(t, t != node.hostname)"
    cel = CelEvaluator(cycle_budget=300)
    scheduler = Scheduler(cel=cel)
    ledger = ledger_for(*[node(f"n{i:03d}") for i in range(40)])
    spec: dict[str, Any] = {
        "kind": "DaemonSet",
        "schedule": {"mode": "Matching"},
        "constraints": [costly],
    }
    short = scheduler.schedule(workload(name="a", **spec), ledger, now=NOW)
    assert short.placed < 40
    for _ in range(40):  # each cycle evaluates more (memo by value), none reuses a cut mask
        again = scheduler.schedule(workload(name="b", **spec), ledger, now=NOW)
        if again.placed == 40:
            break
    assert again.placed == 40
    assert not any("budget" in r.reason for r in again.unschedulable)


# -- the dry runs: "what if" asked of a cycle and of the whole cluster --------------------------


def test_what_if_on_a_cycle_is_a_clone_with_the_bookings_lifted_and_placed() -> None:
    from controller.scheduler.ledger import Booking

    nodes = [node("a", cpu="4"), node("b", cpu="4")]
    web = workload(kind="Service", count=2, resources={"cpu": "1"})
    other = Booking("b", "shop/other-0", 2000, 0)
    ledger = ledger_for(*nodes)
    ledger.load("shop/other", [other])
    ledger.load(web.key, [Booking("a", "shop/web-0", 1000, 0), Booking("b", "shop/web-1", 1000, 0)])
    scheduler = Scheduler()
    prepared = scheduler.prepare(web, ledger, now=NOW)
    cycle = prepared.cycle
    # After keep: web holds one replica on each node; b also holds other's 2 cores.
    assert cycle.free_cpu.tolist() == [3000, 1000] and cycle.own.tolist() == [1, 1]
    trial = scheduler.framework.what_if(
        cycle,
        lift=[other, Booking("a", "shop/web-0", 1000, 0)],
        book=[Booking("b", "shop/web-9", 500, 0), Booking("a", "shop/other-1", 1000, 0)],
    )
    # other's 2 cores back on b, web-0's core back on a (no longer counted), web-9 on b, and
    # another Workload's replica on a: room taken, not web's own.
    assert trial.free_cpu.tolist() == [3000, 2500]
    assert trial.own.tolist() == [0, 2]
    with trial.vacated(1):  # one of web's replicas (1 core) off b for the block
        assert trial.free_cpu.tolist() == [3000, 3500] and trial.own.tolist() == [0, 1]
    assert trial.free_cpu.tolist() == [3000, 2500] and trial.own.tolist() == [0, 2]
    # The cycle asked about is as it was.
    assert cycle.free_cpu.tolist() == [3000, 1000] and cycle.own.tolist() == [1, 1]
    # The per-replica filters see the trial's room: a 3-core replica fits a only there.
    big = scheduler.prepare(workload("big", kind="Job", resources={"cpu": "3"}), ledger, now=NOW)
    assert big.filtered is not None
    assert scheduler.framework.fits(big.cycle, big.filtered).tolist() == [True, False]
    lifted = scheduler.framework.what_if(big.cycle, lift=[other])
    assert scheduler.framework.fits(lifted, big.filtered).tolist() == [True, True]


def test_what_if_on_the_cluster_lifts_removes_and_adds_without_changing_it() -> None:
    from controller.scheduler.ledger import REMOVED, Booking

    ledger = ledger_for(node("a", cpu="4"), node("b", cpu="4"))
    ledger.load("shop/x", [Booking("a", "shop/x-0", 3000, 0), Booking("b", "shop/x-1", 1000, 0)])
    lifted = ledger.what_if(lift={"shop/x": [Booking("a", "shop/x-0", 3000, 0)]})
    assert [b.alloc_id for b in lifted.bookings("shop/x")] == ["shop/x-1"]
    assert lifted.free()[0].tolist() == [4000, 3000]
    gone = ledger.what_if(remove={"a"}, add=[node("c", cpu="8")])
    assert gone.table.hostnames == ("b", "c")
    # What the removed node held stays recorded (the scheduler finds its node gone and moves
    # it); it holds no room anywhere.
    assert [b.node for b in gone.bookings("shop/x")] == ["a", "b"]
    assert gone.free()[0].tolist() == [3000, 8000]
    assert ledger.table.hostnames == ("a", "b") and ledger.free()[0].tolist() == [1000, 3000]
    with pytest.raises(ValueError, match="node b is already in the cluster"):
        ledger.what_if(add=[node("b")])
    with pytest.raises(ValueError, match="node c is already in the cluster"):
        ledger.what_if(add=[node("c"), node("c")])  # twice among the added
    # A node removed and added back in one change is replaced: the new one is empty (all of
    # its 8 cores free) and what the old one held is displaced, counted nowhere.
    replaced = ledger.what_if(remove={"a"}, add=[node("a", cpu="8")])
    assert replaced.table.hostnames == ("a", "b")
    assert replaced.free()[0].tolist() == [8000, 3000]
    assert replaced.replicas.tolist() == [0, 1]
    assert [b.node for b in replaced.bookings("shop/x")] == [REMOVED, "b"]
    # The scheduler places the displaced replica again, on the new node.
    x = workload("x", kind="Service", count=2, resources={"cpu": "3"})
    decision = Scheduler().schedule(x, replaced, now=NOW)
    assert sorted((b.node, b.alloc_id) for b in decision.bookings) == [
        ("a", "shop/x-0"),
        ("b", "shop/x-1"),
    ]
    assert ledger.bookings("shop/x")[0].node == "a"  # the ledger asked is as it was


class Cores:
    """A score plugin written for the test: a node's cpu in cores."""

    name = "Cores"

    def score(self, cycle: CycleState, candidates: Any) -> Any:
        return cycle.table.cpu[candidates] // 1000


class Abstains:
    """A score plugin with nothing to say for this Workload (kube's Skip)."""

    name = "Abstains"

    def score(self, cycle: CycleState, candidates: Any) -> Any:
        return None


def test_score_parts_are_each_plugins_weighted_score_and_sum_to_the_score() -> None:
    """``orca explain``'s score parts: weight x score per plugin (a plugin that abstains
    scores 0 everywhere, as integers like the others), and their sum is the node's score."""
    framework = Framework(Profile(((Cores(), 3), (Abstains(), 2))))
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="4"), node("c", cpu="2"))
    cycle = cycle_for(workload(kind="Job"), ledger)
    candidates = np.array([2, 0], dtype=np.intp)
    parts = framework.score_parts(cycle, candidates)
    assert {name: part.tolist() for name, part in parts.items()} == {
        "Cores": [6, 3],
        "Abstains": [0, 0],
    }
    assert all(part.dtype.kind == "i" for part in parts.values())
    assert framework.score(cycle, candidates).tolist() == [6, 3]


class Gibs:
    """A score plugin written for the test: a node's memory in GiB."""

    name = "Gibs"

    def score(self, cycle: CycleState, candidates: Any) -> Any:
        return cycle.table.memory[candidates] // GiB


def test_the_score_is_the_weighted_sum_of_the_plugins_that_score() -> None:
    """Per candidate, weight x score summed over the plugins, whatever their order, past one
    that abstains; integers, and zeros when every plugin abstains."""
    ledger = ledger_for(
        node("a", cpu="1", memory="8Gi"), node("b", cpu="4", memory="2Gi"), node("c", cpu="2")
    )
    cycle = cycle_for(workload(kind="Job"), ledger)
    candidates = np.array([2, 0, 1], dtype=np.intp)  # c: 2 cores, 8Gi; a: 1, 8Gi; b: 4, 2Gi
    framework = Framework(Profile(((Abstains(), 1), (Cores(), 2), (Gibs(), 1))))
    total = framework.score(cycle, candidates)
    assert total.tolist() == [2 * 2 + 8, 2 * 1 + 8, 2 * 4 + 2]
    assert total.dtype.kind == "i"
    nothing = Framework(Profile(((Abstains(), 1),))).score(cycle, candidates)
    assert nothing.tolist() == [0, 0, 0] and nothing.dtype.kind == "i"


@pytest.mark.parametrize("folded", [False, True], ids=["one-filter", "folded"])
def test_a_verdict_holds_from_its_since_up_to_not_at_its_until(folded: bool) -> None:
    """``since <= now < until``: at ``until`` (a toleration running out) it is decided again."""
    passes = np.ones(1, dtype=np.bool_)
    verdict: FilterResult | Filtered = (
        Filtered((), passes, passes, since=10.0, until=20.0)
        if folded
        else FilterResult("P", Code.UNRESOLVABLE, False, (), passes, passes, since=10.0, until=20.0)
    )
    assert [verdict.holds_at(t) for t in (9.5, 10.0, 19.5, 20.0)] == [False, True, True, False]


class RoomNow:
    """A static filter written for the test that reads the cycle (signature None): nodes with
    room for the Workload's request right now."""

    name = "RoomNow"
    code = Code.UNSCHEDULABLE
    evicts = False
    selects = False
    per_replica = False

    def signature(self, cycle: CycleState) -> Hashable | None:
        return None

    def filter(self, cycle: CycleState) -> Verdict:
        return Verdict((Rejection("no room now", cycle.free_cpu >= cycle.cpu),))


def test_a_filter_without_signature_is_run_every_cycle() -> None:
    """A signature of None means "reads this cycle": its verdict is never reused, even when it
    is the only static filter (every signature None)."""
    framework = Framework(Profile(((RoomNow(), 0),)))
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="4"))
    small = framework.filter(cycle_for(workload(kind="Job", resources={"cpu": "1"}), ledger))
    large = framework.filter(cycle_for(workload(kind="Job", resources={"cpu": "2"}), ledger))
    assert (small.passes.tolist(), large.passes.tolist()) == ([True, True], [False, True])


def test_a_profile_without_static_filters_passes_every_node_at_any_time() -> None:
    framework = Framework(Profile(((Cores(), 1),)))
    filtered = framework.filter(cycle_for(workload(kind="Job"), ledger_for(node("a"), node("b"))))
    assert filtered.passes.tolist() == [True, True] and filtered.keeps.tolist() == [True, True]
    assert filtered.holds_at(NOW) and filtered.leaves is None


class OddCpuStays(OddCpu):
    """The same filter, declared not to move a replica already on a node it fails (as
    capacity in kube-scheduler: a filter that only guards new placements)."""

    name = "OddCpuStays"
    evicts = False


@pytest.mark.parametrize(
    ("plugin", "keeps"), [(OddCpu(), [False, True]), (OddCpuStays(), [True, True])]
)
def test_a_filter_that_evicts_keeps_a_replica_only_where_it_passes(
    plugin: OddCpu, keeps: list[bool]
) -> None:
    """``evicts`` decides ``keeps`` when a plugin gives none: where an evicting filter fails,
    an existing replica must leave; a filter that does not evict only turns new replicas away."""
    framework = Framework(Profile(((plugin, 0),)))
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="2"))
    filtered = framework.filter(cycle_for(workload(kind="Job"), ledger))
    assert filtered.passes.tolist() == [False, True]
    assert filtered.keeps.tolist() == keeps


class EvenOwnRow:
    """A per-replica filter written for the test, without a ``fit`` of its own: it rejects
    the odd rows while the cycle holds a replica on row 0, and rejects nothing otherwise."""

    name = "EvenOwnRow"
    code = Code.UNSCHEDULABLE
    evicts = False
    selects = False
    per_replica = True

    def signature(self, cycle: CycleState) -> Hashable | None:
        return None

    def filter(self, cycle: CycleState) -> Verdict:
        if not cycle.own[0]:
            return Verdict(())
        even = np.arange(len(cycle.table)) % 2 == 0
        return Verdict((Rejection("odd row", even),))


def test_the_candidates_are_the_nodes_that_fit_now_in_the_order_of_the_table() -> None:
    """``candidates`` is ``fits`` as indexes: the static filters' nodes, narrowed by each
    per-replica filter as the cycle stands (``ResourcesFit``'s ``fit``, a plugin's rejections),
    lowest index first, whatever the cycle took since the static verdict was memoised."""
    base = default_profile(Scheduler().cel).plugins
    framework = Framework(Profile((*base[:4], (OddCpu(), 0), (EvenOwnRow(), 0), *base[4:])))
    ledger = ledger_for(
        *(node(f"n{i}", cpu="2" if i % 3 else "3") for i in range(7)),  # odd cores on n0, n3, n6
    )
    cycle = cycle_for(workload(kind="Job", resources={"cpu": "1"}), ledger)
    filtered = framework.filter(cycle)
    assert framework.candidates(cycle, filtered).tolist() == [1, 2, 4, 5]  # even cores only
    steps = []
    for taken in (2, 2, 0, 4):  # two replicas fill n2; one on n0 (rejected) turns EvenOwnRow on
        cycle.take_one(taken)
        got = framework.candidates(cycle, filtered)
        assert got.tolist() == np.flatnonzero(framework.fits(cycle, filtered)).tolist()
        steps.append(got.tolist())
    assert steps == [[1, 2, 4, 5], [1, 4, 5], [4], [4]]
    fresh = cycle_for(workload(kind="Job", resources={"cpu": "1"}), ledger)
    assert framework.candidates(fresh, framework.filter(fresh)).tolist() == [1, 2, 4, 5]


def test_the_passing_nodes_are_found_once_per_verdict_for_the_few_verdicts_asked_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workloads alike share a memoised verdict and with it the indexes of the nodes it
    passes; past ``MAX_CACHED_NODES`` verdicts the one asked least recently is let go (found
    again if asked again), and every answer is the verdict's own."""
    found: list[list[bool]] = []
    real = framework_module.passing

    def counting(filtered: Filtered) -> Any:
        found.append(filtered.passes.tolist())
        return real(filtered)

    monkeypatch.setattr(framework_module, "passing", counting)
    monkeypatch.setattr(Framework, "MAX_CACHED_NODES", 2)
    framework = Framework(profile_with(OddCpu()))
    ledger = ledger_for(
        node("a", cpu="2"), node("b", cpu="3"), node("c", cpu="4", runtimes=("process",))
    )
    runtimes = {"oneOf": ["process"]}
    specs = {  # three verdicts: odd cores rejected, or not (BinPack), or a runtime asked too
        "spread": workload(kind="Job"),
        "binpack": workload(kind="Job", strategy="BinPack"),
        "process": workload(kind="Job", runtime=runtimes),
    }
    expected = {"spread": [0, 2], "binpack": [0, 1, 2], "process": [2]}

    def ask(name: str) -> None:
        cycle = cycle_for(specs[name], ledger)
        assert framework.candidates(cycle, framework.filter(cycle)).tolist() == expected[name]

    for name in ("spread", "spread", "binpack", "spread", "process", "spread", "binpack"):
        ask(name)
    # binpack was let go for process (spread had been asked since), then found again
    assert found == [[True, False, True], [True] * 3, [False, False, True], [True] * 3]
    ledger.rebind(ledger.table.replaced([node("a", cpu="4")]))  # a new table: verdicts anew
    ask("binpack")
    assert len(framework._nodes) == 1  # those of the verdicts let go are let go with them
