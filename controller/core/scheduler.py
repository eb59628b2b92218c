"""orca's scheduler: one Workload and the cluster in, the status it should have out.

The scheduling cycle reads as a pipeline (kube-scheduler's ``schedule_one``, in miniature)::

    prepare      compile the spec's CEL once; a spec that cannot run is Invalid
    filter       eligible -> runtime -> each constraint -> Insufficient cpu -> memory,
                 as boolean numpy masks over the hostname-sorted node table
    keep         existing placements stay while their node is eligible and still passes
                 runtime + constraints (capacity changes never evict)
    score        capacity (Spread / BinPack, 0..100 per node) + affinity weights
    select       fewest replicas of this Workload first, then score, then hostname
    diagnose     when short: the first failing filter per rejected node, counted, which
                 becomes the status message (DaemonSets always report why nodes lack one)

``Scheduler.schedule`` is a pure function of (Workload, Ledger): the ledger is read, never
written, and the memo caches inside only remember answers. The caller books the decision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from controller.api.models import (
    NodeInfo,
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
from controller.core.nodes import BoolArray, FloatArray, IntArray, NodeTable

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
    cpu: int
    memory: int
    runtimes: tuple[str, ...]
    constraints: tuple[CompiledExpression, ...]
    cel_affinity: tuple[tuple[CompiledExpression, int], ...]
    name_affinity: tuple[tuple[str, int], ...]
    errors: tuple[str, ...] = ()

    @property
    def affinity_reads_free(self) -> bool:
        return any(expr.reads_free for expr, _ in self.cel_affinity)


@dataclass(frozen=True)
class _Stage:
    reason: str
    passed: BoolArray


@dataclass(frozen=True)
class _Filters:
    """The filters that do not depend on this cycle's placements, and their conjunction."""

    stages: tuple[_Stage, ...]
    passes: BoolArray


@dataclass
class _State:
    """Mutable scratch of one scheduling cycle (copies; the ledger is never touched)."""

    free_cpu: IntArray
    free_memory: IntArray
    own: IntArray  # replicas of this Workload per node


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
        cpu=spec.cpu_millis,
        memory=spec.memory_bytes,
        runtimes=runtimes,
        constraints=tuple(constraints),
        cel_affinity=tuple(cel_affinity),
        name_affinity=tuple(name_affinity),
        errors=tuple(errors),
    )


def offers_runtime(node: NodeInfo, wants: frozenset[str]) -> bool:
    """Runtime matching of the original: ``pve-vm``/``pve-ct``/``proxmox`` mean "a node of
    kind proxmox" (it *is* the runtime); any other runtime must be in the node's labels."""
    if node.kind == PROXMOX_KIND and wants & PROXMOX_RUNTIMES:
        return True
    return any(normalize_runtime(r) in wants for r in node.runtimes if r not in PROXMOX_RUNTIMES)


