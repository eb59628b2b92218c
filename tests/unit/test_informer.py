"""The informers (``controller/operator/kube/informer.py``) for Nodes, Workloads and
PriorityClasses, with the operator's handlers (``controller/operator/handlers.py``) and the
start-up gate, against an in-process API server (``fakeapi``) over loopback HTTP through the
real ``KubeApi``.

Written against behaviour: objects and faults go in at the server, the operator's state and
what its scheduling queue is handed come out. The informer's clock and sleep are fake, so a
back-off of 30 s costs nothing and its steps can be read. (tests/integration/test_informer.py
runs the same client against the real kube-apiserver.)
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller.operator.app import NO_CRD
from controller.operator.handlers import (
    NodeEvents,
    PriorityClassEvents,
    StartupGate,
    WorkloadEvents,
)
from controller.operator.kube.informer import Handler, Informer
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from controller.scheduler.nodes import NODES_PATH
from controller.scheduler.priority import LIST_PATH as PRIORITY_CLASSES
from tests.support.factories import node_object, stored_workload
from tests.support.fakeapi import (
    FakeApiServer,
    FakeClock,
    Fault,
    let_end,
    never_ends,
    run,
    until,
)

WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1/workloads"
PATHS = {"workloads": WORKLOADS, "nodes": NODES_PATH, "priorityclasses": PRIORITY_CLASSES}


OUTCOMES = ("failed", "listed")


def relists(resource: str, outcome: str) -> float:
    labels = {"resource": resource, "outcome": outcome}
    return REGISTRY.get_sample_value("orca_relists_total", labels) or 0.0


def restarts(resource: str, reason: str) -> float:
    labels = {"resource": resource, "reason": reason}
    return REGISTRY.get_sample_value("orca_watch_restarts_total", labels) or 0.0


class Watching:
    """One operator's view: an informer per kind given (the first one watched by the test),
    its handler, and the start-up gate; fake clocks and sleeps."""

    def __init__(self, server: FakeApiServer, *kinds: str, resync: float | None = None) -> None:
        kinds = kinds or ("workloads",)
        self.resync = resync  # given to each informer as ``orca operate`` gives it (app.py)
        self.server = server
        self.api = server.client()
        self.state, self.queue = ClusterState(), WorkQueue()
        self.priorities = PriorityIndex()
        self.gate = StartupGate(self.state, self.queue)
        self.clock = FakeClock()
        self.delays: list[float] = []
        self.informers = [self._informer(kind) for kind in kinds]
        self.informer = self.informers[0]
        self.path = self.informer.path
        self.tasks: list[asyncio.Task[None]] = []

    def _informer(self, kind: str) -> Informer:
        handler: Handler
        if kind == "workloads":
            handler = WorkloadEvents(self.state, self.queue, self.gate)
        elif kind == "nodes":
            handler = NodeEvents(self.state, self.queue, self.gate)
        else:
            handler = PriorityClassEvents(self.state, self.queue, self.gate, self.priorities)
        missing = NO_CRD if kind == "workloads" else None
        informer = Informer(
            self.api, PATHS[kind], kind, handler, timeout=300, resync=self.resync, missing=missing
        )
        informer.clock = self.clock
        informer.sleep = self._sleep
        return informer

    async def _sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.clock.advance(delay)
        await asyncio.sleep(0.002)  # let the loop run; the back-off itself is the record

    async def listed(self) -> Watching:
        """Until every informer has listed once and the gate opened (the operator's start)."""
        self.tasks = [
            never_ends(asyncio.create_task(i.run(), name=f"the {i.resource} informer"))
            for i in self.informers
        ]
        opening = asyncio.create_task(self.gate.open(self.informers))
        try:
            await until(opening.done, "every informer listed once")
        finally:
            opening.cancel()
        await opening
        return self

    async def start(self) -> Watching:
        await self.listed()
        await self.watching()
        return self

    async def watching(self, count: int = 1) -> None:
        """Until the informer holds a live watch (the ``count``-th watch request answered)."""
        await until(
            lambda: self.server.live_watches >= 1 and len(self.watches()) >= count,
            f"watch #{count} open",
        )

    def watches(self) -> list[str | None]:
        """The resourceVersion each watch request started from, in order."""
        return [s.query.get("resourceVersion") for s in self.server.seen("GET", self.path, True)]

    def lists(self) -> int:
        return len(self.server.seen("GET", self.path, False))

    @property
    def keys(self) -> set[str]:
        return set(self.state.records)

    @property
    def nodes(self) -> set[str]:
        return set(self.state.nodes)

    @property
    def classes(self) -> set[str]:
        return set(self.priorities.classes.by_name)

    async def handed_out(self) -> set[str]:
        """What the scheduling queue holds now, taken as the loop would take it."""
        queue, keys = self.queue, set()
        while len(queue):
            key = await queue.get()
            queue.done(key)
            keys.add(key)
        return keys

    async def stop(self) -> None:
        for task in self.tasks:
            assert not task.done(), task  # an informer never ends by itself
            let_end(task)
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.api.close()


def workload(name: str) -> dict[str, Any]:
    return stored_workload(name)


def priority_class(name: str, value: int = 1000) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}  # fmt: skip


