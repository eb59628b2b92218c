"""orca's scheduler: one Workload and the cluster in, the status it should have out.

The scheduling cycle reads as a pipeline (kube-scheduler's ``schedule_one``, in miniature)::

    prepare      compile the spec's CEL once; a spec that cannot run is Invalid
    keep         existing placements stay while their node is eligible and still passes
                 runtime + constraints (capacity changes never evict)
    filter       eligible -> runtime -> each constraint -> Insufficient cpu -> memory,
                 as boolean numpy masks over the hostname-sorted node table
    score        capacity (Spread / BinPack, 0..100 per node) + affinity weights
    select       fewest replicas of this Workload first, then score, then hostname
    diagnose     the first failing filter per rejected node, counted: the status message

``Scheduler.schedule`` is a pure function of (Workload, Ledger): the ledger is read, never
written, and the memo caches inside only remember answers. The caller books the decision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from controller.api.models import (
    Phase,
    Placement,
    RejectionReason,
    ScheduleMode,
    Strategy,
    Workload,
    WorkloadKind,
    WorkloadSpec,
)
from controller.core.celexpr import (
    CelCompileError,
    CelEvaluator,
    CompiledExpression,
    compile_expression,
)
from controller.core.ledger import Booking, Ledger
from controller.core.nodes import BoolArray, IntArray, NodeTable

# -- rejection reasons (kube-scheduler wording where there is one) ------------------------------
REASON_CORDONED: Final = "node(s) were unschedulable"
REASON_NOT_READY: Final = "node(s) not ready"
REASON_INSUFFICIENT_CPU: Final = "Insufficient cpu"
REASON_INSUFFICIENT_MEMORY: Final = "Insufficient memory"
NODES_PER_REASON: Final = 3  # node names listed per rejection reason


def reason_runtime(runtimes: Sequence[str]) -> str:
    return f"runtime {'|'.join(runtimes)} not offered"


def reason_constraint(source: str) -> str:
    return f"node(s) didn't match constraint {source}"


def reason_constraint_error(source: str) -> str:
    return f"constraint {source} failed to evaluate"


# -- condition reasons (the Scheduled condition) ------------------------------------------------
CONDITION_ALL_PLACED: Final = "AllPlaced"
CONDITION_PARTIALLY_PLACED: Final = "PartiallyPlaced"
CONDITION_UNSCHEDULABLE: Final = "Unschedulable"
CONDITION_INVALID_SPEC: Final = "InvalidSpec"

_CONDITION_BY_PHASE: Final = {
    Phase.SCHEDULED: CONDITION_ALL_PLACED,
    Phase.PARTIALLY_SCHEDULED: CONDITION_PARTIALLY_PLACED,
    Phase.UNSCHEDULABLE: CONDITION_UNSCHEDULABLE,
    Phase.INVALID: CONDITION_INVALID_SPEC,
}

# -- runtimes (the aliases of the original scheduler) --------------------------------------------
PROXMOX_RUNTIMES: Final = frozenset({"pve-vm", "pve-ct", "proxmox"})
PROXMOX_KIND: Final = "proxmox"
_RUNTIME_ALIASES: Final = {"wasmtime": "wasm"}


def normalize_runtime(name: str) -> str:
    """Case-insensitive; ``wasm`` and ``wasmtime`` are one runtime."""
    lowered = name.lower()
    return _RUNTIME_ALIASES.get(lowered, lowered)


_ALLOC_SUFFIX = re.compile(r"-(0|[1-9][0-9]*)$")


def alloc_id(namespace: str, name: str, index: int) -> str:
    """``<namespace>/<name>-<index>``: stable for the life of the replica."""
    return f"{namespace}/{name}-{index}"


def alloc_index(workload_key: str, value: str) -> int | None:
    """The replica index of an AllocID of this Workload, or None if it is not one of its ids."""
    match = _ALLOC_SUFFIX.search(value)
    if match is None or value[: match.start()] != workload_key:
        return None
    return int(match.group(1))


@dataclass(frozen=True, slots=True)
class Decision:
    """What a Workload's status should say, and the bookings that back it."""

    phase: Phase
    reason: str
    desired: int
    placements: tuple[Placement, ...]
    message: str
    unschedulable: tuple[RejectionReason, ...] = ()
    bookings: tuple[Booking, ...] = ()

    @property
    def placed(self) -> int:
        return len(self.placements)


