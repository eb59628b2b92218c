"""The one status-write transaction (``controller.operator.transaction``) as each of its three
users meets it: the scheduling loop, a preemption's victims and the rebalancer all get the
same rollback on every way out, and the same handling of a write that got no answer (both
outcomes held, the Workload read back before it is decided again).

Before, only the loop's own writes held both outcomes: a victim's write and a rebalancing
move that got no answer were forgotten like refused ones (their capacity freed while the
object may have recorded the write), and a bug inside a write left its assumption booked.

Its sections: the transaction's three users (here first); a write that got no answer
(``StatusWrites.reread``); a write that did not land (``StatusWrites.abandon``); capacity held
until the write lands (``ledger.held_until_written``)."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any, cast

import aiohttp
import pytest
from prometheus_client import REGISTRY

from controller.api.models import Phase
from controller.operator.app import Operator
from controller.operator.handlers import WorkloadEvents
from controller.operator.kube import ApiError, Fenced, KubeApi, TransportError
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.ledger import Booking, held_until_written
from tests.support.factories import free_cpu, job, node_object, stored_workload
from tests.support.fakeapi import until

NO_ANSWER = TransportError("PATCH status", aiohttp.ServerDisconnectedError())


def count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Api:
    """Status writes of the Workloads named in ``fail`` raise its exception; the others land.
    A GET returns the object as ``objects`` holds it (for the read-back)."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.fail = fail or {}
        self.objects: dict[str, dict[str, Any]] = {}
        self.written: list[str] = []
        self.gets: list[str] = []

    async def write_workload_status(
        self, _namespace: str, name: str, status: dict[str, Any], _version: str | None
    ) -> dict[str, Any]:
        if name in self.fail:
            raise self.fail[name]
        self.written.append(name)
        return {"metadata": {"resourceVersion": str(100 + len(self.written))}}

    async def request(self, method: str, path: str, *_: Any, **__: Any) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        self.gets.append(name)
        return self.objects[name]

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


def test_a_bug_inside_the_loops_write_leaves_nothing_assumed() -> None:
    """An unexpected exception while the write is in flight (not an answer, not a transport
    error: a bug) still rolls the assumption back, and the loop retries the key later."""
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="2"))
    state.upsert_workload(job("web", "1", version="5"))
    api = Api({"web": RuntimeError("a bug while writing")})
    operator = Operator.wire(cast(KubeApi, api), state)

    async def scenario() -> None:
        operator.queue.add("ns/web")
        await operator.loop.process_next()  # logs the bug, backs off, marks the key done

    asyncio.run(scenario())
    assert not state.ledger.assumed("ns/web")
    assert state.ledger.bookings("ns/web") == ()
    assert free_cpu(state) == {"a": 2000}
    assert operator.queue.backing_off == 1 and not operator.queue.busy("ns/web")


def rebalancing(fail: BaseException) -> tuple[ClusterState, Api, Operator]:
    """Service ``web`` (2 x 1 cpu, rebalance: Allowed) on node a; node b empty."""
    state = ClusterState()
    for name in ("a", "b"):
        state.upsert_node(node_object(name, cpu="2"))
    spec = {"kind": "Service", "count": 2, "resources": {"cpu": "1"}, "rebalance": "Allowed"}
    placements = [{"node": "a", "allocId": f"ns/web-{i}", "score": 0} for i in range(2)]
    status = {"phase": "Scheduled", "placements": placements, "resources": {"cpu": "1"}}
    state.upsert_workload(stored_workload("web", "5", spec, status))
    api = Api({"web": fail})
    operator = Operator.wire(cast(KubeApi, api), state, rebalance_every=1.0)
    operator.gate.ready.set()
    return state, api, operator


def test_a_bug_inside_a_move_leaves_nothing_assumed() -> None:
    """The same for the rebalancer: its pass fails (and is logged), the ledger is as before."""
    state, _, operator = rebalancing(RuntimeError("a bug while writing"))
    assert operator.rebalancer is not None
    with pytest.raises(RuntimeError):
        asyncio.run(operator.rebalancer.rebalance())
    assert not state.ledger.assumed("ns/web")
    assert free_cpu(state) == {"a": 0, "b": 2000}
    assert not operator.queue.busy("ns/web")


def preemption(fail: dict[str, BaseException]) -> tuple[ClusterState, Api, Operator]:
    """Node a (4 cpu) full with ``low`` (priority 0); ``high`` (priority 1000, 2 cpu) preempts."""
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="4"))
    state.upsert_workload(job("low", "4", node="a", version="5"))
    state.upsert_workload(job("high", "2", priorityClassName="high", version="5"))
    api = Api(fail)
    operator = Operator.wire(cast(KubeApi, api), state)
    operator.priorities.upsert(
        {"metadata": {"name": "high", "resourceVersion": "1"}, "value": 1000}
    )
    return state, api, operator


def test_a_victims_write_without_an_answer_is_held_and_read_back() -> None:
    state, api, operator = preemption({"low": NO_ANSWER})
    # it did not land, as the read-back shows
    api.objects["low"] = job("low", "4", node="a", version="5")

    async def scenario() -> None:
        operator.queue.add("ns/high")
        await operator.loop.process_next()
        assert api.written == []  # the preemptor waits for its victims
        assert state.ledger.bookings("ns/high") == ()
        assert free_cpu(state) == {"a": 0}  # low's replica held: its write may have landed
        assert "ns/low" in operator.writes.unsure
        await operator.loop.process("ns/low")  # read back before it is decided again

    asyncio.run(scenario())
    assert api.gets == ["low"]
    assert "ns/low" not in operator.writes.unsure
    assert [b.node for b in state.ledger.bookings("ns/low")] == ["a"]


