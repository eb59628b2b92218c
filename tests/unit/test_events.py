"""The Event poster: Events are paced while status writes are in flight, then go out several
at a time (one at a time, a 10,000-Workload backlog's Events took half a minute after its last
placement and cost the API server more per Event)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY

from controller.operator.app import Operator
from controller.operator.events import EVENT_POSTERS, EventRecorder, PendingEvent, SpamFilter
from controller.operator.kube import ApiError, Fenced, TransportError
from controller.operator.state import ClusterState, WorkloadRecord
from controller.operator.workqueue import WorkQueue
from tests.support.factories import node_object, stored_workload
from tests.support.fakeapi import until


class GatedApi:
    """``create_event`` answers once ``gate`` is set; counts how many are in flight at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.posted: list[str] = []

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await self.gate.wait()
        self.in_flight -= 1
        self.posted.append(event["involvedObject"]["name"])
        return {}


def queued(recorder: EventRecorder, count: int) -> list[str]:
    names = [f"w{i}" for i in range(count)]
    for name in names:
        event = PendingEvent(name, "ns", None, "1", "Scheduled", "placed", False, "", "me")
        recorder.queue.put_nowait(event)
    return names


async def settle() -> None:
    for _ in range(50):  # enough loop turns for every poster to take what it can
        await asyncio.sleep(0)


def test_when_idle_events_go_out_several_at_a_time_and_all_are_posted() -> None:
    async def scenario() -> None:
        api = GatedApi()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        names = queued(recorder, 3 * EVENT_POSTERS + 1)
        poster = asyncio.create_task(recorder.post())
        await settle()
        assert api.in_flight == EVENT_POSTERS  # not one by one, and no more than the limit
        api.gate.set()
        while len(api.posted) < len(names):
            await asyncio.sleep(0)
        poster.cancel()
        assert sorted(api.posted) == sorted(names)
        assert api.most_in_flight == EVENT_POSTERS

    asyncio.run(scenario())


def test_events_wait_while_workloads_wait_for_a_decision() -> None:
    async def scenario() -> None:
        api = GatedApi()
        api.gate.set()
        queue = WorkQueue()
        queue.add("ns/undecided")
        recorder = EventRecorder(api, busy=lambda: len(queue) > 0)  # type: ignore[arg-type]
        names = queued(recorder, 5)
        poster = asyncio.create_task(recorder.post(busy_interval=3600))
        await settle()
        assert api.posted == []  # status writes get the API server first
        assert recorder.queue.qsize() == len(names)  # held in the queue, none taken
        poster.cancel()

    asyncio.run(scenario())


def test_a_stop_posts_the_queued_events_several_at_a_time() -> None:
    async def scenario() -> None:
        api = GatedApi()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        names = queued(recorder, 3 * EVENT_POSTERS + 1)
        flush = asyncio.create_task(recorder.flush())
        await settle()
        assert api.in_flight == EVENT_POSTERS
        api.gate.set()
        assert await flush == 0
        assert sorted(api.posted) == sorted(names)

    asyncio.run(scenario())


def test_a_stop_does_not_wait_on_events_past_its_bound(caplog: pytest.LogCaptureFixture) -> None:
    """The Lease is handed back only after the flush: an API server that does not answer must
    not hold it (the gate is never opened here)."""

    async def scenario() -> int:
        api = GatedApi()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        queued(recorder, 3 * EVENT_POSTERS + 1)
        return await recorder.flush(within=0.05)

    assert asyncio.run(scenario()) == 3 * EVENT_POSTERS + 1  # 8 cut short, 17 never taken
    assert "25 queued Events not posted within 0.05s" in caplog.text


class FencedApi:
    def __init__(self) -> None:
        self.attempts = 0

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        self.attempts += 1
        raise Fenced()


def test_a_stop_gives_up_on_events_once_the_lease_is_lost() -> None:
    async def scenario() -> tuple[int, int]:
        api = FencedApi()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        queued(recorder, 100)
        left = await recorder.flush(within=60)
        return left, api.attempts

    left, attempts = asyncio.run(scenario())
    assert attempts == EVENT_POSTERS  # one refusal per poster, not one per queued Event
    assert left == 100 - EVENT_POSTERS


