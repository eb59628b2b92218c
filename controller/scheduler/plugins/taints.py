"""TaintToleration: node taints against the Workload's tolerations (kube-scheduler semantics).

- ``NoSchedule`` / ``NoExecute`` taints no toleration tolerates filter the node, reported
  as ``node(s) had untolerated taint {key: value}`` with the node's first such taint.
- A ``NoExecute`` taint also moves existing replicas (kube's taint-eviction controller,
  pkg/controller/tainteviction/taint_eviction.go ``processPodOnNode``): at once when a
  NoExecute taint of the node is tolerated by none of the tolerations; else, per taint, the
  first toleration that tolerates it (``GetMatchingTolerations``) says for how long:
  ``tolerationSeconds`` from the taint's ``timeAdded`` (``<= 0``: at once; absent: forever),
  and the replica leaves at the earliest of those times (``getMinTolerationTime``; kube counts
  every taint from when it first saw the Pod tainted, orca from each taint's ``timeAdded``, the
  same moment when the node lifecycle controller set them). A ``NoSchedule`` taint added later
  leaves existing replicas where they are.
- The tolerations are the Workload's own plus what Kubernetes adds to Pods
  (``effective_tolerations``): ``DefaultTolerationSeconds`` admission gives every Job and
  Service ``not-ready`` and ``unreachable`` (NoExecute) for 300 s unless it lists its own for
  that key; the DaemonSet controller gives its replicas both forever
  (``AddOrUpdateDaemonPodTolerations``).
- ``PreferNoSchedule`` taints lower the score: kube-scheduler's normalisation (the candidate
  with the most untolerated PreferNoSchedule taints scores 0, one without scores 100),
  shifted down by 100 so a cluster without such taints scores exactly as before: the part is
  ``-100 * count / max_count`` over the candidates, in -100..0.

Taints Kubernetes itself sets (``node.kubernetes.io/not-ready``, ``.../unschedulable``,
``node-role.kubernetes.io/control-plane``) need no special case.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from controller.api.models import TaintEffect, Toleration, TolerationOperator, WorkloadSpec
from controller.scheduler.framework import Code, CycleState, IndexArray, Rejection, Verdict
from controller.scheduler.nodes import (
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    FloatArray,
    IntArray,
    Taint,
)

_BLOCKING: Final = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})
MAX_CACHED: Final = 256


def reason_untolerated(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    """The taints no toleration tolerates, in the node's (sorted) order."""
    return [t for t in taints if not any(tol.tolerates(t) for tol in tolerations)]


#: kube-apiserver's ``--default-not-ready-toleration-seconds`` and
#: ``--default-unreachable-toleration-seconds`` (plugin/pkg/admission/defaulttolerationseconds).
DEFAULT_TOLERATION_SECONDS: Final = 300


@dataclass(frozen=True, slots=True)
class DefaultTolerations:
    """The seconds Jobs and Services tolerate a not-ready or unreachable node by default
    (``orca run --default-not-ready-toleration-seconds`` and
    ``--default-unreachable-toleration-seconds``, as kube-apiserver's flags of those names)."""

    not_ready: int = DEFAULT_TOLERATION_SECONDS
    unreachable: int = DEFAULT_TOLERATION_SECONDS


def effective_tolerations(
    spec: WorkloadSpec, daemon: bool, defaults: DefaultTolerations
) -> tuple[Toleration, ...]:
    """The Workload's tolerations as Kubernetes would complete a Pod's.

    DaemonSet: ``AddOrUpdateTolerationInPodSpec`` of pkg/controller/daemon/util: a
    ``{key, Exists, NoExecute}`` toleration without seconds for not-ready and unreachable,
    replacing one of the user's with the same key, operator, value and effect (so a
    DaemonSet's own ``tolerationSeconds`` for those is overridden, as for its Pods), else
    appended. Job and Service: ``DefaultTolerationSeconds`` admission: appended, for each of the
    two keys, unless a toleration has that key or none, and effect NoExecute or none.
    """
    own = tuple(spec.tolerations)
    if daemon:
        out = list(own)
        for key in (TAINT_NOT_READY, TAINT_UNREACHABLE):
            forever = Toleration(
                key=key, operator=TolerationOperator.EXISTS, effect=TaintEffect.NO_EXECUTE
            )
            matches = [i for i, t in enumerate(out) if _match_toleration(t, forever)]
            for i in matches:
                out[i] = forever
            if not matches:
                out.append(forever)
        return tuple(out)
    added = []
    for key, seconds in (
        (TAINT_NOT_READY, defaults.not_ready),
        (TAINT_UNREACHABLE, defaults.unreachable),
    ):
        if not any(
            (t.key == key or not t.key) and t.effect in (TaintEffect.NO_EXECUTE, None) for t in own
        ):
            added.append(
                Toleration(
                    key=key,
                    operator=TolerationOperator.EXISTS,
                    effect=TaintEffect.NO_EXECUTE,
                    toleration_seconds=seconds,
                )
            )
    return (*own, *added)