def test_a_move_without_an_answer_is_held_on_both_nodes_and_read_back() -> None:
    state, _, operator = rebalancing(NO_ANSWER)
    assert operator.rebalancer is not None
    before = count("orca_rebalance_moves_total", outcome=metrics.MOVE_FAILED)
    assert asyncio.run(operator.rebalancer.rebalance()) == 0
    assert count("orca_rebalance_moves_total", outcome=metrics.MOVE_FAILED) == before + 1
    assert free_cpu(state) == {"a": 0, "b": 1000}  # the moved replica held on both nodes
    assert "ns/web" in operator.writes.unsure and operator.queue.busy("ns/web")


@pytest.mark.parametrize("victim", [True, False])
def test_every_user_gets_the_same_outcome_counts(victim: bool) -> None:
    """A write that got no answer counts as failed with its cause, whoever made it."""
    failed = count("orca_status_writes_total", outcome="failed")
    cause = count("orca_status_write_failures_total", code="ServerDisconnectedError")
    if victim:
        _, _, operator = preemption({"low": NO_ANSWER})
        key = "ns/high"
    else:
        state = ClusterState()
        state.upsert_node(node_object("a", cpu="2"))
        state.upsert_workload(job("web", "1", version="5"))
        operator = Operator.wire(cast(KubeApi, Api({"web": NO_ANSWER})), state)
        key = "ns/web"
    asyncio.run(operator.loop.process(key))
    assert count("orca_status_writes_total", outcome="failed") == failed + 1
    assert count("orca_status_write_failures_total", code="ServerDisconnectedError") == cause + 1