class RefusingApi:
    """Refuses the Events on ``refused`` (403, as for a terminating namespace), takes the rest."""

    def __init__(self, refused: set[str]) -> None:
        self.refused = refused
        self.posted: list[str] = []

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        name = event["involvedObject"]["name"]
        if name in self.refused:
            raise ApiError(403, "Forbidden", "namespace is being terminated")
        self.posted.append(name)
        return {}


def test_a_stop_goes_on_past_an_event_the_server_refuses() -> None:
    async def scenario() -> tuple[int, list[str], list[str]]:
        names = [f"w{i}" for i in range(3 * EVENT_POSTERS)]
        api = RefusingApi(set(names[: 2 * EVENT_POSTERS : 2]))
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        queued(recorder, len(names))
        left = await recorder.flush(within=60)
        return left, api.posted, [n for n in names if n not in api.refused]

    left, posted, accepted = asyncio.run(scenario())
    assert sorted(posted) == sorted(accepted) and left == 0


class FlakyApi:
    """Fails each Event's first post: no answer (``TransportError``) for some, a bug (an
    unexpected exception) for others; takes every Event the second time."""

    def __init__(self) -> None:
        self.tried: set[str] = set()
        self.posted: list[str] = []

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        name = event["involvedObject"]["name"]
        if name not in self.tried:
            self.tried.add(name)
            if int(name[1:]) % 2:
                raise RuntimeError("a bug in building or reading the Event")
            raise TransportError("POST events", aiohttp.ServerDisconnectedError())
        self.posted.append(name)
        return {}


def test_the_posters_outlive_dropped_connections_and_unexpected_errors() -> None:
    """Events are informational: neither a dropped connection nor a bug in one Event stops
    the posters (the task's death would stop the whole operator: ``app.operate``)."""

    async def scenario() -> tuple[bool, list[str]]:
        api = FlakyApi()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        names = queued(recorder, 2 * EVENT_POSTERS)
        poster = asyncio.create_task(recorder.post())
        await until(lambda: len(api.tried) == len(names), "every Event tried")
        second = queued(recorder, 2 * EVENT_POSTERS)  # the same names, posted this time
        await until(lambda: len(api.posted) == len(second), "the second round posted")
        alive = not poster.done()
        poster.cancel()
        await asyncio.gather(poster, return_exceptions=True)
        return alive, api.posted

    alive, posted = asyncio.run(scenario())
    assert alive
    assert sorted(posted) == sorted(f"w{i}" for i in range(2 * EVENT_POSTERS))


# -- the spam filter (client-go's EventSourceObjectSpamFilter: 25, then 1 per 300 s) ----------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_object_gets_25_events_then_one_per_five_minutes() -> None:
    clock = FakeClock()
    spam = SpamFilter(clock=clock)
    web = ("ns/web", "uid-1", False)
    assert [spam.allows(web) for _ in range(26)] == [True] * 25 + [False]
    clock.now += 299
    assert not spam.allows(web)  # not a whole token back yet
    clock.now += 1
    assert spam.allows(web) and not spam.allows(web)  # one per 300 s
    clock.now += 300 * 100
    assert [spam.allows(web) for _ in range(26)] == [True] * 25 + [False]  # refilled to 25


def test_each_object_and_type_has_its_own_share_and_the_memory_is_bounded() -> None:
    clock = FakeClock()
    spam = SpamFilter(burst=1, size=2, clock=clock)
    assert spam.allows(("ns/a", "1", False)) and not spam.allows(("ns/a", "1", False))
    assert spam.allows(("ns/a", "1", True))  # a Warning is another key, as client-go's
    assert spam.allows(("ns/a", "2", False))  # a new object of the same name: its own share
    assert spam.allows(("ns/b", "3", False))  # the LRU (size 2) forgot ns/a's first key
    assert spam.allows(("ns/a", "1", False))  # so it starts again from the burst


