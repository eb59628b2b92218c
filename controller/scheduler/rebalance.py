"""The rebalancer's planner: a bounded, ordered list of replica moves that each improve a
Workload's strategy objective (docs/design.md 4, "Rebalancing"; issue 13).

Pure, on the scheduler's own framework and a scratch copy of the ledger: a move is judged the
way the scheduling cycle would judge placing that replica afresh (``Scheduler.prepare``, the
replica off its node for a dry run, ``CycleState.vacated``, then ``Framework.fits``), so the
target passes every filter of the profile, capacity and topology spread included, given the
moves before it. Nothing here re-implements a filter or the capacity rule, or writes the
cycle's arrays itself.

The objective of a move is the moving Workload's strategy's, compared in order (lower is
better; a move must improve it by at least ``min_gain`` so a plan never oscillates):

    Spread   (topology skew, utilisation dispersion)  skew = the sum over the Workload's
             topologySpread constraints of max - min replicas per eligible domain,
             counted as the scheduler counts them (``controller.scheduler.topology``, kube's
             node inclusion policies); dispersion = n x the variance of node
             utilisation (mean of the cpu and memory shares booked) over the eligible nodes,
             which orders plans as the standard deviation does (reported) while a move's
             gain does not shrink with the cluster's size
    BinPack  (nodes in use, -packing)  nodes holding any replica of any Workload; packing =
             the sum over eligible nodes of utilisation squared, which grows as replicas move
             from emptier to fuller nodes and so leads, move by move, to freeing a node.
             A BinPack move never raises its Workload's skew either.

Rules beside the objective: only ``rebalance: Allowed`` Job and Service Workloads move (a
DaemonSet has one replica per node by definition); only *settled* Workloads move: all replicas
placed, every placement one the scheduler would keep as it is (otherwise the scheduling loop
has a decision to make first); a move never puts more replicas of a Workload on the target
than were on the source (the scheduler's implicit anti-affinity, docs/design.md 4); a
Workload with a disruption budget (``spec.disruption``) moves only while its budget allows a
replica in motion (``controller.scheduler.budgets``: placed - 1 >= what must stay placed).

Budgets. A plan holds at most ``max_moves`` moves, found in rounds: each round visits the
Workloads in key order and makes the best move of each (so the budget is shared fairly).
*At most one replica of a Workload in motion at a time* means, for a plan, that its moves are
a sequence: each is valid given that every move before it has been made, so they are made in
order, one at a time. The operator (``controller.operator.rebalancer``) makes them that way:
one status write in flight, confirmed before the next move, each move checked again
(``Rebalancer.check``) against the live ledger just before it is made, the rest of the plan
dropped at the first move that no longer holds.

Determinism: the node table is hostname-sorted and every tie is broken by table index
(hostname), Workload key and replica index, so the plan does not depend on listing order.
Running the planner on its own output proposes nothing, unless the budget cut it short
(``Plan.complete``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from controller.api.models import (
    RebalancePolicy,
    Strategy,
    WhenUnsatisfiable,
    Workload,
    WorkloadKind,
)
from controller.scheduler.budgets import budget_of
from controller.scheduler.framework import CycleState, Filtered
from controller.scheduler.ledger import Booking, Ledger, fits
from controller.scheduler.nodes import BoolArray, FloatArray, IntArray, NodeTable
from controller.scheduler.plugins.topology_spread import prepared_domains
from controller.scheduler.scheduler import PreparedCycle, Scheduler
from controller.scheduler.topology import NO_DOMAIN, skew

DEFAULT_MAX_MOVES: Final = 10
MAX_MOVES: Final = 10_000
MIN_GAIN: Final = 0.001
"""The least a move must lower the dispersion (Spread: the sum of squared deviations of node
utilisation from its mean) or raise the packing (BinPack: the sum of squared utilisations),
in utilisation² units (utilisation is 0..1): moving a replica that holds a share ``a`` of
equal nodes from ``u_s`` to ``u_t`` lowers the dispersion by ``2a(u_s - u_t - a)``, so a
replica of 10% moves only for a gap of 15 points. Smaller changes are noise, and moving for
them would oscillate."""


@dataclass(frozen=True, slots=True)
class Objective:
    """A Workload's strategy objective at one moment (see the module docstring)."""

    strategy: Strategy
    skew: int
    nodes_in_use: int
    stddev: float
    packing: float
    dispersion: float  # n x variance: what Spread compares (stddev's order, n-independent steps)

    def as_dict(self) -> dict[str, float | int]:
        """The parts the strategy compares, in order, as the dry run prints them."""
        if self.strategy is Strategy.BINPACK:
            return {"nodesInUse": self.nodes_in_use, "packing": round(self.packing, 4)}
        return {"skew": self.skew, "utilisationStddev": round(self.stddev, 4)}