@pytest.mark.parametrize("victim", [True, False])
def test_a_write_not_sent_without_the_lease_is_counted_fenced_and_says_why(
    victim: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A write refused locally (the leader Lease lapsed) counts as ``fenced``, whoever made
    it, and a preemption that could not write its victim says why in its log line."""
    caplog.set_level(logging.INFO, logger="orca.preemption")
    fenced = count("orca_status_writes_total", outcome="fenced")
    if victim:
        _, _, operator = preemption({"low": Fenced()})
        key = "ns/high"
    else:
        state = ClusterState()
        state.upsert_node(node_object("a", cpu="2"))
        state.upsert_workload(job("web", "1", version="5"))
        operator = Operator.wire(cast(KubeApi, Api({"web": Fenced()})), state)
        key = "ns/web"
    asyncio.run(operator.loop.process(key))
    assert count("orca_status_writes_total", outcome="fenced") == fenced + 1
    if victim:  # what else the preemption logs (a retry, say) depends on the loop's timing
        assert (
            "preemption of ns/low for ns/high failed: "
            "not sent: this replica does not hold a valid leader Lease"
        ) in [r.getMessage() for r in caplog.records if r.name == "orca.preemption"]


class OneByOneApi:
    """Each Workload's status write waits for its own ``release`` event, then lands."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.release = {name: asyncio.Event() for name in names}
        self.pending: set[str] = set()

    async def write_workload_status(self, _namespace: str, name: str, *_: Any) -> dict[str, Any]:
        self.pending.add(name)
        await self.release[name].wait()
        return {"metadata": {"resourceVersion": "99"}}

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


def test_events_hold_back_while_any_status_write_is_in_flight() -> None:
    """Events wait while status writes are in flight (so a burst's writes get the API server
    first): with two in flight and one landed, the other still holds them back; with none, they
    go."""

    async def scenario() -> list[bool]:
        state, api = ClusterState(), OneByOneApi(("web", "db"))
        state.upsert_node(node_object("a", cpu="4"))
        state.upsert_workload(job("web", "1", version="5"))
        state.upsert_workload(job("db", "1", version="5"))
        operator = Operator.wire(cast(KubeApi, api), state)
        busy = [operator.events.busy()]
        writing = {
            name: asyncio.create_task(operator.loop.process(f"ns/{name}")) for name in ("web", "db")
        }
        await until(lambda: api.pending == {"web", "db"}, "both writes in flight")
        busy.append(operator.events.busy())
        api.release["web"].set()
        assert await writing["web"]
        busy.append(operator.events.busy())
        api.release["db"].set()
        assert await writing["db"]
        busy.append(operator.events.busy())
        return busy

    assert asyncio.run(scenario()) == [False, True, True, False]


# -- a write that got no answer (StatusWrites.reread) ---------------------------------------------
# A status write that got no answer may have landed: both outcomes stay booked until the
# object is read again (``StatusWrites.reread``), and the next decision starts from what the
# object records.
#
# Before, the write was forgotten like a refused one: its bookings freed while the object
# recorded them (another Workload was placed there: a node over capacity), and the next decision
# started from the bookings before it, dropping the replicas the landed write had added. The
# chaos suite's flaky network found both (a proxy cutting connections after forwarding a
# request): ``over-capacity: flaky-0004: cpu 4350/4000m``, the 350m being two DaemonSets'
# replicas the ledger had forgotten, and ``lost: .../w00008-5 was on flaky-0045, now nowhere``.


class DroppingApi:
    """An API server holding the objects; the first status write of ``web`` gets no answer,
    after being applied (``lands``) or not."""

    def __init__(self, lands: bool) -> None:
        self.objects = {name: job(name, "1", version=10, uid=f"u-{name}") for name in ("web", "db")}
        self.lands = lands
        self.dropped = False
        self.writes: list[str] = []

    async def write_workload_status(
        self, _namespace: str, name: str, status: dict[str, Any], version: str | None
    ) -> dict[str, Any]:
        obj = self.objects[name]
        if version is not None and version != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        drop = name == "web" and not self.dropped
        self.dropped |= drop
        if drop and not self.lands:
            raise TransportError("PATCH status", aiohttp.ServerDisconnectedError())
        obj["status"] = status
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self.writes.append(f"{name}: {[p['node'] for p in status['placements']]}")
        if drop:
            raise TransportError("PATCH status", aiohttp.ServerDisconnectedError())
        return copy.deepcopy(obj)

    async def request(self, method: str, path: str, *_: Any, **__: Any) -> dict[str, Any]:
        assert method == "GET", path
        return copy.deepcopy(self.objects[path.rsplit("/", 1)[1]])

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


async def step(operator: Operator, queue: WorkQueue) -> str:
    """One turn of the scheduling loop: its next key, decided and written, then done."""
    key = await asyncio.wait_for(queue.get(), timeout=5)
    try:
        await operator.loop.process(key)
    finally:
        queue.done(key)
    return key


def run(lands: bool) -> tuple[dict[str, int], list[str], dict[str, int], list[str]]:
    """(free cpu after web's unanswered write, the writes made by then, free cpu at the end,
    every write the API server applied)."""

    async def scenario() -> tuple[dict[str, int], list[str], dict[str, int], list[str]]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands)
        for name in ("a", "b"):
            state.upsert_node(node_object(name, cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web decided on a; the write gets no answer
        during = free_cpu(state)
        state.upsert_workload(job("db", "1", version=10, uid="u-db"))
        queue.add("ns/db")
        await step(operator, queue)  # db must not get the room web may hold
        writes = list(api.writes)
        while await step(operator, queue) != "ns/web":
            pass  # web again: read back first
        while len(queue):
            await step(operator, queue)
        return during, writes, free_cpu(state), api.writes

    return asyncio.run(scenario())


def test_an_unanswered_write_keeps_its_capacity_and_the_truth_is_read_back() -> None:
    during, writes, after, applied = run(lands=True)
    assert during == {"a": 0, "b": 1000}  # web's write may have landed: a stays booked
    assert writes == ["web: ['a']", "db: ['b']"]  # db went to b, not over web on a
    assert after == {"a": 0, "b": 0}
    assert applied == writes  # web was read back on a: nothing to write again


def test_an_unanswered_write_that_did_not_land_is_decided_again() -> None:
    during, writes, after, applied = run(lands=False)
    assert during == {"a": 0, "b": 1000}  # not known yet: held all the same
    assert writes == ["db: ['b']"]
    assert after == {"a": 0, "b": 0}
    assert applied == ["db: ['b']", "web: ['a']"]  # read back unplaced, placed on a


def test_the_read_back_books_what_the_object_records_after_an_earlier_write() -> None:
    """web was written once (answered): the record's parsed object predates that status. Its
    next write (a move off a cordoned node) gets no answer and does not land: the read-back
    must book web where the object has it, not where the first parse had nothing."""

    async def scenario() -> tuple[dict[str, int], list[str]]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=False)
        api.dropped = True  # the first write of web is answered
        for name in ("a", "b"):
            state.upsert_node(node_object(name, cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # on a, answered
        state.upsert_node({**node_object("a", cpu="1", cordoned=True)})
        api.dropped = False  # the next one is not
        queue.add("ns/web")
        await step(operator, queue)  # a move to b: no answer, did not land
        await step(operator, queue)  # the read-back
        read_back = free_cpu(state)
        while len(queue):
            await step(operator, queue)
        return read_back, api.writes

    read_back, applied = asyncio.run(scenario())
    assert read_back == {"a": 0, "b": 1000}  # web is on a, as the object says
    assert applied == ["web: ['a']", "web: ['b']"]


def test_room_freed_without_a_landed_write_wakes_who_waits_for_it() -> None:
    """web's write gets no answer and did not land; db, decided meanwhile, found no room (a
    held for web) and waits for capacity. The read-back frees a: db must be queued again, as
    kube-scheduler moves unschedulable Pods back when it forgets an assumed one
    (``handleBindingCycleError``). Before, only web was queued: db waited for an unrelated
    event or the resync (the chaos suite's flaky network: ``stranded: ... DaemonSet misses
    ['flaky-0066']``)."""

    async def scenario() -> tuple[bool, bool, list[str]]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=False)
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, not landed, a held
        state.upsert_workload(job("db", "1", version=10, uid="u-db"))
        queue.add("ns/db")
        await step(operator, queue)  # db: no room, waits for capacity
        waiting = "ns/db" in state.keys_waiting_for_capacity()
        assert await step(operator, queue) == "ns/web"  # the read-back
        woken = queue.busy("ns/db")
        while len(queue):
            await step(operator, queue)
        return waiting, woken, api.writes

    waiting, woken, applied = asyncio.run(scenario())
    assert waiting and woken
    assert applied[0] == "db: []"  # Unschedulable first; then one of the two gets a
    assert len([w for w in applied if w.endswith("['a']")]) == 1


def test_a_held_write_resolved_by_a_watch_event_wakes_who_waits() -> None:
    """The same, but web's next event (a label set on it) arrives before the read-back: the
    event books what web records (nothing), which frees a; db must be queued by that event,
    as kube-scheduler moves unschedulable Pods back on an assigned Pod's update."""

    async def scenario() -> tuple[bool, bool, dict[str, int]]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=False)
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        operator.gate.ready.set()
        events = WorkloadEvents(state, queue, operator.gate)
        events.added(job("web", "1", version=10, uid="u-web"))
        await step(operator, queue)  # web on a: no answer, not landed, a held
        events.added(job("db", "1", version=10, uid="u-db"))
        await step(operator, queue)  # db: no room, waits for capacity
        waiting = "ns/db" in state.keys_waiting_for_capacity()
        labelled = job("web", "1", version=11, uid="u-web")
        labelled["metadata"]["labels"] = {"team": "blue"}
        events.added(labelled)  # web as it is: unplaced
        await asyncio.sleep(0)  # who waits is queued once per loop turn (WorkloadEvents.flush)
        return waiting, queue.busy("ns/db"), free_cpu(state)

    waiting, woken, free = asyncio.run(scenario())
    assert waiting and woken
    assert free == {"a": 1000}


class UnreadableApi(DroppingApi):
    """The first write of ``web`` gets no answer and does not land; reading ``web`` back then
    fails ``reads`` times: with ``failure`` (a dropped connection by default), then answers."""

    def __init__(self, failure: Exception | None = None, reads: int = 1) -> None:
        super().__init__(lands=False)
        self.failure = failure or TransportError("GET", aiohttp.ServerDisconnectedError())
        self.failing = reads

    async def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if path.endswith("/web") and self.failing:
            self.failing -= 1
            raise self.failure
        return await super().request(method, path, *args, **kwargs)


def test_a_read_back_that_fails_keeps_both_outcomes_and_retries_after_a_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """web's write got no answer; reading it back fails too (the connection drops again). Its
    capacity stays held (it may still have landed), web stays unsure, and the read-back is
    tried again after the queue's back-off; the warning names web and the delay."""

    async def scenario() -> tuple[dict[str, int], bool, int, str, dict[str, int], list[str]]:
        state, queue, api = ClusterState(), WorkQueue(base_delay=0.01), UnreadableApi()
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, did not land
        assert await step(operator, queue) == "ns/web"  # the read-back: fails
        held, unsure = free_cpu(state), "ns/web" in operator.writes.unsure
        backing_off, waiting = queue.backing_off, len(queue)
        again = await step(operator, queue)  # after the back-off: read back, then decided
        while len(queue):
            await step(operator, queue)
        assert waiting == 0
        return held, unsure, backing_off, again, free_cpu(state), api.writes

    with caplog.at_level(logging.WARNING, logger="orca"):
        held, unsure, backing_off, again, after, applied = asyncio.run(scenario())
    assert held == {"a": 0} and unsure  # not known yet: still held, still unsure
    assert backing_off == 1 and again == "ns/web"
    assert after == {"a": 0} and applied == ["web: ['a']"]  # read back unplaced, placed on a
    # web's second failure in a row (the unanswered write was the first): 0.01 s * 2
    assert [
        (r.levelname, r.getMessage()) for r in caplog.records if "failed" in r.getMessage()
    ] == [
        (
            "WARNING",
            "status write for ns/web failed (PATCH status: ServerDisconnectedError: Server "
            "disconnected); retrying in 0.01s",
        ),
        (
            "WARNING",
            "reading ns/web back failed (GET: ServerDisconnectedError: Server disconnected);"
            " retrying in 0.02s",
        ),
    ]


def test_a_read_back_that_finds_the_workload_deleted_frees_its_room_for_who_waits() -> None:
    """web's write got no answer and did not land; db, decided meanwhile, waits for the room
    held for web. Reading web back finds it deleted (404): its bookings are dropped, it is
    no longer unsure, and db is queued again and placed where web was held."""

    async def scenario() -> tuple[dict[str, int], bool, bool, list[str]]:
        state, queue = ClusterState(), WorkQueue()
        api = UnreadableApi(ApiError(404, "NotFound", 'workloads "web" not found'))
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, not landed, a held
        state.upsert_workload(job("db", "1", version=10, uid="u-db"))
        queue.add("ns/db")
        await step(operator, queue)  # db: no room, waits for capacity
        assert await step(operator, queue) == "ns/web"  # the read-back: 404
        freed = free_cpu(state)
        unsure, woken = "ns/web" in operator.writes.unsure, queue.busy("ns/db")
        while len(queue):
            await step(operator, queue)
        return freed, unsure, woken, api.writes

    freed, unsure, woken, applied = asyncio.run(scenario())
    assert freed == {"a": 1000} and not unsure and woken
    assert applied == ["db: []", "db: ['a']"]


class OvertakenApi(DroppingApi):
    """web's first write gets no answer and does not land; while web is read back, a newer
    version of web arrives by watch (its write landed after all, at version 12), and the read
    answers with the version before it (11)."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(lands=False)
        self.state = state

    async def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        answer = await super().request(method, path, *args, **kwargs)
        if path.endswith("/web"):
            answer["metadata"]["resourceVersion"] = "11"
            newer = copy.deepcopy(answer)
            newer["metadata"]["resourceVersion"] = "12"
            newer["status"] = {"placements": [{"node": "a", "allocId": "ns/web-0", "score": 1}]}
            self.state.upsert_workload(newer)
        return answer


def test_a_read_back_overtaken_by_a_newer_event_keeps_what_the_newer_one_records() -> None:
    """The read-back's answer (11) is older than the record a watch event brought meanwhile
    (12, web on a): the ledger must not book the older answer's placements (none) over it;
    a stays booked for web."""

    async def scenario() -> dict[str, int]:
        state, queue = ClusterState(), WorkQueue()
        api = OvertakenApi(state)
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, not landed, a held
        assert await step(operator, queue) == "ns/web"  # the read-back, overtaken
        assert state.records["ns/web"].resource_version == "12"
        return free_cpu(state)

    assert asyncio.run(scenario()) == {"a": 0}


def test_a_read_back_refused_by_the_api_server_is_retried_after_a_backoff() -> None:
    """Reading web back answers 500: as for a dropped connection, web stays held and unsure,
    and the read-back is tried again after the back-off (not dropped, not hot-looped)."""

    async def scenario() -> tuple[dict[str, int], bool, int, str, list[str]]:
        state, queue = ClusterState(), WorkQueue(base_delay=0.01)
        api = UnreadableApi(ApiError(500, "InternalError", "etcdserver: leader changed"))
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, did not land
        assert await step(operator, queue) == "ns/web"  # the read-back: refused
        held, unsure = free_cpu(state), "ns/web" in operator.writes.unsure
        backing_off = queue.backing_off
        again = await step(operator, queue)  # after the back-off: read back, then decided
        while len(queue):
            await step(operator, queue)
        return held, unsure, backing_off, again, api.writes

    held, unsure, backing_off, again, applied = asyncio.run(scenario())
    assert held == {"a": 0} and unsure and backing_off == 1 and again == "ns/web"
    assert applied == ["web: ['a']"]


def test_a_landed_write_that_gives_room_back_wakes_who_waits_for_it() -> None:
    """web shrinks from 1 cpu to 500m on a (1 cpu): once that write lands, the 500m it gave
    back is free, and db (500m, waiting for capacity) is queued again and placed on a, as
    kube-scheduler moves unschedulable Pods back on an assigned Pod's update."""

    async def scenario() -> tuple[bool, bool, list[str]]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=True)
        api.dropped = True  # every write answered
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a, 1 cpu
        api.objects["db"]["spec"]["resources"] = {"cpu": "500m"}
        state.upsert_workload(api.objects["db"])
        queue.add("ns/db")
        await step(operator, queue)  # db: no room, waits for capacity
        waiting = "ns/db" in state.keys_waiting_for_capacity()
        web = api.objects["web"]
        web["spec"]["resources"] = {"cpu": "500m"}
        web["metadata"]["resourceVersion"] = str(int(web["metadata"]["resourceVersion"]) + 1)
        state.upsert_workload(copy.deepcopy(web))
        queue.add("ns/web")
        assert await step(operator, queue) == "ns/web"  # resized in place: the write lands
        woken = queue.busy("ns/db")
        while len(queue):
            await step(operator, queue)
        return waiting, woken, api.writes

    waiting, woken, applied = asyncio.run(scenario())
    assert waiting and woken
    assert applied == ["web: ['a']", "db: []", "web: ['a']", "db: ['a']"]