def test_a_workload_past_its_share_has_its_events_dropped_and_counted() -> None:
    recorder = EventRecorder(GatedApi())  # type: ignore[arg-type]
    recorder.spam = SpamFilter(clock=FakeClock())
    record = WorkloadRecord("ns/web", "ns", "web", "uid", "1", 1, None)
    before = REGISTRY.get_sample_value("orca_events_dropped_total") or 0.0
    for i in range(30):
        recorder.record(record, "MovePending", f"flap {i}", "1", warning=True)
    dropped = (REGISTRY.get_sample_value("orca_events_dropped_total") or 0.0) - before
    assert recorder.queue.qsize() == 25 and dropped == 5


def test_a_warning_has_its_own_share_beside_the_normal_events() -> None:
    """client-go's spam key holds the Event's type: a Workload that used up its share of
    ``Scheduled`` Events still gets its ``FailedScheduling`` Warning, and each object its
    own share (a new object of the same name, by its uid)."""
    recorder = EventRecorder(GatedApi())  # type: ignore[arg-type]
    recorder.spam = SpamFilter(clock=FakeClock())
    web = WorkloadRecord("ns/web", "ns", "web", "uid-1", "1", 1, None)
    for i in range(30):
        recorder.record(web, "Scheduled", f"placed {i}", "1")
    recorder.record(web, "FailedScheduling", "no node", "2", warning=True)
    again = WorkloadRecord("ns/web", "ns", "web", "uid-2", "1", 1, None)  # deleted, recreated
    recorder.record(again, "Scheduled", "placed", "1")
    other = WorkloadRecord("ns/db", "ns", "db", "uid-3", "1", 1, None)
    recorder.record(other, "Scheduled", "placed", "1")
    events = [recorder.queue.get_nowait() for _ in range(recorder.queue.qsize())]
    assert [(e.name, e.uid, e.reason) for e in events[25:]] == [
        ("web", "uid-1", "FailedScheduling"),
        ("web", "uid-2", "Scheduled"),
        ("db", "uid-3", "Scheduled"),
    ]
    assert events[25].warning and events[25].body()["type"] == "Warning"
    assert events[0].body()["type"] == "Normal"


