"""Leader election on a ``coordination.k8s.io/v1`` Lease, so a second replica stands by.

The same protocol as client-go's ``leaderelection``: the leader renews the Lease every
``retry_period``; a standby takes it over once the Lease record has not changed for
``lease_duration`` *as observed on the standby's own clock* (no cross-node clock comparison);
a leader that cannot renew within ``renew_deadline`` steps down. Every write carries the
Lease's resourceVersion, so two replicas can never both win the same round.

Write fencing (client-go's rule): a replica counts as leader only until *the start of its last
successful renew* + ``renew_deadline``, on the monotonic clock, which keeps running while the
process is frozen. ``holds_lease`` is asked before every decision and, through
``KubeApi.fence``, right before every status write or Event leaves; a leader frozen past its
deadline (SIGSTOP, a stalled VM) wakes up, finds the deadline passed, steps down and sends
nothing it had queued. A standby takes over only after ``lease_duration`` > ``renew_deadline``
of silence, so the two never write in the same window (up to the margin between the two).

Field by field the Lease is written as client-go writes it (``tryAcquireOrRenew`` and
``release`` in k8s.io/client-go/tools/leaderelection/leaderelection.go): created with
``leaseTransitions`` 0 and ``acquireTime`` = ``renewTime`` = now; a renew keeps both; a
takeover (including of a released Lease) sets ``acquireTime`` to now and adds one to
``leaseTransitions``; a release empties ``holderIdentity``, sets ``leaseDurationSeconds`` to 1
and both times to now, and keeps ``leaseTransitions``.

A renew refused with 409 Conflict (the Lease changed since this replica read it) is a round
not won, as in client-go: the next round reads the Lease again. A replica that reads another
holder on a Lease still valid stops counting as leader at once, without waiting for its
deadline (client-go's ``IsLeader`` turns false as soon as the record it observes names
another holder). A 409 alone proves nothing more: aiohttp sends an idempotent request (a PUT)
once more when its connection closed before the answer, and the first one may have been
applied, so the second meets this replica's own write. A request that got no answer
(``TransportError``: a connection closed mid-renew, the API server down) changes nothing:
the leader keeps renewing, and steps down only when ``renew_deadline`` has passed.

A standby takes over as soon as the Lease may be taken: it reads the Lease every half
``retry_period`` (a GET), so it sees the holder's last renewal at most 1 s late (its clock
starts then), and wakes at the instant the Lease it watches expires rather than at its next
round. A leader killed outright is replaced within ``lease_duration`` + ``retry_period`` / 2
of its last renewal (client-go's standby reads every ``retry_period``, jittered, and looks
again only at its next round: up to ``lease_duration`` + 2 x ``retry_period`` and more).

Standbys keep watching (their in-memory state stays warm) but decide and write nothing; on
election the loop resyncs every Workload. A graceful stop releases the Lease at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from controller.operator.kube.client import ApiError, KubeApi, TransportError
from controller.operator.telemetry import metrics

logger = logging.getLogger("orca.leader")

#: A standby waking for a Lease's expiry wakes this much after it (the event loop's timers
#: may fire up to a clock tick early, and a round before the expiry would find it valid).
EXPIRY_MARGIN = 0.01


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Holds or waits for the Lease; ``holds_lease`` is what the scheduling loop and the
    write fence check (``is_leader`` alone may be stale after a freeze)."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_elected: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_elected = on_elected
        self.is_leader = False
        self._observed: tuple[str | None, float] = (None, 0.0)
        self._last_renew = 0.0  # time.monotonic() when the last successful renew was sent
        #: When the Lease another replica holds expires on this replica's clock, if it does.
        self._expires: float | None = None
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def holds_lease(self) -> bool:
        """Leader, and the last successful renew started less than ``renew_deadline`` ago.

        Past the deadline it steps down at once (so a later successful renew counts as a new
        election and requeues everything), without waiting for the renew loop to notice."""
        if not self.is_leader:
            return False
        if self.clock() - self._last_renew < self.renew_deadline:
            return True
        logger.error(
            "leader Lease %s/%s not renewed within %.1fs: writing nothing more",
            self.namespace,
            self.name,
            self.renew_deadline,
        )
        self._set(False)
        return False

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    async def run(self) -> None:
        """Try to acquire or renew every ``retry_period`` until cancelled; release on exit."""
        try:
            while True:
                sent = self.clock()
                try:
                    won = await self._try_once(sent)
                except (ApiError, TransportError) as exc:  # retried; the deadline decides
                    logger.warning("leader election: %s", exc)
                    won = False
                if won:
                    # The renew counts from when it was sent: the API server may have applied
                    # it any time after that, so the deadline is never later than the truth.
                    self._last_renew = sent
                    self._set(True)
                else:
                    self.holds_lease()  # steps down once the deadline has passed
                await self.sleep(self.until_next_round())
        finally:
            if self.is_leader:
                await asyncio.shield(self._release())

    def until_next_round(self) -> float:
        """Seconds to the next round: ``retry_period`` for the leader; for a standby half of
        it, and never past the instant the Lease it waits for expires (see the module)."""
        if self.is_leader:
            return self.retry_period
        wait = self.retry_period / 2
        if self._expires is not None:
            wait = min(wait, max(0.0, self._expires - self.clock()) + EXPIRY_MARGIN)
        return wait

    def _set(self, leader: bool) -> None:
        if leader == self.is_leader:
            return
        self.is_leader = leader
        metrics.IS_LEADER.set(1 if leader else 0)
        if leader:
            logger.info("became leader (Lease %s/%s, %s)", self.namespace, self.name, self.identity)
            if self.on_elected is not None:
                self.on_elected()

    async def _try_once(self, now: float) -> bool:
        """One round of client-go's ``tryAcquireOrRenew``: True when this replica wrote the
        Lease as its holder (created, renewed or taken over). ``now`` is when the round began,
        on this replica's monotonic clock: a Lease is expired when its record has not changed
        for its ``leaseDurationSeconds`` *as observed here* (client-go's ``observedTime``),
        never by comparing its ``renewTime`` with this node's wall clock."""
        try:
            lease = await self.api.request("GET", f"{self.path}/{self.name}")
        except ApiError as exc:
            if not exc.not_found:
                raise
            try:
                created = await self.api.request("POST", self.path, self._lease(None, 0))
            except ApiError as exc:
                if exc.conflict:  # another replica created it first: it holds the Lease
                    return False
                raise
            self._observed = (created["metadata"].get("resourceVersion"), now)
            return True
        spec = lease.get("spec") or {}
        version = lease["metadata"].get("resourceVersion")
        holder = spec.get("holderIdentity") or ""
        if version != self._observed[0]:
            self._observed = (version, now)
        # client-go's isLeaseValid: valid while observedTime + leaseDuration is after now.
        duration = float(spec.get("leaseDurationSeconds") or 15)
        expired = now - self._observed[1] >= duration
        self._expires = None
        if holder and holder != self.identity and not expired:
            self._expires = self._observed[1] + duration
            self._lost(f"held by {holder}")
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
        updated = self._lease(lease, transitions, spec.get("acquireTime"))
        try:
            result = await self.api.request("PUT", f"{self.path}/{self.name}", updated)
        except ApiError as exc:
            if exc.conflict:  # changed since the GET: the next round reads who holds it
                logger.info("leader election: the Lease changed meanwhile (%s)", exc)
                return False
            raise
        self._observed = (result["metadata"].get("resourceVersion"), now)
        return True

    def _lost(self, why: str) -> None:
        """The Lease is not ours any more: stop counting as leader now, not at the deadline."""
        if self.is_leader:
            logger.warning("lost the leader Lease %s/%s (%s)", self.namespace, self.name, why)
            self._set(False)

    def _lease(
        self, current: dict[str, Any] | None, transitions: int, acquired: str | None = None
    ) -> dict[str, Any]:
        now = _micro_time()
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if current is not None:
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
            if (current.get("spec") or {}).get("holderIdentity") != self.identity:
                acquired = None
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": acquired or now,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    async def _release(self) -> None:
        """Hand the Lease back (empty holder, 1 s) so a standby takes over at once."""
        try:
            lease = await self.api.request("GET", f"{self.path}/{self.name}")
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            now = _micro_time()  # client-go's release: both times now, transitions kept
            lease["spec"].update(
                holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now
            )
            await self.api.request("PUT", f"{self.path}/{self.name}", lease)
            logger.info("released the leader Lease")
        except (ApiError, TransportError) as exc:
            logger.warning("could not release the Lease: %s", exc)
        finally:
            self._set(False)
