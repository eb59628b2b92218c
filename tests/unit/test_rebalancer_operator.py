"""The operator's rebalancing pass (``controller.operator.rebalancer``) on a recording API:
a move is one preconditioned status write through the ledger, with an Event and a count; a
Workload changed meanwhile is re-planned, never overwritten; only the leader moves anything.
(The same on a real API server: tests/integration/test_rebalance.py.)"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY

from controller.cli.run import parse_duration, run
from controller.operator.app import Operator
from controller.operator.kube import ApiError, KubeApi
from controller.operator.rebalancer import RebalanceLoop
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from tests.support.factories import NOW, node_object, service


class RecordingApi:
    """Status writes succeed with the next resourceVersion (or raise ``error``); Events are
    kept."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any], str | None]] = []
        self.events: list[dict[str, Any]] = []
        self.error: ApiError | None = None
        self.refuse: set[str] = set()  # keys whose writes get 409 (changed by their owner)
        self.version = 100

    async def write_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], version: str | None
    ) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        if f"{namespace}/{name}" in self.refuse:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.writes.append((f"{namespace}/{name}", status, version))
        self.version += 1
        return {"metadata": {"resourceVersion": str(self.version)}}

    async def create_event(self, namespace: str, event: dict[str, Any]) -> dict[str, Any]:
        self.events.append(event)
        return {}


def cluster(
    *workloads: dict[str, Any], new: int = 2
) -> tuple[ClusterState, RecordingApi, Operator]:
    """The Workloads placed by the scheduling loop on two old nodes, then ``new`` empty
    nodes joined: the drift a rebalancing pass is for."""
    state, api = ClusterState(), RecordingApi()
    operator = Operator.wire(cast(KubeApi, api), state, rebalance_every=1.0)
    operator.gate.ready.set()

    async def place() -> None:
        for w in workloads:
            state.upsert_workload(w)
            assert await operator.loop.process(
                w["metadata"]["namespace"] + "/" + w["metadata"]["name"]
            )

    for name in ("old-0", "old-1"):
        state.upsert_node(node_object(name))
    asyncio.run(place())
    for i in range(new):
        state.upsert_node(node_object(f"new-{i}"))
    api.writes.clear()
    while not operator.events.queue.empty():
        operator.events.queue.get_nowait()
    return state, api, operator


def rebalancer(operator: Operator) -> RebalanceLoop:
    assert operator.rebalancer is not None
    return operator.rebalancer


def moves(outcome: str) -> float:
    return REGISTRY.get_sample_value("orca_rebalance_moves_total", {"outcome": outcome}) or 0.0


def nodes_of(state: ClusterState, key: str) -> list[str]:
    return sorted(b.node for b in state.ledger.bookings(key))


def test_a_pass_moves_allowed_replicas_with_a_write_an_event_and_a_count() -> None:
    state, api, operator = cluster(
        service("web", 2, version="7", rebalance="Allowed"),
        service("db", 2, version="7", rebalance="Never"),
    )
    before = moves(metrics.MOVE_MOVED)
    made = asyncio.run(rebalancer(operator).rebalance())

    assert made == 2 == len(api.writes)
    assert all(key == "ns/web" for key, _, _ in api.writes)  # db is Never: untouched
    assert [version for _, _, version in api.writes] == ["101", "103"]  # each on the one before
    assert nodes_of(state, "ns/web") == ["new-0", "new-1"]
    assert nodes_of(state, "ns/db") == ["old-0", "old-1"]
    record = state.records["ns/web"]
    assert record.status is not None and record.resource_version == "104"
    assert sorted(p.node for p in record.status.placements) == ["new-0", "new-1"]
    assert record.status.nodes == "new-0,new-1" or record.status.nodes == "new-1,new-0"
    assert moves(metrics.MOVE_MOVED) - before == 2
    queued = []
    while not operator.events.queue.empty():
        queued.append(operator.events.queue.get_nowait().body())
    assert [e["reason"] for e in queued] == ["Rebalanced", "Rebalanced"]
    assert "moved replica ns/web-" in queued[0]["message"]
    assert queued[0]["involvedObject"]["name"] == "web"
    # The moves are stable: the scheduling loop, deciding again, writes nothing.
    assert asyncio.run(operator.loop.process("ns/web")) is False
    # And a second pass proposes nothing.
    assert asyncio.run(rebalancer(operator).rebalance()) == 0


def test_a_workload_changed_by_its_owner_is_replanned_not_overwritten() -> None:
    state, api, operator = cluster(
        service("web", 2, version="7", rebalance="Allowed"),
        service("db", 2, version="7", rebalance="Never"),
    )
    api.error = ApiError(409, "Conflict", "the object has been modified")
    before = moves(metrics.MOVE_CONFLICT)
    assert asyncio.run(rebalancer(operator).rebalance()) == 0
    assert moves(metrics.MOVE_CONFLICT) - before == 1
    assert nodes_of(state, "ns/web") == ["old-0", "old-1"]  # the assumption was forgotten
    assert state.ledger.free()[0].tolist() == [4000, 4000, 2000, 2000]  # new-*, old-*
    assert not state.ledger.assumed("ns/web")
    assert len(operator.queue) == 1  # handed to the scheduling loop to decide afresh