def test_events_go_into_the_state_and_the_queue_from_the_lists_version_on() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        listed_at = str(server.revision)
        w = await Watching(server).start()
        assert w.watches() == [listed_at]  # the watch is the LIST's other half
        assert await w.handed_out() == {"ns/a"}  # everything listed is decided once
        server.put("workloads", workload("b"))
        await until(lambda: "ns/b" in w.keys, "b added")
        assert await w.handed_out() == {"ns/b"}
        server.delete("workloads", "a", "ns")
        await until(lambda: "ns/a" not in w.keys, "a deleted")
        assert w.lists() == 1  # no LIST but the first
        await w.stop()

    run(scenario)


@pytest.mark.parametrize("kind", ["workloads", "nodes", "priorityclasses"])
def test_an_expired_watch_lists_again_and_what_was_deleted_meanwhile_is_gone(kind: str) -> None:
    """The watch is down while one object is deleted and one created, and the server forgets
    that history (a restart, a compaction): the watch from the old version gets 410, the
    informer LISTs again (its first LIST attempt dropped, for good measure), the deleted
    object leaves the state, and the watch goes on from the new LIST's version. The same for
    each kind: a PriorityClass deleted while nobody watched is gone too (kopf's watch, which
    followed them before, replays what a relist finds but never what went)."""

    async def scenario(server: FakeApiServer) -> None:
        def obj(name: str) -> dict[str, Any]:
            if kind == "priorityclasses":
                return priority_class(name)
            return workload(name) if kind == "workloads" else node_object(name)

        def key(name: str) -> str:
            return f"ns/{name}" if kind == "workloads" else name

        server.put(kind, obj("a"))
        server.put(kind, obj("b"))
        w = await Watching(server, kind).start()

        def seen() -> set[str]:
            return {"workloads": w.keys, "nodes": w.nodes, "priorityclasses": w.classes}[kind]

        assert seen() == {key("a"), key("b")}
        old_version = w.watches()[-1]
        await w.handed_out()
        expired = restarts(kind, "expired")
        reconnect = server.add(Fault("GET", w.path, "hold", watch=True))
        server.cut_watches()
        await until(lambda: reconnect.arrived == 1, "the informer watching again")
        server.delete(kind, "a", "ns" if kind == "workloads" else "")
        server.put(kind, obj("c"))
        server.compact()
        server.add(Fault("GET", w.path, "cut", watch=False))  # the first relist: no answer
        reconnect.gate.set()
        await until(lambda: seen() == {key("b"), key("c")}, "the relist merged")
        await w.watching(count=3)
        versions = w.watches()
        assert versions[1] == old_version  # watched again from where it was: too old
        assert versions[2] == str(server.revision)  # then from the new LIST's version
        assert restarts(kind, "expired") == expired + 1
        assert w.lists() == 3  # the start-up LIST, the dropped one, the relist
        if kind == "workloads":
            assert await w.handed_out() == {"ns/b", "ns/c"}  # everything decided again
        server.put(kind, obj("d"))  # and the new watch delivers
        await until(lambda: key("d") in seen(), "d seen")
        await w.stop()

    run(scenario)


