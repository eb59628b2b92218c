"""Leader election (``controller/operator/leader.py``) driven end to end: the real
``LeaderElector`` and ``KubeApi`` against an in-process Lease API (``fakeapi``) over loopback
HTTP, with a fake monotonic clock where time matters.

The Lease fields are checked against what client-go writes (k8s.io/client-go@v0.36.3
tools/leaderelection/leaderelection.go): ``tryAcquireOrRenew`` creates the Lease with
``leaseTransitions`` 0 and ``acquireTime`` = ``renewTime`` = now; keeps ``acquireTime`` and
``leaseTransitions`` on a renew (``if le.IsLeader()``); sets ``acquireTime`` to now and adds one
to ``leaseTransitions`` on a takeover (``else { LeaderTransitions + 1 }``); judges expiry by
``isLeaseValid``: ``observedTime`` (this replica's clock, when the record last changed) +
``leaseDurationSeconds``, never the Lease's own ``renewTime``. ``release`` writes an empty
holder, ``leaseDurationSeconds`` 1, both times now, and keeps ``leaseTransitions``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller.operator.kube import KubeApi
from controller.operator.kube.leader import LeaderElector, default_identity
from tests.support.fakeapi import FakeApiServer, FakeClock, Fault, run, until

NS, NAME = "orca-system", "orca-controller"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
ITEM = f"{LEASE}/{NAME}"
RETRY = 0.02  # seconds between rounds (real): the clock that matters is the fake one


class Replica:
    """One operator replica's elector: its own client (session), clock and task."""

    def __init__(self, server: FakeApiServer, identity: str) -> None:
        self.identity = identity
        self.api: KubeApi = server.client(token=identity)  # the server tells replicas apart
        self.clock = FakeClock()
        self.elected: list[float] = []
        self.elector = LeaderElector(
            self.api,
            NS,
            NAME,
            identity,
            lease_duration=15.0,
            renew_deadline=10.0,
            retry_period=RETRY,
            on_elected=lambda: self.elected.append(self.clock()),
        )
        self.elector.clock = self.clock
        self.task: asyncio.Task[None] | None = None

    def start(self) -> Replica:
        self.task = asyncio.create_task(self.elector.run())
        return self

    @property
    def leader(self) -> bool:
        return self.elector.holds_lease()

    async def stop(self) -> None:
        """A graceful stop: cancel the loop (its ``finally`` releases the Lease)."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.api.close()

    def failure(self) -> BaseException | None:
        assert self.task is not None
        return self.task.exception() if self.task.done() and not self.task.cancelled() else None


async def alive_until(replica: Replica, predicate: Callable[[], bool], what: str) -> None:
    """``until``, failing at once (with the error) if the elector's task died meanwhile."""
    await until(lambda: predicate() or replica.failure() is not None, what)
    assert replica.failure() is None, f"the elector stopped: {replica.failure()!r}"


async def rounds(server: FakeApiServer, replica: Replica, count: int = 3) -> None:
    """Wait until ``replica`` has made ``count`` more rounds (each starts with a GET)."""

    def answered() -> int:
        return sum(1 for s in server.seen("GET", ITEM) if s.outcome and s.token == replica.identity)

    target = answered() + count
    await alive_until(replica, lambda: answered() >= target, "rounds")


def lease() -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": NAME}}


def held_by(server: FakeApiServer, holder: str, transitions: int = 3) -> dict[str, Any]:
    """A Lease another replica holds, renewed (by its own wall clock) long ago."""
    obj = lease()
    obj["metadata"]["namespace"] = NS
    obj["spec"] = {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "acquireTime": "2001-01-01T00:00:00.000000Z",
        "renewTime": "2001-01-01T00:00:00.000000Z",
        "leaseTransitions": transitions,
    }
    return server.put("leases", obj)


def spec(server: FakeApiServer) -> dict[str, Any]:
    stored = server.get("leases", NAME, NS)
    assert stored is not None
    result: dict[str, Any] = stored["spec"]
    return result


