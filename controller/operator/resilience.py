"""The operator's answer to "what if a failure domain were lost", kept current (``orca run
--resilience-key KEY --resilience-interval DURATION``): the gauges
``orca_failure_domain_unplaceable_replicas{topology_key,domain}`` and
``orca_failure_domain_displaced_replicas``, which the alert ``OrcaZoneLossWouldStrandReplicas``
reads.

Every interval, on the leader, after the initial listing, once no key waits for a decision,
and only when the cluster changed since the last answer (a Node, a Workload or a placement:
the node table's version and every Workload's resourceVersion)::

    snapshot   the node table, a copy of the ledger, the parsed Workloads and the
               PriorityClasses as they are now (copies and immutable values: the loop goes
               on changing the live ones)
    answer     one ``DomainLoss`` over the snapshot (``orca plan --resilience``'s what-if,
               exact and incremental), a step at a time: a step is one decision, counted
               and let go (``DomainLoss.figure_steps``: what the gauges read, no status)
    export     the gauges, replaced as a whole (a domain that went has no series)

Between answers it keeps what the gauges and the log read of each domain (``DomainFigures``),
and a digest of the cluster it answered for: nothing per Workload. A domain's answer holds a
decided status for every Workload it plans (each one with a replica in the domain), and kept
until the next answer, with every key and resourceVersion in a tuple, they were 1.6 KiB per
stored Workload, 170 MB of a restarted operator's 866 MB at rest on 100,000 Workloads
(bench_scale; bench_restart_memory replays it).

It runs on the event loop, off the scheduling path: the scheduling loop's decisions never
wait for it. Between steps it gives the loop back: at once while the work queue holds keys
(decisions first; it waits until the queue is empty), and after each slice of ``SLICE``
seconds of work it sleeps long enough to keep its CPU within ``SHARE`` of one core. So a
decision waits for at most one step (a few milliseconds on 5,000 nodes), and the answer for
10,000 Workloads takes about ten times its CPU time in wall time. A thread would not do
better: it shares the interpreter lock, which a CPU-bound thread hands back only every 5 ms,
so each of the loop's awaits could wait that long, and its CPU could not be bounded. Its own
scheduler (``DomainLoss`` builds one), so the loop's caches are never thrashed by trial
tables.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Final, TypeVar

from controller.operator import heap
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.resilience import (
    ZONE_KEY,
    Domain,
    DomainLoss,
    LossFigures,
    domains_of,
    worse,
)
from controller.scheduler.status import rfc3339_now

logger = logging.getLogger("orca.resilience")

#: The failure domains ``orca run`` answers for by default: zones.
DEFAULT_RESILIENCE_KEY: Final = ZONE_KEY
#: Seconds of work between two gives of the loop.
SLICE: Final = 0.005
#: The share of one core the answer may take on average (issue 48: under 10 %).
SHARE: Final = 0.1
#: How long to wait, while the work queue holds keys, before looking again.
QUEUE_WAIT: Final = 0.05

T = TypeVar("T")


@dataclass(frozen=True)
class DomainFigures:
    """What the gauges and the log read of one domain's loss: its drain's answer counted
    (``DomainLoss.figure_steps``, which keeps no decision past the step that makes it)."""

    domain: str
    unplaced: int  # replicas left without a place
    displaced: int
    settled: bool  # every replica has a place and no budget is broken

    @classmethod
    def of(cls, domain: Domain, figures: LossFigures) -> DomainFigures:
        return cls(domain.name, figures.unplaced, figures.displaced, figures.settled)


@dataclass(frozen=True)
class Answered:
    """One answer: the domains' losses, and what it cost."""

    key: str
    domains: tuple[DomainFigures, ...]
    cpu_seconds: float
    wall_seconds: float