def test_a_watch_expired_after_a_break_lists_again_at_once() -> None:
    """An API server restart: the watch broke, the informer watches again from the last
    event's version, and the restarted server no longer has it (410 at once). The server
    answered, and that version came from before the break, not from a LIST just made: the
    informer lists again at once, without a back-off on top of the break's (client-go's
    reflector waits out its back-off here: in the chaos suite that kept the operator blind
    up to 30 s after the server was back)."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = await Watching(server).start()
        server.put("workloads", workload("b"))
        await until(lambda: w.keys == {"ns/a", "ns/b"}, "b seen on the watch")
        last_event = str(server.revision)
        reconnect = server.add(Fault("GET", w.path, "hold", watch=True))
        server.cut_watches()
        await until(lambda: reconnect.arrived == 1, "the informer watching again")
        server.put("workloads", workload("c"))  # while nobody watches
        server.compact()  # the restarted server's watch cache starts after it
        reconnect.gate.set()
        await w.watching(count=3)
        assert w.watches()[1] == last_event
        assert w.lists() == 2  # the start-up LIST and the relist
        assert w.delays == [0.5]  # the break's back-off, and none for the 410
        assert w.keys == {"ns/a", "ns/b", "ns/c"}
        await w.stop()

    run(scenario)


def test_a_back_off_after_no_answer_ends_when_the_server_answers_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server is away (the watch cut, then the next attempt cut as its bytes arrive: no
    answer), the back-off grows past its first step, and then the API server answers another
    request (as the Lease's renews probe it every 2 s): the informer watches again then, not
    at the end of its delay, once the first step (0.5 s) has passed since the wait began; and
    the back-off starts over. The sleep here never ends by itself past the first step."""

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()

        async def long_sleep(delay: float) -> None:
            w.delays.append(delay)
            if delay > 0.5:
                w.clock.advance(0.25)  # a quarter of a second into the wait ...
                await asyncio.sleep(3600)  # ... only an answer from the server ends it
            w.clock.advance(delay)
            await asyncio.sleep(0.002)

        w.informer.sleep = long_sleep
        away = server.add(Fault("GET", w.path, "cut", watch=True))
        server.cut_watches()
        await until(lambda: away.arrived == 1 and w.delays == [0.5, 1.0], "backing off")
        await asyncio.sleep(0.05)
        assert len(w.watches()) == 2  # still waiting: nothing answered since
        with caplog.at_level(logging.INFO, logger="orca.informer"):
            await w.api.request("GET", NODES_PATH)  # answered: the server is back
            await w.watching(count=3)
        assert "the API server answers again: the workloads informer goes on now" in [
            r.getMessage() for r in caplog.records
        ]
        assert w.delays == [0.5, 1.0, 0.25]  # woken, then the rest of the first step
        server.put("workloads", workload("c"))
        await until(lambda: "ns/c" in w.keys, "c seen on the new watch")
        server.cut_watches()  # broken again at once: the back-off started over when woken
        await w.watching(count=4)
        assert w.delays == [0.5, 1.0, 0.25, 0.5]
        await w.stop()

    run(scenario)


def test_an_answer_during_the_first_step_neither_cuts_it_short_nor_restarts_the_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The watch breaks (no answer) and the API server answers another request during the
    first step's 0.5 s: that wait could not be shorter anyway, so nothing is said about going
    on early, and when the next watch breaks too the back-off has grown (1 s), as after any
    two failures in a row."""

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()
        answered: list[bool] = []

        async def sleep(delay: float) -> None:
            w.delays.append(delay)
            if not answered:
                answered.append(True)
                await w.api.request("GET", NODES_PATH)  # a Lease renew, say, answered
                await asyncio.sleep(0.05)
            w.clock.advance(delay)
            await asyncio.sleep(0.002)

        w.informer.sleep = sleep
        server.add(Fault("GET", w.path, "cut", watch=True))  # the next watch breaks too
        with caplog.at_level(logging.INFO, logger="orca.informer"):
            server.cut_watches()
            await w.watching(count=3)
        assert w.delays == [0.5, 1.0]
        assert "answers again" not in caplog.text
        await w.stop()

    run(scenario)


def test_an_answer_as_a_delay_runs_out_does_not_restart_the_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The watch breaks three times in a row (no answer); the API server answers another
    request just as the second delay runs out: that wait was not cut short, so the back-off
    goes on growing (0.5, 1, 2 s), and nothing is said about going on early."""

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()

        async def sleep(delay: float) -> None:
            w.delays.append(delay)
            w.clock.advance(delay)
            await asyncio.sleep(0.002)
            if delay == 1.0:
                await w.api.request("GET", NODES_PATH)  # answered as the delay ends

        w.informer.sleep = sleep
        server.add(Fault("GET", w.path, "cut", times=2, watch=True))
        with caplog.at_level(logging.INFO, logger="orca.informer"):
            server.cut_watches()
            await w.watching(count=4)
        assert w.delays == [0.5, 1.0, 2.0]
        assert "answers again" not in caplog.text
        await w.stop()

    run(scenario)


def test_a_watch_resumed_in_time_replays_the_deletions_it_missed() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = await Watching(server).start()
        reconnect = server.add(Fault("GET", w.path, "hold", watch=True))
        server.cut_watches()
        await until(lambda: reconnect.arrived == 1, "the informer watching again")
        server.delete("workloads", "a", "ns")
        reconnect.gate.set()
        await until(lambda: "ns/a" not in w.keys, "a's deletion replayed")
        assert w.lists() == 1  # no LIST needed
        await w.stop()

    run(scenario)