def test_the_first_replica_creates_the_lease_as_client_go_does_and_renews_it() -> None:
    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        created = server.seen("POST", LEASE)
        assert [s.outcome for s in created] == ["201"]
        first = dict(created[0].body["spec"])  # type: ignore[index]
        assert first["holderIdentity"] == "a"
        assert first["leaseDurationSeconds"] == 15
        assert first["leaseTransitions"] == 0
        assert first["acquireTime"] == first["renewTime"]
        await rounds(server, a)
        renewed = spec(server)
        puts = [s for s in server.seen("PUT", ITEM) if s.outcome == "200"]
        assert len(puts) >= 2  # every round renews
        assert renewed["holderIdentity"] == "a"
        assert renewed["acquireTime"] == first["acquireTime"]  # kept on a renew
        assert renewed["leaseTransitions"] == 0  # kept on a renew
        assert renewed["renewTime"] > first["renewTime"]
        assert a.leader and a.elected == [a.clock()]  # elected once, not per renew
        await a.stop()

    run(scenario)


def test_a_standby_judges_expiry_on_its_own_clock_and_takes_over_as_client_go_does() -> None:
    """The holder's ``renewTime`` says 2001: by wall clocks long expired. The standby judges
    by its own clock only: the record must stay unchanged for ``leaseDurationSeconds`` from
    when the standby first saw it."""

    async def scenario(server: FakeApiServer) -> None:
        held_by(server, "old", transitions=3)
        b = Replica(server, "b").start()
        await rounds(server, b)
        assert not b.leader and spec(server)["holderIdentity"] == "old"
        b.clock.advance(14.9)
        await rounds(server, b)
        assert not b.leader and spec(server)["holderIdentity"] == "old"
        # The holder renews (the record changes): the standby's observation starts again.
        renewed = server.get("leases", NAME, NS)
        assert renewed is not None
        renewed["spec"]["renewTime"] = "2001-01-01T00:00:10.000000Z"
        server.put("leases", renewed)
        await rounds(server, b)
        b.clock.advance(14.9)  # 29.8 s since the first look, 14.9 s since the change
        await rounds(server, b)
        assert not b.leader and spec(server)["holderIdentity"] == "old"
        assert not server.seen("PUT", ITEM)  # never tried while the Lease was valid
        b.clock.advance(0.2)
        await until(lambda: b.leader, "b takes over the expired Lease")
        taken = spec(server)
        assert taken["holderIdentity"] == "b"
        assert taken["leaseTransitions"] == 4  # one more than the holder's
        assert taken["acquireTime"] == taken["renewTime"] != "2001-01-01T00:00:00.000000Z"
        await rounds(server, b)
        assert spec(server)["leaseTransitions"] == 4  # its renews keep it
        assert spec(server)["acquireTime"] == taken["acquireTime"]
        await b.stop()

    run(scenario)


def test_a_standby_looks_every_half_round_and_wakes_when_the_lease_expires() -> None:
    """A leader killed outright: its standby reads the Lease every half ``retry_period`` (it
    sees the last renewal at most 1 s late) and sleeps no further than the instant the Lease
    it waits for expires on its own clock, rather than up to a whole round past it; once it
    leads it renews every ``retry_period``. The rounds here run at once: the waits asked
    for are what is checked, against the fake clock."""

    async def scenario(server: FakeApiServer) -> None:
        held_by(server, "old")
        b = Replica(server, "b")
        b.elector.retry_period = 2.0
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            await asyncio.sleep(RETRY)

        b.elector.sleep = sleep
        b.start()
        await rounds(server, b)
        assert not b.leader and waits[-1] == 1.0  # half a round, the Lease 15 s from expiry
        b.clock.advance(14.5)
        await rounds(server, b)
        assert not b.leader and waits[-1] == pytest.approx(0.5, abs=0.02)  # to its expiry
        b.clock.advance(0.5)
        await until(lambda: b.leader, "b takes over at the expiry")
        await rounds(server, b)
        assert waits[-1] == 2.0  # the leader renews every round
        await b.stop()

    run(scenario)


