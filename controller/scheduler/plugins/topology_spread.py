"""TopologySpread: a Service's replicas spread over the values of node labels (docs/design.md 4).

kube-scheduler's PodTopologySpread (``framework/plugins/podtopologyspread``) for one
Workload's own replicas, per constraint of ``spec.topologySpread``, with the domains counted
as kube counts them (``controller.scheduler.topology``: every key of the constraints of the same
``whenUnsatisfiable`` required, ``nodeAffinityPolicy`` and ``nodeTaintsPolicy``).

What kube's inclusion policies mean in orca's terms (``inclusion``):

- *node affinity* (``nodeAffinityPolicy``) is the Workload's ``runtime`` and ``constraints``:
  kube's ``nodeaffinity.GetRequiredNodeAffinity`` is the Pod's ``nodeSelector`` and required
  node affinity, its own statement of which nodes it may run on judged by their labels and
  fields, and orca's runtime (a match on ``runtime.orca.cloudinit.dev/*`` and kind labels) and
  CEL constraints over ``node`` are exactly that. Not node affinity: eligibility and taints
  (kube's NodeUnschedulable and TaintToleration, governed by ``nodeTaintsPolicy``), capacity
  (NodeResourcesFit, never part of the spread). A constraint that reads ``node.freeCpu`` is
  judged as this cycle evaluates it.
- *taints* (``nodeTaintsPolicy``): the node's ``NoSchedule``/``NoExecute`` taints the
  Workload does not tolerate (kube's ``DoNotScheduleTaintsFilterFunc``), plus the taints
  Kubernetes puts on a cordoned node (``node.kubernetes.io/unschedulable:NoSchedule``) and a
  NotReady one (``node.kubernetes.io/not-ready``, NoSchedule and NoExecute), which orca reads
  as eligibility: with the default ``Ignore``, a cordoned or NotReady node's domain counts, as
  it does in kube.

- ``DoNotSchedule`` (Filter, per replica: it reads ``cycle.own``, which grows as the cycle
  places replicas; ``filtering.go``): a node without the key is rejected
  (``UNRESOLVABLE``); otherwise it may take the next replica only if its domain's count
  + 1 - the global minimum <= ``maxSkew``, the minimum being the smallest count over the
  eligible domains, or 0 when fewer domains are eligible than ``minDomains`` (absent: 1).
  Reasons, kube-scheduler's wording plus the key:
  ``node(s) didn't match pod topology spread constraints (topology.kubernetes.io/zone)``
  (``UNSCHEDULABLE``: freed capacity in the minimum domain cures it) and
  ``... (missing required label topology.kubernetes.io/zone)``.
- ``ScheduleAnyway`` (Score, -100..0; ``scoring.go``): per candidate with every key, the sum
  over the constraints of ``count(domain) * ln(domains among the candidates + 2) + maxSkew -
  1``, rounded; normalised as kube does (``100 * (max + min - score) / max``, 100 for all when
  the max is 0) and shifted down by 100 like the taints part; a candidate without every key
  scores kube's 0, i.e. -100. kube normalises over every node that passed its filters, orca
  over the candidates it scores (those with the fewest replicas of this Workload, the rule
  that comes first in orca).

The node-level rule of ``place_replicas`` (fewest replicas of this Workload per node first)
still applies within the nodes this filter allows, and before this score. Existing replicas
are never moved when the skew grows later (``evicts`` is False: the rebalancer does that).
A Workload without ``topologySpread`` costs one attribute test per replica.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from controller.api.models import (
    NodeInclusionPolicy,
    TaintEffect,
    TopologySpreadConstraint,
    WhenUnsatisfiable,
)
from controller.scheduler.framework import Code, CycleState, IndexArray, Rejection, Verdict
from controller.scheduler.nodes import BoolArray, FloatArray, IntArray, Taint
from controller.scheduler.plugins.constraints import CelConstraints
from controller.scheduler.plugins.runtime import Runtime
from controller.scheduler.plugins.taints import TaintToleration, untolerated
from controller.scheduler.topology import NO_DOMAIN, SpreadDomains, counts, spread_domains

REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
MAX_SCORE: Final = 100
_NOTHING: Final = Verdict(())

NODE_AFFINITY_PLUGINS: Final = frozenset({Runtime.name, CelConstraints.name})
"""The filters that are orca's node affinity (see the module docstring)."""
CORDONED_TAINTS: Final = (
    Taint(key="node.kubernetes.io/unschedulable", effect=TaintEffect.NO_SCHEDULE),
)
NOT_READY_TAINTS: Final = (
    Taint(key="node.kubernetes.io/not-ready", effect=TaintEffect.NO_SCHEDULE),
    Taint(key="node.kubernetes.io/not-ready", effect=TaintEffect.NO_EXECUTE),
)


