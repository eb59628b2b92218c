"""The scheduling framework: plugins at extension points, run by one engine over the node table.

kube-scheduler's framework (``pkg/scheduler/framework``), in miniature. A *profile* lists the
plugins in order, each with its score weight; a plugin implements one or more extension points:

    PreFilter   once per Workload and cycle: compile and check what the schema cannot
                (CEL, runtime aliases); any error makes the Workload Invalid
    Filter      a boolean mask over the node table per rejection reason. Filters are
                memoised per node table and per ``signature``, what the plugin declares it
                reads of the spec, so two Workloads with equal signatures share the masks
                and no hand-kept key can leak masks between different specs. A signature of
                None means "reads this cycle's free capacity": computed every cycle. A
                verdict that depends on the time (a toleration running down) says over
                which span of the cycle's clock it holds, and is memoised for that span.
    Filter (per replica)  ``per_replica`` filters (capacity, topology spread) run again
                before each replica is placed, as the cycle's own placements use capacity
                up and fill domains; they may read the static filters' mask, ``cycle.passes``
    Score       an int per candidate node, multiplied by the profile weight and summed

The engine builds the diagnosis from the plugins' reasons (the first failing filter per node,
in profile order) and a ``Code`` that tells the scheduling loop who can cure a failure.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from controller.api.models import RejectionReason, ScheduleMode, WorkloadKind, WorkloadSpec
from controller.api.resources import Scalars
from controller.scheduler.ledger import Booking, Ledger, alloc_index, has_room
from controller.scheduler.nodes import BoolArray, FloatArray, IntArray, NodeTable

IndexArray = npt.NDArray[np.intp]
NODES_PER_REASON: Final = 3  # node names listed per rejection reason


class Code(IntEnum):
    """What a decision that is not complete asks of the scheduling loop (kube-scheduler's
    ``framework.Code``, the subset orca needs)."""

    SUCCESS = 0
    UNSCHEDULABLE = 1
    """Some node failed only for lack of capacity: retry when capacity frees."""
    UNRESOLVABLE = 2
    """``UnschedulableAndUnresolvable``: runtime, constraints, taints, eligibility. Only a
    spec or node change can cure it; freed capacity cannot."""
    INVALID = 3
    """The spec cannot run; only a spec change can cure it."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """Nodes a filter rejects for one reason: ``passed`` is False where it rejects.

    ``code`` overrides the plugin's for this reason, for a plugin whose reasons differ in who
    can cure them (topology spread: a node without the key is ``UNRESOLVABLE``, a skew
    ``UNSCHEDULABLE``, as in kube-scheduler); None means the plugin's ``code``.
    """

    reason: str
    passed: BoolArray
    code: Code | None = None
    #: Where no freed capacity can cure the rejection (kube's ``Unresolvable`` of an
    #: ``InsufficientResource``: the request exceeds the node's allocatable itself): those
    #: nodes count as ``UNRESOLVABLE`` whatever ``code`` says. None: nowhere.
    beyond: BoolArray | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A filter plugin's answer over the whole table.

    ``keeps`` says where an *existing* replica may stay (docs/design.md 5); None means the
    plugin's ``evicts`` attribute decides: the same as passing, or everywhere.

    ``since`` and ``until``: the span of the cycle's clock (``CycleState.now``) over which
    this same verdict holds, ``since <= now < until``, for a verdict that depends on the
    time (a toleration running down changes it when it runs out); any time by default.
    The engine memoises it for that span, as kube-scheduler's taint manager keeps a
    timer per Pod rather than look again at every tick.
    """

    rejections: tuple[Rejection, ...]
    keeps: BoolArray | None = None
    cacheable: bool = True  # False: depends on this cycle (e.g. a CEL budget ran out)
    #: Where ``keeps`` holds, until when (seconds since the epoch, after the cycle's ``now``;
    #: inf: for good), e.g. a NoExecute taint tolerated for ``tolerationSeconds``. None: for
    #: good everywhere. What the status reports as a pending move.
    leaves: FloatArray | None = None
    since: float = -math.inf
    until: float = math.inf


