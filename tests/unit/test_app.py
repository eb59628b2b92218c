"""The operator's parts wired as ``orca run`` wires them (``controller.operator.app.Operator``),
driven in-process against the in-process API server (``fakeapi``) over loopback HTTP: the path
of one Workload from a watch event to its status, and a stop that lets the write in flight
land before anything else ends. (tests/integration/test_operator.py runs the real process on
the real API server.)"""

from __future__ import annotations

import asyncio

from controller.operator.app import Operator
from controller.operator.telemetry import metrics
from controller.scheduler.nodes import NODES_PATH
from tests.support.factories import node_object, stored_workload
from tests.support.fakeapi import FakeApiServer, Fault, run, until


def failed_to_start(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        raise AssertionError(f"{task.get_name()} failed: {task.exception()!r}")


def placed(server: FakeApiServer, name: str) -> list[str]:
    obj = server.get("workloads", name, "ns") or {}
    return [p["node"] for p in (obj.get("status") or {}).get("placements", [])]


def test_a_workload_created_after_start_is_placed_through_every_part() -> None:
    """Informer -> handler -> queue -> loop -> transaction -> PUT -> the echo, a no-op."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", node_object("a", cpu="4"))
        operator = Operator.wire(server.client())
        operator.start(failed_to_start)
        await operator.gate.ready.wait()
        server.put("workloads", stored_workload("web", spec={"kind": "Job"}))
        await until(lambda: placed(server, "web") == ["a"], "web placed on a")
        record = operator.state.records["ns/web"]
        await until(lambda: record.resource_version == placed_version(server), "the echo seen")
        assert [b.node for b in operator.state.ledger.bookings("ns/web")] == ["a"]
        assert not operator.state.ledger.assumed("ns/web")
        patches = server.seen("PUT", "/workloads/web/status")
        assert len(patches) == 1  # the echo of the write decided nothing new
        await operator.stop()
        await operator.api.close()

    run(scenario)


def placed_version(server: FakeApiServer) -> str:
    obj = server.get("workloads", "web", "ns")
    assert obj is not None
    return str(obj["metadata"]["resourceVersion"])


def test_a_write_applied_then_cut_and_sent_again_counts_as_unanswered() -> None:
    """aiohttp sends a PUT once more when its connection closed before the answer; the
    status write was applied, so the second meets its own resourceVersion: 409. That says
    nothing of the first: the write got no answer (both outcomes held, the Workload read
    back), not a refusal (which would give the room back while the object records it)."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", node_object("a", cpu="4"))
        server.put("workloads", stored_workload("web", spec={"kind": "Job"}))
        server.drop("PUT", "/workloads/web/status", after=True)
        failed = metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FAILED)
        conflicts = metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_CONFLICT)
        before = (failed._value.get(), conflicts._value.get())
        operator = Operator.wire(server.client())
        operator.start(failed_to_start)
        await until(lambda: len(server.seen("GET", "/workloads/web")) >= 1, "read back")
        await until(lambda: not operator.writes.unsure, "the read-back taken as the truth")
        writes = [s.outcome for s in server.seen("PUT", "/workloads/web/status")]
        assert writes == ["dropped", "409"]  # applied and cut, then sent again by aiohttp
        assert (failed._value.get(), conflicts._value.get()) == (before[0] + 1, before[1])
        assert placed(server, "web") == ["a"]
        record = operator.state.records["ns/web"]
        await until(lambda: record.resource_version == placed_version(server), "the echo seen")
        assert [b.node for b in operator.state.ledger.bookings("ns/web")] == ["a"]
        await asyncio.sleep(0.2)
        assert len(server.seen("PUT", "/workloads/web/status")) == 2  # nothing more to write
        await operator.stop()
        await operator.api.close()

    run(scenario)


def test_a_stop_lets_the_write_in_flight_land_then_ends_every_part() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", node_object("a", cpu="4"))
        server.put("workloads", stored_workload("web", spec={"kind": "Job"}))
        held = server.add(Fault("PUT", "/workloads/web/status", "hold"))
        operator = Operator.wire(server.client())
        operator.start(failed_to_start)
        await until(lambda: held.arrived == 1, "the status write in flight")
        stopping = asyncio.create_task(operator.stop())
        await asyncio.sleep(0.2)
        assert not stopping.done()  # waiting for the write ...
        assert server.live_watches >= 1  # ... with the informers still up
        held.gate.set()
        await stopping
        assert placed(server, "web") == ["a"]  # it landed
        assert all(task.done() for task in operator._tasks)  # and every part has ended
        assert operator.failed() == []
        await operator.api.close()

    run(scenario)


def test_a_stop_before_the_initial_listing_ends_at_once() -> None:
    """Nothing decided yet, nothing in flight: the loop waiting for the start-up gate ends."""

    async def scenario(server: FakeApiServer) -> None:
        server.add(Fault("GET", NODES_PATH, "hold", watch=False))  # the Nodes never list
        operator = Operator.wire(server.client())
        operator.start(failed_to_start)
        await asyncio.sleep(0.1)
        assert not operator.gate.ready.is_set()
        before = metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_WRITTEN)._value.get()
        await asyncio.wait_for(operator.stop(), 10)
        assert metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_WRITTEN)._value.get() == before
        await operator.api.close()

    run(scenario)