def test_a_bookmark_moves_the_watch_on_so_a_quiet_watch_resumes_without_a_relist() -> None:
    """A watch of Nodes sees nothing for a while as the rest of the cluster changes (Leases
    renewed every few seconds); the server sends a BOOKMARK at its current revision, then
    forgets the history before it (the watch cache's window moved on) and ends the watch
    (its timeout). client-go's reflector takes a bookmark's resourceVersion as the one to
    resume from (tools/cache/reflector.go, ``watch.Bookmark``: ``setLastSyncResourceVersion``):
    so the informer watches on from there, with no 410 and no second LIST. Without it the
    next watch would start from the list's old version and pay an expiry and a relist."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", node_object("a"))
        w = await Watching(server, "nodes").start()
        listed_at = w.watches()[-1]
        for i in range(5):  # other kinds change: the revision moves on, the nodes do not
            server.put("leases", {"metadata": {"name": f"lease-{i}", "namespace": "ns"}})
        assert server.bookmark() == 1  # the watch asked for bookmarks, and got one
        await until(lambda: w.informer.version == str(server.revision), "the bookmark seen")
        server.compact()  # the history up to the bookmark is gone
        server.end_watches()
        await w.watching(2)
        assert w.watches() == [listed_at, str(server.revision)]
        assert w.lists() == 1  # no relist
        assert w.nodes == {"a"}
        server.put("nodes", node_object("b"))  # and the resumed watch delivers
        await until(lambda: w.nodes == {"a", "b"}, "b seen")
        await w.stop()

    run(scenario)


def test_a_connection_dropped_mid_watch_resumes_from_the_last_event_seen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The break is logged with the watch it broke and the wait, and the next watch starts
    from the last event seen."""
    caplog.set_level(logging.INFO, logger="orca.informer")

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()
        broken = restarts("workloads", "broken")
        for name in ("a", "b"):
            server.put("workloads", workload(name))
        await until(lambda: w.keys == {"ns/a", "ns/b"}, "a and b seen")
        last_seen = str(server.revision)
        assert server.cut_watches() == 1
        await w.watching(count=2)
        assert w.watches()[-1] == last_seen
        assert restarts("workloads", "broken") == broken + 1
        assert w.delays == [0.5]
        assert [
            m
            for m in (r.getMessage() for r in caplog.records)
            if m.startswith(f"the workloads watch broke (WATCH {w.path}")
            and m.endswith("); again in 0.5s")
        ]
        assert w.informer.version == last_seen
        server.put("workloads", workload("c"))
        await until(lambda: "ns/c" in w.keys, "c seen on the new watch")
        assert w.lists() == 1
        await w.stop()

    run(scenario)


def test_backoff_doubles_to_30s_on_failures_and_starts_again_after_a_watch_that_ran() -> None:
    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()
        refused = server.add(Fault("GET", w.path, "status", times=8, status=500, watch=True))
        server.cut_watches()  # ran for no time (the fake clock stood still): a failure
        await w.watching(count=10)
        assert refused.arrived == 8
        assert w.delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
        w.delays.clear()
        w.clock.advance(5)
        server.cut_watches()  # ran a while, then broke: the back-off starts from the start
        await w.watching(count=11)
        assert w.delays == [0.5]
        w.clock.advance(5)  # this watch runs a while ...
        server.end_watches()  # ... and the server ends it: watch on at once, no back-off
        await w.watching(count=12)
        assert w.delays == [0.5]
        server.add(Fault("GET", w.path, "cut", times=2, watch=True))
        server.cut_watches()  # at once this time, then twice more: growing again from 0.5
        await w.watching(count=15)
        assert w.delays == [0.5, 0.5, 1.0, 2.0]
        await w.stop()

    run(scenario)


def test_a_watch_that_ran_a_while_before_it_expired_starts_the_back_off_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The back-off grown by failures in a row (0.5 to 8 s) starts over after a watch that ran
    a while (5 s here) and then expired (410): the next break waits 0.5 s, not 16 s. The
    expiry is logged with the API server's own words."""
    caplog.set_level(logging.INFO, logger="orca.informer")

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()
        server.add(Fault("GET", w.path, "status", times=3, status=500, watch=True))
        server.cut_watches()  # then refused three times: 0.5, 1, 2, 4
        await w.watching(count=5)
        assert w.delays == [0.5, 1.0, 2.0, 4.0]

        def five_seconds_then_expired() -> None:
            w.clock.advance(5)  # the watch runs 5 s ...
            server.put("workloads", workload("x"))
            server.compact()  # ... and its version leaves the watch cache: 410

        server.cut_watches()  # 8 s, then the next watch runs 5 s and expires
        server.add(Fault("GET", w.path, "before", hook=five_seconds_then_expired, watch=True))
        await until(lambda: w.lists() == 2, "the LIST after the 410")
        await w.watching(count=7)
        server.cut_watches()  # broken at once: the back-off from its start
        await w.watching(count=8)
        assert w.delays == [0.5, 1.0, 2.0, 4.0, 8.0, 0.5]
        since, compacted = w.watches()[5], server.compacted
        expired = f"410 Expired: too old resource version: {since} ({compacted})"
        assert f"the workloads watch expired ({expired}): relisting" in [
            r.getMessage() for r in caplog.records
        ]
        await w.stop()

    run(scenario)