@dataclass(frozen=True)
class FilterResult:
    """A filter plugin's verdict, folded: its masks and what a rejection means."""

    plugin: str
    code: Code
    selects: bool
    rejections: tuple[Rejection, ...]
    passes: BoolArray
    keeps: BoolArray
    cacheable: bool = True
    leaves: FloatArray | None = None
    since: float = -math.inf  # the span of the clock it holds over (``Verdict``)
    until: float = math.inf

    def holds_at(self, now: float) -> bool:
        return self.since <= now < self.until


@dataclass
class CycleState:
    """One scheduling cycle of one Workload: the spec, the cluster, and scratch copies.

    The ledger is read, never written; the free capacity (``free_cpu``, ``free_memory``,
    ``free_pods``, ``free_scalars``) and ``own`` are this cycle's own copies (``own``: this
    Workload's replicas the cycle holds, per node), changed only by ``take`` and ``give``
    (and the booking forms ``book`` and ``lift``) as the cycle places replicas, and by
    ``Framework.what_if`` on a clone for a planner's dry run. ``data`` holds what plugins
    prepared for later extension points, under their own name (kube-scheduler's
    CycleState.Write). ``passes`` is set by ``Framework.filter``: the nodes that pass every
    static filter, and ``results`` each static filter's verdict, which per-replica filters
    may read (topology spread counts its domains over the nodes that pass some of them).
    """

    key: str
    namespace: str
    name: str
    spec: WorkloadSpec
    ledger: Ledger
    free_cpu: IntArray
    free_memory: IntArray
    own: IntArray
    cpu: int  # the spec's request, millicores (parsed once per cycle)
    memory: int  # bytes
    free_pods: IntArray  # Pods each node still takes (every replica is one)
    #: The spec's other resources (``WorkloadSpec.scalars``), and each one's free amount per
    #: node: only those asked for, so a cycle that asks cpu and memory alone copies no more.
    scalars: Scalars = ()
    free_scalars: dict[str, IntArray] = field(default_factory=dict)
    now: float = 0.0  # the cycle's time, seconds since the epoch (``Verdict.leaves``)
    data: dict[str, Any] = field(default_factory=dict)
    passes: BoolArray | None = None
    results: tuple[FilterResult, ...] = ()
    #: ``room()``, once asked: kept up to date node by node by ``take`` and ``give``.
    _room: BoolArray | None = field(default=None, repr=False)
    #: Where the ledger stood when the free capacity was copied from it (``Ledger.position``),
    #: and the rows ``take`` and ``give`` changed since: the free capacity here is the
    #: ledger's at ``origin`` but in ``touched`` (what a score kept per row redoes).
    origin: tuple[int, int] = (-1, 0)
    touched: set[int] = field(default_factory=set, repr=False)

    @property
    def table(self) -> NodeTable:
        return self.ledger.table

    @property
    def daemon(self) -> bool:
        return self.spec.kind is WorkloadKind.DAEMONSET

    @property
    def uses_constraints(self) -> bool:
        """``EveryNode`` DaemonSets ignore constraints (docs/design.md 4)."""
        return not (self.daemon and self.spec.mode is ScheduleMode.EVERY_NODE)

    # -- the only writers of the scratch arrays ----------------------------------------------

    def take(
        self, i: int, cpu: int, memory: int, scalars: Scalars = (), *, own: bool = True
    ) -> None:
        """Node ``i`` holds one more replica (one Pod) of (``cpu``, ``memory``, ``scalars``):
        of this Workload when ``own`` (counted in ``own``), else of another one. Scalar
        resources this cycle does not ask for are not followed."""
        self.free_cpu[i] -= cpu
        self.free_memory[i] -= memory
        self.free_pods[i] -= 1
        self.touched.add(i)
        for name, amount in scalars:
            free = self.free_scalars.get(name)
            if free is not None:
                free[i] -= amount
        if own:
            self.own[i] += 1
        if self._room is not None:
            self._room[i] = self.fits_one(i)

    def give(
        self, i: int, cpu: int, memory: int, scalars: Scalars = (), *, own: bool = True
    ) -> None:
        """The reverse of ``take``: node ``i`` holds one replica fewer."""
        self.free_cpu[i] += cpu
        self.free_memory[i] += memory
        self.free_pods[i] += 1
        self.touched.add(i)
        for name, amount in scalars:
            free = self.free_scalars.get(name)
            if free is not None:
                free[i] += amount
        if own:
            self.own[i] -= 1
        if self._room is not None:
            self._room[i] = self.fits_one(i)

    def take_one(self, i: int) -> None:
        """``take`` one replica of this Workload, at the spec's size."""
        self.take(i, self.cpu, self.memory, self.scalars)

    def book(self, bookings: Iterable[Booking]) -> None:
        """``take`` for each booking on a node of the table (this Workload's own, by AllocID,
        are counted in ``own``)."""
        for b in bookings:
            i = self.table.index.get(b.node)
            if i is not None:
                own = alloc_index(self.key, b.alloc_id) is not None
                self.take(i, b.cpu, b.memory, b.scalars, own=own)

    def lift(self, bookings: Iterable[Booking]) -> None:
        """``give`` for each booking on a node of the table: the replicas are gone (this
        Workload's own ones must be among those the cycle holds)."""
        for b in bookings:
            i = self.table.index.get(b.node)
            if i is not None:
                own = alloc_index(self.key, b.alloc_id) is not None
                self.give(i, b.cpu, b.memory, b.scalars, own=own)

    def room(self) -> BoolArray:
        """The nodes with room for one more replica of the spec's size now: a Pod and every
        resource asked for (``fits_one`` of every node, ``ResourcesFit``'s rule). Computed
        once per cycle, then kept up to date by ``take`` and ``give`` for the one node each
        changes, so a replica placed costs one node's check, not the table's (the scheduling
        loop asks this before every replica)."""
        if self._room is None:
            room = (self.free_pods >= 1) & has_room(self.free_cpu, self.cpu)
            room &= has_room(self.free_memory, self.memory)
            for name, amount in self.scalars:
                room &= has_room(self.free_scalars[name], amount)
            self._room = room
        return self._room

    def fits_one(self, i: int, *, pod: bool = True) -> bool:
        """Whether node ``i`` holds one more replica of the spec's size now: ``has_room`` for
        a Pod and every resource asked for (``ResourcesFit``'s rule, for one node). Without
        ``pod``, the resources only: a replica that stays where it is and grows is a Pod there
        already (capacity never evicts, and a resize asks only for what it adds)."""
        return (
            (not pod or self.free_pods[i] >= 1)
            and has_room(int(self.free_cpu[i]), self.cpu)
            and has_room(int(self.free_memory[i]), self.memory)
            and all(has_room(int(self.free_scalars[n][i]), a) for n, a in self.scalars)
        )

    @contextmanager
    def vacated(self, i: int) -> Iterator[None]:
        """One of this Workload's replicas (of the spec's size) off node ``i`` for the block,
        back after it: dry runs one replica after another on a cycle that is itself a
        planner's copy (``Framework.what_if``), without a copy each time (the rebalancer asks
        this of every replica it might move)."""
        self.give(i, self.cpu, self.memory, self.scalars)
        try:
            yield
        finally:
            self.take_one(i)

    def clone(self) -> CycleState:
        """A copy whose scratch arrays and plugin data are its own (kube's
        ``CycleState.Clone``); the spec, the ledger and the filters' verdicts are shared."""
        other = copy.copy(self)  # every field shared, then the scratch made its own
        other.free_cpu = self.free_cpu.copy()
        other.free_memory = self.free_memory.copy()
        other.free_pods = self.free_pods.copy()
        other.free_scalars = {name: free.copy() for name, free in self.free_scalars.items()}
        other.own = self.own.copy()
        other._room = None if self._room is None else self._room.copy()
        other.touched = set(self.touched)
        other.data = dict(self.data)
        return other


