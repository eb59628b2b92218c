"""orca's Node and Workload watches (``controller/operator/informer.py``) and the start-up LIST
(``Reconciler.list_until_done``), against an in-process API server (``fakeapi``) over loopback
HTTP through the real ``KubeApi``.

Written against behaviour: objects and faults go in at the server, the operator's state and
what its scheduling queue is handed come out. The informer's clock and sleep are fake, so a
back-off of 30 s costs nothing and its steps can be read. (tests/integration/test_informer.py
runs the same client against the real kube-apiserver.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller.operator import reconciler as reconciler_module
from controller.operator.kube.informer import Informer, apply_node_event, apply_workload_event
from controller.operator.reconciler import NODES_PATH, Reconciler
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from tests.factories import node_object, stored_workload
from tests.unit.fakeapi import FakeApiServer, FakeClock, Fault, until

WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1/workloads"


@pytest.fixture(autouse=True)
def quick_list_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LIST's retry back-off (real sleeps) in milliseconds: its steps are not under test."""
    monkeypatch.setattr(reconciler_module, "LIST_BACKOFF", (0.001, 0.004))


def restarts(resource: str, reason: str) -> float:
    labels = {"resource": resource, "reason": reason}
    return REGISTRY.get_sample_value("orca_watch_restarts_total", labels) or 0.0


class Watching:
    """One operator's view of one collection: the reconciler's LIST, then the informer."""

    def __init__(self, server: FakeApiServer, kind: str = "workloads") -> None:
        self.server = server
        self.api = server.client()
        self.reconciler = Reconciler(ClusterState(), WorkQueue(), self.api)
        self.path = WORKLOADS if kind == "workloads" else NODES_PATH
        apply = apply_workload_event if kind == "workloads" else apply_node_event
        self.informer = Informer(self.reconciler, self.path, apply, kind, timeout=300)
        self.clock = FakeClock()
        self.delays: list[float] = []
        self.informer.clock = self.clock
        self.informer.sleep = self._sleep
        self.task: asyncio.Task[None] | None = None

    async def _sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.clock.advance(delay)
        await asyncio.sleep(0.002)  # let the loop run; the back-off itself is the record

    async def start(self) -> Watching:
        await self.reconciler.start()
        self.task = asyncio.create_task(self.informer.run())
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
        return set(self.reconciler.state.records)

    @property
    def nodes(self) -> set[str]:
        return set(self.reconciler.state.nodes)

    async def handed_out(self) -> set[str]:
        """What the scheduling queue holds now, taken as the loop would take it."""
        queue, keys = self.reconciler.queue, set()
        while len(queue):
            key = await queue.get()
            queue.done(key)
            keys.add(key)
        return keys

    async def stop(self) -> None:
        assert self.task is not None
        assert not self.task.done(), self.task  # the informer never ends by itself
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.api.close()


def run(scenario: Callable[[FakeApiServer], Awaitable[None]]) -> None:
    async def main() -> None:
        async with FakeApiServer() as server:
            await asyncio.wait_for(scenario(server), 120)

    asyncio.run(main())


def workload(name: str) -> dict[str, Any]:
    return stored_workload(name)


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


@pytest.mark.parametrize("kind", ["workloads", "nodes"])
def test_an_expired_watch_lists_again_and_what_was_deleted_meanwhile_is_gone(kind: str) -> None:
    """The watch is down while one object is deleted and one created, and the server forgets
    that history (a restart, a compaction): the watch from the old version gets 410, the
    informer LISTs again (its first LIST attempt dropped, for good measure), the deleted
    object leaves the state, and the watch goes on from the new LIST's version."""

    async def scenario(server: FakeApiServer) -> None:
        def obj(name: str) -> dict[str, Any]:
            return workload(name) if kind == "workloads" else node_object(name)

        def key(name: str) -> str:
            return f"ns/{name}" if kind == "workloads" else name

        server.put(kind, obj("a"))
        server.put(kind, obj("b"))
        w = await Watching(server, kind).start()

        def seen() -> set[str]:
            return w.keys if kind == "workloads" else w.nodes

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


def test_a_connection_dropped_mid_watch_resumes_from_the_last_event_seen() -> None:
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


def test_a_refused_watch_is_tried_again_without_listing_and_delivers_once_allowed() -> None:
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
        assert await w.handed_out() == set()  # nothing to decide again
        server.put("workloads", workload("b"))
        await until(lambda: "ns/b" in w.keys, "b seen once allowed")
        await w.stop()

    run(scenario)


def test_a_watch_that_ends_at_once_backs_off_instead_of_spinning() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        w = Watching(server)
        w.informer.timeout = 0  # the server ends every watch as soon as it starts
        await w.reconciler.start()
        w.task = asyncio.create_task(w.informer.run())
        await until(lambda: len(w.watches()) >= 5, "five watches")
        assert w.delays[:4] == [0.5, 1.0, 2.0, 4.0]
        assert set(w.watches()) == {str(server.revision)}
        assert w.lists() == 1
        await w.stop()

    run(scenario)


def test_the_startup_list_retries_until_the_api_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first LIST gets no answer (connection closed), then the Workload resource is not
    there (404: the CRD is not installed, said in so many words), then it is."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("workloads", workload("a"))
        server.put("nodes", node_object("n1"))
        # Twice: aiohttp sends a GET once more when its connection closed (fakeapi's notes).
        server.add(Fault("GET", NODES_PATH, "drop", times=2, watch=False))
        crd = server.add(Fault("GET", WORKLOADS, "status", times=2, status=404, watch=False))
        crd.reason = "NotFound"
        w = Watching(server)
        with caplog.at_level(logging.WARNING, logger="orca.scheduler"):
            await w.reconciler.start()
        assert w.reconciler.ready.is_set()
        assert w.keys == {"ns/a"} and w.nodes == {"n1"}
        assert await w.handed_out() == {"ns/a"}
        messages = [r.getMessage() for r in caplog.records if r.name == "orca.scheduler"]
        assert len(messages) == 3, messages
        assert "initial listing failed" in messages[0]
        assert "ServerDisconnectedError" in messages[0]
        for message in messages[1:]:
            assert "the Workload CRD is not installed (kubectl apply -k crds/)" in message
        await w.api.close()

    run(scenario)


def test_the_startup_list_gives_a_refusal_that_is_not_a_missing_crd_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(server: FakeApiServer) -> None:
        forbidden = server.add(Fault("GET", WORKLOADS, "status", status=403, watch=False))
        forbidden.reason = "Forbidden"
        w = Watching(server)
        with caplog.at_level(logging.WARNING, logger="orca.scheduler"):
            await w.reconciler.start()
        messages = [r.getMessage() for r in caplog.records if r.name == "orca.scheduler"]
        assert len(messages) == 1 and "403 Forbidden" in messages[0]
        assert "CRD" not in messages[0]
        await w.api.close()

    run(scenario)