def test_a_409_on_renew_means_not_leader_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """Another replica took the Lease between this one's GET and PUT: the server refuses the
    PUT (409), and the replica stops counting as leader at its next read of the Lease (which
    names the other holder), not at its renew deadline. The lost round is logged with the
    API server's words."""
    caplog.set_level(logging.INFO, logger="orca.leader")

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")

        def taken_over() -> None:
            current = server.get("leases", NAME, NS)
            assert current is not None
            current["spec"].update(holderIdentity="b", leaseTransitions=1)
            server.put("leases", current)

        fault = server.before("PUT", ITEM, taken_over)
        await alive_until(a, lambda: fault.arrived == 1, "a's renew met the takeover")
        await alive_until(a, lambda: not a.elector.is_leader, "a steps down")
        assert [s.outcome for s in server.seen("PUT", ITEM)][-1] == "409"
        assert a.clock() == 1000.0  # the fake clock never moved: not the deadline
        assert not a.leader
        await rounds(server, a)  # b's Lease is valid on a's clock: a stands by
        assert not a.leader and spec(server)["holderIdentity"] == "b"
        assert server.seen("PUT", ITEM)[-1].outcome == "409"  # and tries no more writes
        await a.stop()

    run(scenario)
    changed = "leader election: the Lease changed meanwhile (409 Conflict: "
    assert [r.levelno for r in caplog.records if r.getMessage().startswith(changed)] == [
        logging.INFO
    ]


def test_a_409_against_its_own_write_leaves_the_leader_leading() -> None:
    """A renew applied but answered on a closed connection is sent again by aiohttp (an
    idempotent PUT) and meets the replica's own write: 409. That is a round lost, not the
    Lease: the next round reads it, still held by this replica, and renews."""

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        puts = len(server.seen("PUT", ITEM))
        server.drop("PUT", ITEM, after=True)
        await alive_until(
            a, lambda: any(s.outcome == "409" for s in server.seen("PUT", ITEM)[puts:]), "409"
        )
        outcomes = [s.outcome for s in server.seen("PUT", ITEM)[puts:]]
        assert outcomes[:2] == ["dropped", "409"]  # applied and cut, then sent again
        await rounds(server, a)
        assert a.leader and a.elected == [1000.0]  # never stepped down
        assert server.seen("PUT", ITEM)[-1].outcome == "200"
        await a.stop()

    run(scenario)


def test_two_standbys_racing_for_an_expired_lease_exactly_one_wins() -> None:
    async def scenario(server: FakeApiServer) -> None:
        held_by(server, "old", transitions=7)
        b, c = Replica(server, "b").start(), Replica(server, "c").start()
        await rounds(server, b)
        await rounds(server, c)
        # Both read the same version of the expired Lease before either writes.
        barrier = server.add(Fault("GET", ITEM, "hold", times=2))
        b.clock.advance(16)
        c.clock.advance(16)
        await until(lambda: barrier.arrived == 2, "both standbys read the Lease")
        barrier.gate.set()
        await until(lambda: len([s for s in server.seen("PUT", ITEM) if s.outcome]) >= 2, "PUTs")
        first_two = [s.outcome for s in server.seen("PUT", ITEM)][:2]
        assert sorted(first_two) == ["200", "409"]  # one precondition held, one failed
        await rounds(server, b)
        await rounds(server, c)
        assert [b.leader, c.leader].count(True) == 1
        winner = "b" if b.leader else "c"
        assert spec(server)["holderIdentity"] == winner
        assert spec(server)["leaseTransitions"] == 8  # one takeover, counted once
        for loser in (b, c):
            if not loser.leader:
                assert loser.elected == []
        await b.stop()
        await c.stop()

    run(scenario)


@pytest.mark.parametrize(
    "fault",
    ["drop", "drop-after", "cut"],
    ids=["closed-before-applied", "closed-after-applied", "answer-cut-short"],
)
def test_a_connection_closed_mid_renew_keeps_the_elector_running(fault: str) -> None:
    """The fault that stopped the operator: a connection the server closes while a renew is
    in flight (aiohttp's ``ServerDisconnectedError``; ``ClientPayloadError`` for an answer cut
    short). The elector goes on, counts as leader until its renew deadline, steps down after
    it, and takes the Lease up again when the server answers again."""

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        server.add(Fault("PUT", ITEM, fault, times=None))
        await alive_until(a, lambda: len(server.seen("PUT", ITEM)) >= 4, "renews failing")
        a.clock.advance(9.9)  # under the renew deadline (10 s) since the last renew
        await rounds(server, a)
        assert a.leader
        a.clock.advance(0.2)
        assert not a.leader  # past the deadline: writes nothing more
        await rounds(server, a)
        assert not a.elector.is_leader and a.failure() is None
        outcomes = {s.outcome for s in server.seen("PUT", ITEM)}
        assert {"dropped", "cut"} & outcomes  # the fault really happened
        server.clear()
        await until(lambda: a.leader, "a takes the Lease up again")
        assert len(a.elected) == 2  # a new election: the loop requeues everything
        assert spec(server)["holderIdentity"] == "a"
        assert spec(server)["leaseTransitions"] == 0  # nobody else held it meanwhile
        await a.stop()

    run(scenario)