# -- the extension points ------------------------------------------------------------------------


@runtime_checkable
class PreFilterPlugin(Protocol):
    """Checks and compiles a spec once per cycle; returns errors naming the field."""

    name: str

    def pre_filter(self, cycle: CycleState) -> Sequence[str]: ...


@runtime_checkable
class FilterPlugin(Protocol):
    """Rejects nodes. Class attributes say what a rejection means:

    - ``code``: ``UNSCHEDULABLE`` if freed capacity could cure it, else ``UNRESOLVABLE``;
    - ``evicts``: whether failing it moves an existing replica (when ``keeps`` is None);
    - ``selects``: whether failing it means "not a node this Workload wants" (a Mandatory
      DaemonSet counts the other rejections, runtime and capacity, as missing nodes);
    - ``per_replica``: re-run before each replica (it reads what the cycle's placements
      change: free capacity, ``own``); it runs after the static filters and may read
      ``cycle.passes``.

    Optionally ``fit(cycle)``: the nodes it passes now, the conjunction of its rejections'
    ``passed`` without building them (``Framework.fits``, once per replica, asks it instead
    of ``filter``; ``filter`` still says why, for the diagnosis).

    Optionally ``shape_only = True``: its verdict reads nothing of a node but
    ``NodeTable.SHAPE_FIELDS`` (labels, runtimes, allocatable...), so the engine keeps it
    across tables of the same ``shape``, through nodes going NotReady and back. Without it, a
    verdict is kept for one table only.
    """

    name: str
    code: Code
    evicts: bool
    selects: bool
    per_replica: bool

    def signature(self, cycle: CycleState) -> Hashable | None: ...

    def filter(self, cycle: CycleState) -> Verdict: ...