def test_a_watch_that_ran_one_second_is_not_a_while() -> None:
    """ "A while" is more than a second (``QUIET``): a watch that breaks, or expires from the
    LIST's own version, after exactly one second is a failure in a row, and the back-off goes
    on growing (0.5, 1, then 2 and 4 s)."""

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server).start()
        server.add(Fault("GET", w.path, "status", times=1, status=500, watch=True))
        server.cut_watches()  # 0.5, then refused: 1
        await w.watching(count=3)
        w.clock.advance(1.0)
        server.cut_watches()  # after exactly one second: 2

        def one_second_then_expired() -> None:
            w.clock.advance(1.0)
            server.put("workloads", workload("x"))
            server.compact()

        server.add(Fault("GET", w.path, "before", hook=one_second_then_expired, watch=True))
        await until(lambda: w.lists() == 2, "the LIST after the 410")
        await w.watching(count=5)
        assert w.delays == [0.5, 1.0, 2.0, 4.0]
        w.clock.advance(1.0)
        server.end_watches()  # ended by the server after exactly one second: at once, 8
        await w.watching(count=6)
        assert w.delays == [0.5, 1.0, 2.0, 4.0, 8.0]
        await w.stop()

    run(scenario)


def test_a_refused_watch_is_tried_again_without_listing_and_delivers_once_allowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused watch is a warning naming the refusal and the wait, tried again from the
    same version, with no LIST."""
    caplog.set_level(logging.INFO, logger="orca.informer")

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = await Watching(server).start()
        await w.handed_out()
        version = w.watches()[-1]
        refused = server.add(Fault("GET", w.path, "status", times=3, status=403, watch=True))
        refused.reason = "Forbidden"
        server.cut_watches()
        await w.watching(count=5)
        assert refused.arrived == 3
        assert w.delays == [0.5, 1.0, 2.0, 4.0]
        assert w.watches()[1:] == [version] * 4  # each attempt from the same version
        assert w.lists() == 1 and w.keys == {"ns/a"}  # a refusal is not an expiry
        refusal = "the workloads watch was refused (403 Forbidden: injected 403); again in 1.0s"
        assert (logging.WARNING, refusal) in [(r.levelno, r.getMessage()) for r in caplog.records]
        assert await w.handed_out() == set()  # nothing to decide again
        server.put("workloads", workload("b"))
        await until(lambda: "ns/b" in w.keys, "b seen once allowed")
        await w.stop()

    run(scenario)


def test_a_watch_that_ends_at_once_backs_off_instead_of_spinning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orca.informer")

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = Watching(server)
        w.informer.timeout = 0  # the server ends every watch as soon as it starts
        await w.listed()
        await until(lambda: len(w.watches()) >= 5, "five watches")
        assert w.delays[:4] == [0.5, 1.0, 2.0, 4.0]
        assert set(w.watches()) == {str(server.revision)}
        assert w.lists() == 1
        messages = [r.getMessage() for r in caplog.records]
        assert "the workloads watch ended at once; again in 1.0s" in messages
        await w.stop()

    run(scenario)


def test_the_startup_list_retries_until_the_api_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first LIST of Nodes gets no answer (connection closed), the Workload resource is
    not there (404: the CRD is not installed, said in so many words), then it is; the gate
    opens only once every informer has listed."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        server.put("nodes", node_object("n1"))
        # Twice: aiohttp sends a GET once more when its connection closed (fakeapi's notes).
        server.add(Fault("GET", NODES_PATH, "drop", times=2, watch=False))
        crd = server.add(Fault("GET", WORKLOADS, "status", times=2, status=404, watch=False))
        crd.reason = "NotFound"
        w = Watching(server, "workloads", "nodes")
        outcomes = [(kind, outcome) for kind in ("workloads", "nodes") for outcome in OUTCOMES]
        before = {key: relists(*key) for key in outcomes}
        with caplog.at_level(logging.WARNING, logger="orca.informer"):
            await w.listed()
        assert w.gate.ready.is_set()
        counted = {key: relists(*key) - before[key] for key in outcomes}
        assert counted == {  # each LIST counted by its kind and outcome
            ("workloads", "failed"): 2,
            ("workloads", "listed"): 1,
            ("nodes", "failed"): 1,
            ("nodes", "listed"): 1,
        }
        assert w.keys == {"ns/a"} and w.nodes == {"n1"}
        assert await w.handed_out() == {"ns/a"}
        messages = [r.getMessage() for r in caplog.records if r.name == "orca.informer"]
        assert len(messages) == 3, messages
        assert all(m.startswith("initial listing of ") for m in messages)
        (no_answer,) = [m for m in messages if "nodes" in m]
        assert "ServerDisconnectedError" in no_answer
        crd_missing = [m for m in messages if "workloads" in m]
        assert len(crd_missing) == 2
        for message in crd_missing:
            assert "the Workload CRD is not installed (kubectl apply -k crds/)" in message
        await w.stop()

    run(scenario)


def test_the_startup_list_gives_a_refusal_that_is_not_a_missing_crd_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(server: FakeApiServer) -> None:
        forbidden = server.add(Fault("GET", WORKLOADS, "status", status=403, watch=False))
        forbidden.reason = "Forbidden"
        w = Watching(server)
        with caplog.at_level(logging.WARNING, logger="orca.informer"):
            await w.listed()
        messages = [r.getMessage() for r in caplog.records if r.name == "orca.informer"]
        assert len(messages) == 1 and "403 Forbidden" in messages[0]
        assert "CRD" not in messages[0]
        await w.stop()

    run(scenario)


def test_an_informer_as_the_operator_builds_it_waits_on_the_event_loop_and_retries() -> None:
    """``orca operate`` leaves an informer its own clock and sleep (app.py): the monotonic
    clock and asyncio's sleep. A LIST refused once (500) is retried after the back-off's first
    step, 0.5 s of the loop's time, and the informer goes on: nothing blocks the loop, the
    handler gets the list, the caller no error."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        server.refuse("GET", WORKLOADS, 500, "InternalError")
        recording = Recording()
        informer = Informer(server.client(), WORKLOADS, "workloads", recording)
        loop = asyncio.get_running_loop()
        ticks: list[int] = []

        async def ticking() -> None:  # the loop stays free while the informer waits
            while True:
                ticks.append(1)
                await asyncio.sleep(0.05)

        ticker = asyncio.create_task(ticking())
        started = loop.time()
        await informer.list_until_done(initial=True)
        waited = loop.time() - started
        ticker.cancel()
        assert [s.outcome for s in server.seen("GET", WORKLOADS)] == ["500", "200"]
        assert recording.calls == [("added", "a"), ("listed", True)]
        assert waited >= 0.45 and len(ticks) >= 5  # asyncio may wake a timer a hair early
        await informer.api.close()

    run(scenario)