class Scheduler:
    """Runs the scheduling cycle. Holds only memo caches (CEL outcomes, filter masks per node
    table), so one instance can serve a whole ``orca plan`` run or the operator's lifetime."""

    MAX_CACHED_FILTERS = 4096

    def __init__(self, cel: CelEvaluator | None = None) -> None:
        self.cel = cel if cel is not None else CelEvaluator()
        self._filters: dict[tuple[object, ...], _Filters] = {}
        self._filters_version = -1

    # -- the cycle ------------------------------------------------------------------------------

    def schedule(self, workload: Workload, ledger: Ledger) -> Decision:
        """The status ``workload`` should have, given the cluster in ``ledger``."""
        namespace, name = workload.metadata.namespace, workload.metadata.name
        key = workload.key
        prepared = prepare(workload.spec, namespace)
        existing = ledger.bookings(key)
        if prepared.errors:
            return _invalid(prepared, existing)
        table = ledger.table
        spec = prepared.spec
        free_cpu, free_memory = ledger.free()
        state = _State(free_cpu, free_memory, np.zeros(len(table), dtype=np.int64))
        _release(existing, table, state)
        daemon = spec.kind is WorkloadKind.DAEMONSET
        use_constraints = not (daemon and spec.mode is ScheduleMode.EVERY_NODE)
        filters = self._static_filters(prepared, table, state, use_constraints)
        kept = _keep(key, prepared, existing, table, filters.passes, state, daemon)
        if daemon:
            return self._place_daemonset(
                key, namespace, name, prepared, ledger, filters, kept, state
            )
        return self._place_replicas(namespace, name, prepared, ledger, filters, kept, state)

    # -- filter ---------------------------------------------------------------------------------

    def _static_filters(
        self, prepared: _Prepared, table: NodeTable, state: _State, use_constraints: bool
    ) -> _Filters:
        """Eligibility, runtime and constraints, memoised per node table and spec signature
        (unless a constraint reads free capacity, which changes with every placement)."""
        constraints = prepared.constraints if use_constraints else ()
        signature = (prepared.runtimes, tuple(c.source for c in constraints))
        cacheable = not any(c.reads_free for c in constraints)
        if table.version != self._filters_version or len(self._filters) > self.MAX_CACHED_FILTERS:
            self._filters.clear()
            self._filters_version = table.version
        if cacheable and (hit := self._filters.get(signature)) is not None:
            return hit
        stages = [
            _Stage(REASON_CORDONED, ~table.cordoned),
            _Stage(REASON_NOT_READY, table.ready),
        ]
        if prepared.runtimes:
            stages.append(
                _Stage(reason_runtime(prepared.runtimes), self._runtime_mask(table, prepared))
            )
        for expr in constraints:
            true, failed = self.cel.truth(expr, table, state.free_cpu, state.free_memory)
            if failed.any():
                stages.append(_Stage(reason_constraint_error(expr.source), ~failed))
            stages.append(_Stage(reason_constraint(expr.source), true | failed))
        filters = _Filters(tuple(stages), _all(stages, len(table)))
        if cacheable:
            self._filters[signature] = filters
        return filters

    def _runtime_mask(self, table: NodeTable, prepared: _Prepared) -> BoolArray:
        signature = (prepared.runtimes, "runtime")
        hit = self._filters.get(signature)
        if hit is None:
            wants = frozenset(prepared.runtimes)
            mask = np.fromiter(
                (offers_runtime(n, wants) for n in table.nodes), dtype=np.bool_, count=len(table)
            )
            hit = self._filters[signature] = _Filters((), mask)
        return hit.passes

    @staticmethod
    def _capacity_stages(prepared: _Prepared, state: _State) -> list[_Stage]:
        return [
            _Stage(REASON_INSUFFICIENT_CPU, state.free_cpu >= prepared.cpu),
            _Stage(REASON_INSUFFICIENT_MEMORY, state.free_memory >= prepared.memory),
        ]

    # -- score ----------------------------------------------------------------------------------

    def _affinity(
        self, prepared: _Prepared, table: NodeTable, ledger: Ledger, state: _State
    ) -> IntArray | None:
        """Affinity part of the score per node (None: the spec has no affinity rules)."""
        if not prepared.cel_affinity and not prepared.name_affinity:
            return None
        total = np.zeros(len(table), dtype=np.int64)
        for expr, weight in prepared.cel_affinity:
            true, _ = self.cel.truth(expr, table, state.free_cpu, state.free_memory)
            total += true * weight
        for target, weight in prepared.name_affinity:
            total += ledger.replicas_per_node(target) * weight
        return total

    @staticmethod
    def _scores(
        prepared: _Prepared,
        table: NodeTable,
        state: _State,
        candidates: npt.NDArray[np.intp],
        affinity: IntArray | None,
    ) -> IntArray:
        scores = capacity_score(
            prepared.spec.strategy,
            table.cpu_divisor[candidates],
            table.memory_divisor[candidates],
            state.free_cpu[candidates] - prepared.cpu,
            state.free_memory[candidates] - prepared.memory,
        )
        if affinity is not None:
            scores += affinity[candidates]
        return scores

    # -- select ---------------------------------------------------------------------------------

    def _place_replicas(
        self,
        namespace: str,
        name: str,
        prepared: _Prepared,
        ledger: Ledger,
        filters: _Filters,
        kept: dict[int, Booking],
        state: _State,
    ) -> Decision:
        """Job and Service: fill the missing replica indexes one by one, each on the node with
        the fewest replicas of this Workload, then the best score, then the lowest hostname."""
        table = ledger.table
        desired = prepared.spec.replicas
        cpu, memory = prepared.cpu, prepared.memory
        affinity = self._affinity(prepared, table, ledger, state)
        refresh_affinity = prepared.affinity_reads_free
        new: dict[int, Booking] = {}
        for index in range(desired):
            if index in kept:
                continue
            fit = filters.passes & (state.free_cpu >= cpu)
            if memory:
                fit &= state.free_memory >= memory
            candidates = np.flatnonzero(fit)
            if candidates.size == 0:
                break
            if new or kept:
                own = state.own[candidates]
                candidates = candidates[own == own.min()]
                if refresh_affinity:
                    affinity = self._affinity(prepared, table, ledger, state)
            scores = self._scores(prepared, table, state, candidates, affinity)
            best = int(np.argmax(scores))  # the first maximum: lowest hostname wins ties
            i = int(candidates[best])
            new[index] = Booking(
                table.hostnames[i], alloc_id(namespace, name, index), cpu, memory, int(scores[best])
            )
            state.free_cpu[i] -= cpu
            state.free_memory[i] -= memory
            state.own[i] += 1
        bookings = [b for _, b in sorted({**kept, **new}.items())]
        placed = len(bookings)
        if placed >= desired:
            return _decision(
                Phase.SCHEDULED, desired, bookings, f"{placed}/{desired} replicas placed"
            )
        diagnosis = _diagnose(table, [*filters.stages, *self._capacity_stages(prepared, state)])
        message = _short_message(placed, desired, len(table), diagnosis)
        return _decision(_phase(placed, desired), desired, bookings, message, diagnosis)

    def _place_daemonset(
        self,
        key: str,
        namespace: str,
        name: str,
        prepared: _Prepared,
        ledger: Ledger,
        filters: _Filters,
        kept: dict[int, Booking],
        state: _State,
    ) -> Decision:
        """DaemonSet: one placement per eligible node that passes the filters.

        ``every-node`` ignores constraints, ``matching`` uses them, ``mandatory`` also counts
        the matching nodes that cannot take it (runtime, capacity) as missing.
        """
        table = ledger.table
        spec = prepared.spec
        cpu, memory = prepared.cpu, prepared.memory
        diagnosis = _diagnose(table, [*filters.stages, *self._capacity_stages(prepared, state)])
        fit = filters.passes & (state.free_cpu >= cpu) & (state.free_memory >= memory)
        fit &= state.own == 0
        candidates = np.flatnonzero(fit)
        affinity = self._affinity(prepared, table, ledger, state)
        scores = self._scores(prepared, table, state, candidates, affinity)
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
            matching = _all([s for s in filters.stages if not _is_runtime(s)], len(table))
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