def test_a_landed_write_that_gives_room_back_does_not_wake_its_own_workload() -> None:
    """web (2 x 1 cpu on a, 2 cpu) grows to 2 x 1.5 cpu: one replica fits, the other waits
    for capacity. That write gives room back (two replicas become one) and so wakes whoever
    waits for capacity, but not web itself, though it waits for capacity too: the room it
    gave back is the room its own decision could not use, so deciding it again for it would
    decide the same (one more scheduling attempt counted for nothing)."""

    async def scenario() -> tuple[Phase | None, set[str], bool, list[str]]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=True)
        api.dropped = True  # every write answered
        state.upsert_node(node_object("a", cpu="2"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        web = api.objects["web"]
        web["spec"].update(kind="Service", count=2, resources={"cpu": "1"})
        state.upsert_workload(copy.deepcopy(web))
        queue.add("ns/web")
        await step(operator, queue)  # web: both replicas on a
        web["spec"]["resources"] = {"cpu": "1500m"}
        web["metadata"]["resourceVersion"] = str(int(web["metadata"]["resourceVersion"]) + 1)
        state.upsert_workload(copy.deepcopy(web))
        queue.add("ns/web")
        assert await step(operator, queue) == "ns/web"  # one replica left: the write lands
        waiting = state.keys_waiting_for_capacity()
        return state.records["ns/web"].phase, waiting, queue.busy("ns/web"), api.writes

    phase, waiting, again, applied = asyncio.run(scenario())
    assert phase is Phase.PARTIALLY_SCHEDULED and waiting == {"ns/web"}
    assert not again
    assert applied == ["web: ['a', 'a']", "web: ['a']"]


def test_a_landed_write_records_its_event_about_the_version_it_wrote() -> None:
    """Each landed decision queues its Event about the object's version the write produced
    (10 -> 11), a warning only when the Workload is not placed; the record now holds that
    version as its own write, so the write's echo is not decided again, and a failure
    before it does not count towards the next back-off."""

    async def scenario() -> tuple[list[tuple[str, str | None, str, bool]], float]:
        state, queue, api = ClusterState(), WorkQueue(base_delay=0.01), DroppingApi(lands=True)
        api.dropped = True  # every write answered
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        for name in ("web", "db"):
            state.upsert_workload(job(name, "1", version=10, uid=f"u-{name}"))
            queue.add_rate_limited(f"ns/{name}")  # as after a failed attempt: backing off
            await asyncio.wait_for(step(operator, queue), 5)
        events = operator.events.queue
        seen = [events.get_nowait() for _ in range(events.qsize())]
        record = state.records["ns/web"]
        assert (record.resource_version, record.written_version) == ("11", "11")
        assert state.upsert_workload(api.objects["web"]) is None  # the echo: nothing to decide
        return [(e.name, e.version, e.reason, e.warning) for e in seen], queue.add_rate_limited(
            "ns/web"
        )

    events, next_delay = asyncio.run(scenario())
    assert [(name, version, warning) for name, version, _, warning in events] == [
        ("web", "11", False),
        ("db", "11", True),
    ]
    assert next_delay == 0.01  # forgotten on success: the back-off starts again


def not_found() -> float:
    labels = {"outcome": "not_found"}
    return REGISTRY.get_sample_value("orca_status_writes_total", labels) or 0.0


class DeletingApi(DroppingApi):
    """web is deleted on the API server while its next status write is in flight: the write
    answers 404."""

    async def write_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], version: str | None
    ) -> dict[str, Any]:
        if name == "web" and self.writes:
            raise ApiError(404, "NotFound", 'workloads "web" not found')
        return await super().write_workload_status(namespace, name, status, version)