class Recording:
    """A handler that records what it is given, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def added(self, obj: dict[str, Any]) -> None:
        self.calls.append(("added", obj["metadata"]["name"]))

    def modified(self, obj: dict[str, Any]) -> None:
        self.calls.append(("modified", obj["metadata"]["name"]))

    def deleted(self, obj: dict[str, Any]) -> None:
        self.calls.append(("deleted", obj["metadata"]))

    def listed(self, initial: bool) -> None:
        self.calls.append(("listed", initial))


def test_a_relist_delivers_what_changed_and_what_went_and_nothing_else() -> None:
    """client-go's ``Replace``: against the informer's own store, an unchanged object is not
    delivered again, a changed one is, and one the list lacks is deleted with the metadata
    last seen (the object itself went while nobody watched)."""

    async def scenario(server: FakeApiServer) -> None:
        for name in ("same", "changed", "gone"):
            server.put("workloads", workload(name))
        recording = Recording()
        informer = Informer(server.client(), WORKLOADS, "workloads", recording)
        await informer.list_once(initial=True)
        gone = server.get("workloads", "gone", "ns")
        assert gone is not None
        gone_version = gone["metadata"]["resourceVersion"]
        server.put("workloads", {**workload("changed"), "spec": {"kind": "Job", "count": None}})
        server.delete("workloads", "gone", "ns")
        server.put("workloads", workload("new"))
        recording.calls.clear()
        await informer.list_once()
        assert sorted(recording.calls[:-1], key=str) == sorted(
            [
                ("added", "new"),
                ("modified", "changed"),
                ("deleted", {"name": "gone", "namespace": "ns", "resourceVersion": gone_version}),
            ],
            key=str,
        )
        assert recording.calls[-1] == ("listed", False)
        assert informer.version == str(server.revision)
        recording.calls.clear()
        await informer.list_once()  # nothing changed since: nothing delivered again
        assert recording.calls == [("listed", False)]
        await informer.api.close()

    run(scenario)


def test_watch_events_are_delivered_by_kind_and_a_relist_after_them_repeats_nothing() -> None:
    """Each watch event reaches the handler as what it is (``ADDED`` as added, ``MODIFIED`` as
    modified, ``DELETED`` as deleted), and goes into the informer's store: a LIST right after
    finds everything as the watch left it and delivers nothing again (no object modified
    again, no deletion twice), as client-go's ``Replace`` against its store."""

    async def scenario(server: FakeApiServer) -> None:
        for name in ("a", "b"):
            server.put("workloads", workload(name))
        recording = Recording()
        informer = Informer(server.client(), WORKLOADS, "workloads", recording)
        await informer.list_once(initial=True)
        recording.calls.clear()
        watching = asyncio.create_task(informer.watch_once())
        await until(lambda: server.live_watches == 1, "watching")
        server.put("workloads", {**workload("a"), "spec": {"kind": "Job", "count": None}})
        server.put("workloads", workload("c"))
        server.delete("workloads", "b", "ns")
        await until(lambda: len(recording.calls) == 3, "three events delivered")
        server.end_watches()
        await watching
        assert [(kind, what) for kind, what in recording.calls[:2]] == [
            ("modified", "a"),
            ("added", "c"),
        ]
        assert recording.calls[2][0] == "deleted" and recording.calls[2][1]["name"] == "b"
        recording.calls.clear()
        await informer.list_once()
        assert recording.calls == [("listed", False)]
        await informer.api.close()

    run(scenario)