def reason_skew(key: str) -> str:
    return f"{REASON_CONSTRAINTS_NOT_MATCH} ({key})"


def reason_missing_label(key: str) -> str:
    return f"{REASON_CONSTRAINTS_NOT_MATCH} (missing required label {key})"


def inclusion(cycle: CycleState) -> tuple[BoolArray, BoolArray]:
    """(nodes passing the Workload's node affinity, nodes whose taints it tolerates), from
    this cycle's static filter verdicts (``cycle.results``)."""
    table = cycle.table
    affinity = np.ones(len(table), dtype=np.bool_)
    taints = np.ones(len(table), dtype=np.bool_)
    for result in cycle.results:
        if result.plugin in NODE_AFFINITY_PLUGINS:
            affinity &= result.passes
        elif result.plugin == TaintToleration.name:
            taints &= result.passes
    tolerations = cycle.spec.tolerations
    if untolerated(CORDONED_TAINTS, tolerations):
        taints &= ~table.cordoned
    if untolerated(NOT_READY_TAINTS, tolerations):
        taints &= table.ready
    return affinity, taints


@dataclass(frozen=True)
class _Hard:
    """A DoNotSchedule constraint, prepared once per cycle."""

    domains: SpreadDomains
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
        hard = self._hard(cycle)
        if not hard:
            return _NOTHING
        rejections: list[Rejection] = []
        for constraint in hard:
            if constraint.missing is not None:
                rejections.append(constraint.missing)
            d = constraint.domains
            rejections.append(Rejection(reason_skew(d.key), allowed(d, cycle.own)))
        return Verdict(tuple(rejections))

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None:
        if not cycle.spec.topology_spread:
            return None
        soft = prepared_domains(cycle, WhenUnsatisfiable.SCHEDULE_ANYWAY)
        if not soft or candidates.size == 0:
            return None
        return spread_score(soft, cycle.own, candidates)

    def _hard(self, cycle: CycleState) -> tuple[_Hard, ...]:
        key = f"{self.name}/hard"
        prepared: tuple[_Hard, ...] | None = cycle.data.get(key)
        if prepared is None:
            hard = []
            for d in prepared_domains(cycle, WhenUnsatisfiable.DO_NOT_SCHEDULE):
                has_key = d.codes != NO_DOMAIN
                missing = (
                    None
                    if has_key.all()
                    else Rejection(reason_missing_label(d.key), has_key, Code.UNRESOLVABLE)
                )
                hard.append(_Hard(d, missing))
            cycle.data[key] = prepared = tuple(hard)
        return prepared


def prepared_domains(cycle: CycleState, when: WhenUnsatisfiable) -> tuple[SpreadDomains, ...]:
    """The cycle's constraints of one ``whenUnsatisfiable``, their domains counted as kube
    counts them; once per cycle (the inclusion masks depend on the static filters only)."""
    key = f"{TopologySpread.name}/{when.value}"
    prepared: tuple[SpreadDomains, ...] | None = cycle.data.get(key)
    if prepared is None:
        if cycle.passes is None:
            raise RuntimeError("TopologySpread runs after Framework.filter")
        constraints = [c for c in cycle.spec.topology_spread if c.when_unsatisfiable is when]
        if constraints:
            affinity, taints = inclusion(cycle)
            prepared = spread_domains(cycle.table, constraints, affinity, taints)
        else:
            prepared = ()
        cycle.data[key] = prepared
    return prepared


def allowed(d: SpreadDomains, own: IntArray) -> BoolArray:
    """kube's Filter for one constraint: where one more replica keeps ``count(domain) + 1 -
    minimum <= maxSkew`` (the count of a domain that is not eligible is 0); True on nodes
    without the key (their own rejection says why)."""
    per_domain = d.replicas(own)
    minimum = d.minimum(per_domain)
    fits = np.append(per_domain + 1 - minimum <= d.constraint.max_skew, True)  # [-1]: no key
    passed: BoolArray = fits[d.codes]
    return passed


