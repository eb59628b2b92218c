"""``orca run --node-lifecycle`` (``controller.operator.lifecycle``): how the operator learns
whether kube-controller-manager's node lifecycle controller runs, from its leader Lease
(k8s.io/client-go tools/leaderelection: the holder renews ``renewTime`` every retry period,
2 s for kube-controller-manager; a released Lease has an empty ``holderIdentity``), and that
the Nodes are read accordingly from the very first LIST.

Against the in-process API server (``fakeapi``), through the real client.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller.operator.app import Operator
from controller.operator.lifecycle import (
    FRESH_SECONDS,
    LEASE_PATH,
    NodeLifecycle,
    read_verdict,
    resolve,
    verdict_of_lease,
)
from tests.support.factories import node_object
from tests.support.fakeapi import FakeApiServer, run, until

NOW = 1_796_119_200.0  # 2026-12-01T10:00:00Z
UNREACHABLE = "node.kubernetes.io/unreachable"


def lease(holder: str, renewed_ago: float | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "leaseDurationSeconds": 15}
    if renewed_ago is not None:
        when = datetime.fromtimestamp(NOW - renewed_ago, UTC)
        spec["renewTime"] = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-controller-manager", "namespace": "kube-system"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("obj", "imply", "why"),
    [
        (lease("host_1a2b", 2.0), False, "kube-controller-manager holds Lease"),
        (lease("host_1a2b", FRESH_SECONDS - 1), False, "kube-controller-manager holds Lease"),
        (lease("host_1a2b", FRESH_SECONDS + 1), True, "last renewed 301 s ago"),
        (lease("", 1.0), True, "has no holder"),  # released on a graceful stop
        (lease("host_1a2b", None), True, "no readable renewTime"),
        (None, True, "no Lease kube-system/kube-controller-manager"),
    ],
)
def test_the_lease_says_whether_the_controller_runs(
    obj: dict[str, Any] | None, imply: bool, why: str
) -> None:
    verdict = verdict_of_lease(obj, NOW)
    assert verdict.imply is imply
    assert why in verdict.why
    assert not verdict.warn


def test_a_lease_it_may_not_read_is_the_ready_rule_with_a_warning_naming_the_flag() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.refuse("GET", LEASE_PATH, 403, "Forbidden")
        async with server.client() as api:
            verdict = await read_verdict(api, clock=lambda: NOW)
        assert verdict.imply and verdict.warn
        assert "403 Forbidden" in verdict.why and "--node-lifecycle=taints" in verdict.why

    run(scenario)


def test_auto_asks_again_until_the_api_server_answers(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("leases", lease("host_1a2b", 1.0))
        server.refuse("GET", LEASE_PATH, 503, "ServiceUnavailable", times=2)
        async with server.client() as api:
            imply = await resolve(api, NodeLifecycle.AUTO, clock=lambda: NOW)
        assert imply is False
        assert len(server.seen("GET", LEASE_PATH)) == 3

    with caplog.at_level(logging.INFO, logger="orca.lifecycle"):
        run(scenario)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("retrying" in line for line in lines) == 2
    assert lines[-1].startswith("node lifecycle: kube-controller-manager holds Lease")


@pytest.mark.parametrize("mode", [NodeLifecycle.TAINTS, NodeLifecycle.READY])
def test_a_mode_given_asks_nothing(mode: NodeLifecycle) -> None:
    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            imply = await resolve(api, mode)
        assert imply is (mode is NodeLifecycle.READY)
        assert server.seen("GET", LEASE_PATH) == []

    run(scenario)


def operator_reads(obj: dict[str, Any] | None) -> tuple[str, ...]:
    """The taints the operator (``--node-lifecycle=auto``) reads on an Unknown, untainted Node
    from its first LIST, with ``obj`` as kube-controller-manager's Lease."""
    taints: list[tuple[str, ...]] = []

    async def scenario(server: FakeApiServer) -> None:
        if obj is not None:
            server.put("leases", obj)
        server.put("nodes", node_object("a", ready="Unknown", since="2026-12-01T09:00:00Z"))
        operator = Operator.wire(server.client(), lifecycle=NodeLifecycle.AUTO)
        operator.start(lambda task: None)
        await until(lambda: "a" in operator.state.nodes, "node a read")
        taints.append(tuple(t.key for t in operator.state.nodes["a"].taints))
        await operator.stop()
        await operator.api.close()

    run(scenario)
    return taints[0]


