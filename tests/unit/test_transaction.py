"""The one status-write transaction (``controller.operator.transaction``) as each of its three
users meets it: the scheduling loop, a preemption's victims and the rebalancer all get the
same rollback on every way out, and the same handling of a write that got no answer (both
outcomes held, the Workload read back before it is decided again).

Before, only the loop's own writes held both outcomes: a victim's write and a rebalancing
move that got no answer were forgotten like refused ones (their capacity freed while the
object may have recorded the write), and a bug inside a write left its assumption booked."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import pytest
from prometheus_client import REGISTRY

from controller.operator.app import Operator
from controller.operator.kube import KubeApi, TransportError
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from tests.support.factories import free_cpu, node_object, stored_workload

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

    async def patch_workload_status(
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


def job(name: str, cpu: str, node: str | None = None, **spec: Any) -> dict[str, Any]:
    status = None
    if node is not None:
        placement = {"node": node, "allocId": f"ns/{name}-0", "score": 0}
        status = {"phase": "Scheduled", "placements": [placement], "resources": {"cpu": cpu}}
    return stored_workload(name, "5", {"kind": "Job", "resources": {"cpu": cpu}, **spec}, status)


def test_a_bug_inside_the_loops_write_leaves_nothing_assumed() -> None:
    """An unexpected exception while the write is in flight (not an answer, not a transport
    error: a bug) still rolls the assumption back, and the loop retries the key later."""
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="2"))
    state.upsert_workload(job("web", "1"))
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
    state.upsert_workload(job("low", "4", node="a"))
    state.upsert_workload(job("high", "2", priorityClassName="high"))
    api = Api(fail)
    operator = Operator.wire(cast(KubeApi, api), state)
    operator.priorities.upsert(
        {"metadata": {"name": "high", "resourceVersion": "1"}, "value": 1000}
    )
    return state, api, operator


def test_a_victims_write_without_an_answer_is_held_and_read_back() -> None:
    state, api, operator = preemption({"low": NO_ANSWER})
    api.objects["low"] = job("low", "4", node="a")  # it did not land, as the read-back shows

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
        state.upsert_workload(job("web", "1"))
        operator = Operator.wire(cast(KubeApi, Api({"web": NO_ANSWER})), state)
        key = "ns/web"
    asyncio.run(operator.loop.process(key))
    assert count("orca_status_writes_total", outcome="failed") == failed + 1
    assert count("orca_status_write_failures_total", code="ServerDisconnectedError") == cause + 1