@runtime_checkable
class ScorePlugin(Protocol):
    """Scores candidate nodes (indexes into the table); each plugin documents its range.
    None means it adds nothing for this Workload (no affinity rules, no soft taints), which
    spares the hot path an array of zeros per replica."""

    name: str

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None: ...


@dataclass(frozen=True)
class Profile:
    """The plugins in the order they run (and are reported), with their score weights."""

    plugins: tuple[tuple[object, int], ...]

    def __post_init__(self) -> None:
        names = [getattr(p, "name", None) for p, _ in self.plugins]
        if None in names or len(set(names)) != len(names):
            raise ValueError(f"plugins need distinct names: {names}")
        for plugin, _ in self.plugins:
            if not isinstance(plugin, PreFilterPlugin | FilterPlugin | ScorePlugin):
                raise TypeError(f"{plugin!r} implements no extension point")

    @property
    def pre_filters(self) -> list[PreFilterPlugin]:
        return [p for p, _ in self.plugins if isinstance(p, PreFilterPlugin)]

    @property
    def filters(self) -> list[FilterPlugin]:
        return [p for p, _ in self.plugins if isinstance(p, FilterPlugin)]

    @property
    def scores(self) -> list[tuple[ScorePlugin, int]]:
        return [(p, w) for p, w in self.plugins if isinstance(p, ScorePlugin) and w]


@dataclass(frozen=True)
class Filtered:
    """The static (not per-replica) filters of one cycle, folded."""

    results: tuple[FilterResult, ...]
    passes: BoolArray
    keeps: BoolArray
    leaves: FloatArray | None = None  # the earliest of the filters' ``leaves`` (None: none)
    since: float = -math.inf  # the span of the clock every verdict holds over
    until: float = math.inf

    def holds_at(self, now: float) -> bool:
        return self.since <= now < self.until