@dataclass(frozen=True)
class _Prepared:
    """A spec checked and compiled once per cycle."""

    spec: WorkloadSpec
    runtimes: tuple[str, ...]
    constraints: tuple[CompiledExpression, ...]
    cel_affinity: tuple[tuple[CompiledExpression, int], ...]
    name_affinity: tuple[tuple[str, int], ...]
    errors: tuple[str, ...] = ()


@dataclass
class _Stage:
    reason: str
    passed: BoolArray


@dataclass
class _State:
    """Mutable scratch of one scheduling cycle (copies; the ledger is never touched)."""

    free_cpu: IntArray
    free_memory: IntArray
    own: IntArray  # replicas of this Workload per node
    bookings: list[Booking] = field(default_factory=list)


def prepare(spec: WorkloadSpec, namespace: str) -> _Prepared:
    """Compile the spec's CEL and check what the CRD schema cannot; errors name the field."""
    errors: list[str] = []
    constraints: list[CompiledExpression] = []
    for i, source in enumerate(spec.constraints):
        try:
            constraints.append(compile_expression(source))
        except CelCompileError as exc:
            errors.append(f"spec.constraints[{i}] {source!r}: {exc}")
    cel_affinity: list[tuple[CompiledExpression, int]] = []
    name_affinity: list[tuple[str, int]] = []
    for i, rule in enumerate(spec.affinity):
        if rule.is_workload_name:
            name_affinity.append((f"{namespace}/{rule.target}", rule.weight))
            continue
        try:
            cel_affinity.append((compile_expression(rule.target), rule.weight))
        except CelCompileError as exc:
            errors.append(f"spec.affinity[{i}].target {rule.target!r}: {exc}")
    runtimes = tuple(dict.fromkeys(normalize_runtime(r) for r in spec.runtimes))
    for i, runtime in enumerate(runtimes):
        if runtime.startswith("pve-") and runtime not in PROXMOX_RUNTIMES:
            errors.append(
                f"spec.runtime.oneOf[{i}] {runtime!r}: unknown runtime alias "
                f"(proxmox runtimes are {', '.join(sorted(PROXMOX_RUNTIMES))})"
            )
    return _Prepared(
        spec=spec,
        runtimes=runtimes,
        constraints=tuple(constraints),
        cel_affinity=tuple(cel_affinity),
        name_affinity=tuple(name_affinity),
        errors=tuple(errors),
    )