def test_a_deletion_of_an_object_never_seen_is_delivered_and_the_informer_goes_on() -> None:
    """A ``DELETED`` event for an object the informer never delivered (a watch cache that
    replays from a version of its own, a proxy in between): handed on as a deletion, the
    store left as it was, and no exception that would end the informer's task."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        recording = Recording()
        informer = Informer(server.client(), WORKLOADS, "workloads", recording)
        await informer.list_once(initial=True)
        recording.calls.clear()
        stray = {"metadata": {"name": "stray", "namespace": "ns", "resourceVersion": "999"}}
        informer.deliver("DELETED", stray)
        assert recording.calls == [("deleted", stray["metadata"])]
        assert informer.version == "999"
        recording.calls.clear()
        await informer.list_once()
        assert recording.calls == [("listed", False)]  # "a" still known, nothing else
        await informer.api.close()

    run(scenario)


def test_a_cluster_scoped_object_gone_while_nobody_watched_is_deleted_by_its_name_alone() -> None:
    """A Node the relist no longer finds is delivered as deleted with its name and the
    version last seen, and no namespace (it has none)."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", node_object("gone"))
        recording = Recording()
        informer = Informer(server.client(), NODES_PATH, "nodes", recording)
        await informer.list_once(initial=True)
        stored = server.get("nodes", "gone")
        assert stored is not None
        version = stored["metadata"]["resourceVersion"]
        server.delete("nodes", "gone")
        recording.calls.clear()
        await informer.list_once()
        assert recording.calls == [
            ("deleted", {"name": "gone", "resourceVersion": version}),
            ("listed", False),
        ]
        await informer.api.close()

    run(scenario)


def test_a_list_is_read_page_by_page() -> None:
    """LISTs come in pages (``limit`` + ``continue``): every page is read and merged."""
    from kubernetes import client as k8s_client

    from controller.operator.kube import KubeApi

    items = [workload(f"w{i}") for i in range(7)]

    class Paging(KubeApi):
        def __init__(self) -> None:
            super().__init__(k8s_client.Configuration())
            self.calls: list[dict[str, str]] = []

        async def request(self, method: str, path: str, *_: Any, **kwargs: Any) -> Any:
            params = kwargs["params"]
            self.calls.append(dict(params))
            start = int(params.get("continue", "0"))
            end = start + int(params["limit"])
            more = str(end) if end < len(items) else ""
            return {
                "items": items[start:end],
                "metadata": {"resourceVersion": "9", "continue": more},
            }

    async def scenario() -> None:
        api = Paging()
        state, queue = ClusterState(), WorkQueue()
        handler = WorkloadEvents(state, queue, StartupGate(state, queue))
        informer = Informer(api, WORKLOADS, "workloads", handler, page=2)
        await informer.list_once(initial=True)
        assert sorted(state.records) == [f"ns/w{i}" for i in range(7)]
        assert len(api.calls) == 4 and all(c["limit"] == "2" for c in api.calls)
        assert informer.version == "9"

    asyncio.run(scenario())


