"""TopologySpread: a Service's replicas spread over the values of node labels (DESIGN.md 4).

kube-scheduler's PodTopologySpread for one Workload's own replicas, per constraint of
``spec.topologySpread`` (domains and skew as ``controller.core.topology`` defines them):

- ``DoNotSchedule`` (Filter, per replica: it reads ``cycle.own``, which grows as the cycle
  places replicas): a node may take the next replica only if its domain's count + 1 - the
  minimum over the live domains stays within ``maxSkew`` (kube-scheduler's test, so a domain
  at the minimum is always allowed and a skew that grew earlier only ever shrinks). Live
  domains are those with a node passing the Workload's static filters (``cycle.passes``:
  eligibility, taints, runtime, constraints; not capacity, so a full zone still holds the
  minimum down and a constraint that only one zone could satisfy says so instead of piling
  everything there). Reasons, kube-scheduler's wording plus the key:
  ``node(s) didn't match pod topology spread constraints (topology.kubernetes.io/zone)``
  (``UNSCHEDULABLE``: the minimum domain lacks room; freed capacity there cures it) and
  ``... (missing required label topology.kubernetes.io/zone)`` for nodes without the key
  (``UNRESOLVABLE``: only a node or spec change cures it).
- ``ScheduleAnyway`` (Score, -100..0): kube-scheduler's normalisation of the replicas in the
  node's domain, summed over the constraints: ``-100 * (count - min) / max`` over the
  candidates, so the least-loaded domain scores 0 (shifted down by 100 like the taints part,
  so the other scores read as before) and a node without the key -100.

The node-level rule of ``place_replicas`` (fewest replicas of this Workload per node first)
still applies within the nodes this filter allows, and before this score. Existing replicas
are never moved when the skew grows later (``evicts`` is False: the rebalancer does that).
A Workload without ``topologySpread`` costs one attribute test per replica.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

import numpy as np

from controller.api.models import WhenUnsatisfiable
from controller.core.framework import Code, CycleState, IndexArray, Rejection, Verdict
from controller.core.nodes import BoolArray, IntArray
from controller.core.topology import NO_DOMAIN, counts, domains, live_domains

REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
MAX_SCORE: Final = 100
_NOTHING: Final = Verdict(())


def reason_skew(key: str) -> str:
    return f"{REASON_CONSTRAINTS_NOT_MATCH} ({key})"


def reason_missing_label(key: str) -> str:
    return f"{REASON_CONSTRAINTS_NOT_MATCH} (missing required label {key})"


@dataclass(frozen=True)
class _Domains:
    """One constraint's domains on this cycle's table: per node the domain index
    (``NO_DOMAIN`` without the key) and the number of domains."""

    key: str
    max_skew: int
    codes: IntArray
    size: int

    def replicas(self, own: IntArray) -> IntArray:
        """This Workload's replicas per domain."""
        return counts(self.codes, own, self.size)


@dataclass(frozen=True)
class _Hard:
    """A DoNotSchedule constraint, prepared once per cycle (the live domains depend on the
    static filters only)."""

    domains: _Domains
    live: BoolArray
    missing: Rejection | None  # None: every node has the key