class Framework:
    """Runs a profile's plugins. Holds only memo caches, so one instance can serve a whole
    ``orca plan`` run or the operator's lifetime (not thread-safe: one loop owns it)."""

    MAX_CACHED_FILTERS: Final = 4096
    #: Static verdicts whose passing nodes are kept as indexes (``candidates``), the least
    #: recently used let go first, all of them with the memoised verdicts: 8 bytes per passing
    #: node each (15,000 nodes: 120 KB at most), so bounded apart from the memo (whose
    #: verdicts hold 2 bytes per node each).
    MAX_CACHED_NODES: Final = 256

    def __init__(self, profile: Profile) -> None:
        self._pre_filters = profile.pre_filters
        self._static = [f for f in profile.filters if not f.per_replica]
        self._per_replica = [f for f in profile.filters if f.per_replica]
        self._scores = profile.scores
        # Static filters' verdicts by (plugin, signature): for this table only, or, for the
        # ``shape_only`` plugins, for every table of this shape.
        self._memo: dict[Hashable, FilterResult] = {}
        self._shaped: dict[Hashable, FilterResult] = {}
        self._shape_only = {f.name for f in self._static if getattr(f, "shape_only", False)}
        self._folded: dict[Hashable, Filtered] = {}
        # ``passing`` of the verdicts asked last, by identity (each entry holds its verdict,
        # so no other object can take its id while it is here).
        self._nodes: OrderedDict[int, tuple[Filtered, IndexArray]] = OrderedDict()
        self._table_version = -1
        self._table_shape = -1

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, cycle: CycleState) -> list[str]:
        """Every plugin's errors (all of them, so a user fixes a spec in one go)."""
        errors: list[str] = []
        for plugin in self._pre_filters:
            errors.extend(plugin.pre_filter(cycle))
        return errors

    # -- Filter --------------------------------------------------------------------------------

    def filter(self, cycle: CycleState) -> Filtered:
        """The static filters over the whole table, memoised per table and signature; their
        verdicts and conjunction are also left in ``cycle.results`` and ``cycle.passes`` for the
        per-replica filters."""
        folded = self._filter(cycle)
        cycle.passes = folded.passes
        cycle.results = folded.results
        return folded

    def _filter(self, cycle: CycleState) -> Filtered:
        table, now = cycle.table, cycle.now
        if table.version != self._table_version or len(self._memo) > self.MAX_CACHED_FILTERS:
            self._memo.clear()
            self._folded.clear()
            self._nodes.clear()  # only for the verdicts memoised, not those let go
            self._table_version = table.version
        if table.shape != self._table_shape or len(self._shaped) > self.MAX_CACHED_FILTERS:
            self._shaped.clear()
            self._table_shape = table.shape
        signatures = [(f.name, f.signature(cycle)) for f in self._static]
        cacheable = all(sig is not None for _, sig in signatures)
        folded_key = tuple(signatures)
        if cacheable and (hit := self._folded.get(folded_key)) is not None and hit.holds_at(now):
            return hit
        results: list[FilterResult] = []
        for plugin, key in zip(self._static, signatures, strict=True):
            memo = self._shaped if plugin.name in self._shape_only else self._memo
            result = memo.get(key) if key[1] is not None else None
            if result is None or not result.holds_at(now):
                result = _run_filter(plugin, cycle)
                if key[1] is not None and result.cacheable:
                    memo[key] = result
            cacheable = cacheable and result.cacheable
            results.append(result)
        size = len(table)
        leaves = [r.leaves for r in results if r.leaves is not None]
        folded = Filtered(
            tuple(results),
            _conjunction((r.passes for r in results), size),
            _conjunction((r.keeps for r in results), size),
            np.minimum.reduce(leaves) if leaves else None,
            max(r.since for r in results) if results else -math.inf,
            min(r.until for r in results) if results else math.inf,
        )
        if cacheable:
            self._folded[folded_key] = folded
        return folded

    # -- dry runs ------------------------------------------------------------------------------

    @staticmethod
    def what_if(
        cycle: CycleState, *, lift: Iterable[Booking] = (), book: Iterable[Booking] = ()
    ) -> CycleState:
        """The cycle as it would be if ``lift``'s replicas were gone and ``book``'s placed: a
        clone, so ``cycle`` is not changed (kube-scheduler's preemption dry runs clone the
        CycleState and call the PreFilter extensions' ``RemovePod``/``AddPod`` on the copy,
        ``SelectVictimsOnNode`` in defaultpreemption/default_preemption.go). What the static
        filters decided is kept (``cycle.passes``); the per-replica filters (``fits``) and the
        scores then see the changed room and counts. The planners ask here: preemption (the
        decision's replicas placed, then victims lifted node by node), ``explain`` (the
        placement made on a copy, the cycle narrated as it was); the rebalancer, which tries
        every replica of a Workload in turn, asks ``CycleState.vacated`` of its own cycle;
        ``Ledger.what_if`` asks the same of the whole cluster (bookings lifted, nodes removed
        or added): preemption's check, the drain and add-nodes what-if."""
        trial = cycle.clone()
        trial.lift(lift)
        trial.book(book)
        return trial

    def filter_replica(self, cycle: CycleState) -> tuple[FilterResult, ...]:
        """The per-replica filters, on the cycle's free capacity as it is now."""
        return tuple(_run_filter(plugin, cycle) for plugin in self._per_replica)

    def fits(self, cycle: CycleState, filtered: Filtered) -> BoolArray:
        """Nodes that pass every filter right now (the hot path: once per replica, so it
        folds the per-replica rejections directly, without building FilterResults, or takes a
        plugin's own ``fit`` where it has one)."""
        fit = filtered.passes
        for plugin in self._per_replica:
            quick = getattr(plugin, "fit", None)
            if quick is not None:
                fit = fit & quick(cycle)  # a new array: the memoised mask stays intact
                continue
            for rejection in plugin.filter(cycle).rejections:
                fit = fit & rejection.passed
        return fit

    def candidates(self, cycle: CycleState, filtered: Filtered) -> IndexArray:
        """``fits`` as node indexes, ascending (the order ties are broken in), worked out on
        the nodes that pass the static filters only (``passing``, kept per verdict: the
        engine memoises verdicts, so Workloads alike share them): once per replica, the
        per-replica filters' masks are read at those nodes rather than combined and searched
        over the whole table (at 15,000 nodes, 8 % of ``orca plan``'s planning). Read only:
        without per-replica filters it is the array kept."""
        kept = self._nodes.get(id(filtered))
        if kept is None:
            kept = self._nodes[id(filtered)] = (filtered, passing(filtered))
            if len(self._nodes) > self.MAX_CACHED_NODES:
                self._nodes.popitem(last=False)
        else:
            self._nodes.move_to_end(id(filtered))
        nodes = kept[1]
        for plugin in self._per_replica:
            quick = getattr(plugin, "fit", None)
            if quick is not None:
                nodes = nodes[quick(cycle)[nodes]]
                continue
            for rejection in plugin.filter(cycle).rejections:
                nodes = nodes[rejection.passed[nodes]]
        return nodes

    # -- Score ---------------------------------------------------------------------------------

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray:
        """Sum over score plugins of weight x score, per candidate."""
        total: IntArray | None = None
        for plugin, weight in self._scores:
            part = plugin.score(cycle, candidates)
            if part is None:
                continue
            if weight != 1:
                part = part * weight
            total = part if total is None else total + part
        return total if total is not None else np.zeros(len(candidates), dtype=np.int64)

    # -- diagnosis -----------------------------------------------------------------------------

    def diagnose(
        self, cycle: CycleState, filtered: Filtered, ignore: BoolArray | None = None
    ) -> tuple[tuple[RejectionReason, ...], Code]:
        """The first failing filter per node, counted per reason, with a few node names and the
        plugin that rejected them (passed on to the status, the metrics and explanations); and
        ``UNSCHEDULABLE`` when some node failed only for a reason capacity can cure (not beyond
        cure: ``Rejection.beyond``).
        Nodes in ``ignore`` (a DaemonSet's nodes that already hold it) are not reported."""
        table = cycle.table
        remaining = np.ones(len(table), dtype=np.bool_) if ignore is None else ~ignore
        reasons: list[RejectionReason] = []
        code = Code.UNRESOLVABLE
        for result in (*filtered.results, *self.filter_replica(cycle)):
            beyond = _beyond(result.rejections)
            for rejection in result.rejections:
                failed = remaining & ~rejection.passed
                count = int(failed.sum())
                if not count:
                    continue
                reasons.append(
                    RejectionReason(
                        reason=rejection.reason,
                        count=count,
                        nodes=table.names(failed, NODES_PER_REASON),
                        plugin=result.plugin,
                    )
                )
                remaining &= rejection.passed
                cure = result.code if rejection.code is None else rejection.code
                if cure is Code.UNSCHEDULABLE and (beyond is None or (failed & ~beyond).any()):
                    code = Code.UNSCHEDULABLE
        return tuple(reasons), code

    # -- explanation (``orca explain``) ---------------------------------------------------------

    def first_rejections(
        self, cycle: CycleState, filtered: Filtered
    ) -> list[tuple[str, str] | None]:
        """Per node: (plugin, reason) of the first filter that rejects it now, or None."""
        first: list[tuple[str, str] | None] = [None] * len(cycle.table)
        for result in (*filtered.results, *self.filter_replica(cycle)):
            for rejection in result.rejections:
                for i in np.flatnonzero(~rejection.passed).tolist():
                    if first[i] is None:
                        first[i] = (result.plugin, rejection.reason)
        return first

    def score_parts(self, cycle: CycleState, candidates: IndexArray) -> dict[str, IntArray]:
        """Each score plugin's weighted part per candidate (their sum is ``score``)."""
        zeros = np.zeros(len(candidates), dtype=np.int64)
        parts = {plugin.name: plugin.score(cycle, candidates) for plugin, _ in self._scores}
        return {
            name: zeros if part is None else part * w
            for (name, part), (_, w) in zip(parts.items(), self._scores, strict=True)
        }


