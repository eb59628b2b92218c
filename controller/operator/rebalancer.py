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
      assume    the moved replica booked on its target, and still on its source until the
                write lands (``reconciler.held_until_written``): capacity is never
                counted free twice
      write     one status PATCH, preconditioned on the resourceVersion planned on: a
                Workload its owner changed meanwhile gets 409, is forgotten and queued for
                the scheduling loop, never overwritten ("conflict")
      confirm   the ledger holds the replica on its target only; Event ``Rebalanced``
    a move not made drops that Workload's later moves from this pass (each assumed the one
    before it); the others go on, each checked on the live ledger. All are planned afresh
    next pass.

A move is one status write, so a crash at any moment leaves the old placement or the new one
in the Workload's status, never both and never neither: a restarted operator rebuilds the
same ledger (DESIGN.md 5). ``orca_rebalance_moves_total{outcome}`` counts each outcome.
"""

from __future__ import annotations

import asyncio
import logging
import time

from controller.api.models import WorkloadStatus
from controller.operator.kube import ApiError, Fenced, TransportError
from controller.operator.reconciler import Reconciler, held_until_written, write_outcome
from controller.operator.state import is_newer
from controller.operator.telemetry import metrics
from controller.scheduler.ledger import Booking
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
        self, reconciler: Reconciler, interval: float, max_moves: int = DEFAULT_MAX_MOVES
    ) -> None:
        self.reconciler = reconciler
        self.interval = interval
        # Its own scheduler (memo caches, CEL evaluator): the plan runs in a worker thread,
        # and the scheduling loop's scheduler is not thread-safe.
        self.planner = Rebalancer(Scheduler(), max_moves=max_moves)

    async def run(self) -> None:
        """Forever: wait for the initial listing, then a pass every interval."""
        await self.reconciler.ready.wait()
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.rebalance()
            except Exception:  # a bug must not stop the operator: log, try next interval
                logger.exception("rebalancing pass failed")

    async def rebalance(self) -> int:
        """One pass: plan, then make the moves in order; returns how many were made."""
        r = self.reconciler
        if not r.is_leader() or not r.ready.is_set():
            return 0
        state = r.state
        state.table()
        started = time.perf_counter()
        candidates = {
            key: record
            for key, record in state.records.items()
            if record.workload is not None and not record.writing and not r.queue.busy(key)
        }
        planned = {key: rec.resource_version for key, rec in candidates.items()}
        workloads = [rec.workload for rec in candidates.values() if rec.workload is not None]
        plan = await asyncio.to_thread(self.planner.plan, workloads, state.ledger.copy())
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
        r = self.reconciler
        state, key = r.state, move.workload
        record = state.records.get(key)
        if (
            record is None
            or record.workload is None
            or record.status is None
            or record.writing
            or record.resource_version != planned_version
            or not r.is_leader()
        ):
            return metrics.MOVE_CHANGED, None
        state.table()
        checked = self.planner.check(move, record.workload, state.ledger)
        if checked is None:
            return metrics.MOVE_STALE, None
        if not r.queue.claim(key):
            return metrics.MOVE_CHANGED, None
        previous = state.ledger.bookings(key)
        decided = moved(previous, checked)
        status = moved_status(record.status, decided)
        assumption = state.ledger.assume(key, held_until_written(previous, decided))
        record.writing = True
        payload = status.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            response = await r.api.patch_workload_status(
                record.namespace, record.name, payload, planned_version
            )
        except (Fenced, ApiError, TransportError) as exc:
            state.ledger.forget(assumption)
            r.queue.add(key)  # the scheduling loop looks at it again, after ``done``
            if isinstance(exc, Fenced):
                metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FENCED).inc()
            else:
                code = str(exc.status) if isinstance(exc, ApiError) else exc.kind
                metrics.STATUS_WRITES.labels(outcome=write_outcome(exc)).inc()
                metrics.STATUS_WRITE_FAILURES.labels(code=code).inc()
            if isinstance(exc, ApiError) and exc.not_found:
                state.delete_workload(key)
            conflict = isinstance(exc, ApiError) and exc.conflict
            logger.info("move of %s to %s not made: %s", move.alloc_id, move.target, exc)
            return (metrics.MOVE_CONFLICT if conflict else metrics.MOVE_FAILED), None
        except BaseException:  # cancelled mid-write (shutdown): the status says which it is
            state.ledger.forget(assumption)
            raise
        else:
            state.ledger.confirm(assumption)
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_WRITTEN).inc()
            if state.records.get(key) is not None:
                state.ledger.load(key, decided)  # the replica is on its target only now
            version = (response.get("metadata") or {}).get("resourceVersion")
            current = state.records.get(key)
            if current is not None and is_newer(version, current.resource_version):
                # The record holds what we wrote: the echo of this write is then a no-op.
                current.written_version = version
                current.resource_version = version
                current.status = status
            message = (
                f"moved replica {checked.alloc_id} from {checked.source} to {checked.target}: "
                f"{_objective(checked)}"
            )
            r.post_event(record, EVENT_REBALANCED, message, version)
            r.queue.add_all(state.keys_waiting_for_capacity() - {key})  # the source has room
            return metrics.MOVE_MOVED, version
        finally:
            current = state.records.get(key)
            if current is not None:
                current.writing = False
            r.queue.done(key)


def _objective(move: Move) -> str:
    before, after = move.before.as_dict(), move.after.as_dict()
    return ", ".join(f"{name} {before[name]} -> {after[name]}" for name in before)