def test_a_write_that_finds_the_workload_deleted_frees_its_room_for_who_waits() -> None:
    """web (on a, the only node) is rescheduled and its write answers 404: web is gone, its
    room is free at once (counted as not_found, not failed), and db, waiting for capacity,
    is queued again and placed on a."""

    async def scenario() -> tuple[dict[str, int], bool, bool, list[str]]:
        state, queue, api = ClusterState(), WorkQueue(), DeletingApi(lands=True)
        api.dropped = True  # answered
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a
        state.upsert_workload(job("db", "1", version=10, uid="u-db"))
        queue.add("ns/db")
        await step(operator, queue)  # db: no room, waits for capacity
        web = copy.deepcopy(api.objects["web"])
        web["metadata"]["resourceVersion"] = "99"
        web["spec"]["resources"] = {"cpu": "500m"}
        state.upsert_workload(web)
        queue.add("ns/web")
        gone = not_found()
        assert await step(operator, queue) == "ns/web"  # its write: 404
        gone = not_found() - gone
        freed = free_cpu(state)
        known, woken = "ns/web" in state.records, queue.busy("ns/db")
        while len(queue):
            await step(operator, queue)
        assert gone == 1
        return freed, known, woken, api.writes

    freed, known, woken, applied = asyncio.run(scenario())
    assert freed == {"a": 1000} and not known and woken
    assert applied == ["web: ['a']", "db: []", "db: ['a']"]