def test_the_renew_deadline_counts_from_when_the_renew_was_sent() -> None:
    """A renew the API server answers 4 s after it was sent: it may have been applied at any
    moment in between, so the leadership it buys ends ``renew_deadline`` (10 s) after it was
    *sent*, not after it was answered (which would keep acting as leader past the deadline a
    standby relies on). Every renew after it is dropped, so it stays the last one that
    counted: leader at 9.9 s after sending, not at 10.5 s."""

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        sent = a.clock()
        slow = server.before("PUT", ITEM, hook=lambda: a.clock.advance(4), times=1)
        server.drop("PUT", ITEM, times=None)

        def dropped() -> int:
            return sum(1 for s in server.seen("PUT", ITEM) if s.outcome == "dropped")

        await alive_until(a, lambda: slow.arrived == 1 and dropped() >= 2, "the slow renew")
        assert a.clock() == sent + 4  # answered 4 s after it was sent
        a.clock.advance(5.9)
        assert a.leader  # 9.9 s after sending
        a.clock.advance(0.6)
        assert not a.leader  # 10.5 s after sending, 6.5 s after the answer
        await a.stop()

    run(scenario)


def test_the_api_server_gone_for_longer_than_the_deadline_is_ridden_through() -> None:
    """Every request refused at the socket (the API server down): no answer, many times."""

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        server.add(Fault("*", LEASE, "drop", times=None))
        a.clock.advance(11)
        await alive_until(a, lambda: len(server.seen(path=LEASE)) > 20, "many failed rounds")
        assert not a.leader
        server.clear()
        await until(lambda: a.leader, "a leads again")
        await a.stop()

    run(scenario)


def test_a_graceful_stop_releases_the_lease_and_a_standby_takes_it_at_once() -> None:
    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        b = Replica(server, "b").start()
        await rounds(server, b)
        before = spec(server)
        await a.stop()
        released = [s.body for s in server.seen("PUT", ITEM) if s.outcome == "200"][-1]
        assert released is not None
        assert released["spec"]["holderIdentity"] == ""
        assert released["spec"]["leaseDurationSeconds"] == 1
        assert released["spec"]["leaseTransitions"] == before["leaseTransitions"]
        assert released["spec"]["acquireTime"] == released["spec"]["renewTime"]
        assert not a.elector.is_leader
        # b's clock has not moved: an empty holder is taken without waiting for expiry.
        await until(lambda: b.leader, "b takes the released Lease")
        assert spec(server)["holderIdentity"] == "b"
        assert spec(server)["leaseTransitions"] == before["leaseTransitions"] + 1
        await b.stop()

    run(scenario)


def test_a_stop_while_the_server_is_unreachable_ends_quietly() -> None:
    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        server.add(Fault("*", LEASE, "drop", times=None))
        await a.stop()  # the release gets no answer: logged, and the stop goes on
        assert a.task is not None and a.task.cancelled()
        assert not a.elector.is_leader
        assert spec(server)["holderIdentity"] == "a"  # not released: it expires instead

    run(scenario)


def test_a_standby_never_releases_what_it_does_not_hold() -> None:
    async def scenario(server: FakeApiServer) -> None:
        held_by(server, "old")
        b = Replica(server, "b").start()
        await rounds(server, b)
        await b.stop()
        assert not server.seen("PUT", ITEM)
        assert spec(server)["holderIdentity"] == "old"

    run(scenario)


def test_a_lease_is_expired_once_its_duration_has_passed_as_client_go_judges() -> None:
    """client-go's ``isLeaseValid``: valid while ``observedTime + leaseDurationSeconds`` is
    *after* now, so at exactly ``leaseDurationSeconds`` since the record last changed the
    Lease is expired and a standby takes it (a standby waiting one round more would leave the
    cluster without a leader a retry period longer than the one a Go replica allows)."""

    async def scenario(server: FakeApiServer) -> None:
        held_by(server, "old")
        b = Replica(server, "b").start()
        await rounds(server, b)
        b.clock.advance(14.5)
        await rounds(server, b)
        assert not b.leader and not server.seen("PUT", ITEM)
        b.clock.advance(0.5)  # exactly 15 s since b first saw this record
        await until(lambda: b.leader, "b takes over at exactly leaseDurationSeconds")
        await b.stop()

    run(scenario)


