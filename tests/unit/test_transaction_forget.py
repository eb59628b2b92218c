"""A status write that did not land restores the bookings it replaced, unless the Workload
changed while it was in flight: then what the Workload records now is booked
(``StatusWrites.abandon``).

The ledger books no event that arrives during a write. Before, a refused or fenced write then
restored the bookings from before it, over another replica's status seen meanwhile: the
replica decided next from placements the object no longer had. The split-brain chaos scenario
found it: the thawed old leader's fenced write of Job j4 left j4 unbooked while the object had
it on split-1; elected again, that replica moved j4 to split-0 for no reason
(``lost: split-.../j4: .../j4-0 was on split-1, now split-0``)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from controller.operator.app import Operator
from controller.operator.kube import ApiError, Fenced, KubeApi
from controller.operator.state import ClusterState
from tests.support.factories import free_cpu, node_object
from tests.support.fakeapi import until


def job(version: int, node: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": str(version),
            "generation": 1,
        },
        "spec": {"kind": "Job", "resources": {"cpu": "1"}},
    }
    if node is not None:
        obj["status"] = {
            "observedGeneration": 1,
            "phase": "Scheduled",
            "placements": [{"node": node, "allocId": "ns/web-0", "score": 0}],
            "resources": {"cpu": "1"},
        }
    return obj


class RefusingApi:
    """Status writes wait for ``release``, then fail with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.release = asyncio.Event()
        self.error = error
        self.pending = 0

    async def patch_workload_status(self, *_: Any) -> dict[str, Any]:
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
        state.upsert_workload(job(10))
        operator = Operator.wire(cast(KubeApi, api), state)
        writing = asyncio.create_task(operator.loop.process("ns/web"))
        await until(lambda: api.pending == 1, "decided on a; the write waits")
        if changed:  # meanwhile another replica's write of web, on b, is seen
            state.upsert_workload(job(12, node="b"))
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
        state.upsert_workload(job(10))
        db = {**job(10), "metadata": {**job(10)["metadata"], "name": "db", "uid": "u-db"}}
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