def test_a_refused_move_drops_only_that_workloads_later_moves() -> None:
    state, api, operator = cluster(
        service("web", 2, version="7", rebalance="Allowed"),
        service("api", 2, version="7", rebalance="Allowed"),
        service("db", 2, version="7", rebalance="Never"),
        new=4,
    )
    loop = rebalancer(operator)
    state.table()
    workloads = [r.workload for r in state.records.values() if r.workload is not None]
    planned = [m.workload for m in loop.planner.plan(workloads, state.ledger, now=NOW).moves]
    assert planned == ["ns/api", "ns/web", "ns/api", "ns/web"]
    api.refuse.add("ns/api")  # its first move is refused: web still moves
    before = moves(metrics.MOVE_CONFLICT)
    assert asyncio.run(loop.rebalance()) == 2
    assert moves(metrics.MOVE_CONFLICT) - before == 1  # api's later moves were not tried
    assert {key for key, _, _ in api.writes} == {"ns/web"}
    assert nodes_of(state, "ns/api") == ["old-0", "old-1"]


def test_a_move_planned_on_an_older_version_is_not_made() -> None:
    state, api, operator = cluster(
        service("web", 2, version="7", rebalance="Allowed"),
        service("db", 2, version="7", rebalance="Never"),
    )
    loop = rebalancer(operator)
    record = state.records["ns/web"]
    assert record.workload is not None
    state.table()
    plan = loop.planner.plan([record.workload], state.ledger, now=NOW)
    assert plan.moves
    planned = record.resource_version
    stored = service(
        "web", 2, version="200", rebalance="Allowed"
    )  # the owner changed it; the watch told us
    stored["status"] = record.status.model_dump(by_alias=True, mode="json") if record.status else {}
    state.upsert_workload(stored)
    assert asyncio.run(loop.make(plan.moves[0], planned)) == (metrics.MOVE_CHANGED, None)
    assert api.writes == []


def test_a_busy_workload_is_left_to_the_scheduling_loop_and_the_others_move() -> None:
    state, api, operator = cluster(
        service("web", 2, version="7", rebalance="Allowed"),
        service("api", 2, version="7", rebalance="Allowed"),
    )
    operator.queue.add("ns/web")  # an event is waiting to be decided
    assert asyncio.run(rebalancer(operator).rebalance()) >= 1
    assert {key for key, _, _ in api.writes} == {"ns/api"}
    assert nodes_of(state, "ns/web") == ["old-0", "old-1"]


def test_only_the_leader_rebalances() -> None:
    _, api, operator = cluster(
        service("web", 2, version="7", rebalance="Allowed"),
        service("db", 2, version="7", rebalance="Never"),
    )
    rebalancer(operator).is_leader = lambda: False
    assert asyncio.run(rebalancer(operator).rebalance()) == 0
    assert api.writes == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("1500ms", 1.5),
        ("off", None),
        ("0", None),
    ],
)
def test_durations_parse_like_kubernetes_flags(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("30", "is not a duration"),
        ("5x", "is not a duration"),
        ("1h 30m", "is not a duration"),
        ("-5s", "is not a duration"),
        ("500ms", "is out of range"),
        ("25h", "is out of range"),
    ],
)
def test_bad_durations_are_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_duration(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rebalance-interval", "soon"], "--rebalance-interval: 'soon' is not a duration"),
        (["--rebalance-interval", "0.5s"], "--rebalance-interval: '0.5s' is out of range"),
        (["--rebalance-max-moves", "many"], "--rebalance-max-moves: 'many' is not a whole number"),
        (
            ["--rebalance-max-moves", "100000"],
            "--rebalance-max-moves: 100000 is out of range (0..10000)",  # as orca rebalance's
        ),
    ],
)
def test_orca_run_refuses_bad_rebalance_flags_in_one_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.cli import build_parser

    args = build_parser().parse_args(["run", "--metrics-port", "0", *flags])
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err == f"error: {message}\n" or (err.startswith("error: ") and message in err)
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--webhook-port", "9090", "--metrics-port", "9090"], "must differ"),
        (
            [
                "--webhook-port",
                "9443",
                "--webhook-host",
                "h",
                "--webhook-service",
                "ns/s",
                "--tls-secret",
                "ns/t",
            ],
            "--webhook-host and --webhook-service exclude each other",
        ),
        (["--webhook-host", "127.0.0.1"], "need --webhook-port"),
        (["--webhook-port", "9443", "--webhook-service", "ns/s"], "needs --tls-secret or"),
        (["--tls-secret", "ns/t", "--tls-cert-dir", "/x"], "exclude each other"),
    ],
)
def test_orca_run_refuses_webhook_flags_that_cannot_work_in_one_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.cli import build_parser

    args = build_parser().parse_args(["run", *flags])
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