def test_lease_times_are_micro_times_the_api_server_parses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``acquireTime`` and ``renewTime`` are ``metav1.MicroTime``: RFC 3339 with exactly six
    fractional digits (k8s.io/apimachinery pkg/apis/meta/v1/micro_time.go, ``RFC3339Micro``),
    in UTC; a Lease written otherwise is refused by the API server (400). The time is now:
    tools that show leader changes (``kubectl get lease``) read it, whatever the local time
    zone of the Pod (``TZ``)."""
    monkeypatch.setenv("TZ", "IST-5:30")  # a POSIX zone 5.5 hours east of UTC
    time.tzset()
    micro = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

    async def scenario(server: FakeApiServer) -> None:
        before = datetime.now(UTC)
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        await rounds(server, a)
        await a.stop()
        after = datetime.now(UTC)
        bodies = [s.body for s in server.seen(path=LEASE) if s.method in ("POST", "PUT")]
        assert len(bodies) >= 3  # created, renewed, released
        for body in bodies:
            assert body is not None
            for field in ("acquireTime", "renewTime"):
                written = body["spec"][field]
                assert micro.match(written), written
                when = datetime.strptime(written, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
                assert before - timedelta(seconds=1) <= when <= after + timedelta(seconds=1)

    try:
        run(scenario)
    finally:
        monkeypatch.undo()  # TZ as it was, and the zone read again
        time.tzset()


def test_the_default_identity_names_the_host_and_process_and_is_unique() -> None:
    """The holder an operator reads in the Lease: which pod (hostname) and process, and a
    random part so a restarted process never passes for its predecessor."""
    first, second = default_identity(), default_identity()
    host, pid, tail = first.rsplit("_", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert re.fullmatch(r"[0-9a-f]{6}", tail)
    assert first != second


def test_leadership_changes_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """What an operator reads to tell when and why a replica led, stepped down or lost the
    Lease: elected (with the Lease and identity), the deadline passed, another holder seen,
    the Lease released."""
    caplog.set_level(logging.INFO, logger="orca.leader")

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        server.add(Fault("PUT", ITEM, "drop", times=None))
        await rounds(server, a)
        a.clock.advance(10)
        assert not a.leader  # exactly the renew deadline since the last renew was sent
        server.clear()
        await until(lambda: a.leader, "a leads again")

        def taken_over() -> None:
            current = server.get("leases", NAME, NS)
            assert current is not None
            current["spec"].update(holderIdentity="b")
            server.put("leases", current)

        server.before("PUT", ITEM, taken_over)
        await alive_until(a, lambda: not a.elector.is_leader, "a steps down")
        await rounds(server, a)  # reads b's Lease: lost
        await a.stop()

    run(scenario)
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    lease = f"{NS}/{NAME}"
    assert (logging.INFO, f"became leader (Lease {lease}, a)") in messages
    assert (
        logging.ERROR,
        f"leader Lease {lease} not renewed within 10.0s: writing nothing more",
    ) in messages
    assert any(m.startswith("leader election: PUT ") for _, m in messages)
    assert (logging.WARNING, f"lost the leader Lease {lease} (held by b)") in messages


def test_a_release_is_logged_and_a_failed_one_says_why(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="orca.leader")

    async def scenario(server: FakeApiServer) -> None:
        a = Replica(server, "a").start()
        await until(lambda: a.leader, "a elected")
        await a.stop()
        b = Replica(server, "b").start()
        await until(lambda: b.leader, "b elected")
        server.refuse("PUT", ITEM, 500, "InternalError", times=None)
        await b.stop()

    run(scenario)
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.INFO, "released the leader Lease") in messages
    # Every request the elector made is counted under its HTTP verb, as the API server's own
    # apiserver_request_total spells it (a dashboard sums both by verb).
    verbs = {
        sample.labels["verb"]
        for metric in REGISTRY.collect()
        if metric.name == "orca_api_requests"
        for sample in metric.samples
        if sample.labels.get("resource") == "leases"
    }
    assert verbs and verbs <= {"GET", "POST", "PUT"}
    assert (
        logging.WARNING,
        "could not release the Lease: 500 InternalError: injected 500",
    ) in messages


@pytest.mark.parametrize(("duration", "wait"), [(40, 40.0), (None, 15.0)], ids=["40s", "unset"])
def test_a_standby_waits_the_leases_own_duration(duration: int | None, wait: float) -> None:
    """Expiry is judged by the Lease's ``leaseDurationSeconds`` (the holder's setting, not
    the standby's), 15 s when the Lease names none."""

    async def scenario(server: FakeApiServer) -> None:
        obj = held_by(server, "old")
        if duration is None:
            del obj["spec"]["leaseDurationSeconds"]
        else:
            obj["spec"]["leaseDurationSeconds"] = duration
        server.put("leases", obj)
        b = Replica(server, "b").start()
        await rounds(server, b)
        b.clock.advance(wait - 0.5)
        await rounds(server, b)
        assert not b.leader and not server.seen("PUT", ITEM)
        b.clock.advance(0.5)
        await until(lambda: b.leader, "b takes over after the Lease's own duration")
        await b.stop()

    run(scenario)