def test_a_landed_write_that_gives_nothing_back_wakes_nobody() -> None:
    """web grows from 500m to 1 cpu in place (a has 2): nothing is given back, so db (2 cpu,
    waiting for capacity) is not queued again for nothing."""

    async def scenario() -> tuple[bool, bool]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=True)
        api.dropped = True  # every write answered
        state.upsert_node(node_object("a", cpu="2"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        api.objects["web"]["spec"]["resources"] = {"cpu": "500m"}
        state.upsert_workload(copy.deepcopy(api.objects["web"]))
        queue.add("ns/web")
        await step(operator, queue)  # web on a, 500m
        api.objects["db"]["spec"]["resources"] = {"cpu": "2"}
        state.upsert_workload(copy.deepcopy(api.objects["db"]))
        queue.add("ns/db")
        await step(operator, queue)  # db: no room, waits for capacity
        waiting = "ns/db" in state.keys_waiting_for_capacity()
        web = api.objects["web"]
        web["spec"]["resources"] = {"cpu": "1"}
        web["metadata"]["resourceVersion"] = str(int(web["metadata"]["resourceVersion"]) + 1)
        state.upsert_workload(copy.deepcopy(web))
        queue.add("ns/web")
        assert await step(operator, queue) == "ns/web"  # grown in place: the write lands
        assert api.writes[-1] == "web: ['a']"
        return waiting, queue.busy("ns/db")

    waiting, woken = asyncio.run(scenario())
    assert waiting and not woken


def test_a_conflicting_write_is_counted_as_a_conflict_and_logged_as_routine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 409 (the object changed since it was read) is the API server's optimistic
    concurrency at work, not a fault: counted under ``conflict``, logged at INFO, retried."""

    async def scenario() -> tuple[float, int]:
        state, queue, api = ClusterState(), WorkQueue(), DroppingApi(lands=True)
        api.dropped = True  # answered
        state.upsert_node(node_object("a", cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        # older than the API server's 10: 409
        state.upsert_workload(job("web", "1", version=9, uid="u-web"))
        queue.add("ns/web")
        labels = {"outcome": "conflict"}
        before = REGISTRY.get_sample_value("orca_status_writes_total", labels) or 0.0
        await step(operator, queue)
        after = REGISTRY.get_sample_value("orca_status_writes_total", labels) or 0.0
        return after - before, queue.backing_off

    with caplog.at_level(logging.INFO, logger="orca"):
        conflicts, backing_off = asyncio.run(scenario())
    assert conflicts == 1 and backing_off == 1
    assert [
        (r.levelname, r.getMessage()) for r in caplog.records if "failed" in r.getMessage()
    ] == [
        (
            "INFO",
            "status write for ns/web failed (409 Conflict: the object has been modified);"
            " retrying in 0.05s",
        )
    ]


class OvertakingApi(DroppingApi):
    """web's write is refused (409): another replica's write moved web to b meanwhile (the
    split-brain chaos scenario), and its watch event arrived before the refusal."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(lands=True)
        self.state = state

    async def write_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], version: str | None
    ) -> dict[str, Any]:
        if name == "web" and self.writes:
            newer = copy.deepcopy(self.objects["web"])
            newer["metadata"]["resourceVersion"] = "50"
            newer["status"] = {
                "placements": [{"node": "b", "allocId": "ns/web-0", "score": 1}],
                "resources": {"cpu": "1"},
            }
            self.objects["web"] = newer
            self.state.upsert_workload(copy.deepcopy(newer))
            raise ApiError(409, "Conflict", "the object has been modified")
        return await super().write_workload_status(namespace, name, status, version)