def _invalid(prepared: _Prepared, existing: Sequence[Booking]) -> Decision:
    """A spec that cannot run: say why; existing placements stay until it is fixed."""
    return Decision(
        phase=Phase.INVALID,
        reason=CONDITION_INVALID_SPEC,
        desired=prepared.spec.replicas,
        placements=tuple(_placement(b) for b in existing),
        message="; ".join(prepared.errors),
        bookings=tuple(existing),
    )


def _release(existing: Sequence[Booking], table: NodeTable, state: _State) -> None:
    """Give back what this Workload's current bookings hold: the cycle re-decides them all."""
    for booking in existing:
        i = table.index.get(booking.node)
        if i is not None:
            state.free_cpu[i] += booking.cpu
            state.free_memory[i] += booking.memory


def _keep(
    key: str,
    prepared: _Prepared,
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
    cpu, memory = prepared.cpu, prepared.memory
    replicas = prepared.spec.replicas
    for booking in existing:
        i = table.index.get(booking.node)
        index = alloc_index(key, booking.alloc_id)
        if (
            i is None
            or index is None
            or index in kept
            or not passes[i]
            or (not daemon and index >= replicas)
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
    cpu_divisor: FloatArray,
    memory_divisor: FloatArray,
    free_cpu_after: IntArray,
    free_memory_after: IntArray,
) -> IntArray:
    """Capacity score 0..100 per node, normalised per node so unequal nodes compare fairly.

    Spread:  mean over cpu, memory of ``floor(free_after * 100 / allocatable)``
    BinPack: mean over cpu, memory of ``100 - that``, i.e. of the used share (MostAllocated)

    The mean is rounded down. ``*_divisor`` is the allocatable as float, ``inf`` where a node
    has none of the resource (``NodeTable.cpu_divisor``), so such a resource scores 0 (or 100
    for BinPack, where a node that has none of it is as full as it gets). Each part is clipped
    to 0..100, so an over-committed node (possible after a resize) never scores outside the
    range. float64 division of integers below 2**46 (64 TiB) is exact enough that the floor
    equals integer floor division.
    """
    total = _percent_free(cpu_divisor, free_cpu_after)
    total += _percent_free(memory_divisor, free_memory_after)
    if strategy is Strategy.BINPACK:
        np.subtract(200.0, total, out=total)
    total //= 2
    return total.astype(np.int64)


def _percent_free(divisor: FloatArray, free_after: IntArray) -> FloatArray:
    score: FloatArray = np.multiply(free_after, 100.0, dtype=np.float64)
    score /= divisor
    np.floor(score, out=score)
    np.minimum(score, 100.0, out=score)
    np.maximum(score, 0.0, out=score)
    return score


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
    diagnosis: tuple[RejectionReason, ...] = (),
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