def passing(filtered: Filtered) -> IndexArray:
    """The indexes of the nodes that pass every static filter, ascending."""
    return np.flatnonzero(filtered.passes)


def _run_filter(plugin: FilterPlugin, cycle: CycleState) -> FilterResult:
    verdict = plugin.filter(cycle)
    size = len(cycle.table)
    passes = _conjunction((r.passed for r in verdict.rejections), size)
    if verdict.keeps is not None:
        keeps = verdict.keeps
    else:
        keeps = passes if plugin.evicts else np.ones(size, dtype=np.bool_)
    return FilterResult(
        plugin=plugin.name,
        code=plugin.code,
        selects=plugin.selects,
        rejections=verdict.rejections,
        passes=passes,
        keeps=keeps,
        cacheable=verdict.cacheable,
        leaves=verdict.leaves,
        since=verdict.since,
        until=verdict.until,
    )


def _beyond(rejections: tuple[Rejection, ...]) -> BoolArray | None:
    """The nodes one of ``rejections`` rejects beyond cure (``Rejection.beyond``): a node
    short of one resource it can never hold is not cured by room freed for another."""
    out: BoolArray | None = None
    for rejection in rejections:
        if rejection.beyond is not None:
            found = rejection.beyond & ~rejection.passed
            out = found if out is None else out | found
    return out


def _conjunction(masks: Any, size: int) -> BoolArray:
    out = np.ones(size, dtype=np.bool_)
    for mask in masks:
        out &= mask
    return out