def test_losing_the_race_to_create_the_lease_is_not_winning_it() -> None:
    """Two replicas starting at once both find no Lease; the second POST is refused (409
    AlreadyExists): that replica stands by, it does not count as leader."""

    async def scenario(server: FakeApiServer) -> None:
        def other_created_it() -> None:
            obj = lease()
            obj["metadata"]["namespace"] = NS
            obj["spec"] = {"holderIdentity": "a", "leaseDurationSeconds": 15}
            server.put("leases", obj)

        server.before("POST", LEASE, other_created_it)
        b = Replica(server, "b").start()
        await alive_until(b, lambda: any(s.outcome == "409" for s in server.seen("POST")), "409")
        await rounds(server, b)
        assert not b.leader and b.elected == []
        assert spec(server)["holderIdentity"] == "a"
        await b.stop()

    run(scenario)


def test_the_replica_that_creates_the_lease_leads_from_that_round() -> None:
    """Creating the Lease is winning it: leader at once, not a retry period later."""

    async def scenario(server: FakeApiServer) -> None:
        def hold_the_next_rounds() -> None:
            server.hold("GET", ITEM, times=None)

        server.before("POST", LEASE, hold_the_next_rounds)
        a = Replica(server, "a").start()
        await alive_until(a, lambda: a.leader, "a leads after its POST alone")
        assert [s.outcome for s in server.seen("POST")] == ["201"]
        server.clear()
        await a.stop()

    run(scenario)


def test_a_default_replica_runs_on_the_monotonic_clock_with_kube_schedulers_timing() -> None:
    """``orca operate`` builds its elector with every default (``app.py``): the monotonic
    clock (the fence's deadline must keep running while the process is frozen), and
    kube-scheduler's leader election timing, which docs/faults.md states: a Lease of 15 s,
    a renew deadline of 10 s, a round every 2 s (k8s.io/component-base config/v1alpha1
    defaults.go, ``RecommendedDefaultLeaderElectionConfiguration``). A replica is not
    leader before its first round; the round that creates the Lease elects it, once, with
    the leader gauge at 1, and a stop hands it back (gauge 0). Nothing here asks
    ``holds_lease`` before the election, so only the round itself can elect."""

    def leader_gauge() -> float | None:
        return REGISTRY.get_sample_value("orca_leader")

    async def scenario(server: FakeApiServer) -> None:
        api = server.client(token="a")
        elected: list[bool] = []
        elector = LeaderElector(api, NS, NAME, "a", on_elected=lambda: elected.append(True))
        assert (elector.lease_duration, elector.renew_deadline, elector.retry_period) == (
            15.0,
            10.0,
            2.0,
        )
        assert not elector.is_leader
        task = asyncio.create_task(elector.run())
        await until(lambda: bool(elected) or task.done(), "a elected")
        assert not task.done(), task
        assert elected == [True] and elector.is_leader and leader_gauge() == 1.0
        assert elector.holds_lease()  # its clock is running: just renewed, well within 10 s
        assert spec(server)["leaseDurationSeconds"] == 15
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        assert not elector.is_leader and leader_gauge() == 0.0
        assert spec(server)["holderIdentity"] == ""  # released

    run(scenario)
