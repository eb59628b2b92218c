"""Capacity a decision gives up is not free until its status write lands
(``ledger.held_until_written``, booked by the status-write transaction).

Before, the ledger handed a scale-down's freed room to the next decision at once; when that
next write landed and the first one did not (operator SIGKILLed, or a 409), both stayed in the
statuses: a node over capacity that nothing repairs. The chaos suite found it (operator-kill)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from controller.operator.app import Operator
from controller.operator.kube import ApiError, KubeApi
from controller.operator.state import ClusterState
from controller.scheduler.ledger import Booking, held_until_written
from tests.support.factories import node_object
from tests.support.fakeapi import until


class BlockedApi:
    """Status writes wait for ``release``, then fail with ``error`` or succeed."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.error: ApiError | None = None
        self.pending = 0

    async def patch_workload_status(self, *_: Any) -> dict[str, Any]:
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


def run_write(fail: bool) -> tuple[int, int]:
    """(free cpu on a while the write is in flight, after it settled)."""

    async def scenario() -> tuple[int, int]:
        state, api = ClusterState(), BlockedApi()
        state.upsert_node(node_object("a", cpu="2"))
        state.upsert_workload(scaled_down(2))
        operator = Operator.wire(cast(KubeApi, api), state)
        writing = asyncio.create_task(operator.loop.process("ns/web"))
        await until(lambda: api.pending == 1, "the write in flight")
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


def test_held_keeps_both_places_of_a_moved_replica_and_the_larger_size() -> None:
    before = (Booking("a", "ns/w-0", 1000, 10), Booking("a", "ns/w-1", 500, 10))
    after = (Booking("b", "ns/w-0", 1000, 10), Booking("a", "ns/w-1", 250, 10))
    held = sorted(held_until_written(before, after), key=lambda b: (b.node, b.alloc_id))
    assert [(b.node, b.alloc_id, b.cpu) for b in held] == [
        ("a", "ns/w-0", 1000),
        ("a", "ns/w-1", 500),
        ("b", "ns/w-0", 1000),
    ]
