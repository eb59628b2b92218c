"""The scheduling loop gives the event loop turns while it decides every Workload again.

After a restart (the start-up gate) or an election, every Workload is queued and decided
again, and a decision that finds nothing to write never awaits. Before, the first worker
decided the whole queue in one step of the event loop: with 100,000 Workloads that held it
for 11 s, in which no watch event was read, no probe or /metrics request answered and no
Lease renewed (``loop.TURN``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from itertools import pairwise
from typing import Any, cast

from prometheus_client import REGISTRY

from controller.operator.app import Operator
from controller.operator.kube import KubeApi
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from tests.support.factories import job, node_object

WORKLOADS = 60
WORKERS = 4


class Api:
    """Every status write lands (a new resourceVersion); Events are accepted."""

    def __init__(self) -> None:
        self.version = 100

    async def write_workload_status(
        self, _namespace: str, _name: str, _status: Mapping[str, Any], _version: str | None
    ) -> dict[str, Any]:
        self.version += 1
        return {"metadata": {"resourceVersion": str(self.version)}}

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


def unchanged() -> float:
    """Decisions that found nothing to write, so far (process-wide: read as a delta)."""
    return (
        REGISTRY.get_sample_value(
            "orca_schedule_unchanged_total", {"kind": "Job", "result": "scheduled"}
        )
        or 0.0
    )


def test_the_event_loop_gets_a_turn_between_the_workers_rounds_of_decisions() -> None:
    """``turn`` 0: after each decision a worker lets the event loop run, so a coroutine that
    stands for the watches, probes and the Lease's renewal runs after every round of at most
    one decision per worker, from the first round to the last (without the turns it ran only
    before the first decision and after the last)."""
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="64"))
    keys = [f"ns/w{i}" for i in range(WORKLOADS)]
    for key in keys:
        state.upsert_workload(job(key.removeprefix("ns/"), "100m", version="5"))
    queue = WorkQueue()
    operator = Operator.wire(cast(KubeApi, Api()), state, queue, workers=WORKERS)
    operator.loop.turn = 0.0

    async def scenario() -> list[float]:
        for key in keys:  # each written once: its status is now what a decision implies
            queue.add(key)
            await operator.loop.process_next()
        before = unchanged()
        queue.add_all(keys)  # what the start-up gate and an election do
        operator.gate.ready.set()
        running = asyncio.create_task(operator.loop.run())
        seen: list[float] = []
        while (decided := unchanged() - before) < WORKLOADS:
            seen.append(decided)
            await asyncio.sleep(0)
        seen.append(decided)
        operator.loop.stop()
        await running
        return seen

    seen = asyncio.run(scenario())
    assert seen[0] == 0 and seen[-1] == WORKLOADS
    assert all(0 <= b - a <= WORKERS for a, b in pairwise(seen)), seen
    assert all(state.records[key].phase is not None for key in keys)
