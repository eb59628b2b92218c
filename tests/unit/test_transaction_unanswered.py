"""A status write that got no answer may have landed: both outcomes stay booked until the
object is read again (``StatusWrites.reread``), and the next decision starts from what the
object records.

Before, the write was forgotten like a refused one: its bookings freed while the object
recorded them (another Workload was placed there: a node over capacity), and the next decision
started from the bookings before it, dropping the replicas the landed write had added. The
chaos suite's flaky network found both (a proxy cutting connections after forwarding a
request): ``over-capacity: flaky-0004: cpu 4350/4000m``, the 350m being two DaemonSets'
replicas the ledger had forgotten, and ``lost: .../w00008-5 was on flaky-0045, now nowhere``."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any, cast

import aiohttp
import pytest
from prometheus_client import REGISTRY

from controller.operator.app import Operator
from controller.operator.handlers import WorkloadEvents
from controller.operator.kube import ApiError, KubeApi, TransportError
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from tests.factories import free_cpu, node_object


def job(name: str, version: int = 10) -> dict[str, Any]:
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "resourceVersion": str(version),
            "generation": 1,
        },
        "spec": {"kind": "Job", "resources": {"cpu": "1"}},
    }


class DroppingApi:
    """An API server holding the objects; the first status write of ``web`` gets no answer,
    after being applied (``lands``) or not."""

    def __init__(self, lands: bool) -> None:
        self.objects = {name: job(name) for name in ("web", "db")}
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
        state.upsert_workload(job("web"))
        queue.add("ns/web")
        await step(operator, queue)  # web decided on a; the write gets no answer
        during = free_cpu(state)
        state.upsert_workload(job("db"))
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
        state.upsert_workload(job("web"))
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
        state.upsert_workload(job("web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, not landed, a held
        state.upsert_workload(job("db"))
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
        events.added(job("web"))
        await step(operator, queue)  # web on a: no answer, not landed, a held
        events.added(job("db"))
        await step(operator, queue)  # db: no room, waits for capacity
        waiting = "ns/db" in state.keys_waiting_for_capacity()
        labelled = job("web", version=11)
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
        state.upsert_workload(job("web"))
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
        state.upsert_workload(job("web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a: no answer, not landed, a held
        state.upsert_workload(job("db"))
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
        state.upsert_workload(job("web"))
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
        state.upsert_workload(job("web"))
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
        state.upsert_workload(job("web"))
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
            state.upsert_workload(job(name))
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
        state.upsert_workload(job("web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a
        state.upsert_workload(job("db"))
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
        state.upsert_workload(job("web", version=9))  # older than the API server's 10: 409
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
        state.upsert_workload(job("web"))
        queue.add("ns/web")
        await step(operator, queue)  # web on a
        state.upsert_node(node_object("a", cpu="1", cordoned=True))
        queue.add("ns/web")
        await step(operator, queue)  # a move: refused, web is on b now
        return free_cpu(state)

    assert asyncio.run(scenario()) == {"a": 1000, "b": 0}