class ResilienceLoop:
    """Answers every ``interval`` seconds while this replica leads (see the module)."""

    def __init__(
        self,
        state: ClusterState,
        queue: WorkQueue,
        priorities: PriorityIndex,
        ready: asyncio.Event,
        key: str,
        interval: float,
        is_leader: Callable[[], bool] = lambda: True,
        tolerations: DefaultTolerations | None = None,
        now: Callable[[], str] = rfc3339_now,
        share: float = SHARE,
    ) -> None:
        self.state = state
        self.queue = queue
        self.priorities = priorities
        self.ready = ready
        self.key = key
        self.interval = interval
        self.is_leader = is_leader
        self.tolerations = tolerations
        self.now = now
        self.share = share
        self.answered: Answered | None = None
        self._seen: bytes | None = None  # the cluster's fingerprint at the last answer

    async def run(self) -> None:
        """Forever: wait for the initial listing, then an answer every interval (when the
        cluster changed since the last one)."""
        await self.ready.wait()
        while True:
            try:
                await self.refresh()
            except Exception:  # a bug must not stop the operator: log, try next interval
                logger.exception("failure domains' what-if failed")
            await asyncio.sleep(self.interval)

    def fingerprint(self) -> bytes:
        """What changes whenever the answer could: the node table (any Node change the
        scheduler sees), and each Workload's key and resourceVersion (a spec, or a status
        our write or another's changed), as a digest (BLAKE2b, 32 bytes): kept between
        answers, the pairs themselves were a tuple per stored Workload."""
        digest = hashlib.blake2b(repr(self.state.table().version).encode())
        for key, record in self.state.records.items():
            digest.update(f"\0{key}\0{record.resource_version}".encode())
        return digest.digest()

    async def refresh(self) -> Answered | None:
        """Answer and export if leading and the cluster changed; None when skipped. The
        snapshot is taken once no key waits for a decision: taken before a backlog was decided
        (at start, every stored Workload waits), it was stale before its answer was made, and
        that answer planned the whole backlog a second time."""
        while len(self.queue):
            await asyncio.sleep(QUEUE_WAIT)
        if not self.is_leader():
            metrics.FAILURE_DOMAINS.publish(self.key, ())
            self._seen = None
            return None
        seen = self.fingerprint()
        if seen == self._seen:
            return None
        answered = await self.answer()
        heap.give_back()  # what the answer's plans freed (``heap``)
        self._seen = seen
        self.answered = answered
        metrics.FAILURE_DOMAINS.publish(
            self.key,
            tuple(metrics.DomainRow(d.domain, d.unplaced, d.displaced) for d in answered.domains),
        )
        metrics.FAILURE_DOMAIN_COMPUTATION.observe(answered.cpu_seconds)
        stranding = [d for d in answered.domains if not d.settled]
        worst = min(stranding, key=lambda d: worse(d.unplaced, d.displaced, d.domain), default=None)
        logger.info(
            "failure domains of %s: %d, of which %d would strand replicas%s; %.2f s of CPU "
            "over %.1f s",
            self.key,
            len(answered.domains),
            len(stranding),
            f" (most: {worst.domain}, {worst.unplaced})" if worst else "",
            answered.cpu_seconds,
            answered.wall_seconds,
        )
        return answered

    async def answer(self) -> Answered:
        """The snapshot, then every domain's loss, a step at a time (see the module)."""
        state = self.state
        table = state.table()
        ledger = state.ledger.copy()
        workloads = [r.workload for r in state.records.values() if r.workload is not None]
        loss = DomainLoss(
            ledger,
            workloads,
            now=self.now(),
            classes=self.priorities.classes,
            tolerations=self.tolerations,
        )
        pacer = _Pacer(self.queue, self.share)
        await pacer.drive(loss.settling())
        answers = []
        for domain in domains_of(self.key, table.nodes):
            # Counted as it is planned: the full answer (``loss.steps``) held every decided
            # status of the domain to its end, 50 MB of the answer's peak on 100,000
            # Workloads (bench_restart_memory: 502 MB, then 452).
            figures = await pacer.drive(loss.figure_steps(domain.nodes))
            answers.append(DomainFigures.of(domain, figures))
        return Answered(self.key, tuple(answers), pacer.cpu, time.monotonic() - pacer.started)


class _Pacer:
    """Runs a generator's steps on the event loop: decisions first, at most ``share`` of a
    core, and the CPU it took (``time.thread_time``: this thread's, the loop's own included
    only while a step runs)."""

    def __init__(self, queue: WorkQueue, share: float) -> None:
        self.queue = queue
        self.share = share
        self.cpu = 0.0
        self.started = time.monotonic()

    async def drive(self, steps: Generator[object, None, T]) -> T:
        spent = 0.0
        while True:
            while len(self.queue):  # keys waiting: the scheduling loop goes first
                await asyncio.sleep(QUEUE_WAIT)
            before = time.thread_time()
            try:
                next(steps)
            except StopIteration as stop:
                self.cpu += time.thread_time() - before
                value: T = stop.value
                return value
            took = time.thread_time() - before
            self.cpu += took
            spent += took
            if spent >= SLICE:
                await asyncio.sleep(spent * (1 - self.share) / self.share)
                spent = 0.0