class Scheduler:
    """Runs the scheduling cycle. Holds only memo caches (CEL outcomes, runtime masks), so
    one instance can serve a whole ``orca plan`` run or the operator's lifetime."""

    def __init__(self, cel: CelEvaluator | None = None) -> None:
        self.cel = cel if cel is not None else CelEvaluator()
        self._runtime_masks: dict[tuple[int, tuple[str, ...]], BoolArray] = {}

    # -- the cycle ------------------------------------------------------------------------------

    def schedule(self, workload: Workload, ledger: Ledger) -> Decision:
        """The status ``workload`` should have, given the cluster in ``ledger``."""
        namespace, name = workload.metadata.namespace, workload.metadata.name
        key = workload.key
        prepared = prepare(workload.spec, namespace)
        existing = ledger.bookings(key)
        if prepared.errors:
            return self._invalid(prepared, existing)
        table = ledger.table
        spec = prepared.spec
        free_cpu, free_memory = ledger.free()
        free_cpu, free_memory = free_cpu.copy(), free_memory.copy()
        daemon = spec.kind is WorkloadKind.DAEMONSET
        use_constraints = not (daemon and spec.mode is ScheduleMode.EVERY_NODE)
        state = _State(free_cpu, free_memory, np.zeros(len(table), dtype=np.int64))
        _release(existing, table, state)
        static = self._static_stages(prepared, table, free_cpu, free_memory, use_constraints)
        passes = _all(static, len(table))
        kept = _keep(key, spec, existing, table, passes, state, daemon)
        affinity = self._affinity(prepared, table, ledger, state)
        if daemon:
            return self._place_daemonset(
                key, namespace, name, prepared, table, static, passes, kept, affinity, state
            )
        return self._place_replicas(
            namespace, name, prepared, ledger, static, passes, kept, affinity, state
        )

    # -- prepare / filter -----------------------------------------------------------------------

    def _invalid(self, prepared: _Prepared, existing: Sequence[Booking]) -> Decision:
        """A spec that cannot run: say why; existing placements stay until it is fixed."""
        return Decision(
            phase=Phase.INVALID,
            reason=CONDITION_INVALID_SPEC,
            desired=prepared.spec.replicas,
            placements=tuple(_placement(b) for b in existing),
            message="; ".join(prepared.errors),
            bookings=tuple(existing),
        )

    def _runtime_mask(self, table: NodeTable, runtimes: tuple[str, ...]) -> BoolArray:
        cache_key = (table.version, runtimes)
        mask = self._runtime_masks.get(cache_key)
        if mask is None:
            if len(self._runtime_masks) > 256:
                self._runtime_masks.clear()
            wants = set(runtimes)
            proxmox = bool(wants & PROXMOX_RUNTIMES)
            mask = np.array(
                [
                    (proxmox and n.kind == PROXMOX_KIND)
                    or any(normalize_runtime(r) in wants for r in n.runtimes)
                    for n in table.nodes
                ],
                dtype=np.bool_,
            )
            self._runtime_masks[cache_key] = mask
        return mask

    def _static_stages(
        self,
        prepared: _Prepared,
        table: NodeTable,
        free_cpu: IntArray,
        free_memory: IntArray,
        use_constraints: bool,
    ) -> list[_Stage]:
        """The filters that do not depend on this cycle's own placements, in report order."""
        stages = [
            _Stage(REASON_CORDONED, ~table.cordoned),
            _Stage(REASON_NOT_READY, table.ready),
        ]
        if prepared.runtimes:
            mask = self._runtime_mask(table, prepared.runtimes)
            stages.append(_Stage(reason_runtime(prepared.runtimes), mask))
        if use_constraints:
            for expr in prepared.constraints:
                true, failed = self.cel.truth(expr, table, free_cpu, free_memory)
                if failed.any():
                    stages.append(_Stage(reason_constraint_error(expr.source), ~failed))
                stages.append(_Stage(reason_constraint(expr.source), true | failed))
        return stages

    @staticmethod
    def _capacity_stages(spec: WorkloadSpec, state: _State) -> list[_Stage]:
        return [
            _Stage(REASON_INSUFFICIENT_CPU, state.free_cpu >= spec.cpu_millis),
            _Stage(REASON_INSUFFICIENT_MEMORY, state.free_memory >= spec.memory_bytes),
        ]

    # -- score ----------------------------------------------------------------------------------

    def _affinity(
        self, prepared: _Prepared, table: NodeTable, ledger: Ledger, state: _State
    ) -> IntArray:
        """Affinity part of the score per node: CEL targets and Workload-name targets."""
        total = np.zeros(len(table), dtype=np.int64)
        for expr, weight in prepared.cel_affinity:
            true, _ = self.cel.truth(expr, table, state.free_cpu, state.free_memory)
            total += true * weight
        for target, weight in prepared.name_affinity:
            total += ledger.replicas_per_node(target) * weight
        return total

    # -- select ---------------------------------------------------------------------------------

    def _place_replicas(
        self,
        namespace: str,
        name: str,
        prepared: _Prepared,
        ledger: Ledger,
        static: list[_Stage],
        passes: BoolArray,
        kept: dict[int, Booking],
        affinity: IntArray,
        state: _State,
    ) -> Decision:
        """Job and Service: fill the missing replica indexes one by one."""
        table = ledger.table
        spec = prepared.spec
        desired = spec.replicas
        cpu, memory = spec.cpu_millis, spec.memory_bytes
        diagnosis = _diagnose(table, static + self._capacity_stages(spec, state))
        new: dict[int, Booking] = {}
        short = False
        for index in range(desired):
            if index in kept:
                continue
            fit = passes & (state.free_cpu >= cpu) & (state.free_memory >= memory)
            candidates = np.flatnonzero(fit)
            if candidates.size == 0:
                short = True
                break
            own = state.own[candidates]
            candidates = candidates[own == own.min()]
            if self._affinity_reads_free(prepared) and new:
                affinity = self._affinity(prepared, table, ledger, state)
            scores = self._scores(spec.strategy, table, state, candidates, cpu, memory)
            scores += affinity[candidates]
            best = int(np.argmax(scores))  # first maximum: lowest hostname wins ties
            i = int(candidates[best])
            booking = Booking(
                table.hostnames[i], alloc_id(namespace, name, index), cpu, memory, int(scores[best])
            )
            new[index] = booking
            state.free_cpu[i] -= cpu
            state.free_memory[i] -= memory
            state.own[i] += 1
        if short:
            diagnosis = _diagnose(table, static + self._capacity_stages(spec, state))
        bookings = tuple(sorted({**kept, **new}.items()))
        placed = len(bookings)
        phase = _phase(placed, desired)
        message = f"{placed}/{desired} replicas placed"
        if placed < desired:
            message = _short_message(placed, desired, len(table), diagnosis)
        return _decision(phase, desired, [b for _, b in bookings], message, diagnosis)

    @staticmethod
    def _affinity_reads_free(prepared: _Prepared) -> bool:
        return any(expr.reads_free for expr, _ in prepared.cel_affinity)

    @staticmethod
    def _scores(
        strategy: Strategy,
        table: NodeTable,
        state: _State,
        candidates: np.ndarray[tuple[int], np.dtype[np.intp]],
        cpu: int,
        memory: int,
    ) -> IntArray:
        return capacity_score(
            strategy,
            table.cpu[candidates],
            table.memory[candidates],
            state.free_cpu[candidates] - cpu,
            state.free_memory[candidates] - memory,
        )

    def _place_daemonset(
        self,
        key: str,
        namespace: str,
        name: str,
        prepared: _Prepared,
        table: NodeTable,
        static: list[_Stage],
        passes: BoolArray,
        kept: dict[int, Booking],
        affinity: IntArray,
        state: _State,
    ) -> Decision:
        """DaemonSet: one placement per eligible node that passes the filters.

        ``every-node`` ignores constraints, ``matching`` uses them, ``mandatory`` also counts
        the matching nodes that cannot take it (runtime, capacity) as missing.
        """
        spec = prepared.spec
        cpu, memory = spec.cpu_millis, spec.memory_bytes
        stages = static + self._capacity_stages(spec, state)
        diagnosis = _diagnose(table, stages)
        fit = passes & (state.free_cpu >= cpu) & (state.free_memory >= memory) & (state.own == 0)
        candidates = np.flatnonzero(fit)
        scores = self._scores(spec.strategy, table, state, candidates, cpu, memory)
        scores += affinity[candidates]
        used = set(kept)
        free_indexes = (i for i in range(len(table) + len(kept) + 1) if i not in used)
        new = [
            Booking(table.hostnames[i], alloc_id(namespace, name, index), cpu, memory, int(s))
            for i, s, index in zip(candidates.tolist(), scores.tolist(), free_indexes, strict=False)
        ]
        bookings = sorted([*kept.values(), *new], key=lambda b: alloc_index(key, b.alloc_id) or 0)
        placed = len(bookings)
        if spec.mode is ScheduleMode.MANDATORY:
            # Matching = eligible and passing the constraints; runtime and capacity may fail.
            matching = _all([s for s in static if not _is_runtime(s)], len(table))
            desired = int(matching.sum())
            missing = matching.copy()
            for b in bookings:
                missing[table.index[b.node]] = False
            phase = _phase(placed, desired) if desired else Phase.UNSCHEDULABLE
            if placed < desired or desired == 0:
                names = table.names(missing, NODES_PER_REASON * 2)
                more = int(missing.sum()) - len(names)
                listed = ", ".join(names) + (f" and {more} more" if more > 0 else "")
                message = _short_message(placed, desired, len(table), diagnosis)
                if names:
                    message += f" Mandatory on {listed}."
            else:
                message = f"{placed}/{desired} nodes placed"
        else:
            desired = placed
            phase = Phase.SCHEDULED if placed else Phase.UNSCHEDULABLE
            message = (
                f"{placed}/{desired} nodes placed"
                if placed
                else _short_message(0, 0, len(table), diagnosis)
            )
        return _decision(phase, desired, bookings, message, diagnosis)