def test_a_refused_write_books_what_the_workload_records_now_not_what_it_had() -> None:
    """web is on a; its next write (a move) is refused because another replica moved it to b
    meanwhile, and that event came while the write was in flight (not booked then). The
    rollback must book web where the object now has it (b), not restore a."""

    async def scenario() -> dict[str, int]:
        state, queue = ClusterState(), WorkQueue()
        api = OvertakingApi(state)
        api.dropped = True  # answered
        for name in ("a", "b"):
            state.upsert_node(node_object(name, cpu="1"))
        operator = Operator.wire(cast(KubeApi, api), state, queue)
        state.upsert_workload(job("web", "1", version=10, uid="u-web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a
        state.upsert_node(node_object("a", cpu="1", cordoned=True))
        queue.add("ns/web")
        await step(operator, queue)  # a move: refused, web is on b now
        return free_cpu(state)

    assert asyncio.run(scenario()) == {"a": 1000, "b": 0}


# -- a write that did not land (StatusWrites.abandon) ---------------------------------------------
# A status write that did not land restores the bookings it replaced, unless the Workload
# changed while it was in flight: then what the Workload records now is booked
# (``StatusWrites.abandon``).
#
# The ledger books no event that arrives during a write. Before, a refused or fenced write then
# restored the bookings from before it, over another replica's status seen meanwhile: the
# replica decided next from placements the object no longer had. The split-brain chaos scenario
# found it: the thawed old leader's fenced write of Job j4 left j4 unbooked while the object had
# it on split-1; elected again, that replica moved j4 to split-0 for no reason
# (``lost: split-.../j4: .../j4-0 was on split-1, now split-0``).


class RefusingApi:
    """Status writes wait for ``release``, then fail with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.release = asyncio.Event()
        self.error = error
        self.pending = 0

    async def write_workload_status(self, *_: Any) -> dict[str, Any]:
        self.pending += 1
        await self.release.wait()
        raise self.error

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(
    "error", [ApiError(409, "Conflict", "the object has been modified"), Fenced()]
)
@pytest.mark.parametrize("changed", [True, False])
def test_a_write_that_did_not_land_books_what_the_workload_records(
    error: Exception, changed: bool
) -> None:
    async def scenario() -> dict[str, int]:
        state, api = ClusterState(), RefusingApi(error)
        for name in ("a", "b"):
            state.upsert_node(node_object(name, cpu="1"))
        state.upsert_workload(job("web", "1", version=10, uid="u"))
        operator = Operator.wire(cast(KubeApi, api), state)
        writing = asyncio.create_task(operator.loop.process("ns/web"))
        await until(lambda: api.pending == 1, "decided on a; the write waits")
        if changed:  # meanwhile another replica's write of web, on b, is seen
            state.upsert_workload(job("web", "1", "b", version=12, uid="u", observed=1))
        api.release.set()
        assert await writing
        return free_cpu(state)

    expected = {"a": 1000, "b": 0} if changed else {"a": 1000, "b": 1000}
    assert asyncio.run(scenario()) == expected


@pytest.mark.parametrize(
    "error", [ApiError(500, "Internal Server Error", "etcd timed out"), Fenced()]
)
def test_room_a_forgotten_write_held_wakes_who_waits_for_it(error: Exception) -> None:
    """web's write holds node a while in flight; db, decided meanwhile, finds no room and
    waits for capacity. The write is refused: forgetting it frees a, and db is queued again,
    as kube-scheduler moves unschedulable Pods back when it forgets an assumed one
    (``handleBindingCycleError``, pkg/scheduler/schedule_one.go)."""

    async def scenario() -> tuple[bool, bool, bool]:
        state, api = ClusterState(), RefusingApi(error)
        state.upsert_node(node_object("a", cpu="1"))
        state.upsert_workload(job("web", "1", version=10, uid="u"))
        db = job("db", "1", version=10, uid="u-db")
        state.upsert_workload(db)
        operator = Operator.wire(cast(KubeApi, api), state)
        writing = asyncio.create_task(operator.loop.process("ns/web"))
        await until(lambda: api.pending == 1, "web decided on a; the write waits")
        deciding = asyncio.create_task(operator.loop.process("ns/db"))
        await until(lambda: api.pending == 2, "db decided unplaced: no room on a")
        waiting = "ns/db" in state.keys_waiting_for_capacity()
        queued_before = operator.queue.busy("ns/db")
        api.release.set()  # both refused: db's own retry is a back-off timer, not queued now
        await asyncio.gather(writing, deciding)
        return waiting, queued_before, operator.queue.busy("ns/db")

    waiting, queued_before, queued_after = asyncio.run(scenario())
    assert waiting and not queued_before and queued_after


# -- capacity held until the write lands (ledger.held_until_written) ------------------------------
# Capacity a decision gives up is not free until its status write lands
# (``ledger.held_until_written``, booked by the status-write transaction).
#
# Before, the ledger handed a scale-down's freed room to the next decision at once; when that
# next write landed and the first one did not (operator SIGKILLed, or a 409), both stayed in the
# statuses: a node over capacity that nothing repairs. The chaos suite found it (operator-kill).


class BlockedApi:
    """Status writes wait for ``release``, then fail with ``error`` or succeed."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.error: ApiError | None = None
        self.pending = 0

    async def write_workload_status(self, *_: Any) -> dict[str, Any]:
        self.pending += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return {"metadata": {"resourceVersion": "99"}}

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


def scaled_down(generation: int) -> dict[str, Any]:
    """Service ``web`` on node a (2 cpu, full) with 2 replicas, now asked for 1."""
    placements = [{"node": "a", "allocId": f"ns/web-{i}", "score": 0} for i in range(2)]
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": str(10 + generation),
            "generation": generation,
        },
        "spec": {"kind": "Service", "count": 1, "resources": {"cpu": "1"}},
        "status": {"observedGeneration": 1, "phase": "Scheduled", "placements": placements},
    }


def free_cpu_on_a(state: ClusterState) -> int:
    state.table()
    return int(state.ledger.free()[0][state.ledger.table.index["a"]])


async def scale_down_in_flight() -> tuple[ClusterState, BlockedApi, asyncio.Task[bool]]:
    """web (two replicas on node a) scaled down to one, its status write sent and held."""
    state, api = ClusterState(), BlockedApi()
    state.upsert_node(node_object("a", cpu="2"))
    state.upsert_workload(scaled_down(2))
    operator = Operator.wire(cast(KubeApi, api), state)
    writing = asyncio.create_task(operator.loop.process("ns/web"))
    await until(lambda: api.pending == 1, "the write in flight")
    return state, api, writing


def run_write(fail: bool) -> tuple[int, int]:
    """(free cpu on a while the write is in flight, after it settled)."""

    async def scenario() -> tuple[int, int]:
        state, api, writing = await scale_down_in_flight()
        during = free_cpu_on_a(state)
        api.error = ApiError(409, "Conflict", "modified") if fail else None
        api.release.set()
        assert await writing  # a write was sent
        return during, free_cpu_on_a(state)

    return asyncio.run(scenario())