def spread_score(
    soft: tuple[SpreadDomains, ...], own: IntArray, candidates: IndexArray
) -> IntArray:
    """ScheduleAnyway's part per candidate, -100..0: kube's ``Score`` and ``NormalizeScore``
    (scoring.go) over ``candidates``, shifted down by 100. The float operations are kube's,
    in its order (``score += cnt * weight + (maxSkew - 1)`` per constraint), so the rounding
    is the same."""
    keyed = soft[0].has_all_keys[candidates]  # IgnoredNodes: those without every key
    every = bool(keyed.all())
    scored = candidates if every else candidates[keyed]
    if scored.size == 0:
        return np.full(candidates.size, -MAX_SCORE, dtype=np.int64)
    raw: FloatArray | None = None
    for d in soft:
        codes = d.codes[scored]
        present = int(np.count_nonzero(np.bincount(codes, minlength=d.size)))
        term: FloatArray = np.multiply(d.replicas(own)[codes], _weight(present), dtype=np.float64)
        term += float(d.constraint.max_skew - 1)
        raw = term if raw is None else raw + term
    assert raw is not None
    rounded = np.floor(raw)
    rounded += raw - rounded >= 0.5  # Go's math.Round: half away from zero (raw >= 0)
    score = rounded.astype(np.int64)
    low, high = int(score.min()), int(score.max())
    if high == 0:
        normalised = np.zeros(scored.size, dtype=np.int64)  # kube: MaxNodeScore for all
    else:
        normalised = (high + low - score) * MAX_SCORE // high - MAX_SCORE
    if every:
        return normalised
    part = np.full(candidates.size, -MAX_SCORE, dtype=np.int64)
    part[keyed] = normalised
    return part


@functools.lru_cache(maxsize=1024)
def _weight(domains: int) -> float:
    """kube's ``topologyNormalizingWeight``: ``ln(domains + 2)``."""
    return math.log(domains + 2)


# -- orca explain ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DomainVerdict:
    """One domain of a constraint and whether it counts; ``replicas``: this Workload's
    replicas the skew counts in it (for an ignored domain: those on its nodes, uncounted)."""

    domain: str
    replicas: int
    counted: bool
    why: str


@dataclass(frozen=True)
class ConstraintVerdict:
    """One constraint as the next replica sees it: its settings, its domains, the minimum."""

    constraint: TopologySpreadConstraint
    domains: tuple[DomainVerdict, ...]
    eligible: int
    minimum: int
    note: str = ""

    def settings(self) -> str:
        """``topology.kubernetes.io/zone maxSkew=1 DoNotSchedule minDomains=1
        nodeAffinityPolicy=Honor nodeTaintsPolicy=Ignore``: every field, defaults shown."""
        c = self.constraint
        min_domains = (
            f" minDomains={c.domains_needed}"
            if c.when_unsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE
            else ""
        )
        return (
            f"{c.topology_key} maxSkew={c.max_skew} {c.when_unsatisfiable.value}{min_domains} "
            f"nodeAffinityPolicy={c.node_affinity_policy.value} "
            f"nodeTaintsPolicy={c.node_taints_policy.value}"
        )

    def to_json(self) -> dict[str, Any]:
        """The constraint with its defaults filled in (camelCase, as in the spec), the
        domains, the minimum the skew is measured from and the minDomains note."""
        c = self.constraint
        return {
            "topologyKey": c.topology_key,
            "maxSkew": c.max_skew,
            "whenUnsatisfiable": c.when_unsatisfiable.value,
            **(
                {"minDomains": c.domains_needed}
                if c.when_unsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE
                else {}
            ),
            "nodeAffinityPolicy": c.node_affinity_policy.value,
            "nodeTaintsPolicy": c.node_taints_policy.value,
            "eligibleDomains": self.eligible,
            "minimum": self.minimum,
            **({"note": self.note} if self.note else {}),
            "domains": [
                {"domain": d.domain, "replicas": d.replicas, "counted": d.counted, "why": d.why}
                for d in self.domains
            ],
        }