def _match_toleration(a: Toleration, b: Toleration) -> bool:
    """kube's ``Toleration.MatchToleration``: same key, operator, value and effect."""
    return (a.key or "", a.operator, a.value or "", a.effect) == (
        b.key or "",
        b.operator,
        b.value or "",
        b.effect,
    )


def leave_time(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], now: float
) -> tuple[float, Taint | None]:
    """When a replica on a node with ``taints`` must leave it, and the NoExecute taint that
    says so: ``-inf`` and the taint when a NoExecute taint is tolerated by none of
    ``tolerations`` (at once), ``inf`` and None when never, else the earliest ``timeAdded +
    tolerationSeconds`` over the NoExecute taints, each with the first toleration that
    tolerates it (module docstring). A taint with no time counts from ``now``, as first seen
    now: ``orca plan`` and ``explain`` look once; the operator gives every NoExecute taint the
    time it first saw it (``nodes.with_taint_times``) before it gets here."""
    deadline, why = math.inf, None
    for taint in taints:
        if taint.effect is not TaintEffect.NO_EXECUTE:
            continue
        used = next((t for t in tolerations if t.tolerates(taint)), None)
        if used is None:
            return -math.inf, taint
        if used.toleration_seconds is not None:
            start = taint.time_added if taint.time_added is not None else now
            at = start + max(used.toleration_seconds, 0)
            if at < deadline:
                deadline, why = at, taint
    return deadline, why