def test_freed_capacity_is_held_until_the_write_lands() -> None:
    assert run_write(fail=False) == (0, 1000)


def test_a_failed_write_leaves_the_capacity_with_its_owner() -> None:
    assert run_write(fail=True) == (0, 0)


def test_a_write_that_lands_after_its_workload_was_deleted_books_nothing() -> None:
    """web scales down while its write is in flight, and is deleted meanwhile: the write
    lands, but the Workload is gone, so node a is all free (its capacity is not booked again
    for a Workload nobody will delete)."""

    async def scenario() -> int:
        state, api, writing = await scale_down_in_flight()
        state.delete_workload("ns/web")  # its DELETED event, seen meanwhile
        api.release.set()
        assert await writing
        return free_cpu_on_a(state)

    assert asyncio.run(scenario()) == 2000


def test_a_write_that_lands_after_its_workload_was_deleted_wakes_nobody_again() -> None:
    """web (1 x 1 cpu on a) scales up to two replicas; its write is in flight when web is
    deleted. The write lands, but what it decided gave nothing back (one replica became
    two), and the room web held went with the deletion, whose event woke who waits: db,
    waiting for capacity all along, is not queued again by the write."""

    async def scenario() -> tuple[set[str], int, int]:
        state, api = ClusterState(), BlockedApi()
        state.upsert_node(node_object("a", cpu="2"))
        web = scaled_down(2)
        web["spec"]["count"] = 2
        web["status"]["placements"] = web["status"]["placements"][:1]
        state.upsert_workload(web)
        state.upsert_workload(job("db", "1", version="5"))  # not decided: waits for room
        operator = Operator.wire(cast(KubeApi, api), state)
        writing = asyncio.create_task(operator.loop.process("ns/web"))
        await until(lambda: api.pending == 1, "the write in flight")
        state.delete_workload("ns/web")  # its DELETED event, seen meanwhile
        api.release.set()
        assert await writing
        return state.keys_waiting_for_capacity(), len(operator.queue), free_cpu_on_a(state)

    waiting, queued, free = asyncio.run(scenario())
    assert waiting == {"ns/db"}
    assert queued == 0
    assert free == 2000


def test_held_keeps_both_places_of_a_moved_replica_and_the_larger_size() -> None:
    before = (Booking("a", "ns/w-0", 1000, 10), Booking("a", "ns/w-1", 500, 10))
    after = (Booking("b", "ns/w-0", 1000, 10), Booking("a", "ns/w-1", 250, 10))
    held = sorted(held_until_written(before, after), key=lambda b: (b.node, b.alloc_id))
    assert [(b.node, b.alloc_id, b.cpu) for b in held] == [
        ("a", "ns/w-0", 1000),
        ("a", "ns/w-1", 500),
        ("b", "ns/w-0", 1000),
    ]


def test_a_change_seen_before_the_writes_answer_is_not_rolled_back_by_it() -> None:
    """The write lands (10 -> 11) and another client changes the Workload right after
    (11 -> 12); the watch delivers that change before the write's answer is handled. The
    record keeps the newer version and what it records: a later write is preconditioned on
    12, not on the 11 it would meet a conflict with."""

    class LateAnswer(DroppingApi):
        async def write_workload_status(
            self, namespace: str, name: str, status: dict[str, Any], version: str | None
        ) -> dict[str, Any]:
            answer = await super().write_workload_status(namespace, name, status, version)
            obj = self.objects[name]
            obj["metadata"]["resourceVersion"] = "12"
            obj["metadata"]["labels"] = {"team": "blue"}  # another client's edit
            state.upsert_workload(copy.deepcopy(obj))  # its event, delivered first
            return answer

    state, queue = ClusterState(), WorkQueue()
    api = LateAnswer(lands=True)
    api.dropped = True  # every write answered
    state.upsert_node(node_object("a", cpu="1"))
    operator = Operator.wire(cast(KubeApi, api), state, queue)
    state.upsert_workload(job("web", "1", version=10, uid="u-web"))

    async def scenario() -> None:
        queue.add("ns/web")
        await step(operator, queue)

    asyncio.run(scenario())
    record = state.records["ns/web"]
    assert record.resource_version == "12"
    assert record.status is not None and [p.node for p in record.status.placements] == ["a"]
    assert api.writes == ["web: ['a']"]


def test_a_victims_room_is_the_preemptors_at_once_not_counted_twice_while_written() -> None:
    """``low`` (4 cpu, all of a) is preempted for ``high`` (2 cpu). While low's write is in
    flight the room it gives up is the preemptor's alone: a holds high's 2 cpu, not low's 4
    as well (a victim's room is not held until its write lands, as a move's is). Counted
    twice, a Workload decided meanwhile would find no room and wait, and nothing would wake
    it: a victim's landing wakes nobody, its room being the preemptor's."""
    state, api, operator = preemption({})
    gate = asyncio.Event()
    written = api.write_workload_status

    async def held(
        _namespace: str, name: str, status: dict[str, Any], _version: str | None
    ) -> dict[str, Any]:
        await gate.wait()
        return await written(_namespace, name, status, _version)

    api.write_workload_status = held  # type: ignore[method-assign]

    async def scenario() -> dict[str, int]:
        operator.queue.add("ns/high")
        task = asyncio.create_task(operator.loop.process_next())
        await until(lambda: state.ledger.assumed("ns/low"), "low's write in flight")
        during = free_cpu(state)
        gate.set()
        await task
        return during

    during = asyncio.run(scenario())
    assert during == {"a": 2000}
    assert api.written == ["low", "high"]
    assert free_cpu(state) == {"a": 2000}