def _release(existing: Sequence[Booking], table: NodeTable, state: _State) -> None:
    """Give back what this Workload's current bookings hold: the cycle re-decides them all."""
    for booking in existing:
        i = table.index.get(booking.node)
        if i is not None:
            state.free_cpu[i] += booking.cpu
            state.free_memory[i] += booking.memory


def _keep(
    key: str,
    spec: WorkloadSpec,
    existing: Sequence[Booking],
    table: NodeTable,
    passes: BoolArray,
    state: _State,
    daemon: bool,
) -> dict[int, Booking]:
    """Existing placements that stay, by replica index (DESIGN.md 5).

    A replica stays while its node exists, is eligible and passes runtime + constraints; count
    down drops the highest indexes; a DaemonSet keeps one replica per node. Kept bookings are
    re-booked at the spec's current resources: a resize never evicts.
    """
    kept: dict[int, Booking] = {}
    taken_nodes: set[int] = set()
    cpu, memory = spec.cpu_millis, spec.memory_bytes
    for booking in existing:
        i = table.index.get(booking.node)
        index = alloc_index(key, booking.alloc_id)
        if (
            i is None
            or index is None
            or index in kept
            or not passes[i]
            or (not daemon and index >= spec.replicas)
            or (daemon and i in taken_nodes)
        ):
            continue
        state.free_cpu[i] -= cpu
        state.free_memory[i] -= memory
        state.own[i] += 1
        taken_nodes.add(i)
        kept[index] = Booking(booking.node, booking.alloc_id, cpu, memory, booking.score)
    return kept


