"""What a Workload can ask (issue 46): every resource by name, a Pod per replica, gangs that
place all or nothing, and disruption budgets that orca's own moves keep.

Each expectation is worked out by hand in the comment beside it, from the rules in
docs/workloads.md (kube's ``fitsRequest`` for resources, KEP-4671 for gangs, the
PodDisruptionBudget controller's arithmetic for budgets), never read off the scheduler.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.api.models import Phase
from controller.scheduler.budgets import budget_of
from controller.scheduler.framework import Code
from controller.scheduler.ledger import Booking, Ledger, ledger_from_statuses
from controller.scheduler.plan import plan
from controller.scheduler.preemption import preemption_outlook
from controller.scheduler.priority import PriorityClass, PriorityClasses
from controller.scheduler.rebalance import Rebalancer
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import status_from_decision
from controller.scheduler.vocabulary import CONDITION_BELOW_MIN_COUNT
from controller.scheduler.whatif import BrokenBudget, Question, WhatIf
from tests.support.factories import NOW, ledger_for, node, workload

GPU = "nvidia.com/gpu"
T0 = "2026-12-01T10:00:00Z"


def gpu_node(name: str, gpus: int, pods: int | None = None, cpu: str = "8") -> Any:
    extra = {GPU: str(gpus)} if gpus else {}
    if pods is not None:
        extra["pods"] = str(pods)
    return node(name, cpu=cpu, memory="16Gi", allocatable=extra)


def nodes_of(decision: Any) -> list[str]:
    return sorted(b.node for b in decision.bookings)


# -- resources by name, and the Pod ---------------------------------------------------------------


def test_a_node_takes_no_more_replicas_than_its_pods() -> None:
    """The issue's case: a node with pods: 2 used to take 3 replicas. Each replica is a Pod:
    two fit, the third finds "Too many pods" (kube's fitsRequest) and waits for room."""
    decision = Scheduler().schedule(
        workload(kind="Service", count=3), ledger_for(gpu_node("small", 0, pods=2)), now=NOW
    )
    assert (decision.placed, decision.phase) == (2, Phase.PARTIALLY_SCHEDULED)
    assert decision.message == "2/3 replicas placed; 0/1 nodes are available: 1 Too many pods."
    assert decision.code is Code.UNSCHEDULABLE  # a replica gone frees a Pod: it may come


def test_pods_count_every_workloads_replicas() -> None:
    """Another Workload's replica is a Pod on the node too: 1 of 2 left."""
    ledger = ledger_for(gpu_node("small", 0, pods=2))
    ledger.load("other/x", [Booking("small", "other/x-0", 0, 0)])
    decision = Scheduler().schedule(workload(kind="Service", count=2), ledger, now=NOW)
    assert decision.placed == 1


def test_extended_resources_are_fit_per_replica_and_named_when_short() -> None:
    """gpu-a offers 4, gpu-b 2, cpu-only offers none. Replicas of 2 GPUs: Spread takes the
    node with the larger free share of cpu and memory (the score), and each replica books
    its GPUs: a, b, a (a has 4: two replicas), then nothing: a 0 left, b 0, cpu-only none."""
    ledger = ledger_for(gpu_node("gpu-a", 4), gpu_node("gpu-b", 2), gpu_node("cpu-only", 0))
    spec: dict[str, Any] = {"kind": "Service", "count": 4, "resources": {"cpu": "1", GPU: 2}}
    decision = Scheduler().schedule(workload(**spec), ledger, now=NOW)
    assert nodes_of(decision) == ["gpu-a", "gpu-a", "gpu-b"]
    assert decision.message == (
        "3/4 replicas placed; 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    )
    # cpu-only can never hold a GPU (allocatable 0 < 2), the others can once one is freed.
    assert decision.code is Code.UNSCHEDULABLE
    assert all(b.scalars == ((GPU, 2),) for b in decision.bookings)


def test_a_gpu_request_no_node_offers_is_unresolvable() -> None:
    """kube: request > allocatable on every node is UnschedulableAndUnresolvable: Stalled."""
    ledger = ledger_for(gpu_node("a", 0), gpu_node("b", 1))
    decision = Scheduler().schedule(workload(kind="Job", resources={GPU: 2}), ledger, now=NOW)
    assert decision.code is Code.UNRESOLVABLE
    assert decision.message == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def test_ephemeral_storage_and_hugepages_are_resources_like_any_other() -> None:
    """ephemeral-storage is checked before the scalars, as kube's fitsRequest does."""
    small = node(
        "a", allocatable={"ephemeral-storage": "10Gi", "hugepages-2Mi": "4Mi"}
    )  # two pages
    spec: dict[str, Any] = {
        "kind": "Job",
        "resources": {"ephemeral-storage": "20Gi", "hugepages-2Mi": "8Mi"},
    }
    decision = Scheduler().schedule(workload(**spec), ledger_for(small), now=NOW)
    assert decision.message == "0/1 nodes are available: 1 Insufficient ephemeral-storage."


def test_the_status_records_every_resource_and_a_rebuilt_ledger_books_it() -> None:
    ledger = ledger_for(gpu_node("a", 4))
    w = workload(kind="Job", resources={"cpu": "1", GPU: 3})
    decision = Scheduler().schedule(w, ledger, now=NOW)
    status = status_from_decision(decision, 1, None, T0)
    assert status.resources is not None and status.resources.root == {"cpu": "1", GPU: 3}
    placed = w.model_copy(update={"status": status})
    rebuilt = ledger_from_statuses([gpu_node("a", 4)], [placed])
    assert rebuilt.free_scalar(GPU).tolist() == [1]
    assert rebuilt.free_pods().tolist()[0] > 10**9  # no pods stated: no limit


def test_scoring_stays_on_cpu_and_memory_by_default() -> None:
    """Two nodes equal in cpu and memory, one with GPUs: a Job asking no GPU scores them
    alike (kube's default scoring resources are cpu and memory), so the lower hostname wins."""
    ledger = ledger_for(gpu_node("a-gpu", 8), gpu_node("b-plain", 0))
    decision = Scheduler().schedule(workload(kind="Job", resources={"cpu": "1"}), ledger, now=NOW)
    assert nodes_of(decision) == ["a-gpu"]
    both = [b.score for b in decision.bookings]
    again = Scheduler().schedule(
        workload(kind="Job", resources={"cpu": "1"}), ledger_for(gpu_node("b-plain", 0)), now=NOW
    )
    assert both == [b.score for b in again.bookings]


def test_a_node_advertising_a_gpu_less_after_a_restart_keeps_its_replicas() -> None:
    """Capacity never evicts: a node whose allocatable GPUs shrink under placed replicas keeps
    them (only a resize re-checks room)."""
    w = workload(kind="Service", count=2, resources={GPU: 2})
    decision = Scheduler().schedule(w, ledger_for(gpu_node("a", 4)), now=NOW)
    placed = w.model_copy(update={"status": status_from_decision(decision, 1, None, T0)})
    shrunk = ledger_from_statuses([gpu_node("a", 2)], [placed])
    again = Scheduler().schedule(placed, shrunk, now=NOW)
    assert nodes_of(again) == ["a", "a"]


# -- gangs --------------------------------------------------------------------------------------


def gang(count: int, minimum: int, gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Service",
        "count": count,
        "resources": {"cpu": "1", GPU: gpus},
        "gang": {"minCount": minimum, **extra},
    }


def test_a_gang_that_cannot_reach_min_count_places_nothing() -> None:
    """8 workers, minCount 8, 6 GPUs in all: 6 would fit, so none is placed, and the message
    says how many would fit."""
    ledger = ledger_for(gpu_node("a", 4), gpu_node("b", 2))
    decision = Scheduler().schedule(workload(name="train", **gang(8, 8)), ledger, now=NOW)
    assert (decision.placed, decision.phase) == (0, Phase.UNSCHEDULABLE)
    assert decision.message == (
        "gang minCount 8: 6 of 8 replicas would fit, so none is placed. "
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    )
    assert decision.code is Code.UNSCHEDULABLE  # GPUs freed would place it


def test_a_gang_above_min_count_places_what_fits() -> None:
    """minCount 4 of 8: 6 fit, 6 >= 4, so 6 are placed; the rest wait as any replica does."""
    ledger = ledger_for(gpu_node("a", 4), gpu_node("b", 2))
    decision = Scheduler().schedule(workload(name="train", **gang(8, 4)), ledger, now=NOW)
    assert (decision.placed, decision.phase) == (6, Phase.PARTIALLY_SCHEDULED)


def test_two_gangs_that_each_need_the_cluster_never_split_it() -> None:
    """Two 6-GPU gangs (all or nothing) on 6 GPUs: the first planned is placed whole, the
    second waits with nothing (no deadlock, no half-placed gang)."""
    nodes = [gpu_node("a", 4), gpu_node("b", 2)]
    results = plan(
        nodes,
        [workload(name="one", **gang(6, 6)), workload(name="two", **gang(6, 6))],
        now=T0,
    )
    assert [(r.workload.metadata.name, r.status.placed) for r in results] == [
        ("one", 6),
        ("two", 0),
    ]


def placed_gang(minimum: int, timeout: int, nodes: list[Any]) -> tuple[Any, Ledger]:
    """A gang of 4 (minCount ``minimum``) placed whole on ``nodes``, as the operator records
    it."""
    w = workload(name="train", **gang(4, minimum, timeoutSeconds=timeout))
    decision = Scheduler().schedule(w, ledger_for(*nodes), now=NOW)
    assert decision.placed == 4
    return w.model_copy(update={"status": status_from_decision(decision, 1, None, T0)}), Ledger()


def test_a_placed_gang_that_loses_a_node_keeps_its_replicas_for_its_timeout_then_lets_go() -> None:
    """4 workers of 1 GPU on a (2 GPUs) and b (2 GPUs); b is deleted. With grace (the
    operator): the 2 on a stay, BelowMinCount since now, released at now + 61 s (the
    condition keeps whole seconds: a second more, so the hold is never shorter than 60 s); at
    that time every placement goes and the gang is Unschedulable."""
    w, _ = placed_gang(4, 60, [gpu_node("a", 2), gpu_node("b", 2)])
    alone = ledger_from_statuses([gpu_node("a", 2)], [w])
    scheduler = Scheduler()
    held = scheduler.schedule(w, alone, now=NOW)
    assert nodes_of(held) == ["a", "a"] and held.deadline == NOW + 61
    assert held.look_again_at == NOW + 61
    status = status_from_decision(held, 1, w.status, T0)
    below = [c for c in status.conditions if c.type == CONDITION_BELOW_MIN_COUNT]
    assert [(c.status, c.last_transition_time) for c in below] == [("True", T0)]
    later = w.model_copy(update={"status": status})
    assert scheduler.schedule(later, alone, now=NOW + 60.9).placed == 2
    released = scheduler.schedule(later, alone, now=NOW + 61)
    assert (released.placed, released.phase) == (0, Phase.UNSCHEDULABLE)
    assert released.message.startswith(
        "gang held fewer than minCount 4 for 60s: every placement released"
    )


def test_a_gang_below_min_count_is_made_whole_again_at_once_when_room_returns() -> None:
    """b deleted, c added with 2 GPUs: the two lost replicas are placed again on c at once."""
    w, _ = placed_gang(4, 60, [gpu_node("a", 2), gpu_node("b", 2)])
    decision = Scheduler().schedule(
        w, ledger_from_statuses([gpu_node("a", 2), gpu_node("c", 2)], [w]), now=NOW
    )
    assert nodes_of(decision) == ["a", "a", "c", "c"] and decision.deadline is None


def test_plans_and_what_ifs_give_a_gang_no_grace() -> None:
    """orca plan answers where the cluster settles: a gang that cannot be whole again is
    released at once (placed is 0, never 2 of minCount 4)."""
    w, _ = placed_gang(4, 300, [gpu_node("a", 2), gpu_node("b", 2)])
    results = plan([gpu_node("a", 2)], [w], now=T0)
    assert results[0].status.placed == 0


# -- disruption budgets ---------------------------------------------------------------------------


CLASSES = PriorityClasses.of([PriorityClass("high", 1000)])


@pytest.mark.parametrize(
    ("budget", "desired", "placed", "needs", "allowed"),
    [
        ({"minAvailable": 3}, 5, 5, 3, 2),
        ({"minAvailable": "50%"}, 5, 5, 3, 2),  # ceil(2.5) = 3
        ({"minAvailable": "100%"}, 5, 5, 5, 0),
        ({"maxUnavailable": 1}, 5, 5, 4, 1),
        ({"maxUnavailable": "30%"}, 5, 5, 3, 2),  # 5 - ceil(1.5) = 3
        ({"maxUnavailable": "0%"}, 5, 4, 5, 0),  # already short: nothing more
        ({"minAvailable": 7}, 5, 5, 7, 0),  # more than desired: nothing may go
    ],
)
def test_a_budget_reads_as_a_pod_disruption_budget(
    budget: dict[str, Any], desired: int, placed: int, needs: int, allowed: int
) -> None:
    w = workload(kind="Service", count=desired, disruption=budget)
    found = budget_of(w, placed)
    assert found is not None and (found.needs, found.allowed) == (needs, allowed)


def budget_cluster() -> tuple[list[Any], Any, Any]:
    """Three 2-cpu nodes full of web (3 replicas of 2 cpu, minAvailable 3); a high-priority
    Job of 2 cpu."""
    nodes = [node(n, cpu="2") for n in ("a", "b", "c")]
    web = workload(
        name="web",
        kind="Service",
        count=3,
        resources={"cpu": "2"},
        disruption={"minAvailable": 3},
    )
    decided = Scheduler().schedule(web, ledger_for(*nodes), now=NOW)
    web = web.model_copy(update={"status": status_from_decision(decided, 1, None, T0)})
    boss = workload(
        name="boss", namespace="ops", kind="Job", resources={"cpu": "2"}, priorityClassName="high"
    )
    return nodes, web, boss


def relaxed(web: Any) -> Any:
    """``budget_cluster``'s web, placed as it is, with minAvailable 2: one replica may go."""
    assert web.status is not None
    return workload(
        name="web",
        kind="Service",
        count=3,
        resources={"cpu": "2"},
        disruption={"minAvailable": 2},
        status=web.status.model_dump(by_alias=True, mode="json"),
    )


def test_preemption_never_takes_a_workload_below_its_budget_and_says_whose() -> None:
    nodes, web, boss = budget_cluster()
    results = plan(nodes, [boss, web], classes=CLASSES, now=T0)
    by_name = {r.workload.metadata.name: r for r in results}
    assert by_name["boss"].status.placed == 0
    assert by_name["boss"].victims == ()
    assert by_name["web"].status.placed == 3
    assert by_name["boss"].status.message == (
        "0/3 nodes are available: 3 Insufficient cpu. Preempting would break the disruption "
        "budget of shop/web (minAvailable 3)."
    )


def test_preemption_goes_ahead_when_the_budget_allows() -> None:
    """minAvailable 2 of 3: one replica may go, and does."""
    nodes, web, boss = budget_cluster()
    loose = relaxed(web)
    results = plan(nodes, [boss, loose], classes=CLASSES, now=T0)
    by_name = {r.workload.metadata.name: r for r in results}
    assert by_name["boss"].status.placed == 1
    assert [v.victim.key for v in by_name["boss"].victims] == ["shop/web"]
    assert by_name["web"].status.placed == 2


def test_explain_says_why_preemption_is_refused() -> None:
    nodes, web, boss = budget_cluster()
    ledger = ledger_from_statuses(nodes, [web])
    scheduler = Scheduler()
    decision = scheduler.schedule(boss, ledger, CLASSES, now=NOW)
    outlook = preemption_outlook(
        scheduler, boss, ledger, decision, CLASSES, {web.key: web, boss.key: boss}, now=NOW
    )
    assert outlook == "refused: would break the disruption budget of shop/web (minAvailable 3)."


def test_a_gang_victim_is_never_left_below_its_min_count() -> None:
    """A low-priority gang of 3 (minCount 3) fills the nodes: preempting one worker would
    leave it half placed, so the high-priority Job waits."""
    nodes = [node(n, cpu="2") for n in ("a", "b", "c")]
    team = workload(
        name="team", kind="Service", count=3, resources={"cpu": "2"}, gang={"minCount": 3}
    )
    decided = Scheduler().schedule(team, ledger_for(*nodes), now=NOW)
    team = team.model_copy(update={"status": status_from_decision(decided, 1, None, T0)})
    boss = workload(name="boss", kind="Job", resources={"cpu": "2"}, priorityClassName="high")
    results = plan(nodes, [boss, team], classes=CLASSES, now=T0)
    assert [r.status.placed for r in results] == [0, 3]
    assert "gang minCount 3" in (results[0].status.message or "")


def test_a_daemonset_is_for_the_nodes_it_selects_whatever_their_room() -> None:
    """a and b take it (2 cpu each), b full of a Job; c is cordoned; d has a NoSchedule
    taint it does not tolerate. It is for a and b (kube's DaemonSet controller counts b too:
    ``NodeShouldRunDaemonPod`` reads no resources), but it fits on a only, so an EveryNode
    DaemonSet's own decision wants 1."""
    taint = [{"key": "x", "value": "y", "effect": "NoSchedule"}]
    nodes = [node("a", cpu="2"), node("b", cpu="2"), node("c", cpu="2", cordoned=True)]
    nodes.append(node("d", cpu="2", taints=taint))
    ledger = ledger_for(*nodes)
    filler = workload(name="filler", kind="Job", resources={"cpu": "2"})
    scheduler = Scheduler()
    job = scheduler.schedule(filler, ledger_for(nodes[1]), now=NOW)
    ledger.load(filler.key, job.bookings)
    ds = workload(name="ds", kind="DaemonSet", resources={"cpu": "2"})
    assert scheduler.selected(ds, ledger, now=NOW) == 2
    assert scheduler.schedule(ds, ledger, now=NOW).desired == 1


def test_a_daemonsets_budget_is_of_the_nodes_it_is_for_not_of_those_it_fits() -> None:
    """a, b, c of 2 cpu: agents (a DaemonSet of 2 cpu, priority 10, maxUnavailable 1) holds a
    and b, and filler (a Job of 2 cpu, priority 100) holds c, so agents' status wants 2.
    It is for 3 nodes, though: 3 - 1 = 2 must stay, 2 are placed, none may go. boss (a Job of
    2 cpu, priority 1000) therefore preempts filler on c, although kube's first rule prefers
    the node whose highest victim has the lowest priority (agents' 10). Of 2 wanted, 1 could
    have gone, and boss would have taken a. filler, itself above agents, then finds the same
    budget in its way."""
    classes = PriorityClasses.of(
        [PriorityClass("low", 10), PriorityClass("mid", 100), PriorityClass("high", 1000)]
    )
    nodes = [node(n, cpu="2") for n in ("a", "b", "c")]
    two_cpu: dict[str, Any] = {"resources": {"cpu": "2"}}
    agents = workload(
        name="agents",
        kind="DaemonSet",
        priorityClassName="low",
        disruption={"maxUnavailable": 1},
        **two_cpu,
    )
    filler = workload(name="filler", kind="Job", priorityClassName="mid", **two_cpu)
    placed = {
        agents.key: plan(nodes[:2], [agents], classes=classes, now=T0)[0].status,
        filler.key: plan(nodes[2:], [filler], classes=classes, now=T0)[0].status,
    }
    assert placed[agents.key].desired == 2
    incumbents = [w.model_copy(update={"status": placed[w.key]}) for w in (agents, filler)]
    boss = workload(name="boss", kind="Job", priorityClassName="high", **two_cpu)
    results = {
        r.workload.metadata.name: r
        for r in plan(nodes, [boss, *incumbents], classes=classes, now=T0)
    }
    assert [p.node for p in results["boss"].status.placements] == ["c"]
    assert [v.victim.key for v in results["boss"].victims] == ["shop/filler"]
    assert sorted(p.node for p in results["agents"].status.placements) == ["a", "b"]
    assert results["filler"].status.placed == 0
    assert (results["filler"].status.message or "").endswith(
        " Preempting would break the disruption budget of shop/agents (maxUnavailable 1)."
    )


def test_a_replica_kept_on_a_not_ready_node_is_placed_but_not_available() -> None:
    """web (3 of 2 cpu, minAvailable 2) on a, b, c; then a goes NotReady and keeps its
    replica (the not-ready taint is tolerated 300 s). kube's disruption controller counts
    Ready Pods only (``countHealthyPods``) and a NotReady node's Pods are marked not ready:
    2 available, 2 must stay, none may go, so boss (2 cpu, priority 1000) waits, naming the
    budget. With a Ready, 3 are available and boss preempts one (the test above)."""
    nodes, web, boss = budget_cluster()
    loose = relaxed(web)
    down = [node("a", cpu="2", ready=False, since=T0), *nodes[1:]]
    results = {
        r.workload.metadata.name: r for r in plan(down, [boss, loose], classes=CLASSES, now=T0)
    }
    assert sorted(p.node for p in results["web"].status.placements) == ["a", "b", "c"]
    assert (results["boss"].status.placed, results["boss"].victims) == (0, ())
    assert (results["boss"].status.message or "").endswith(
        " Preempting would break the disruption budget of shop/web (minAvailable 2)."
    )


def test_the_rebalancer_counts_a_replica_on_a_not_ready_node_as_down() -> None:
    """A Spread Service of 3 (maxUnavailable 1): two on a, one on c, which is NotReady (kept:
    the taint is tolerated 300 s); b was added empty. Moving one from a to b evens the spread,
    but c's is down already: 2 available, 3 - 1 = 2 must stay, no replica may be in motion.
    With c Ready, one may, and the move is made."""
    status = {
        "placements": [
            {"node": "a", "allocId": "shop/web-0", "score": 90},
            {"node": "a", "allocId": "shop/web-1", "score": 80},
            {"node": "c", "allocId": "shop/web-2", "score": 80},
        ],
        "resources": {"cpu": "2"},
    }
    web = workload(
        name="web",
        kind="Service",
        count=3,
        resources={"cpu": "2"},
        rebalance="Allowed",
        disruption={"maxUnavailable": 1},
        status=status,
    )
    for c_ready, moves in ((True, 1), (False, 0)):
        c = node("c", cpu="8", ready=c_ready, since=T0)
        nodes = [node("a", cpu="8"), node("b", cpu="8"), c]
        planned = Rebalancer().plan([web], ledger_from_statuses(nodes, [web]), now=NOW)
        assert len(planned.moves) == moves, c_ready


def test_the_rebalancer_moves_nothing_a_budget_forbids() -> None:
    """A Spread Service of 2 both on a (b was added empty): moving one to b improves the
    spread; with maxUnavailable 0 it may not move, with 1 it does."""
    nodes = [node("a", cpu="8"), node("b", cpu="8")]

    def with_budget(budget: dict[str, Any] | None) -> Any:
        status = {
            "placements": [
                {"node": "a", "allocId": "shop/web-0", "score": 90},
                {"node": "a", "allocId": "shop/web-1", "score": 80},
            ],
            "resources": {"cpu": "2"},
        }
        extra: dict[str, Any] = {"disruption": budget} if budget else {}
        return workload(
            name="web",
            kind="Service",
            count=2,
            resources={"cpu": "2"},
            rebalance="Allowed",
            status=status,
            **extra,
        )

    for budget, moves in (({"maxUnavailable": 0}, 0), ({"maxUnavailable": 1}, 1), (None, 1)):
        w = with_budget(budget)
        planned = Rebalancer().plan([w], ledger_from_statuses(nodes, [w]), now=NOW)
        assert len(planned.moves) == moves, budget


def test_a_drain_that_breaks_a_budget_is_named_and_fails() -> None:
    """web: 3 replicas of 2 cpu on a, b, c (2 cpu each), minAvailable 3. Draining a leaves
    its replica nowhere to go: web keeps 2, needs 3."""
    nodes, web, _ = budget_cluster()
    ledger = ledger_from_statuses(nodes, [web])
    answer = WhatIf(ledger, [web], Scheduler(gang_grace=False), now=T0).answer(
        Question(drain=frozenset({"a"}))
    )
    assert answer.budgets == (BrokenBudget("shop/web", "minAvailable 3", 2, 3),)
    assert not answer.settled


def test_a_drain_that_keeps_the_budget_reports_none() -> None:
    """The same, with a fourth node d: the drained replica moves there, web keeps 3."""
    nodes, web, _ = budget_cluster()
    nodes.append(node("d", cpu="2"))
    ledger = ledger_from_statuses(nodes, [web])
    answer = WhatIf(ledger, [web], Scheduler(gang_grace=False), now=T0).answer(
        Question(drain=frozenset({"a"}))
    )
    assert answer.budgets == () and answer.settled


def test_a_drain_that_breaks_a_gang_names_its_min_count() -> None:
    w, _ = placed_gang(4, 300, [gpu_node("a", 2), gpu_node("b", 2)])
    ledger = ledger_from_statuses([gpu_node("a", 2), gpu_node("b", 2)], [w])
    answer = WhatIf(ledger, [w], Scheduler(gang_grace=False), now=T0).answer(
        Question(drain=frozenset({"b"}))
    )
    assert answer.budgets == (BrokenBudget("shop/train", "gang minCount 4", 0, 4),)
    assert len(answer.unplaced) == 4  # released: every replica is without a place


def test_a_node_lost_by_failure_waits_on_no_budget() -> None:
    """A node deleted is not a voluntary disruption: web's replica there is placed again at
    once whatever its budget (minAvailable 100%)."""
    nodes = [node(n, cpu="2") for n in ("a", "b", "c")]
    web = workload(
        name="web",
        kind="Service",
        count=2,
        resources={"cpu": "2"},
        disruption={"minAvailable": "100%"},
    )
    decided = Scheduler().schedule(web, ledger_for(*nodes[:2]), now=NOW)
    web = web.model_copy(update={"status": status_from_decision(decided, 1, None, T0)})
    again = Scheduler().schedule(web, ledger_from_statuses([nodes[0], nodes[2]], [web]), now=NOW)
    assert nodes_of(again) == ["a", "c"]
