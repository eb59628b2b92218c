"""The operator's failure domains (``controller.operator.resilience``): the gauges follow the
cluster, only the leader answers, an unchanged cluster is not answered twice, and the work is
paced around the scheduling loop (decisions first, a bounded share of a core). The same on a
living cluster, scraped by a real Prometheus: tests/integration/test_prometheus.py."""

from __future__ import annotations

import asyncio
import gc
import types
import weakref
from collections.abc import Generator, Iterator
from typing import cast

import pytest
from prometheus_client import REGISTRY

from controller.api.models import Workload, WorkloadStatus
from controller.cli import build_parser
from controller.cli.run import run
from controller.operator import heap
from controller.operator.app import Operator
from controller.operator.kube import KubeApi
from controller.operator.resilience import SLICE, ResilienceLoop, _Pacer
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.plan import PlanResult, Turns
from tests.support.factories import job, node_object

ZONE = "topology.kubernetes.io/zone"
NOW = "2026-12-01T10:00:00Z"


def gauges() -> dict[tuple[str, str, str], float]:
    """(metric, topology_key, domain) -> value, as a scrape sees them."""
    out = {}
    for family in REGISTRY.collect():
        if family.name.startswith("orca_failure_domain_") and family.type == "gauge":
            for sample in family.samples:
                labels = sample.labels
                out[sample.name, labels["topology_key"], labels["domain"]] = sample.value
    return out


def zoned(state: ClusterState) -> None:
    """a1 (zone a) and b1, b2 (zone b), 4 cores each; x (3 cores) on a1, y (3 cores) on b1."""
    for name, zone in (("a1", "a"), ("b1", "b"), ("b2", "b")):
        state.upsert_node(node_object(name, cpu="4", labels={ZONE: zone}))
    state.upsert_workload(job("x", cpu="3", node="a1"))
    state.upsert_workload(job("y", cpu="3", node="b1"))


def resilience(state: ClusterState, leader: list[bool] | None = None) -> ResilienceLoop:
    operator = Operator.wire(
        cast(KubeApi, object()),
        state,
        resilience_every=60.0,
        now=lambda: NOW,
    )
    assert operator.resilience is not None
    if leader is not None:
        operator.resilience.is_leader = lambda: leader[0]
    return operator.resilience


def test_the_gauges_say_what_each_zones_loss_would_strand_and_follow_the_cluster() -> None:
    state = ClusterState()
    zoned(state)
    loop = resilience(state)
    # Losing a: x (3 cores) goes to b2 (4 free). Losing b: y has 1 core on a1: no place.
    assert asyncio.run(loop.refresh()) is not None
    assert gauges() == {
        ("orca_failure_domain_unplaceable_replicas", ZONE, "a"): 0.0,
        ("orca_failure_domain_unplaceable_replicas", ZONE, "b"): 1.0,
        ("orca_failure_domain_displaced_replicas", ZONE, "a"): 1.0,
        ("orca_failure_domain_displaced_replicas", ZONE, "b"): 1.0,
    }
    # Nothing changed: not answered again.
    assert asyncio.run(loop.refresh()) is None
    # b2 fills up (a 4-core Job placed there): now a's loss strands x too.
    state.upsert_workload(job("z", cpu="4", node="b2"))
    assert asyncio.run(loop.refresh()) is not None
    assert gauges()[("orca_failure_domain_unplaceable_replicas", ZONE, "a")] == 1.0
    assert gauges()[("orca_failure_domain_displaced_replicas", ZONE, "b")] == 2.0
    # A zone that goes has no series any more.
    state.delete_workload("ns/z")
    state.delete_node("b2")
    state.delete_node("b1")
    assert asyncio.run(loop.refresh()) is not None
    assert {domain for _, _, domain in gauges()} == {"a"}


def test_the_log_names_the_domain_whose_loss_strands_the_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = ClusterState()
    zoned(state)
    state.upsert_workload(job("z", cpu="4", node="b2"))
    # Losing a strands x (3 cores: b1 has 1 free, b2 none); losing b strands y and z (a1 has 1
    # core free): b strands more, though a comes first by name.
    with caplog.at_level("INFO", logger="orca.resilience"):
        assert asyncio.run(resilience(state).refresh()) is not None
    (line,) = [r.getMessage() for r in caplog.records if "would strand" in r.getMessage()]
    assert "2, of which 2 would strand replicas (most: b, 2)" in line