@dataclass(frozen=True, slots=True)
class Move:
    """One replica's move, with its Workload's objective before and after it."""

    workload: str
    alloc_id: str
    source: str
    target: str
    score: int  # the target's score, as the scheduler would record it
    before: Objective
    after: Objective


@dataclass(frozen=True, slots=True)
class Totals:
    """The cluster's figures before or after a plan."""

    utilisation_stddev: float  # over the eligible nodes
    nodes_in_use: int  # nodes holding any replica
    skew: int  # summed over the Allowed Workloads with topologySpread
    over_max_skew: int  # Allowed Workloads with some constraint above its maxSkew


@dataclass(frozen=True)
class Plan:
    """The moves in the order they are to be made, and the figures around them."""

    moves: tuple[Move, ...]
    before: Totals
    after: Totals
    ffd_nodes: int  # first-fit-decreasing's node count for the same replicas (a reference)
    max_moves: int
    complete: bool  # False: the budget stopped the plan while moves were still improving

    @property
    def nodes_freed(self) -> int:
        return self.before.nodes_in_use - self.after.nodes_in_use


def movable(workload: Workload) -> bool:
    """Whether the rebalancer may move this Workload's replicas."""
    spec = workload.spec
    return spec.rebalance is RebalancePolicy.ALLOWED and spec.kind is not WorkloadKind.DAEMONSET