class HeldWrites(GatedApi):
    """Status writes answered once ``writes`` is set (the echo of what was sent); Events as
    ``GatedApi`` (its gate open)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate.set()
        self.writes = asyncio.Event()

    async def write_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], version: str | None
    ) -> dict[str, Any]:
        await self.writes.wait()
        return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "99"}}


def test_the_operators_events_hold_back_while_a_status_write_is_in_flight_not_for_a_queue() -> None:
    """Wired as the operator runs: Workloads queued again and decided unchanged (kwok's Nodes
    flapping under a backlog requeue those placed on them) write nothing, so the Events go
    out; a status write in flight holds them back until it is answered."""

    async def scenario() -> tuple[bool, bool, bool]:
        state, queue, api = ClusterState(), WorkQueue(), HeldWrites()
        state.upsert_node(node_object("a"))
        operator = Operator.wire(api, state, queue)  # type: ignore[arg-type]
        busy = operator.events.busy
        queue.add_all(["ns/placed-1", "ns/placed-2"])  # queued, nothing to write
        queue_only = busy()
        state.upsert_workload(stored_workload("w", "1", {"kind": "Job"}))
        writing = asyncio.create_task(operator.loop.process("ns/w"))
        await until(lambda: operator.writes.in_flight == 1, "the status write sent")
        during = busy()
        api.writes.set()
        await writing
        return queue_only, during, busy()

    queue_only, during, after = asyncio.run(scenario())
    assert (queue_only, during, after) == (False, True, False)


def test_an_event_is_posted_as_client_gos_recorder_writes_one() -> None:
    """core/v1 Event fields as kubectl describe shows them: the Workload it is about (at the
    version decided), Normal or Warning, when it happened, and who reports it."""
    api: Any = GatedApi()
    recorder = EventRecorder(api, now=lambda: "2026-12-01T10:00:00Z", identity="orca-a")
    record = WorkloadRecord("shop/web", "shop", "web", "uid-1", "7", 1, None)
    recorder.record(record, "FailedScheduling", "0/3 nodes are available", "7", warning=True)
    recorder.record(record, "Scheduled", "placed", "8")
    warning, normal = (recorder.queue.get_nowait() for _ in range(2))
    assert warning.body() == {
        "metadata": {"generateName": "web.", "namespace": "shop"},
        "involvedObject": {
            "apiVersion": "orca.cloudinit.dev/v1alpha1",
            "kind": "Workload",
            "name": "web",
            "namespace": "shop",
            "uid": "uid-1",
            "resourceVersion": "7",
        },
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available",
        "firstTimestamp": "2026-12-01T10:00:00Z",
        "lastTimestamp": "2026-12-01T10:00:00Z",
        "count": 1,
        "source": {"component": "orca-controller"},
        "reportingComponent": "orca.cloudinit.dev/orca-controller",
        "reportingInstance": "orca-a",
    }
    assert normal.body()["type"] == "Normal"
    assert normal.body()["involvedObject"]["resourceVersion"] == "8"


def test_an_event_not_posted_is_one_line_and_a_bug_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        api = FlakyApi()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        for name in ("w1", "w0"):  # w1: a bug (the flush goes on); w0: no answer (it stops)
            event = PendingEvent(name, "ns", None, "1", "Scheduled", "placed", False, "", "me")
            recorder.queue.put_nowait(event)
        assert await recorder.flush(within=5, posters=1) == 0

    with caplog.at_level(logging.INFO, logger="orca.events"):
        asyncio.run(scenario())
    lines = [
        (r.levelno, r.getMessage(), r.exc_info is not None)
        for r in caplog.records
        if r.name == "orca.events"
    ]
    assert lines == [
        (logging.ERROR, "posting event Scheduled on w1 failed", True),
        (
            logging.INFO,
            "could not post event Scheduled: POST events: ServerDisconnectedError: "
            "Server disconnected",
            False,
        ),
    ]


def test_a_warning_of_each_object_is_remembered_up_to_the_bound() -> None:
    spam = SpamFilter(burst=1, size=2, clock=FakeClock())
    a, b = ("ns/a", "1", False), ("ns/b", "2", False)
    assert [spam.allows(a), spam.allows(b)] == [True, True]
    assert [spam.allows(a), spam.allows(b)] == [False, False]  # both remembered (size 2)


def test_while_writes_are_in_flight_the_posters_post_20_a_second_in_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each of the ``EVENT_POSTERS`` posters waits ``0.05 x EVENT_POSTERS`` s before it takes
    an Event while a status write is in flight: 20 Events a second in all."""
    paused: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        if seconds:
            paused.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("controller.operator.events.asyncio.sleep", sleep)

    async def scenario() -> None:
        api = GatedApi()
        api.gate.set()
        recorder = EventRecorder(api, busy=lambda: True)  # type: ignore[arg-type]
        queued(recorder, EVENT_POSTERS)
        poster = asyncio.create_task(recorder.post())
        while len(api.posted) < EVENT_POSTERS:  # no until(): it sleeps too
            await real_sleep(0)
        poster.cancel()
        await asyncio.gather(poster, return_exceptions=True)

    asyncio.run(scenario())
    assert paused and set(paused) == {0.05 * EVENT_POSTERS}


def test_an_event_is_posted_into_its_workloads_namespace() -> None:
    class Where(GatedApi):
        def __init__(self) -> None:
            super().__init__()
            self.gate.set()
            self.namespaces: list[str] = []

        async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
            self.namespaces.append(namespace)
            return await super().create_event(namespace, event)

    async def scenario() -> list[str]:
        api = Where()
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        event = PendingEvent("web", "shop", None, "1", "Scheduled", "placed", False, "", "me")
        recorder.queue.put_nowait(event)
        await recorder.flush(within=5)
        return api.namespaces

    assert asyncio.run(scenario()) == ["shop"]


def test_a_stop_leaves_no_poster_running_and_says_what_it_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> set[asyncio.Task[Any]]:
        recorder = EventRecorder(GatedApi())  # type: ignore[arg-type]
        queued(recorder, 3)
        await recorder.flush(within=0.05, posters=2)
        return asyncio.all_tasks() - {asyncio.current_task()}

    with caplog.at_level(logging.WARNING, logger="orca.events"):
        assert asyncio.run(scenario()) == set()
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.events"]
    assert lines == ["stopping: 3 queued Events not posted within 0.05s"]
