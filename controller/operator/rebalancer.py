"""The operator's rebalancer (``orca run --rebalance-interval``): plans from the operator's own
ledger and makes the moves through the same ledger and status writes as the scheduling loop.

Every interval, on the leader only, after the initial listing::

    plan      Rebalancer.plan over the Workloads not being written or queued, on a copy
              of the ledger, in a worker thread with a scheduler of its own (planning a
              large cluster takes a while; the scheduling loop goes on meanwhile)
    per move, in the plan's order, one at a time (never two replicas of a Workload in
    motion, and a move is made only after every move before it landed):
      check     the Workload is the one planned on (same resourceVersion, not queued or
                being written), else "changed"; the move still passes every filter and
                still improves, on the *live* ledger (``Rebalancer.check``: whatever the
                loop decided meanwhile is seen), else "stale"
      claim     the key is taken in the work queue, so the scheduling loop does not decide
                the Workload while its move is in flight
      write     the status-write transaction (``transaction``), as the loop's: the moved
                replica booked on its target, and still on its source until the write lands
                (capacity is never counted free twice); one status write, preconditioned on
                the resourceVersion planned on: a Workload its owner changed meanwhile gets
                409, is forgotten and queued for the scheduling loop, never overwritten
                ("conflict"); landed, the ledger holds the replica on its target only, and
                an Event ``Rebalanced``
    a move not made drops that Workload's later moves from this pass (each assumed the one
    before it); the others go on, each checked on the live ledger. All are planned afresh
    next pass.

A move is one status write, so a crash at any moment leaves the old placement or the new one
in the Workload's status, never both and never neither: a restarted operator rebuilds the
same ledger (docs/design.md 5). ``orca_rebalance_moves_total{outcome}`` counts each outcome.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable

from controller.api.models import WorkloadStatus
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.transaction import EventSpec, Result, StatusWrites
from controller.operator.workqueue import WorkQueue
from controller.scheduler.ledger import Booking
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.rebalance import DEFAULT_MAX_MOVES, Move, Rebalancer, moved
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import nodes_summary
from controller.scheduler.vocabulary import EVENT_REBALANCED

logger = logging.getLogger("orca.rebalancer")


def moved_status(status: WorkloadStatus, bookings: tuple[Booking, ...]) -> WorkloadStatus:
    """The status after a move: the same decision with the placements as ``bookings`` (in
    the status's order), everything else (phase, conditions, message) unchanged."""
    by_id = {b.alloc_id: b for b in bookings}
    placements = [
        p.model_copy(update={"node": by_id[p.alloc_id].node, "score": by_id[p.alloc_id].score})
        if p.alloc_id in by_id
        else p
        for p in status.placements
    ]
    return status.model_copy(
        update={"placements": placements, "nodes": nodes_summary([p.node for p in placements])}
    )


class RebalanceLoop:
    """Plans and applies moves every ``interval`` seconds while this replica leads."""

    def __init__(
        self,
        state: ClusterState,
        queue: WorkQueue,
        writes: StatusWrites,
        ready: asyncio.Event,
        interval: float,
        max_moves: int = DEFAULT_MAX_MOVES,
        is_leader: Callable[[], bool] = lambda: True,
        tolerations: DefaultTolerations | None = None,
    ) -> None:
        self.state = state
        self.queue = queue
        self.writes = writes
        self.ready = ready
        self.interval = interval
        self.is_leader = is_leader
        # Its own scheduler (memo caches, CEL evaluator): the plan runs in a worker thread,
        # and the scheduling loop's scheduler is not thread-safe.
        self.planner = Rebalancer(Scheduler(tolerations=tolerations), max_moves=max_moves)

    async def run(self) -> None:
        """Forever: wait for the initial listing, then a pass every interval."""
        await self.ready.wait()
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.rebalance()
            except Exception:  # a bug must not stop the operator: log, try next interval
                logger.exception("rebalancing pass failed")

    async def rebalance(self) -> int:
        """One pass: plan, then make the moves in order; returns how many were made."""
        if not self.is_leader() or not self.ready.is_set():
            return 0
        state, ledger = self.state, self.state.ledger
        state.table()
        started = time.perf_counter()
        candidates = {
            key: record
            for key, record in state.records.items()
            if record.workload is not None and not ledger.assumed(key) and not self.queue.busy(key)
        }
        planned = {key: rec.resource_version for key, rec in candidates.items()}
        workloads = [rec.workload for rec in candidates.values() if rec.workload is not None]
        plan = await asyncio.to_thread(
            functools.partial(self.planner.plan, workloads, ledger.copy(), now=time.time())
        )
        metrics.REBALANCE_PLANNING_DURATION.observe(time.perf_counter() - started)
        if plan.moves:
            logger.info(
                "rebalancing: %d move(s) planned; utilisation stddev %.4f -> %.4f, nodes in use "
                "%d -> %d, skew %d -> %d",
                len(plan.moves),
                plan.before.utilisation_stddev,
                plan.after.utilisation_stddev,
                plan.before.nodes_in_use,
                plan.after.nodes_in_use,
                plan.before.skew,
                plan.after.skew,
            )
        made = 0
        dropped: set[str] = set()
        for move in plan.moves:
            if move.workload in dropped:
                continue
            outcome, written = await self.make(move, planned.get(move.workload))
            metrics.REBALANCE_MOVES.labels(outcome=outcome).inc()
            if outcome != metrics.MOVE_MOVED:
                logger.info(
                    "move of %s to %s not made (%s): %s is planned afresh next pass",
                    move.alloc_id,
                    move.target,
                    outcome,
                    move.workload,
                )
                dropped.add(move.workload)
                continue
            planned[move.workload] = written  # its next move is planned on this write
            made += 1
        return made

    async def make(self, move: Move, planned_version: str | None) -> tuple[str, str | None]:
        """Make one planned move; returns its outcome (``metrics.MOVE_*``) and, when it was
        made, the resourceVersion it wrote."""
        state, key = self.state, move.workload
        record = state.records.get(key)
        if (
            record is None
            or record.workload is None
            or record.status is None
            or state.ledger.assumed(key)
            or record.resource_version != planned_version
            or not self.is_leader()
        ):
            return metrics.MOVE_CHANGED, None
        state.table()
        checked = self.planner.check(move, record.workload, state.ledger, now=time.time())
        if checked is None:
            return metrics.MOVE_STALE, None
        if not self.queue.claim(key):
            return metrics.MOVE_CHANGED, None
        try:
            decided = moved(state.ledger.bookings(key), checked)
            message = (
                f"moved replica {checked.alloc_id} from {checked.source} to {checked.target}: "
                f"{_objective(checked)}"
            )
            status = moved_status(record.status, decided)
            write = self.writes.begin(record, status, decided, EventSpec(EVENT_REBALANCED, message))
            result = await self.writes.commit(write)
        finally:
            self.queue.done(key)
        if result is Result.WRITTEN:
            return metrics.MOVE_MOVED, write.version
        if result is not Result.GONE:
            self.queue.add(key)  # the scheduling loop looks at it again
        logger.info("move of %s to %s not made: %s", move.alloc_id, move.target, write.error)
        conflict = result is Result.REFUSED and getattr(write.error, "conflict", False)
        return (metrics.MOVE_CONFLICT if conflict else metrics.MOVE_FAILED), None


def _objective(move: Move) -> str:
    before, after = move.before.as_dict(), move.after.as_dict()
    return ", ".join(f"{name} {before[name]} -> {after[name]}" for name in before)