def counts_from_now(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> bool:
    """Whether ``leave_time`` counts one of ``taints`` from its ``now``: a NoExecute taint
    with no time, tolerated for a number of seconds. Its verdict then moves with the clock."""
    return any(
        t.effect is TaintEffect.NO_EXECUTE
        and t.time_added is None
        and (used := next((u for u in tolerations if u.tolerates(t)), None)) is not None
        and used.toleration_seconds is not None
        for t in taints
    )


def holding_span(
    deadlines: FloatArray | Sequence[float], now: float, floating: bool
) -> tuple[float, float]:
    """The span of the clock ``[since, until)`` over which a verdict judged at ``now`` from
    ``deadlines`` (each replica leaves at its deadline: ``at <= now`` means gone) stays the
    same: from the latest deadline passed to the next one to come. ``floating`` (a deadline
    counted from ``now`` itself, ``counts_from_now``): at this very ``now`` only."""
    if floating:
        return now, math.nextafter(now, math.inf)
    at = np.asarray(deadlines, dtype=np.float64)
    finite = at[np.isfinite(at)]
    passed, coming = finite[finite <= now], finite[finite > now]
    return (
        float(passed.max()) if passed.size else -math.inf,
        float(coming.min()) if coming.size else math.inf,
    )


#: Reasons named before the codes start over (``TaintToleration._code``).
MAX_REASONS: Final = 100_000
#: Judgements kept per tolerations beyond twice the tainted nodes before those of taints no
#: longer in the table are let go (``TaintToleration._rows_for``).
MIN_JUDGED: Final = 64


@dataclass(frozen=True, slots=True)
class _Judged:
    """A node's taints judged against a Workload's tolerations, whatever the clock says:
    ``untolerated``, the reason a blocking taint no toleration tolerates gives (else None);
    ``at`` and ``expired``, when a replica must leave (``leave_time``) and the reason given
    once that time has passed (None: never); ``floating``: ``at`` was counted from the ``now``
    judged at (``counts_from_now``), so it holds at that moment only; ``prefer``, how many
    PreferNoSchedule taints no toleration tolerates (the score's count)."""

    taints: tuple[Taint, ...]
    untolerated: str | None
    at: float
    expired: str | None
    floating: bool
    prefer: int


def _judge(taints: tuple[Taint, ...], tolerations: Sequence[Toleration], now: float) -> _Judged:
    left = untolerated(taints, tolerations)
    bad = [t for t in left if t.effect in _BLOCKING]
    at, why = leave_time(taints, tolerations, now)
    return _Judged(
        taints,
        reason_untolerated(bad[0]) if bad else None,
        at,
        reason_untolerated(why) if why is not None else None,
        counts_from_now(taints, tolerations),
        sum(1 for t in left if t.effect is TaintEffect.PREFER_NO_SCHEDULE),
    )


@dataclass(slots=True)
class _TaintRows:
    """Every node of one table judged against one Workload's tolerations, whatever the
    clock: when a replica must leave (``at``: ``inf`` never, ``-inf`` at once), and the codes
    of the reason a blocking untolerated taint gives and of the one given once ``at`` has
    passed (-1: none); ``floating``, the rows whose ``at`` was counted from a ``now``."""

    version: int
    at: FloatArray
    untolerated: IntArray
    expired: IntArray
    floating: set[int]
    prefer: IntArray
    #: Whether some row's ``prefer`` is not 0, once asked (None: not asked yet). Rows are
    #: changed in place only for a row counted from ``now`` again, whose ``prefer`` the clock
    #: does not change; a table with rows replaced gets a ``copy``, asked afresh.
    preferred: bool | None = None

    def copy(self, version: int) -> _TaintRows:
        return _TaintRows(
            version,
            self.at.copy(),
            self.untolerated.copy(),
            self.expired.copy(),
            set(self.floating),
            self.prefer.copy(),
        )


class TaintToleration:
    """Filter and score over ``NodeInfo.taints`` and ``spec.tolerations``."""

    name = "TaintToleration"
    code = Code.UNRESOLVABLE
    evicts = False  # only NoExecute evicts: ``keeps`` is given explicitly
    selects = True
    per_replica = False

    def __init__(self, defaults: DefaultTolerations | None = None) -> None:
        self.defaults = defaults if defaults is not None else DefaultTolerations()
        # What ``filter`` judged of a node's taints, per tolerations: by the taints tuple's
        # identity (a NodeInfo keeps its tuple until the Node changes; the entry holds it, so
        # its id is not reused), so a table with a few rows replaced costs a lookup per tainted
        # node, not a judgement (``_judged``).
        self._judged: dict[Hashable, dict[int, _Judged]] = {}
        # Per tolerations, every row of the last table judged (``_rows_for``), and the
        # reasons those rows name, by a code.
        self._rows: dict[Hashable, _TaintRows] = {}
        self._reasons: list[str] = []
        self._codes: dict[str, int] = {}
        # The tolerations with the defaults, per signature: building them anew (pydantic
        # models) was 15 % of ``orca plan``'s planning, twice per decision.
        self._effective: dict[Hashable, tuple[Toleration, ...]] = {}

    def signature(self, cycle: CycleState) -> Hashable:
        return (cycle.daemon, tuple(cycle.spec.tolerations))

    def _tolerations(self, cycle: CycleState, signature: Hashable) -> tuple[Toleration, ...]:
        """The Workload's tolerations with Kubernetes' defaults (``effective_tolerations``),
        worked out once per ``signature``."""
        found = self._effective.get(signature)
        if found is None:
            if len(self._effective) > MAX_CACHED:
                self._effective.clear()
            found = effective_tolerations(cycle.spec, cycle.daemon, self.defaults)
            self._effective[signature] = found
        return found

    def filter(self, cycle: CycleState) -> Verdict:
        """Untolerated NoSchedule/NoExecute taints filter a node; a NoExecute taint tolerated
        only until a time that has passed (``cycle.now``) counts as untolerated, both for new
        replicas (kube-scheduler would place one there and its taint-eviction controller
        would move it at once: orca does not place what must leave) and for those it holds.
        One tolerated until later keeps them there until then (``leaves``); such a verdict
        depends on the time: it says until when it holds (``Verdict.until``, the next
        deadline), and the engine memoises it that long.

        The judgement of each node, whatever the clock (``_TaintRows``), is kept per
        tolerations and table: for a table made from a known one by replacing rows, only
        those rows are judged again, and the clock is applied to the whole table in a few
        vector operations. On a large cluster nodes change between nearly every two
        decisions, and 2,000-odd NotReady kwok Nodes each with its own ``timeAdded`` made
        a walk of every tainted node a quarter of the operator's CPU."""
        now = cycle.now
        rows = self._rows_for(cycle)
        at = rows.at
        due = at <= now
        keeps = ~due
        leaves = np.where(due, math.inf, at)
        timed = bool(np.isfinite(leaves).any())
        reason = np.where(rows.untolerated >= 0, rows.untolerated, np.where(due, rows.expired, -1))
        rejected = reason[reason >= 0]
        rejections = []
        if rejected.size:
            codes, first = np.unique(rejected, return_index=True)
            for code in codes[np.argsort(first)].tolist():  # in the order of the nodes
                rejections.append(Rejection(self._reasons[code], reason != code))
        since, until = holding_span(at, now, bool(rows.floating))
        return Verdict(
            tuple(rejections),
            keeps,
            leaves=leaves if timed else None,
            since=since,
            until=until,
        )

    def _rows_for(self, cycle: CycleState) -> _TaintRows:
        """Every node of the cycle's table judged against the cycle's tolerations: from the
        rows kept for an earlier table, redoing the rows replaced since (and those counted
        from ``now``), else from scratch over the tainted nodes."""
        table, now = cycle.table, cycle.now
        signature = self.signature(cycle)
        tolerations = self._tolerations(cycle, signature)
        judged = self._judged.get(signature)
        if judged is None:
            if len(self._judged) > MAX_CACHED:
                self._judged.clear()
            judged = self._judged[signature] = {}
        if len(self._reasons) > MAX_REASONS:
            self._reasons.clear()
            self._codes.clear()
            self._rows.clear()
        kept = self._rows.get(signature)
        redo: Iterable[int]
        if kept is not None and kept.version == table.version:
            rows, redo = kept, sorted(kept.floating)
        elif kept is not None and kept.version in table.changed_since:
            rows = kept.copy(table.version)
            redo = sorted(table.changed_since[kept.version] | kept.floating)
        else:
            size = len(table)
            rows = _TaintRows(
                table.version,
                np.full(size, math.inf),
                np.full(size, -1, dtype=np.int64),
                np.full(size, -1, dtype=np.int64),
                set(),
                np.zeros(size, dtype=np.int64),
            )
            redo = table.tainted
        for i in redo:
            taints = table.nodes[i].taints
            rows.floating.discard(i)
            if not taints:
                rows.at[i], rows.untolerated[i], rows.expired[i] = math.inf, -1, -1
                rows.prefer[i] = 0
                continue
            entry = judged.get(id(taints))
            if entry is None or entry.taints is not taints:
                entry = _judge(taints, tolerations, now)
                if entry.floating:
                    rows.floating.add(i)  # counted from this ``now``: redone every run
                else:
                    judged[id(taints)] = entry
            rows.at[i] = entry.at
            rows.untolerated[i] = self._code(entry.untolerated)
            rows.expired[i] = self._code(entry.expired)
            rows.prefer[i] = entry.prefer
        if len(judged) > 2 * len(table.tainted) + MIN_JUDGED:
            # Every change of a Node brings a new taints tuple: keep only the judgements of
            # the tuples this table still holds, or flapping nodes would pile them up.
            held = {id(table.nodes[i].taints) for i in table.tainted}
            self._judged[signature] = {k: v for k, v in judged.items() if k in held}
        if len(self._rows) > MAX_CACHED:
            self._rows.clear()
        self._rows[signature] = rows
        return rows

    def _code(self, reason: str | None) -> int:
        """A reason as a small integer, so the rows can be compared in vector operations."""
        if reason is None:
            return -1
        code = self._codes.get(reason)
        if code is None:
            code = self._codes[reason] = len(self._reasons)
            self._reasons.append(reason)
        return code

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None:
        counts = self._prefer_counts(cycle)
        if counts is None:
            return None
        part = counts[candidates]
        worst = int(part.max()) if len(part) else 0
        if worst == 0:
            return None
        return -((part * 100) // worst)

    def _prefer_counts(self, cycle: CycleState) -> IntArray | None:
        """Untolerated PreferNoSchedule taints per node (None: no node has any), from the
        rows kept per tolerations (``_rows_for``): counted again only for the rows replaced
        since the last table. Counted anew per table, walking 4,000-odd tainted kwok Nodes
        was 7 % of the operator's CPU in a 5,000-Node backlog while they flapped.

        Asked once per cycle (``cycle.data``): the table, the tolerations and so the counts
        are the cycle's for its whole life, and looking them up again per replica (the
        signature, the rows, a pass over every node for ``any``) was 5 % of ``orca plan``'s
        planning at 15,000 Nodes. Whether any node has one is kept with the rows
        (``_TaintRows.preferred``), asked again only of a table with rows replaced."""
        key = f"{self.name}/prefer"
        if key not in cycle.data:
            rows = self._rows_for(cycle)
            if rows.preferred is None:
                rows.preferred = bool(rows.prefer.any())
            cycle.data[key] = rows.prefer if rows.preferred else None
        found: IntArray | None = cycle.data[key]
        return found