class Rebalancer:
    """Plans moves on a ``Scheduler``'s framework. Holds nothing between calls but the
    scheduler's memo caches."""

    def __init__(
        self,
        scheduler: Scheduler | None = None,
        max_moves: int = DEFAULT_MAX_MOVES,
        min_gain: float = MIN_GAIN,
    ) -> None:
        if not 0 <= max_moves <= MAX_MOVES:
            raise ValueError(f"max moves must be 0..{MAX_MOVES}, not {max_moves}")
        self.scheduler = scheduler or Scheduler()
        self.max_moves = max_moves
        self.min_gain = min_gain

    # -- planning ------------------------------------------------------------------------------

    def plan(self, workloads: Iterable[Workload], ledger: Ledger, *, now: float) -> Plan:
        """The moves for ``workloads`` (the Allowed ones move; all are measured), made on a
        scratch copy of ``ledger``, which is not changed, at time ``now`` (NoExecute taints
        tolerated for a while)."""
        scratch = ledger.copy()
        usage = _Usage(scratch)
        allowed = sorted((w for w in workloads if movable(w)), key=lambda w: w.key)
        before = self.totals(allowed, scratch, now=now)
        moves: list[Move] = []
        complete = True
        progress = True
        while progress:
            progress = False
            for workload in allowed:
                if len(moves) >= self.max_moves:
                    complete = False
                    break
                move = self._best(workload, scratch, usage, now)
                if move is not None:
                    scratch.load(move.workload, moved(scratch.bookings(move.workload), move))
                    usage.moved(scratch, move)
                    moves.append(move)
                    progress = True
            if not complete:
                # Out of budget: "complete" only if nothing was left to improve anyway.
                complete = not any(self._best(w, scratch, usage, now) is not None for w in allowed)
                break
        return Plan(
            moves=tuple(moves),
            before=before,
            after=self.totals(allowed, scratch, now=now),
            ffd_nodes=ffd_nodes(ledger),
            max_moves=self.max_moves,
            complete=complete,
        )

    def check(self, move: Move, workload: Workload, ledger: Ledger, *, now: float) -> Move | None:
        """``move`` judged again on ``ledger`` as it is now: the same move with fresh figures
        if its target still passes every filter and it still improves the objective, else
        None (the operator calls this just before making a planned move)."""
        if not movable(workload) or workload.key != move.workload:
            return None
        only = (move.alloc_id, move.source, move.target)
        return self._best(workload, ledger, _Usage(ledger), now, only)

    def totals(self, workloads: Iterable[Workload], ledger: Ledger, *, now: float) -> Totals:
        """The cluster's figures: utilisation stddev, nodes in use, and the skew of the
        given Workloads that have topologySpread."""
        usage = _Usage(ledger)
        total_skew = over = 0
        for workload in workloads:
            if not workload.spec.topology_spread:
                continue
            prepared = self.scheduler.prepare(workload, ledger, now=now)
            if prepared.filtered is None:
                continue
            spreads = _spreads(prepared)
            total_skew += sum(s.skew for s in spreads)
            over += any(s.skew > s.max_skew for s in spreads)
        return Totals(usage.stddev(), usage.nodes_in_use(), total_skew, over)

    # -- one Workload ---------------------------------------------------------------------------

    def _best(
        self,
        workload: Workload,
        ledger: Ledger,
        usage: _Usage,
        now: float,
        only: tuple[str, str, str] | None = None,
    ) -> Move | None:
        """The Workload's best improving move on ``ledger`` (or the one move ``only`` names:
        allocId, source, target), or None."""
        prepared = self.scheduler.prepare(workload, ledger, now=now)
        if prepared.filtered is None or not _settled(prepared):
            return None
        # Counted on the replicas available (``Ledger.healthy``): settled, every replica is
        # kept, but one kept on a NotReady node is already down.
        budget = budget_of(workload, ledger.healthy(workload.key), gang=False)
        if budget is not None and budget.allowed < 1:
            return None  # its disruption budget allows no replica in motion
        cycle, filtered = prepared.cycle, prepared.filtered
        spreads = _spreads(prepared)
        strategy = workload.spec.strategy
        before = Objective(
            strategy,
            sum(s.skew for s in spreads),
            usage.nodes_in_use(),
            usage.stddev(),
            usage.packing(),
            usage.dispersion(),
        )
        best: tuple[tuple[float, float], Move] | None = None
        for _, booking in sorted(prepared.kept.items()):
            if only is not None and (booking.alloc_id, booking.node) != only[:2]:
                continue
            # The dry run of placing this replica afresh: the cycle (the rebalancer's own,
            # from ``prepare``) with it off its node for the block (kept: at the spec's size).
            with cycle.vacated(cycle.table.index[booking.node]):
                found = self._move_of(cycle, filtered, booking, usage, spreads, before, only)
            if found is not None and (best is None or found[0] < best[0]):
                best = found  # ties: an earlier replica's move is as good: keep it
        return best[1] if best is not None else None

    def _move_of(
        self,
        trial: CycleState,
        filtered: Filtered,
        booking: Booking,
        usage: _Usage,
        spreads: list[_Spread],
        before: Objective,
        only: tuple[str, str, str] | None,
    ) -> tuple[tuple[float, float], Move] | None:
        """The best improving move of the replica ``booking`` (lifted in ``trial``), with the
        objective it reaches as its sort key, or None."""
        table = trial.table
        strategy = trial.spec.strategy
        s = table.index[booking.node]
        targets = self._targets(trial, filtered, s)
        if only is not None:
            t_only = table.index.get(only[2], -1)
            targets = targets[targets == t_only]
        if targets.size == 0:
            return None
        after = usage.after_move(s, targets, trial.cpu, trial.memory)
        skews = sum((sp.after_move(s, targets) for sp in spreads), np.zeros(targets.size, np.int64))
        primary, secondary, better = _compare(strategy, before, skews, after, self.min_gain)
        if not better.any():
            return None
        pick = np.flatnonzero(better)
        order = np.lexsort((pick, secondary[pick], primary[pick]))  # ties: lowest hostname
        j = int(pick[order[0]])
        key = (float(primary[j]), float(secondary[j]))
        t = int(targets[j])
        move = Move(
            workload=trial.key,
            alloc_id=booking.alloc_id,
            source=booking.node,
            target=table.hostnames[t],
            score=self._score(trial, t),
            before=before,
            after=Objective(
                strategy,
                int(skews[j]),
                int(after.nodes[j]),
                float(after.stddev[j]),
                float(after.packing[j]),
                float(after.dispersion[j]),
            ),
        )
        return key, move

    def _targets(self, trial: CycleState, filtered: Filtered, s: int) -> IntArray:
        """Nodes the replica on node ``s`` could be placed on, as the scheduling cycle would
        place it: ``trial`` is the cycle with that replica off its node
        (``CycleState.vacated``), on which every filter of the profile runs (``fits``); then
        nodes holding as many replicas of the Workload as ``s`` does are left out."""
        own = trial.own
        fit = self.scheduler.framework.fits(trial, filtered)
        fit = fit & (own <= own[s])  # own[s] is already one lower: never more colocated
        fit[s] = False
        return np.flatnonzero(fit).astype(np.int64)

    def _score(self, trial: CycleState, t: int) -> int:
        """The score the scheduler gives node ``t`` for the lifted replica (recorded in
        status)."""
        return int(self.scheduler.framework.score(trial, np.array([t], dtype=np.intp))[0])