def test_the_operator_reads_nodes_as_the_lease_says_from_the_first_list() -> None:
    fresh = lease("host_1a2b", 0.0)
    fresh["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert operator_reads(fresh) == ()
    assert operator_reads(None) == (UNREACHABLE,)


def test_stop_while_waiting_for_the_lease_ends_at_once() -> None:
    """An API server that never answers the Lease: the informers never start, and a stop
    ends the waiting part."""

    async def scenario(server: FakeApiServer) -> None:
        held = server.hold("GET", LEASE_PATH, times=None)
        operator = Operator.wire(server.client(), lifecycle=NodeLifecycle.AUTO)
        operator.start(lambda task: None)
        await until(lambda: len(server.seen("GET", LEASE_PATH)) >= 1, "the Lease asked for")
        await asyncio.wait_for(operator.stop(), 10)
        assert server.seen("GET", "/api/v1/nodes") == []
        held.gate.set()
        await operator.api.close()

    run(scenario)


@pytest.mark.parametrize(
    ("status", "reason"),
    [(429, "TooManyRequests"), (500, "InternalError"), (504, "Timeout")],
)
def test_a_lease_read_the_api_server_could_not_answer_is_asked_again(
    status: int, reason: str
) -> None:
    """Priority and fairness' 429, a 5xx: the API server did not say whether the Lease
    exists, so it is not read as "no Lease" (which would decide ``ready`` for good): asked
    again, and the Lease, once read, decides."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("leases", lease("host_1a2b", 1.0))
        server.refuse("GET", LEASE_PATH, status, reason, times=1)
        async with server.client() as api:
            assert await resolve(api, NodeLifecycle.AUTO, clock=lambda: NOW) is False
        assert len(server.seen("GET", LEASE_PATH)) == 2

    run(scenario)


@pytest.mark.parametrize(("status", "reason"), [(401, "Unauthorized"), (403, "Forbidden")])
def test_a_refusal_is_an_answer_asked_once(
    status: int, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """401 and 403 will not change by asking again: the ready rule, at once, with one
    warning that names the status and the flag that decides instead."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("leases", lease("host_1a2b", 1.0))
        server.refuse("GET", LEASE_PATH, status, reason)
        async with server.client() as api:
            assert await asyncio.wait_for(resolve(api, NodeLifecycle.AUTO), 10) is True
        assert len(server.seen("GET", LEASE_PATH)) == 1

    with caplog.at_level(logging.INFO, logger="orca.lifecycle"):
        run(scenario)
    (record,) = [r for r in caplog.records if r.name == "orca.lifecycle"]
    assert record.levelno == logging.WARNING
    assert f"{status} {reason}" in record.getMessage()
    assert "--node-lifecycle=taints" in record.getMessage()


def test_a_lease_that_is_there_is_logged_once_at_info(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("leases", lease("host_1a2b", 1.0))
        async with server.client() as api:
            assert await resolve(api, NodeLifecycle.AUTO, clock=lambda: NOW) is False

    with caplog.at_level(logging.DEBUG, logger="orca.lifecycle"):
        run(scenario)
    lines = [r for r in caplog.records if r.name == "orca.lifecycle"]
    assert [(r.levelno, r.getMessage()[:45]) for r in lines] == [
        (logging.INFO, "node lifecycle: kube-controller-manager holds")
    ]


def test_the_lease_is_asked_again_after_a_pause_that_doubles_up_to_ten_seconds(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    paused: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:  # asyncio's own, for everyone: the lifecycle's
        if seconds:  # pauses are the ones that are not a mere yield
            paused.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("controller.operator.lifecycle.asyncio.sleep", sleep)

    async def scenario(server: FakeApiServer) -> None:
        server.put("leases", lease("host_1a2b", 1.0))
        server.refuse("GET", LEASE_PATH, 503, "ServiceUnavailable", times=7)
        async with server.client() as api:
            assert await resolve(api, NodeLifecycle.AUTO, clock=lambda: NOW) is False

    with caplog.at_level(logging.WARNING, logger="orca.lifecycle"):
        run(scenario)
    assert paused == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    first = next(r.getMessage() for r in caplog.records if r.name == "orca.lifecycle")
    assert first.startswith("node lifecycle: cannot read the Lease yet (503 ")
    assert first.endswith("); retrying")


def test_a_lease_renewed_exactly_fresh_seconds_ago_still_counts() -> None:
    """Stale is strictly older than ``FRESH_SECONDS``."""
    assert verdict_of_lease(lease("host_1a2b", FRESH_SECONDS), NOW).imply is False
    assert verdict_of_lease(lease("host_1a2b", FRESH_SECONDS + 0.001), NOW).imply is True


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        (
            NodeLifecycle.TAINTS,
            "node lifecycle: --node-lifecycle=taints: only the node lifecycle controller's "
            "NoExecute taints move replicas",
        ),
        (
            NodeLifecycle.READY,
            "node lifecycle: --node-lifecycle=ready: a NotReady Node without a lifecycle taint "
            "counts as tainted from its Ready change",
        ),
    ],
)
def test_a_mode_given_is_said_in_the_log(
    mode: NodeLifecycle, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            await resolve(api, mode)

    with caplog.at_level(logging.INFO, logger="orca.lifecycle"):
        run(scenario)
    assert [r.getMessage() for r in caplog.records if r.name == "orca.lifecycle"] == [said]


def test_the_lease_is_read_with_a_get_counted_as_one() -> None:
    def count() -> float:
        labels = {"verb": "GET", "resource": "leases", "code": "200"}
        return REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0

    before = count()

    async def scenario(server: FakeApiServer) -> None:
        server.put("leases", lease("host_1a2b", 1.0))
        async with server.client() as api:
            await read_verdict(api, clock=lambda: NOW)

    run(scenario)
    assert count() - before == 1.0
