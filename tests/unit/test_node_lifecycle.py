"""Node lifecycle as Kubernetes defines it (docs/design.md 5, issue 21), cases computed by hand from
kube's code, v1.36.3:

- the node lifecycle controller taints a node whose Ready condition is False with
  ``node.kubernetes.io/not-ready:NoExecute`` and one whose Ready is Unknown with
  ``node.kubernetes.io/unreachable:NoExecute`` (pkg/controller/nodelifecycle), ``timeAdded`` set;
- DefaultTolerationSeconds admission (plugin/pkg/admission/defaulttolerationseconds, ``Admit``)
  appends ``{key, Exists, NoExecute, 300}`` for each of the two keys unless a toleration has
  that key or none, and effect NoExecute or none;
- the DaemonSet controller (pkg/controller/daemon/util, ``AddOrUpdateDaemonPodTolerations``)
  puts ``{key, Exists, NoExecute}`` (forever) for both, replacing one with the same key,
  operator, value and effect (``AddOrUpdateTolerationInPodSpec``);
- the taint-eviction controller (pkg/controller/tainteviction, ``processPodOnNode``): a
  NoExecute taint no toleration tolerates evicts at once; else the first toleration matching
  each taint (``GetMatchingTolerations``), and the smallest ``tolerationSeconds`` of those
  (``getMinTolerationTime``: <= 0 at once, none forever).

``NOW`` is 2026-12-01T10:00:00Z; times below are written relative to it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from controller.api.models import Phase, TaintEffect, WorkloadSpec
from controller.scheduler.decision import Decision
from controller.scheduler.framework import CycleState, Profile, Verdict
from controller.scheduler.ledger import Ledger
from controller.scheduler.nodes import (
    NodeError,
    Taint,
    node_info_from_node,
    with_taint_times,
)
from controller.scheduler.plugins import default_profile
from controller.scheduler.plugins.taints import (
    DefaultTolerations,
    TaintToleration,
    effective_tolerations,
    holding_span,
    leave_time,
)
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import status_from_decision
from tests.support.factories import NOW, ledger_for, node, node_object, workload

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
T0 = "2026-12-01T09:59:50Z"  # NOW - 10 s
T0_EPOCH = NOW - 10


def at(seconds: float) -> str:
    """An RFC 3339 time ``seconds`` after NOW."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec(**fields: Any) -> WorkloadSpec:
    return workload(**fields).spec


def keys_and_seconds(tolerations: Any) -> list[tuple[str | None, str, str | None, int | None]]:
    return [
        (
            t.key,
            t.operator.value,
            t.effect.value if t.effect else None,
            t.toleration_seconds,
        )
        for t in tolerations
    ]


# -- reading a Node ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "taint"), [("False", NOT_READY), ("Unknown", UNREACHABLE), ("", NOT_READY)]
)
def test_a_node_not_ready_reads_as_carrying_the_lifecycle_taint_since_its_transition(
    ready: str, taint: str
) -> None:
    obj = node_object("a", ready=ready or "True", since=T0)
    if not ready:
        obj["status"]["conditions"] = []  # registered, never reported: not ready
    info = node_info_from_node(obj)
    assert info.ready is False
    expected_time = T0_EPOCH if ready else None
    assert info.taints == (
        Taint(key=taint, effect=TaintEffect.NO_EXECUTE, time_added=expected_time),
    )