def test_only_the_leader_answers_and_a_replica_that_stops_leading_exports_nothing() -> None:
    state = ClusterState()
    zoned(state)
    leader = [False]
    loop = resilience(state, leader)
    assert asyncio.run(loop.refresh()) is None and gauges() == {}
    leader[0] = True
    assert asyncio.run(loop.refresh()) is not None and len(gauges()) == 4
    leader[0] = False
    assert asyncio.run(loop.refresh()) is None and gauges() == {}
    leader[0] = True  # leading again: answered afresh, though nothing changed
    assert asyncio.run(loop.refresh()) is not None and len(gauges()) == 4


def test_nodes_without_the_label_are_a_domain_of_their_own() -> None:
    state = ClusterState()
    state.upsert_node(node_object("loose", cpu="4"))
    state.upsert_workload(job("x", cpu="1", node="loose"))
    asyncio.run(resilience(state).refresh())
    assert gauges()[("orca_failure_domain_unplaceable_replicas", ZONE, "<none>")] == 1.0


def kept_between_answers(loop: ResilienceLoop) -> int:
    """How many containers (scalars are counted by value) the loop keeps reachable from what
    it holds between two answers (its last answer and the fingerprint of the cluster it
    answered for), the classes and modules they lead to not followed (they lead to
    everything the process has loaded)."""
    seen: set[int] = set()
    containers = 0
    todo: list[object] = [loop.answered, loop._seen]
    while todo:
        obj = todo.pop()
        if id(obj) not in seen:
            seen.add(id(obj))
            if not isinstance(obj, type | types.ModuleType):
                todo.extend(gc.get_referents(obj))
                containers += gc.is_tracked(obj)
    return containers


def test_what_it_keeps_between_answers_does_not_grow_with_the_workloads() -> None:
    """Its answers' decisions (a status for each Workload a domain's loss plans) are let go
    once the gauges are read: 1.6 KiB per stored Workload, kept until the next answer."""
    kept = []
    for count in (2, 40):
        state = ClusterState()
        zoned(state)
        for i in range(count):
            state.upsert_workload(job(f"small-{i}", cpu="10m", node=("a1", "b1", "b2")[i % 3]))
        loop = resilience(state)
        answered = asyncio.run(loop.refresh())
        assert answered is not None and len(answered.domains) == 2
        kept.append(kept_between_answers(loop))
    assert kept[0] == kept[1]


def test_no_decided_status_outlives_the_step_that_made_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gauges read three figures of a domain: its answer keeps none of its decisions past
    the step that made it (the full answer held them all to the domain's end, the answer's
    peak of memory on 100,000 Workloads), and nothing of them once it is done."""
    made: list[weakref.ref[WorkloadStatus]] = []
    alive_when_deciding: list[int] = []
    decide = Turns.decide

    def watched(turns: Turns, workload: Workload) -> PlanResult:
        gc.collect()
        alive_when_deciding.append(sum(ref() is not None for ref in made))
        result = decide(turns, workload)
        made.append(weakref.ref(result.status))
        return result

    monkeypatch.setattr(Turns, "decide", watched)
    state = ClusterState()
    # Zone a: a1 and a2, four 1-core Jobs on them; zone b: b1, b2, with room for all four.
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        state.upsert_node(node_object(name, cpu="4", labels={ZONE: zone}))
    for i in range(4):
        state.upsert_workload(job(f"x{i}", cpu="1", node=f"a{i % 2 + 1}"))
    answered = asyncio.run(resilience(state).refresh())
    assert answered is not None
    assert [(d.domain, d.unplaced, d.displaced, d.settled) for d in answered.domains] == [
        ("a", 0, 4, True),
        ("b", 0, 0, True),
    ]
    assert len(made) == 4  # zone a's loss decided each Job again
    assert max(alive_when_deciding) <= 1  # the step before's, until that step ends
    gc.collect()
    assert [ref() for ref in made] == [None] * len(made)


def test_what_an_answer_freed_is_given_back_to_the_system(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []

    def trim(pad: int) -> int:
        trims.append(pad)
        return 1

    monkeypatch.setattr(heap, "_TRIM", trim)
    state = ClusterState()
    zoned(state)
    loop = resilience(state)
    assert asyncio.run(loop.refresh()) is not None
    assert trims == [0]
    assert asyncio.run(loop.refresh()) is None  # nothing changed, nothing answered or freed
    assert trims == [0]


def test_it_is_off_at_zero_and_its_flags_are_checked_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert Operator.wire(cast(KubeApi, object()), ClusterState()).resilience is None
    for flags, message in (
        (["--resilience-key", "zone=a"], "--resilience-key 'zone=a' is not a valid label key"),
        (["--resilience-interval", "5s"], "--resilience-interval: '5s' is out of range"),
        (["--resilience-interval", "soon"], "--resilience-interval: 'soon' is not a duration"),
    ):
        args = build_parser().parse_args(["run", *flags])
        assert run(args) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    # A key too long to repeat: its first 80 characters, then why.
    key = "a" * 80 + "Z" * 300
    assert run(build_parser().parse_args(["run", "--resilience-key", key])) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resilience-key {'a' * 80!r} ") and "Z" not in err, err


# -- pacing -------------------------------------------------------------------------------------


class FakeClock:
    """``time.thread_time`` advancing only when a step says it worked."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def steps(clock: FakeClock, count: int, each: float, ran: list[int]) -> Generator[None, None, str]:
    for i in range(count):
        clock.now += each
        ran.append(i)
        yield
    return "done"