def _is_runtime(stage: _Stage) -> bool:
    return stage.reason.startswith("runtime ")


def capacity_score(
    strategy: Strategy,
    alloc_cpu: IntArray,
    alloc_memory: IntArray,
    free_cpu_after: IntArray,
    free_memory_after: IntArray,
) -> IntArray:
    """Capacity score 0..100 per node, normalised per node so unequal nodes compare fairly.

    Spread:  mean over cpu, memory of ``free_after * 100 // allocatable``  (LeastAllocated)
    BinPack: mean over cpu, memory of ``used_after * 100 // allocatable``  (MostAllocated)

    A resource a node has none of contributes 0; results are clipped to 0..100, so an
    over-committed node (possible after a resize) never scores outside the range.
    """
    return (
        _resource_score(strategy, alloc_cpu, free_cpu_after)
        + _resource_score(strategy, alloc_memory, free_memory_after)
    ) // 2


def _resource_score(strategy: Strategy, alloc: IntArray, free_after: IntArray) -> IntArray:
    part = free_after if strategy is Strategy.SPREAD else alloc - free_after
    safe = np.where(alloc > 0, alloc, 1)
    score = np.where(alloc > 0, part * 100 // safe, 0)
    return np.clip(score, 0, 100)


def _all(stages: Sequence[_Stage], size: int) -> BoolArray:
    passed = np.ones(size, dtype=np.bool_)
    for stage in stages:
        passed &= stage.passed
    return passed


def _diagnose(table: NodeTable, stages: Sequence[_Stage]) -> tuple[RejectionReason, ...]:
    """The first failing filter per node, counted per reason, with a few node names."""
    remaining = np.ones(len(table), dtype=np.bool_)
    reasons: list[RejectionReason] = []
    for stage in stages:
        failed = remaining & ~stage.passed
        count = int(failed.sum())
        if count:
            reasons.append(
                RejectionReason(
                    reason=stage.reason,
                    count=count,
                    nodes=table.names(failed, NODES_PER_REASON),
                )
            )
            remaining &= stage.passed
    return tuple(reasons)


def _short_message(
    placed: int, desired: int, total: int, diagnosis: Sequence[RejectionReason]
) -> str:
    """kube-scheduler style: ``0/5 nodes are available: 3 runtime wasm not offered, ...``."""
    rejected = sum(r.count for r in diagnosis)
    if total == 0:
        detail = "0/0 nodes are available: no nodes in the cluster."
    else:
        parts = ", ".join(f"{r.count} {r.reason}" for r in diagnosis)
        detail = f"{total - rejected}/{total} nodes are available: {parts}."
    if desired == 0 or placed == 0:
        return detail
    return f"{placed}/{desired} replicas placed; {detail}"


def _phase(placed: int, desired: int) -> Phase:
    if placed >= desired:
        return Phase.SCHEDULED
    return Phase.PARTIALLY_SCHEDULED if placed else Phase.UNSCHEDULABLE


def _placement(booking: Booking) -> Placement:
    return Placement(node=booking.node, alloc_id=booking.alloc_id, score=booking.score)


def _decision(
    phase: Phase,
    desired: int,
    bookings: Sequence[Booking],
    message: str,
    diagnosis: tuple[RejectionReason, ...],
) -> Decision:
    return Decision(
        phase=phase,
        reason=_CONDITION_BY_PHASE[phase],
        desired=desired,
        placements=tuple(_placement(b) for b in bookings),
        message=message,
        unschedulable=diagnosis,
        bookings=tuple(bookings),
    )
