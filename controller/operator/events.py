"""The Event recorder: ``Scheduled``, ``FailedScheduling``, ``Preempted`` and ``Rebalanced`` on
Workloads, queued where they happen (a status write that landed: ``transaction``) and posted
by a few posters of their own.

Events are informational: the status is the record. So they are paced (20/s in all) while
status writes are in flight (those get the API server first), go out several at a time once
none is, are dropped and counted when their queue is full (client-go's recorder drops them
too), and a stop posts what is queued for a bounded time only. They share the client's
connections with the status writes, in turn (``KubeApi.turns``): a poster is never starved of
one by the workers, so a queued Event waits its place in the queue, each poster taking one
per 0.4 s plus the POST's own time while writes are in flight (~6/s in all measured on a
5,000-Node living cluster whose API server was saturated), never a timeout.

One Workload cannot flood the API server with them either: client-go's recorder lets a source
post 25 Events about one object, then one every 5 minutes (``EventSourceObjectSpamFilter``,
tools/record/events_cache.go, its defaults ``defaultSpamBurst`` and ``defaultSpamQPS``), and so
does this one (``SpamFilter``): a node flapping between Ready and NotReady under a hundred
Workloads posts a hundred Events per flap at first, then a hundred every 5 minutes at most.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.api.models import API_VERSION, KIND
from controller.operator.kube import ApiError, Fenced, KubeApi, TransportError
from controller.operator.state import WorkloadRecord
from controller.operator.telemetry import metrics
from controller.scheduler.status import rfc3339_now

logger = logging.getLogger("orca.events")

COMPONENT = "orca-controller"
#: Events posted at a time when no status write is in flight (``EventRecorder.post``).
EVENT_POSTERS = 8
#: How long a graceful stop goes on posting queued Events (``EventRecorder.flush``).
EVENT_FLUSH_SECONDS = 3.0
#: Events queued at most; more are dropped and counted (``orca_events_dropped_total``).
EVENT_QUEUE = 10_000
#: client-go's spam filter: Events about one object at once, then one per this many seconds;
#: objects remembered at most (tools/record/events_cache.go).
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
SPAM_OBJECTS = 4096


class SpamFilter:
    """A token bucket per involved object and Event type (client-go's ``getSpamKey``: the
    source, which is this replica's alone, the object and the type): ``burst`` Events, then
    one per ``refill`` seconds; the ``size`` objects seen last are remembered (an LRU, as
    client-go's), so memory stays bounded whatever the number of Workloads."""

    def __init__(
        self,
        burst: int = SPAM_BURST,
        refill: float = SPAM_REFILL_SECONDS,
        size: int = SPAM_OBJECTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.refill, self.size, self.clock = burst, refill, size, clock
        self._buckets: OrderedDict[tuple[str, str | None, bool], tuple[float, float]] = (
            OrderedDict()
        )

    def allows(self, key: tuple[str, str | None, bool]) -> bool:
        """Whether one more Event about ``key`` may go (and take a token if so)."""
        now = self.clock()
        tokens, then = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) / self.refill)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > self.size:
            self._buckets.popitem(last=False)
        return allowed


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An Event waiting to be posted, kept as small as it can be: a backlog queues one per
    Workload while the status writes go first (10,000 as API dicts were ~16 MB of the
    operator's peak memory). ``body`` builds the API object when it is posted."""

    name: str
    namespace: str
    uid: str | None
    version: str | None  # the involved object's resourceVersion the Event is about
    reason: str
    message: str
    warning: bool
    time: str  # RFC 3339, when it happened (not when it is posted)
    instance: str  # reportingInstance: this replica

    def body(self) -> dict[str, Any]:
        return {
            "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": self.version,
            },
            "type": "Warning" if self.warning else "Normal",
            "reason": self.reason,
            "message": self.message,
            "firstTimestamp": self.time,
            "lastTimestamp": self.time,
            "count": 1,
            "source": {"component": COMPONENT},
            "reportingComponent": f"orca.cloudinit.dev/{COMPONENT}",
            "reportingInstance": self.instance,
        }


class EventRecorder:
    """Queues Events (``record``) and posts them (``post``, ``flush``)."""

    def __init__(
        self,
        api: KubeApi,
        busy: Callable[[], bool] = lambda: False,
        now: Callable[[], str] = rfc3339_now,
        identity: str = COMPONENT,
    ) -> None:
        self.api = api
        #: Whether status writes are in flight (the posters then hold back; ``Operator.wire``).
        self.busy = busy
        self.now = now
        self.identity = identity
        self.queue: asyncio.Queue[PendingEvent] = asyncio.Queue(maxsize=EVENT_QUEUE)
        self.spam = SpamFilter()

    def record(
        self,
        record: WorkloadRecord,
        reason: str,
        message: str,
        version: str | None,
        warning: bool = False,
    ) -> None:
        """Queue an Event on the Workload (dropped and counted when the queue is full or the
        spam filter says this Workload has had its share)."""
        if self.queue.full() or not self.spam.allows((record.key, record.uid, warning)):
            metrics.EVENTS_DROPPED.inc()
            return
        event = PendingEvent(
            record.name,
            record.namespace,
            record.uid,
            version,
            reason,
            message,
            warning,
            self.now(),
            self.identity,
        )
        self.queue.put_nowait(event)

    async def post(self, busy_interval: float = 0.05, posters: int = EVENT_POSTERS) -> None:
        """Post queued Events for ever. While status writes are in flight, one per
        ``busy_interval`` in all (20/s), so a burst's status writes get the API server first.
        When idle, ``posters`` at a time: posted one by one, a 10,000-Workload backlog's
        Events took 31 s after its last placement and cost the API server + etcd ~3 ms each,
        with no two etcd writes to batch (``bench_vs_kube_scheduler``, Events included)."""
        await asyncio.gather(*(self._poster(busy_interval * posters) for _ in range(posters)))

    async def _poster(self, busy_interval: float) -> None:
        """One poster: paced while status writes are in flight (checked before taking an
        Event, so none is held back unposted while it waits)."""
        while True:
            if self.busy():
                await asyncio.sleep(busy_interval)
            await self._post(await self.queue.get())  # on in any case: the server may be back

    async def _post(self, event: PendingEvent) -> bool:
        """Post one Event; False when this replica is fenced or the server is out of reach
        (the next Event would fail the same way), True when it was posted or only it was
        refused (its namespace terminating, say)."""
        try:
            await self.api.create_event(event.namespace, event.body())
        except (ApiError, Fenced, TransportError) as exc:
            logger.info("could not post event %s: %s", event.reason, exc)
            return isinstance(exc, ApiError)
        except Exception:  # a bug: this Event is dropped, the posters (and the operator) go on
            logger.exception("posting event %s on %s failed", event.reason, event.name)
        return True

    async def flush(self, within: float = EVENT_FLUSH_SECONDS, posters: int = EVENT_POSTERS) -> int:
        """Post what is queued now (a graceful stop), ``posters`` at a time, for at most
        ``within`` seconds; return how many were left unposted or cut short. Bounded because
        the Lease is handed back only after this, and the standby decides only then: one at a
        time and unbounded, a stop right after a 10,000-Workload backlog held the Lease for
        10 s (5 s after 5,000), deciding nothing, for Events that only inform (the statuses are
        the record; client-go's recorder drops Events too, when its queue is full)."""

        async def poster() -> None:
            while not self.queue.empty():
                if not await self._post(self.queue.get_nowait()):
                    return  # fenced or the server gone: the rest would fail the same way

        tasks = [asyncio.create_task(poster()) for _ in range(posters)]
        _, cut_short = await asyncio.wait(tasks, timeout=within)
        for task in cut_short:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = self.queue.qsize() + len(cut_short)
        if left:
            logger.warning("stopping: %d queued Events not posted within %gs", left, within)
        return left
