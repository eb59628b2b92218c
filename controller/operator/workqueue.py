"""A de-duplicating priority work queue with per-key backoff: client-go's workqueue, in small,
ordered as kube-scheduler's active queue is by its PrioritySort plugin.

A key is in at most one of three places: waiting (queued once, however often it is added),
processing (handed out by ``get``, until ``done``), or neither. A key added while it is being
processed is marked dirty and queued again on ``done``, so one Workload is never decided twice
at once, and no change is lost while it was.

::

    add ──> WAITING ──get──> PROCESSING ──done──> (gone)
              ^                  │ add                 │
              └──── done <── DIRTY <┘                  │
                                 add_rate_limited: add after a growing delay

Order: higher priority first (``priority_of(key)``, read when the key is added: the
Workload's resolved priority); equal priorities in the order they were added (FIFO, as
before priorities). A key added again while waiting keeps its place unless its priority
changed, which moves it (the old heap entry is skipped when it surfaces).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterable

from controller.operator.telemetry import metrics


class QueueShutDown(Exception):
    """The queue hands out nothing more (``WorkQueue.shut_down``)."""


class WorkQueue:
    """Keys to reconcile, highest priority first then in arrival order, each at most once."""

    def __init__(
        self,
        base_delay: float = 0.05,
        # kube-scheduler's PodMaxBackoffSeconds default (pkg/scheduler/apis/config/v1/
        # defaults.go): a Workload whose writes failed while the API server was away retries
        # at most 10 s after it is back (30 s here made the flaky network's slowest recoveries).
        max_delay: float = 10.0,
        priority_of: Callable[[str], int] = lambda _key: 0,
    ) -> None:
        self.priority_of = priority_of
        self._heap: list[tuple[int, int, str]] = []  # (-priority, arrival, key); some stale
        self._queued: dict[str, tuple[int, int, str]] = {}  # key -> its live heap entry
        self._arrivals = itertools.count()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        #: Keys to queue once a key being processed is done (``add_when_done``).
        self._after: dict[str, set[str]] = {}
        self._failures: dict[str, int] = {}
        #: Workers waiting in ``get``, woken one per key added (not all of them at once).
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._shut_down = False

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def backing_off(self) -> int:
        """Keys waiting out a retry delay (``add_after`` timers not yet fired)."""
        return len(self._timers)

    def add(self, key: str, reprioritise: bool = True) -> None:
        """Queue ``key`` (once); if it is being processed, queue it again when that is done.
        ``reprioritise=False``: a key already waiting keeps its place without its priority
        being resolved again (the caller knows no priority changed)."""
        if key in self._processing:
            self._dirty.add(key)
            return
        if not reprioritise and key in self._queued:
            return
        rank = -self.priority_of(key)
        entry = self._queued.get(key)
        if entry is not None:
            if entry[0] == rank:
                return
            entry = (rank, entry[1], key)  # re-prioritised: keeps its arrival among equals
        else:
            entry = (rank, next(self._arrivals), key)
        self._queued[key] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._queued) + 64:  # stale entries: rebuild, bounded
            self._heap = list(self._queued.values())
            heapq.heapify(self._heap)
        metrics.QUEUE_DEPTH.set(len(self._queued))
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add_all(self, keys: Iterable[str], reprioritise: bool = True) -> None:
        """``add`` each of ``keys``, in order. Without ``reprioritise``, the keys already
        waiting are passed over before any ``add``: a Node change queues every undecided
        Workload of a backlog, nearly all of them already waiting, and one call of ``add``
        each was 5 % of the operator's CPU while 5,000 kwok Nodes flapped."""
        if not reprioritise:
            queued = self._queued
            keys = [key for key in keys if key not in queued]
        for key in keys:
            self.add(key, reprioritise)

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (one timer per key: the earliest wins)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        if existing is not None:
            if existing.when() <= loop.time() + delay:
                return
            existing.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key)

        self._timers[key] = loop.call_later(delay, fire)

    def add_rate_limited(self, key: str) -> float:
        """Queue ``key`` after an exponential backoff for its consecutive failures."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay: float = min(self.base_delay * (2.0**failures), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """``key`` succeeded: its next failure starts the backoff from the beginning."""
        self._failures.pop(key, None)

    async def get(self) -> str:
        """The next key to process; it stays *processing* until ``done``."""
        while not self._queued or self._shut_down:
            if self._shut_down:
                raise QueueShutDown()
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:  # cancelled: a key this waiter was woken for goes to another
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise
        while True:
            entry = heapq.heappop(self._heap)
            if self._queued.get(entry[2]) == entry:
                break  # else stale: the key was re-prioritised (or taken) since
        key = entry[2]
        del self._queued[key]
        self._processing.add(key)
        metrics.QUEUE_DEPTH.set(len(self._queued))
        return key

    def busy(self, key: str) -> bool:
        """Whether ``key`` is waiting or being processed."""
        return key in self._queued or key in self._processing

    def claim(self, key: str) -> bool:
        """Take ``key`` as *processing* without ``get``, if it is neither waiting nor being
        processed (the rebalancer moving a replica: the scheduling loop must not decide the
        same Workload meanwhile). Release it with ``done``; False: it is busy, leave it."""
        if self.busy(key):
            return False
        self._processing.add(key)
        return True

    def take(self, key: str) -> bool:
        """Take ``key`` for processing outside ``get`` even if it is waiting (it leaves the
        queue): a preemption writing a victim's status, so the loop does not decide it
        meanwhile. False if it is being processed. Release it with ``done`` (then ``add`` to
        decide it again)."""
        if key in self._processing:
            return False
        if self._queued.pop(key, None) is not None:
            metrics.QUEUE_DEPTH.set(len(self._queued))
        self._processing.add(key)
        return True

    def processing(self, key: str) -> bool:
        return key in self._processing

    def add_when_done(self, key: str, waiter: str) -> bool:
        """Queue ``waiter`` once ``key`` is done: a decision that had to leave ``key`` out (a
        preemptor whose search skipped a Workload being decided or written) is made again
        when it counts. False, and nothing queued: ``key`` is not being processed."""
        if key not in self._processing:
            return False
        self._after.setdefault(key, set()).add(waiter)
        return True

    def done(self, key: str) -> None:
        """Processing of ``key`` finished; re-queue it if it was added meanwhile, and whoever
        waited for it (``add_when_done``)."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)
        for waiter in sorted(self._after.pop(key, ())):
            self.add(waiter)

    def shut_down(self) -> None:
        """Hand out nothing more: ``get`` raises ``QueueShutDown`` from now on, in every
        waiter (client-go's ``ShutDown``; what is processing finishes, with ``done``)."""
        self._shut_down = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