def test_a_list_whose_own_version_is_already_expired_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every watch from the list's version gets 410 at once (the server compacted past it):
    the informer lists again, but not in a tight loop: the back-off grows as for any failure
    (without it: a LIST and a watch, again and again, as fast as the server answers), and the
    log says why it waits."""
    caplog.set_level(logging.INFO, logger="orca.informer")

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = Watching(server)
        server.compacted = server.revision + 10**6  # every version the server gives is "too old"
        await w.listed()
        await until(lambda: w.lists() >= 5, "five LISTs")
        assert w.delays[:4] == [0.5, 1.0, 2.0, 4.0]
        assert restarts("workloads", "expired") >= 4
        messages = [r.getMessage() for r in caplog.records]
        assert "the workloads watch expired at once; again in 0.5s" in messages
        await w.stop()

    run(scenario)


def test_nothing_is_queued_before_every_informer_has_listed() -> None:
    """The start-up gate: Workloads listed while the PriorityClasses are not are not handed
    to the scheduling loop (they would be decided Invalid, naming a class not yet known);
    once the last informer lists, every Workload is, at its class's priority."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("priorityclasses", priority_class("high", 1000))
        spec = {"kind": "Job", "priorityClassName": "high"}
        server.put("workloads", stored_workload("vip", spec=spec))
        server.put("workloads", workload("plain"))
        held = server.add(Fault("GET", PRIORITY_CLASSES, "hold", watch=False))
        w = Watching(server, "workloads", "priorityclasses")
        w.queue.priority_of = lambda key: w.priorities.resolve(w.state, key).value
        opening = asyncio.create_task(w.listed())
        await until(lambda: w.informers[0].synced.is_set(), "the Workloads listed")
        server.put("workloads", workload("late"))  # a watch event before the gate: not queued
        await until(lambda: "ns/late" in w.keys, "late seen")
        assert not w.gate.ready.is_set() and len(w.queue) == 0
        held.gate.set()
        await opening
        assert w.gate.ready.is_set()
        assert await w.queue.get() == "ns/vip"  # first: the higher priority
        await w.stop()

    run(scenario)


def test_a_class_that_changes_queues_the_workloads_naming_it() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("priorityclasses", priority_class("high", 1000))
        server.put(
            "workloads", stored_workload("vip", spec={"kind": "Job", "priorityClassName": "high"})
        )
        server.put("workloads", workload("plain"))
        w = await Watching(server, "priorityclasses", "workloads").start()
        await w.handed_out()
        server.put("priorityclasses", priority_class("high", 2000))
        await until(lambda: len(w.queue) == 1, "a Workload queued")
        assert await w.handed_out() == {"ns/vip"}
        assert w.priorities.classes.by_name["high"].value == 2000
        await w.stop()

    run(scenario)


@pytest.mark.parametrize(
    ("resync", "asked"), [(None, "300"), (600.0, "300"), (60.0, "60"), (0.4, "1")]
)
def test_a_watch_asks_the_server_to_end_it_in_time_for_the_resync(
    resync: float | None, asked: str
) -> None:
    """Each watch asks the API server to end it (``timeoutSeconds``) after the informer's
    timeout (300 s), or sooner when the resync is due sooner, so the LIST is not late; never
    under a second (0 would mean the server's own default)."""

    async def scenario(server: FakeApiServer) -> None:
        w = await Watching(server, resync=resync).start()
        assert [s.query["timeoutSeconds"] for s in server.seen("GET", w.path, True)] == [asked]
        await w.stop()

    run(scenario)


def test_a_relist_without_an_answer_says_so_and_goes_on_once_the_server_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The resync's LIST gets no answer, twice: each failure is a warning about listing
    again (not the initial listing), and the back-off, past its first step, ends as soon as
    the API server answers another request, as for a watch."""
    caplog.set_level(logging.INFO, logger="orca.informer")

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        recording = Recording()
        initial = Informer(server.client(), WORKLOADS, "workloads", recording)
        await initial.list_until_done(initial=True)
        assert recording.calls[-1] == ("listed", True)
        await initial.api.close()

        w = await Watching(server, resync=60.0).start()

        async def long_sleep(delay: float) -> None:
            w.delays.append(delay)
            if delay > 0.5:
                await asyncio.sleep(3600)  # only an answer from the server ends this wait
            w.clock.advance(delay)
            await asyncio.sleep(0.002)

        w.informer.sleep = long_sleep
        # Twice each: aiohttp sends a GET once more when its connection closed.
        away = server.add(Fault("GET", w.path, "drop", times=4, watch=False))
        w.clock.advance(61)
        server.end_watches()  # the resync is due: LIST, which gets no answer
        await until(lambda: away.arrived == 4 and w.delays == [0.5, 1.0], "backing off")
        server.put("workloads", workload("b"))  # created while the informer is away
        await w.api.request("GET", NODES_PATH)  # answered: the server is back
        await until(lambda: "ns/b" in w.keys, "b seen once the LIST is answered")
        failures = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(failures) == 2, failures
        assert all(m.startswith("listing again of workloads failed: GET ") for m in failures)
        await w.stop()

    run(scenario)


def test_the_periodic_resync_lists_again_and_looks_at_every_workload() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = await Watching(server, resync=60.0).start()
        await w.handed_out()
        w.clock.advance(30)
        server.end_watches()  # the watch ends (its timeout) 30 s after the LIST: watch on
        await w.watching(count=2)
        assert w.lists() == 1
        w.clock.advance(30)
        server.end_watches()  # 60 s after the LIST: the resync is due, LIST first
        await until(lambda: w.lists() == 2, "the resync's LIST")
        await until(lambda: len(w.queue) == 1, "a queued again")
        assert await w.handed_out() == {"ns/a"}
        assert w.watches()[-1] == str(server.revision)
        await w.stop()

    run(scenario)