def test_the_work_takes_at_most_its_share_of_a_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """After each slice of CPU, the pacer sleeps nine times as long (a share of 10 %)."""
    clock = FakeClock()
    monkeypatch.setattr("controller.operator.resilience.time.thread_time", clock)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("controller.operator.resilience.asyncio.sleep", sleep)
    ran: list[int] = []
    pacer = _Pacer(WorkQueue(), share=0.1)
    each = 2**-8  # seconds, exact in binary: two steps make a slice
    assert each < SLICE <= 2 * each
    assert asyncio.run(pacer.drive(steps(clock, 10, each, ran))) == "done"
    assert ran == list(range(10))
    assert slept == pytest.approx([2 * each * 9] * 5)
    assert pacer.cpu == pytest.approx(10 * each)


def test_while_keys_wait_for_a_decision_no_step_runs() -> None:
    async def scenario() -> list[int]:
        queue = WorkQueue()
        queue.add("ns/w")
        ran: list[int] = []
        pacer = _Pacer(queue, share=1.0)
        driving = asyncio.ensure_future(pacer.drive(steps(FakeClock(), 3, 0.0, ran)))
        await asyncio.sleep(0.2)  # four looks at the queue
        assert ran == []  # the scheduling loop's key goes first
        key = await queue.get()
        queue.done(key)
        assert await driving == "done"
        return ran

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_the_snapshot_is_taken_once_the_waiting_keys_were_decided() -> None:
    """At start every stored Workload waits for a decision: the answer is made on the cluster
    as the scheduling loop left it, not on the one it found (x placed meanwhile on a1: losing
    a strands it, since b1 is full), so it neither plans the backlog again nor says what no
    longer holds."""
    state = ClusterState()
    for name, zone in (("a1", "a"), ("b1", "b")):
        state.upsert_node(node_object(name, cpu="4", labels={ZONE: zone}))
    state.upsert_workload(job("y", cpu="4", node="b1"))
    loop = resilience(state)

    async def scenario() -> None:
        loop.queue.add("default/x")
        answering = asyncio.ensure_future(loop.refresh())
        await asyncio.sleep(0.2)
        assert not answering.done()  # a key waits: nothing taken yet
        key = await loop.queue.get()
        state.upsert_workload(job("x", cpu="3", node="a1"))  # the loop's decision landed
        loop.queue.done(key)
        assert await answering is not None

    asyncio.run(scenario())
    assert gauges()[("orca_failure_domain_unplaceable_replicas", ZONE, "a")] == 1.0
    assert gauges()[("orca_failure_domain_displaced_replicas", ZONE, "a")] == 1.0


@pytest.fixture(autouse=True)
def no_domains() -> Iterator[None]:
    metrics.FAILURE_DOMAINS.publish("", ())
    yield
    metrics.FAILURE_DOMAINS.publish("", ())