def _settled(prepared: PreparedCycle) -> bool:
    """Whether the scheduler would keep every placement as it is (same nodes, same sizes) and
    has no replica left to place; if not, the scheduling loop has a decision to make for this
    Workload first (a short Workload gets its missing replicas before anything moves)."""
    kept = prepared.kept.values()
    if len(prepared.kept) != len(prepared.existing) or len(kept) < prepared.cycle.spec.replicas:
        return False
    shape = sorted((b.node, b.alloc_id, b.cpu, b.memory, b.scalars) for b in kept)
    return shape == sorted(
        (b.node, b.alloc_id, b.cpu, b.memory, b.scalars) for b in prepared.existing
    )


def _compare(
    strategy: Strategy, before: Objective, skews: IntArray, after: _After, min_gain: float
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Per target: the objective's (primary, secondary), lower is better, and whether the
    move improves on ``before`` by at least ``min_gain`` (exactly, on the primary)."""
    if strategy is Strategy.BINPACK:
        primary = after.nodes.astype(np.float64)
        secondary = -after.packing
        better = (skews <= before.skew) & (
            (after.nodes < before.nodes_in_use)
            | ((after.nodes == before.nodes_in_use) & (after.packing >= before.packing + min_gain))
        )
        return primary, secondary, better
    primary = skews.astype(np.float64)
    better = (skews < before.skew) | (
        (skews == before.skew) & (after.dispersion <= before.dispersion - min_gain)
    )
    return primary, after.dispersion, better


def moved(bookings: Iterable[Booking], move: Move) -> tuple[Booking, ...]:
    """A Workload's bookings after ``move`` (the replica on its target, at the target's score)."""
    return tuple(
        replace(b, node=move.target, score=move.score)
        if b.alloc_id == move.alloc_id and b.node == move.source
        else b
        for b in bookings
    )


# -- utilisation --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _After:
    """Per candidate target: the cluster's figures after the move."""

    nodes: IntArray
    stddev: FloatArray
    packing: FloatArray
    dispersion: FloatArray


