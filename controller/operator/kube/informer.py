"""The Workload and Node watches: orca's own list-then-watch, not kopf's.

These two kinds are the hot path. Each Workload is seen at least twice (as listed or created,
then the echo of its status write), and under a backlog of 10,000 Workloads on 5,000 Nodes
kopf's per-event machinery (a worker task and queue per object, a ``Body`` view, a logger, the
handler's invocation) was 23% of the operator's CPU (py-spy on
``bench/bench_vs_kube_scheduler.py --mode backlog``), with kopf's own LIST of every object on
top of ours. The reconciler LISTs both kinds itself anyway (kopf gives no "initial listing is
complete" signal, and nothing is decided before it is), so each watch is its LIST's other
half, as in client-go's informers:

    LIST (``Reconciler.relist``)  ->  WATCH from the list's resourceVersion, with bookmarks
      an event   into the state (``apply_workload_event``, ``apply_node_event``), which
                 queues whoever may need a decision again
      ends       the server closes a watch after ``timeout`` seconds: watch again from the
                 last version seen (a bookmark keeps it fresh when nothing changes)
      410 Gone   the version left the API server's watch cache (a restart, a long outage):
                 events were missed, deletions too, so LIST again and look at every Workload
      breaks     connection refused or cut: back off and watch again from the last version

kopf stays the operator framework: the process's lifecycle, login, the liveness probe, and
the PriorityClass watch (``handlers``), a handful of objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from controller.operator.kube.client import ApiError, TransportError
from controller.operator.reconciler import Reconciler
from controller.operator.state import workload_key
from controller.operator.telemetry import metrics

logger = logging.getLogger("orca.informer")

#: Seconds each watch asks the API server to stay open (``timeoutSeconds``), then it starts again.
WATCH_TIMEOUT = 300
#: Back-off between failed attempts (seconds): doubling from the first to the last.
BACKOFF = (0.5, 30.0)


#: Applies one watch event (its type and object) to the reconciler's state.
Apply = Callable[[Reconciler, str, dict[str, Any]], None]


def apply_workload_event(reconciler: Reconciler, kind: str, obj: dict[str, Any]) -> None:
    """A Workload added or changed is queued if it may need a decision (not the echo of our
    own status write); one deleted frees its capacity for whoever waits for some."""
    state, queue = reconciler.state, reconciler.queue
    if kind == "DELETED":
        if state.delete_workload(workload_key(obj)):
            queue.add_all(state.keys_waiting_for_capacity())
    elif kind in ("ADDED", "MODIFIED"):
        record = state.upsert_workload(obj)
        if record is not None:
            queue.add(record.key)


def apply_node_event(reconciler: Reconciler, kind: str, obj: dict[str, Any]) -> None:
    """A Node added, changed (in what the scheduler reads: not a heartbeat) or deleted."""
    state = reconciler.state
    if kind == "DELETED":
        name = (obj.get("metadata") or {}).get("name")
        changed = name if isinstance(name, str) and state.delete_node(name) else None
    elif kind in ("ADDED", "MODIFIED"):
        changed = state.upsert_node(obj)
    else:
        return
    if changed:
        reconciler.node_changed(changed)


class Informer:
    """Keeps the state's objects of one collection (``path``) in step with the API server."""

    def __init__(
        self,
        reconciler: Reconciler,
        path: str,
        apply: Apply,
        resource: str,
        timeout: int = WATCH_TIMEOUT,
    ) -> None:
        self.reconciler = reconciler
        self.path = path
        self.apply_event = apply
        self.resource = resource  # the ``resource`` label of orca_watch_restarts_total
        self.timeout = timeout
        self.version: str | None = None
        #: The back-off's clock and sleep (a test gives fake ones).
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def run(self) -> None:
        """Watch forever, from the reconciler's initial LIST on. A watch that fails (refused,
        broken, or ended at once) is tried again after a back-off doubling from 0.5 s to
        30 s; the back-off starts again from 0.5 s after a watch that ran for more than a
        second (client-go's reflector also resets its back-off after a quiet spell)."""
        await self.reconciler.ready.wait()
        self.version = self.reconciler.list_versions.get(self.path)
        delay = BACKOFF[0]
        while True:
            started = self.clock()
            try:
                await self.watch_once()
            except ApiError as exc:
                if exc.status == 410:
                    metrics.WATCH_RESTARTS.labels(resource=self.resource, reason="expired").inc()
                    logger.info("the %s watch expired (%s): relisting", self.resource, exc)
                    await self.list_again()
                    delay = BACKOFF[0]
                    continue
                failure, log = f"was refused ({exc})", logger.warning
            except TransportError as exc:
                metrics.WATCH_RESTARTS.labels(resource=self.resource, reason="broken").inc()
                failure, log = f"broke ({exc})", logger.info
            else:
                if self.clock() - started > 1.0:
                    delay = BACKOFF[0]
                    continue  # the server ended it after its timeout: watch on at once
                failure, log = "ended at once", logger.info
            if self.clock() - started > 1.0:
                delay = BACKOFF[0]  # it ran a while: a new failure, not the last one's sequel
            log("the %s watch %s; again in %.1fs", self.resource, failure, delay)
            await self.sleep(delay)
            delay = min(delay * 2, BACKOFF[1])

    async def watch_once(self) -> None:
        """One watch, from ``version`` until the server ends it."""
        api = self.reconciler.api
        async for event in api.watch(self.path, self.version, self.timeout):
            self.apply(event)

    def apply(self, event: dict[str, Any]) -> None:
        """One watch event into the state (and the queue); remember its version."""
        obj = event.get("object") or {}
        self.apply_event(self.reconciler, str(event.get("type")), obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = version  # BOOKMARK events carry only this

    async def list_again(self) -> None:
        """What the expired watch would have said (deletions included) is in a new LIST of
        everything (as the periodic resync makes: a 410 is rare); then watch on from it."""
        await self.reconciler.list_until_done(f"listing again after the {self.resource} watch")
        self.version = self.reconciler.list_versions.get(self.path)