def test_a_node_that_carries_the_controllers_taint_gets_no_second_one() -> None:
    controller_taint = {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": at(-5)}
    info = node(
        "a",
        ready="Unknown",
        since=T0,
        taints=[controller_taint, {"key": UNREACHABLE, "effect": "NoSchedule"}],
    )
    assert [(t.key, t.effect.value, t.time_added) for t in info.taints] == [
        (UNREACHABLE, "NoExecute", NOW - 5),  # the taint's own time, not the condition's
        (UNREACHABLE, "NoSchedule", None),
    ]


def test_a_ready_node_has_no_implied_taint_and_a_heartbeat_changes_nothing_read() -> None:
    first = node_object("a")
    first["status"]["conditions"][0].update(
        lastHeartbeatTime=at(-10), lastTransitionTime="2026-11-01T00:00:00Z"
    )
    later = node_object("a")
    later["status"]["conditions"][0].update(
        lastHeartbeatTime=at(0), lastTransitionTime="2026-11-01T00:00:00Z"
    )
    assert node_info_from_node(first).taints == ()
    assert node_info_from_node(first) == node_info_from_node(later)


def test_a_bad_transition_time_is_one_clear_error() -> None:
    with pytest.raises(NodeError, match=r"status.conditions\[0\].lastTransitionTime: 'yesterday'"):
        node("a", ready=False, since="yesterday")


def test_a_taint_without_time_is_stamped_when_first_seen_and_keeps_that_time() -> None:
    bare = node("a", taints=[{"key": "maintenance", "effect": "NoExecute"}])
    first = with_taint_times(bare, seen=NOW)
    assert first.taints[0].time_added == NOW
    again = with_taint_times(bare, seen=NOW + 60, previous=first)
    assert again == first  # the same Node read again: nothing changed


def test_a_ready_node_reads_whatever_its_transition_time() -> None:
    """When a node became Ready matters to no rule, so a time that does not parse is not read
    (a NotReady node's is: ``test_a_bad_transition_time_is_one_clear_error``)."""
    info = node("a", ready=True, since="yesterday")
    assert (info.ready, info.taints) == (True, ())


def test_an_unknown_ready_without_a_transition_time_is_unreachable_from_when_seen() -> None:
    info = node("a", ready="Unknown")
    assert info.taints == (Taint(key=UNREACHABLE, effect=TaintEffect.NO_EXECUTE),)


def test_a_transition_time_in_lower_case_reads_as_rfc_3339_allows() -> None:
    """RFC 3339 5.6: "T" and "Z" may be lower case."""
    info = node("a", ready=False, since=T0.replace("T", "t").replace("Z", "z"))
    assert [t.time_added for t in info.taints] == [T0_EPOCH]


def test_other_taints_do_not_stand_in_for_the_lifecycle_taint() -> None:
    """A user's NoExecute taint, or the controller's not-ready taint with the NoSchedule effect
    (it puts that one first, TaintNodesByCondition), is not the NoExecute one that evicts:
    that one is still implied, and the taints stay sorted by key, effect and value."""
    info = node(
        "a",
        ready=False,
        since=T0,
        taints=[
            {"key": NOT_READY, "effect": "NoSchedule"},
            {"key": "dedicated", "value": "db", "effect": "NoExecute", "timeAdded": at(-60)},
        ],
    )
    assert [(t.key, t.effect.value, t.time_added) for t in info.taints] == [
        ("dedicated", "NoExecute", NOW - 60),
        (NOT_READY, "NoExecute", T0_EPOCH),
        (NOT_READY, "NoSchedule", None),
    ]


def test_where_the_controller_runs_only_its_taints_count() -> None:
    """``imply_lifecycle=False`` (``orca run --node-lifecycle=taints``, or ``auto`` with the
    controller manager's Lease held): a NotReady or Unknown Node carries the taints it has,
    none implied, as kube-scheduler and the taint-eviction controller read it; the Node is
    still not Ready, so nothing new lands there."""
    silent = node_object("a", ready="Unknown", since=T0)
    assert [t.key for t in node_info_from_node(silent).taints] == [UNREACHABLE]
    read = node_info_from_node(silent, imply_lifecycle=False)
    assert read.taints == () and not read.ready
    held_back = node_object(
        "b", ready="Unknown", since=T0, taints=[{"key": UNREACHABLE, "effect": "NoSchedule"}]
    )
    taints = node_info_from_node(held_back, imply_lifecycle=False).taints
    assert [(t.key, t.effect.value) for t in taints] == [(UNREACHABLE, "NoSchedule")]
    tainted = node_object(
        "c",
        ready="Unknown",
        since=T0,
        taints=[{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": at(-5)}],
    )
    taints = node_info_from_node(tainted, imply_lifecycle=False).taints
    assert [(t.key, t.effect.value, t.time_added) for t in taints] == [
        (UNREACHABLE, "NoExecute", NOW - 5)
    ]


def test_a_replica_on_a_node_the_controller_holds_back_stays_for_good() -> None:
    """Read that way, an Unknown Node the controller has not tainted NoExecute (its rate
    limiter, or a fully disrupted zone) keeps a Service replica an hour after its 300 s would
    have run out, with nothing pending: only a taint starts the clock. Read by the Ready
    condition, the same Node lost it at T + 300 s."""
    w = service([])
    first = placed_on(w, ledger_for(*cluster()), NOW)
    assert [p.node for p in first.placements] == ["a"]
    w = with_status(w, first)
    an_hour_ago = at(-3600)
    for imply, where in ((True, ["b"]), (False, ["a"])):
        nodes = [
            node_info_from_node(
                node_object("a", cpu="8", ready="Unknown", since=an_hour_ago),
                imply_lifecycle=imply,
            ),
            node("b", cpu="4"),
        ]
        silent = ledger_for(*nodes)
        silent.load(w.key, first.bookings)
        decision = Scheduler().schedule(w, silent, now=NOW)
        assert [p.node for p in decision.placements] == where, imply
        assert decision.pending == (), imply  # moved, or staying for good
    # Just before the 300 s, read by the Ready condition, the move is announced.
    nodes = [node("a", cpu="8", ready="Unknown", since=at(-299)), node("b", cpu="4")]
    silent = ledger_for(*nodes)
    silent.load(w.key, first.bookings)
    assert [m.at for m in Scheduler().schedule(w, silent, now=NOW).pending] == [NOW + 1]


def test_only_noexecute_taints_without_a_time_are_stamped() -> None:
    """A NoExecute taint with its own ``timeAdded`` keeps it, whatever was seen before; one
    without gets the time it had when seen before, else now; other effects get none."""
    bare = node(
        "a",
        taints=[
            {"key": "maintenance", "effect": "NoExecute"},
            {"key": "drain", "effect": "NoExecute", "timeAdded": at(-30)},
            {"key": "gpu", "effect": "NoSchedule"},
        ],
    )
    earlier = with_taint_times(bare, seen=NOW - 100)
    stamped = with_taint_times(bare, seen=NOW, previous=earlier)
    assert [(t.key, t.time_added) for t in stamped.taints] == [
        ("drain", NOW - 30),
        ("gpu", None),
        ("maintenance", NOW - 100),
    ]


# -- tolerations Kubernetes adds -----------------------------------------------------------------


def test_jobs_and_services_get_the_default_toleration_seconds() -> None:
    tolerations = effective_tolerations(spec(kind="Job"), False, DefaultTolerations())
    assert keys_and_seconds(tolerations) == [
        (NOT_READY, "Exists", "NoExecute", 300),
        (UNREACHABLE, "Exists", "NoExecute", 300),
    ]


@pytest.mark.parametrize(
    ("own", "added"),
    [
        # its own for unreachable: only not-ready is added
        (
            {
                "key": UNREACHABLE,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 15,
            },
            [NOT_READY],
        ),
        # an empty effect covers NoExecute
        ({"key": NOT_READY, "operator": "Exists"}, [UNREACHABLE]),
        # an empty key (Exists) covers both
        ({"operator": "Exists"}, []),
        # NoSchedule does not cover NoExecute: both added
        (
            {"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"},
            [NOT_READY, UNREACHABLE],
        ),
    ],
    ids=["own-unreachable", "empty-effect", "empty-key", "other-effect"],
)
def test_default_toleration_seconds_step_aside_for_the_workloads_own(
    own: dict[str, Any], added: list[str]
) -> None:
    tolerations = effective_tolerations(
        spec(kind="Job", tolerations=[own]), False, DefaultTolerations()
    )
    assert [t.key for t in tolerations[1:]] == added
    assert all(t.toleration_seconds == 300 for t in tolerations[1:])


def test_daemonsets_tolerate_the_lifecycle_taints_forever_replacing_a_matching_one() -> None:
    own = [
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 15},
        {
            "key": NOT_READY,
            "operator": "Equal",
            "value": "",
            "effect": "NoExecute",
            "tolerationSeconds": 5,
        },
    ]
    tolerations = effective_tolerations(
        spec(kind="DaemonSet", tolerations=own), True, DefaultTolerations()
    )
    assert keys_and_seconds(tolerations) == [
        (UNREACHABLE, "Exists", "NoExecute", None),  # replaced: same key, operator, value, effect
        (NOT_READY, "Equal", "NoExecute", 5),  # another operator: kept, and first to match
        (NOT_READY, "Exists", "NoExecute", None),  # appended
    ]


# -- when a replica leaves -----------------------------------------------------------------------


def tol(key: str | None, seconds: int | None, effect: str | None = "NoExecute") -> dict[str, Any]:
    out: dict[str, Any] = {"operator": "Exists"}
    if key:
        out["key"] = key
    if effect:
        out["effect"] = effect
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def no_execute(key: str, added: float | None) -> Taint:
    return Taint(key=key, effect=TaintEffect.NO_EXECUTE, time_added=added)


@pytest.mark.parametrize(
    ("taints", "tolerations", "expected"),
    [
        ([no_execute("k", NOW - 10)], [tol("k", 15)], NOW + 5),
        ([no_execute("k", NOW - 10)], [tol("k", None)], math.inf),  # forever
        ([no_execute("k", NOW - 10)], [tol("k", 0)], NOW - 10),  # 0: at once
        ([no_execute("k", NOW - 10)], [tol("k", -5)], NOW - 10),  # negative: at once
        ([no_execute("k", NOW - 10)], [tol("other", 15)], -math.inf),  # untolerated
        # the first toleration that matches counts, not the shortest
        ([no_execute("k", NOW - 10)], [tol("k", 100), tol(None, 15)], NOW + 90),
        ([no_execute("k", NOW - 10)], [tol(None, None), tol("k", 15)], math.inf),
        # two taints: the earliest of their times
        (
            [no_execute("a", NOW - 100), no_execute("b", NOW - 10)],
            [tol("a", 120), tol("b", 15)],
            NOW + 5,
        ),
        # a taint without a time counts from now
        ([no_execute("k", None)], [tol("k", 15)], NOW + 15),
        # NoSchedule taints do not evict
        ([Taint(key="k", effect=TaintEffect.NO_SCHEDULE)], [], math.inf),
        # ... nor hide the NoExecute taints after them
        (
            [Taint(key="a", effect=TaintEffect.NO_SCHEDULE), no_execute("b", NOW - 10)],
            [tol("b", 15)],
            NOW + 5,
        ),
    ],
)
def test_leave_time_follows_the_taint_eviction_controller(
    taints: list[Taint], tolerations: list[dict[str, Any]], expected: float
) -> None:
    parsed = spec(kind="Job", tolerations=tolerations).tolerations
    assert leave_time(taints, parsed, NOW)[0] == expected


def test_of_two_taints_due_at_once_the_first_is_named() -> None:
    """Two NoExecute taints whose tolerations run out at the same moment: the reason names
    the node's first (the taints are in the node's sorted order), as the filter's
    ``node(s) had untolerated taint`` names the first untolerated one."""
    first, second = no_execute("a", NOW - 10), no_execute("b", NOW - 20)
    parsed = spec(kind="Job", tolerations=[tol("a", 15), tol("b", 25)]).tolerations
    assert leave_time([first, second], parsed, NOW) == (NOW + 5, first)


# -- the scheduler -------------------------------------------------------------------------------


def placed_on(w: Any, ledger: Ledger, now: float) -> Decision:
    decision = Scheduler().schedule(w, ledger, now=now)
    ledger.load(w.key, decision.bookings)
    return decision


def with_status(w: Any, decision: Decision) -> Any:
    status = status_from_decision(decision, 1, None, "2026-12-01T09:00:00Z")
    return workload(
        name=w.metadata.name,
        status=status.model_dump(by_alias=True, exclude_none=True),
        **w.spec.model_dump(by_alias=True, exclude_none=True),
    )


def service(tolerations: list[dict[str, Any]] | None = None, kind: str = "Service") -> Any:
    fields: dict[str, Any] = {"kind": kind}
    if kind == "Service":
        fields["count"] = 1
    if tolerations:
        fields["tolerations"] = tolerations
    return workload(name="web", **fields)


def cluster(a_ready: str = "True", since: str | None = None) -> list[Any]:
    return [node("a", cpu="8", ready=a_ready, since=since), node("b", cpu="4")]


def test_a_replica_on_an_unreachable_node_stays_for_its_toleration_then_moves_once() -> None:
    w = service([tol(UNREACHABLE, 15)])
    first = placed_on(w, ledger_for(*cluster()), NOW)
    assert [p.node for p in first.placements] == ["a"]  # a has more room
    w = with_status(w, first)
    # a went Unknown at NOW - 10: it holds the replica until NOW + 5
    silent = ledger_for(*cluster("Unknown", T0))
    silent.load(w.key, first.bookings)
    before = Scheduler().schedule(w, silent, now=NOW)
    assert [p.node for p in before.placements] == ["a"]
    assert [(m.alloc_id, m.node, m.at, m.taints) for m in before.pending] == [
        (first.placements[0].alloc_id, "a", NOW + 5, (UNREACHABLE,))
    ]
    status = status_from_decision(before, 1, None, "2026-12-01T10:00:00Z")
    (pending,) = [c for c in status.conditions if c.type == "MovePending"]
    assert (pending.status, pending.reason) == ("True", "NodeUnreachable")
    assert pending.message is not None
    assert f"{first.placements[0].alloc_id} on a moves at 2026-12-01T10:00:05Z" in pending.message
    assert status.phase is Phase.SCHEDULED  # still placed: Ready stays True
    # one second after the time: it moves to b, and nothing is pending any more
    after = Scheduler().schedule(w, silent, now=NOW + 6)
    assert [p.node for p in after.placements] == ["b"]
    assert after.pending == ()


def test_pending_moves_are_the_replicas_on_nodes_they_leave_earliest_first() -> None:
    """web-0 on c (Ready), web-1 on a (NotReady since NOW - 10), web-2 on b (Unknown since
    NOW - 100): web-0 stays for good, so it is not pending; the default 300 s toleration moves
    web-2 at NOW + 200 and web-1 at NOW + 290, listed in that order."""
    from controller.scheduler.ledger import Booking

    w = workload(kind="Service", count=3, resources={"cpu": "1"})
    ledger = ledger_for(
        node("a", ready=False, since=T0), node("b", ready="Unknown", since=at(-100)), node("c")
    )
    ledger.load(w.key, [Booking(n, f"shop/web-{i}", 1000, 0) for i, n in enumerate("cab")])
    decision = Scheduler().schedule(w, ledger, now=NOW)
    assert [p.node for p in decision.placements] == ["c", "a", "b"]
    assert [(m.alloc_id, m.node, m.at, m.taints) for m in decision.pending] == [
        ("shop/web-2", "b", NOW + 200, (UNREACHABLE,)),
        ("shop/web-1", "a", NOW + 290, (NOT_READY,)),
    ]


def test_a_node_back_in_time_moves_nothing() -> None:
    w = service([tol(UNREACHABLE, 15)])
    first = placed_on(w, ledger_for(*cluster()), NOW)
    back = ledger_for(*cluster("True", T0))
    back.load(w.key, first.bookings)
    again = Scheduler().schedule(w, back, now=NOW + 60)
    assert again.placements == first.placements and again.pending == ()


def test_a_job_without_its_own_toleration_waits_the_default() -> None:
    w = service(kind="Job")
    first = placed_on(w, ledger_for(*cluster()), NOW)
    silent = ledger_for(*cluster("False", T0))
    silent.load(w.key, first.bookings)
    held = Scheduler().schedule(w, silent, now=NOW + 289)  # T0 + 299 s
    assert [p.node for p in held.placements] == ["a"] and held.pending[0].at == T0_EPOCH + 300
    assert [p.node for p in Scheduler().schedule(w, silent, now=NOW + 290).placements] == ["b"]
    shorter = Scheduler(tolerations=DefaultTolerations(not_ready=20, unreachable=20))
    assert [p.node for p in shorter.schedule(w, silent, now=NOW + 10).placements] == ["b"]


def test_a_daemonset_stays_on_a_silent_node() -> None:
    w = service(kind="DaemonSet")
    first = placed_on(w, ledger_for(*cluster()), NOW)
    assert sorted(p.node for p in first.placements) == ["a", "b"]
    silent = ledger_for(*cluster("Unknown", T0))
    silent.load(w.key, first.bookings)
    later = Scheduler().schedule(w, silent, now=NOW + 86_400)
    assert later.placements == first.placements and later.pending == ()


def test_a_not_ready_node_takes_nothing_new_even_when_tolerated() -> None:
    w = service([tol(None, None)])  # tolerates every taint, forever
    decision = Scheduler().schedule(w, ledger_for(*cluster("False", T0)), now=NOW)
    assert [p.node for p in decision.placements] == ["b"]


def test_a_deleted_or_cordoned_node_moves_its_replica_at_once() -> None:
    w = service([tol(None, None)])
    first = placed_on(w, ledger_for(*cluster()), NOW)
    gone = ledger_for(node("b", cpu="4"))
    gone.load(w.key, first.bookings)
    assert [p.node for p in Scheduler().schedule(w, gone, now=NOW).placements] == ["b"]
    cordoned = ledger_for(node("a", cpu="8", cordoned=True), node("b", cpu="4"))
    cordoned.load(w.key, first.bookings)
    assert [p.node for p in Scheduler().schedule(w, cordoned, now=NOW).placements] == ["b"]


def test_a_user_noexecute_taint_past_its_toleration_takes_nothing_new() -> None:
    taint = {"key": "maintenance", "effect": "NoExecute", "timeAdded": at(-120)}
    nodes = [node("a", cpu="8", taints=[taint]), node("b", cpu="4")]
    w = service([tol("maintenance", 60)])
    decision = Scheduler().schedule(w, ledger_for(*nodes), now=NOW)  # tolerated until NOW - 60
    assert [p.node for p in decision.placements] == ["b"]
    early = Scheduler().schedule(w, ledger_for(*nodes), now=NOW - 100)  # until NOW - 60: later
    assert [p.node for p in early.placements] == ["a"]
    assert early.pending[0].at == NOW - 60 and early.pending[0].taints == ("maintenance",)


# -- memoised with their deadline ----------------------------------------------------------------


class CountingTaints(TaintToleration):
    """The plugin, counting how often the engine asks it (a memo hit does not)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def filter(self, cycle: CycleState) -> Verdict:
        self.calls += 1
        return super().filter(cycle)


def counting_scheduler() -> tuple[Scheduler, CountingTaints]:
    cel = Scheduler().cel
    plugin = CountingTaints()
    plugins = tuple(
        (plugin, w) if getattr(p, "name", None) == plugin.name else (p, w)
        for p, w in default_profile(cel).plugins
    )
    return Scheduler(cel=cel, profile=Profile(plugins)), plugin


@pytest.mark.parametrize(
    ("deadlines", "now", "floating", "expected"),
    [
        ([], NOW, False, (-math.inf, math.inf)),  # nothing runs down: any time
        ([math.inf, -math.inf], NOW, False, (-math.inf, math.inf)),  # forever, or at once
        ([NOW + 5, NOW + 20], NOW, False, (-math.inf, NOW + 5)),  # until the first one to come
        ([NOW - 3, NOW + 5], NOW, False, (NOW - 3, NOW + 5)),  # since the last one passed
        ([NOW], NOW, False, (NOW, math.inf)),  # due now: already gone, for good
        ([NOW + 5], NOW, True, (NOW, math.nextafter(NOW, math.inf))),  # counted from now
    ],
)
def test_a_verdict_holds_from_the_last_deadline_passed_to_the_next_one(
    deadlines: list[float], now: float, floating: bool, expected: tuple[float, float]
) -> None:
    assert holding_span(deadlines, now, floating) == expected


def test_a_toleration_running_down_is_memoised_until_its_deadline() -> None:
    """Five Jobs, one at a time on a cluster where node a went Unknown at T0 and each Job
    tolerates it for 15 s: the taints' verdict is computed once per span of the clock it
    holds over, and every decision is the one a scheduler without a memo makes."""
    scheduler, plugin = counting_scheduler()
    ledger = ledger_for(*cluster("Unknown", T0))
    jobs = [service([tol(UNREACHABLE, 15)], kind="Job") for _ in range(2)]
    times = [NOW, NOW + 1, NOW + 4.5, NOW + 5, NOW + 30, NOW + 2]  # a's deadline: NOW + 5
    for now in times:
        for job in jobs:
            memoised = scheduler.schedule(job, ledger, now=now)
            assert memoised == Scheduler().schedule(job, ledger, now=now), now
    # [T0, NOW + 5) once; [NOW + 5, inf) once; back to NOW + 2, before its span: again
    assert plugin.calls == 3


def test_a_taint_counted_from_now_is_memoised_at_that_now_only() -> None:
    """``orca plan`` counts a NoExecute taint without a time from its ``--now``: every
    Workload of the plan shares the verdict, another clock gets its own."""
    scheduler, plugin = counting_scheduler()
    bare = {"key": "maintenance", "effect": "NoExecute"}
    ledger = ledger_for(node("a", cpu="8", taints=[bare]), node("b", cpu="4"))
    job = service([tol("maintenance", 60)], kind="Job")
    for now in (NOW, NOW, NOW + 1):
        assert scheduler.schedule(job, ledger, now=now) == Scheduler().schedule(
            job, ledger, now=now
        )
    assert plugin.calls == 2