class TopologySpread:
    """Filter (DoNotSchedule, per replica) and Score (ScheduleAnyway) over
    ``spec.topologySpread``."""

    name = "TopologySpread"
    code = Code.UNSCHEDULABLE  # the skew; a missing key is UNRESOLVABLE per rejection
    evicts = False
    selects = False
    per_replica = True

    def signature(self, cycle: CycleState) -> Hashable | None:
        return None  # per replica: never memoised across cycles

    def filter(self, cycle: CycleState) -> Verdict:
        if not cycle.spec.topology_spread:
            return _NOTHING
        hard: tuple[_Hard, ...] = self._hard(cycle)
        if not hard:
            return _NOTHING
        rejections: list[Rejection] = []
        for constraint in hard:
            if constraint.missing is not None:
                rejections.append(constraint.missing)
            rejections.append(
                Rejection(reason_skew(constraint.domains.key), _allowed(constraint, cycle.own))
            )
        return Verdict(tuple(rejections))

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None:
        if not cycle.spec.topology_spread:
            return None
        soft = self._soft(cycle)
        if not soft or candidates.size == 0:
            return None
        raw = np.zeros(candidates.size, dtype=np.int64)
        keyless = np.zeros(candidates.size, dtype=np.bool_)
        for constraint in soft:
            codes = constraint.codes[candidates]
            per_domain = np.append(constraint.replicas(cycle.own), 0)  # [-1]: no domain
            raw += per_domain[codes]
            keyless |= codes == NO_DOMAIN
        return spread_score(raw, keyless)

    # -- prepared once per cycle -----------------------------------------------------------------

    def _hard(self, cycle: CycleState) -> tuple[_Hard, ...]:
        prepared: tuple[_Hard, ...] | None = cycle.data.get(self.name)
        if prepared is not None:
            return prepared
        if cycle.passes is None:
            raise RuntimeError("TopologySpread.filter runs after Framework.filter")
        hard = []
        for d in _constraints(cycle, WhenUnsatisfiable.DO_NOT_SCHEDULE):
            has_key = d.codes != NO_DOMAIN
            missing = (
                None
                if has_key.all()
                else Rejection(reason_missing_label(d.key), has_key, Code.UNRESOLVABLE)
            )
            hard.append(_Hard(d, live_domains(d.codes, cycle.passes, d.size), missing))
        cycle.data[self.name] = prepared = tuple(hard)
        return prepared

    def _soft(self, cycle: CycleState) -> tuple[_Domains, ...]:
        key = f"{self.name}/soft"
        prepared: tuple[_Domains, ...] | None = cycle.data.get(key)
        if prepared is None:
            prepared = _constraints(cycle, WhenUnsatisfiable.SCHEDULE_ANYWAY)
            cycle.data[key] = prepared
        return prepared


def _constraints(cycle: CycleState, when: WhenUnsatisfiable) -> tuple[_Domains, ...]:
    out = []
    for c in cycle.spec.topology_spread:
        if c.when_unsatisfiable is when:
            codes, values = domains(cycle.table, c.topology_key)
            out.append(_Domains(c.topology_key, c.max_skew, codes, len(values)))
    return tuple(out)


def _allowed(constraint: _Hard, own: IntArray) -> BoolArray:
    """Where one more replica keeps ``count(domain) + 1 - min(live domains) <= maxSkew``;
    True on nodes without the key (their own rejection says why) and everywhere when no
    domain is live (every node with the key fails a static filter then)."""
    d = constraint.domains
    if not constraint.live.any():
        return np.ones(len(own), dtype=np.bool_)
    per_domain = d.replicas(own)
    minimum = per_domain[constraint.live].min()
    allowed = np.append(per_domain + 1 - minimum <= d.max_skew, True)  # [-1]: no domain
    passed: BoolArray = allowed[d.codes]
    return passed


def spread_score(raw: IntArray, keyless: BoolArray) -> IntArray:
    """ScheduleAnyway's part per candidate, -100..0, from ``raw`` (the replicas in the
    candidate's domains): kube-scheduler's ``100 * (max + min - raw) / max`` shifted down by
    100, i.e. ``-100 * (raw - min) // max`` over the candidates that have every key (0 for
    all of them when max is 0), and -100 for a candidate without a key."""
    if not keyless.any():  # the usual case: every candidate has the keys
        return _normalised(raw)
    part = np.full(raw.size, -MAX_SCORE, dtype=np.int64)
    keyed = ~keyless
    if keyed.any():
        part[keyed] = _normalised(raw[keyed])
    return part


def _normalised(raw: IntArray) -> IntArray:
    low, high = int(raw.min()), int(raw.max())
    if not high:
        return np.zeros(raw.size, dtype=np.int64)
    part: IntArray = raw - low
    part *= MAX_SCORE
    part //= high
    np.negative(part, out=part)  # -(x // high), not (-x) // high, which rounds away from 0
    return part