class _Usage:
    """Node utilisation from a ledger: per node, the mean of the cpu and memory shares booked
    (a resource a node has none of counts 0), over the *pool* of eligible nodes. Built once
    per plan and kept in step with the scratch ledger move by move (``moved``), with the same
    arithmetic as a fresh one, so the figures do not drift."""

    def __init__(self, ledger: Ledger) -> None:
        table = ledger.table
        self.table = table
        self.pool: BoolArray = table.eligible & ((table.cpu > 0) | (table.memory > 0))
        self.util: FloatArray = _share(table, ledger.used_cpu, ledger.used_memory)
        self.held: IntArray = replicas_per_node(ledger)
        self.n = int(self.pool.sum())
        self._sums()

    def _sums(self) -> None:
        pooled = self.util[self.pool]
        self.s1 = float(pooled.sum())
        self.s2 = float((pooled * pooled).sum())

    def moved(self, ledger: Ledger, move: Move) -> None:
        """``move`` was booked in ``ledger``: follow it."""
        index = self.table.index
        for name, step in ((move.source, -1), (move.target, +1)):
            i = index[name]
            self.util[i] = _share_of(
                self.table, i, int(ledger.used_cpu[i]), int(ledger.used_memory[i])
            )
            self.held[i] += step
        self._sums()

    def dispersion(self) -> float:
        return float(_dispersion(self.s1, self.s2, self.n))

    def nodes_in_use(self) -> int:
        return int((self.held > 0).sum())

    def stddev(self) -> float:
        return float(_stddev(self.s1, self.s2, self.n))

    def packing(self) -> float:
        return self.s2

    def after_move(self, s: int, targets: IntArray, cpu: int, memory: int) -> _After:
        """The figures after one replica (``cpu``, ``memory``) moves from ``s`` to each target."""
        table, util, pool = self.table, self.util, self.pool
        a_s = float(_share_of(table, s, cpu, memory))
        a_t = _share(
            table,
            np.full(targets.size, cpu, np.int64),
            np.full(targets.size, memory, np.int64),
            targets,
        )
        in_s = float(pool[s])
        in_t = pool[targets].astype(np.float64)
        u_s, u_t = float(util[s]), util[targets]
        s1 = self.s1 - in_s * a_s + in_t * a_t
        s2 = self.s2 + in_s * ((u_s - a_s) ** 2 - u_s**2) + in_t * ((u_t + a_t) ** 2 - u_t**2)
        held = self.held
        nodes = self.nodes_in_use() - int(held[s] == 1) + (held[targets] == 0).astype(np.int64)
        return _After(nodes, _stddev(s1, s2, self.n), s2, _dispersion(s1, s2, self.n))


def _share(
    table: NodeTable, cpu: IntArray, memory: IntArray, where: IntArray | None = None
) -> FloatArray:
    """Mean of the cpu and memory shares of allocatable (0 where a node has none)."""
    cpu_div = table.cpu_divisor if where is None else table.cpu_divisor[where]
    mem_div = table.memory_divisor if where is None else table.memory_divisor[where]
    out: FloatArray = (cpu / cpu_div + memory / mem_div) / 2.0
    return out


def _share_of(table: NodeTable, i: int, cpu: int, memory: int) -> float:
    return float((cpu / table.cpu_divisor[i] + memory / table.memory_divisor[i]) / 2.0)


def _stddev(s1: FloatArray | float, s2: FloatArray | float, n: int) -> FloatArray:
    """Population standard deviation from the sum and the sum of squares of ``n`` values."""
    if n == 0:
        return np.zeros(np.shape(s1), dtype=np.float64)
    variance = np.maximum(np.asarray(s2, np.float64) / n - (np.asarray(s1, np.float64) / n) ** 2, 0)
    out: FloatArray = np.sqrt(variance)
    return out


def _dispersion(s1: FloatArray | float, s2: FloatArray | float, n: int) -> FloatArray:
    """The sum of squared deviations from the mean (n x variance): a move changes it by an
    amount that does not shrink as the cluster grows, unlike the stddev, so one minimum gain
    means the same at 10 nodes and at 5,000."""
    if n == 0:
        return np.zeros(np.shape(s1), dtype=np.float64)
    out: FloatArray = np.maximum(
        np.asarray(s2, np.float64) - np.asarray(s1, np.float64) ** 2 / n, 0
    )
    return out