def explain_spread(cycle: CycleState) -> tuple[ConstraintVerdict, ...]:
    """Every ``spec.topologySpread`` constraint, in spec order: per domain the replicas
    counted and the inclusion policy that counted or ignored it (for ``orca explain`` and
    ``orca plan``). The cycle has been through ``Framework.filter``."""
    groups = {
        when: {d.constraint: d for d in prepared_domains(cycle, when)}
        for when in WhenUnsatisfiable
        if any(c.when_unsatisfiable is when for c in cycle.spec.topology_spread)
    }
    affinity, taints = inclusion(cycle)
    out = []
    for constraint in cycle.spec.topology_spread:
        d = groups[constraint.when_unsatisfiable][constraint]
        per_domain = d.replicas(cycle.own)
        shown = np.where(d.eligible, per_domain, counts(d.codes, cycle.own, d.size))
        verdicts = tuple(
            _domain_verdict(d, code, shown, affinity, taints) for code in range(d.size)
        )
        eligible = d.eligible_count
        minimum = d.minimum(per_domain)
        note = ""
        if eligible < constraint.domains_needed and constraint.min_domains is not None:
            note = (
                f"{eligible} eligible domain(s) < minDomains {constraint.min_domains}: "
                "the global minimum is taken as 0"
            )
        out.append(ConstraintVerdict(constraint, verdicts, eligible, minimum, note))
    return tuple(out)


def _domain_verdict(
    d: SpreadDomains, code: int, per_domain: IntArray, affinity: BoolArray, taints: BoolArray
) -> DomainVerdict:
    nodes = (d.codes == code) & d.has_all_keys
    value = d.values[code]
    replicas = int(per_domain[code])
    c = d.constraint
    honor_affinity = c.node_affinity_policy is NodeInclusionPolicy.HONOR
    honor_taints = c.node_taints_policy is NodeInclusionPolicy.HONOR
    if not nodes.any():
        return DomainVerdict(
            value, replicas, False, "ignored: its nodes lack another constraint's topologyKey"
        )
    if d.eligible[code]:
        decisive = []
        if not honor_affinity and not (nodes & affinity).any():
            decisive.append(
                "nodeAffinityPolicy: Ignore (no node in it passes the runtime and constraints)"
            )
        if not honor_taints and not (nodes & taints).any():
            decisive.append(
                "nodeTaintsPolicy: Ignore (every node in it has a taint the Workload does not "
                "tolerate, or is cordoned or NotReady)"
            )
        why = "counted by " + " and ".join(decisive) if decisive else "counted"
        return DomainVerdict(value, replicas, True, why)
    if honor_affinity and not (nodes & affinity).any():
        why = (
            "ignored by nodeAffinityPolicy: Honor (no node in it passes the runtime and "
            "constraints)"
        )
    elif honor_taints and not (nodes & taints).any():
        why = (
            "ignored by nodeTaintsPolicy: Honor (every node in it has a taint the Workload "
            "does not tolerate, or is cordoned or NotReady)"
        )
    else:
        why = (
            "ignored by nodeAffinityPolicy: Honor and nodeTaintsPolicy: Honor (each node "
            "fails the runtime and constraints or has an untolerated taint)"
        )
    return DomainVerdict(value, replicas, False, why)


def spread_lines(spread: Sequence[ConstraintVerdict], indent: str = "") -> list[str]:
    """The constraints as text lines (``orca explain``, ``orca plan``): per constraint its
    settings and minimum, the minDomains note, then a row per domain (name, replicas counted,
    the inclusion policy that counted or ignored it), columns aligned."""
    lines = []
    for c in spread:
        lines.append(f"{indent}{c.settings()}: minimum {c.minimum}\n")
        if c.note:
            lines.append(f"{indent}  {c.note}\n")
        rows = [("DOMAIN", "REPLICAS", "VERDICT")]
        rows += [(d.domain, str(d.replicas), d.why) for d in c.domains]
        width = [max(len(r[i]) for r in rows) for i in (0, 1)]
        lines += [
            f"{indent}  {a.ljust(width[0])}   {b.ljust(width[1])}   {w}".rstrip() + "\n"
            for a, b, w in rows
        ]
    return lines