def replicas_per_node(ledger: Ledger) -> IntArray:
    """How many replicas, of any Workload, each node of the table holds."""
    held = np.zeros(len(ledger.table), dtype=np.int64)
    index = ledger.table.index
    for key in ledger.workload_keys():
        for b in ledger.bookings(key):
            i = index.get(b.node)
            if i is not None:
                held[i] += 1
    return held


# -- topology skew ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spread:
    """One topologySpread constraint of a Workload, as this cycle sees it."""

    codes: IntArray
    size: int
    live: BoolArray
    per_domain: IntArray
    max_skew: int
    skew: int

    def after_move(self, s: int, targets: IntArray) -> IntArray:
        """The skew after the replica on ``s`` moves to each target. A node outside every
        domain cannot take a replica from inside one (it would leave the count, not even it:
        a large number keeps such a move from ever looking better)."""
        out = np.empty(targets.size, dtype=np.int64)
        source = int(self.codes[s])
        target_codes = self.codes[targets]
        for code in np.unique(target_codes).tolist():
            if code == NO_DOMAIN and source != NO_DOMAIN:
                value = 1 << 40
            else:
                per_domain = self.per_domain.copy()
                if source != NO_DOMAIN:
                    per_domain[source] -= 1
                if code != NO_DOMAIN:
                    per_domain[code] += 1
                value = skew(per_domain, self.live)
            out[target_codes == code] = value
        return out


def _spreads(prepared: PreparedCycle) -> list[_Spread]:
    """The Workload's topologySpread constraints over its current replicas, the domains and
    the replicas counted as the scheduler counts them (``prepared_domains``: kube's node
    inclusion policies); ``codes`` are the counted ones, so a replica on a node that does
    not count neither adds to a domain nor leaves one."""
    cycle, filtered = prepared.cycle, prepared.filtered
    constraints = cycle.spec.topology_spread
    if not constraints or filtered is None:
        return []
    by_constraint = {
        d.constraint: d for when in WhenUnsatisfiable for d in prepared_domains(cycle, when)
    }
    out = []
    for constraint in constraints:
        d = by_constraint[constraint]
        per_domain = d.replicas(cycle.own)
        out.append(
            _Spread(
                d.counted,
                d.size,
                d.eligible,
                per_domain,
                constraint.max_skew,
                skew(per_domain, d.eligible),
            )
        )
    return out


# -- the reference --------------------------------------------------------------------------------


def ffd_nodes(ledger: Ledger) -> int:
    """How many nodes first-fit-decreasing needs for every replica in ``ledger`` (a reference
    for BinPack, not a true bound): replicas by decreasing size (the larger of their cpu and
    memory shares of the largest node), each on the first eligible node, largest first, that
    still holds it; only capacity counts. A replica no node holds opens no node.

    Free capacity only shrinks, so a node that cannot hold a size now never will: the search
    for each size resumes where the last one of that size stopped (linear overall)."""
    table = ledger.table
    order = np.lexsort((np.arange(len(table)), -table.memory, -table.cpu))
    bins = order[table.eligible[order]]
    free_cpu: list[int] = table.cpu[bins].tolist()
    free_memory: list[int] = table.memory[bins].tolist()
    items = [b for key in ledger.workload_keys() for b in ledger.bookings(key)]
    biggest_cpu = max(1, int(table.cpu.max())) if len(table) else 1
    biggest_memory = max(1, int(table.memory.max())) if len(table) else 1
    items.sort(key=lambda b: (-max(b.cpu / biggest_cpu, b.memory / biggest_memory), b.alloc_id))
    used = [False] * len(free_cpu)
    resume: dict[tuple[int, int], int] = {}
    for b in items:
        j = resume.get((b.cpu, b.memory), 0)
        while j < len(free_cpu) and not fits(free_cpu[j], free_memory[j], b.cpu, b.memory):
            j += 1
        resume[(b.cpu, b.memory)] = j
        if j < len(free_cpu):
            free_cpu[j] -= b.cpu
            free_memory[j] -= b.memory
            used[j] = True
    return sum(used)
