"""Topology domains: the values of a node label, and how a Workload's replicas spread over them.

One definition of "domain" and "skew" (docs/design.md 4, kube-scheduler's PodTopologySpread for
one Workload's own replicas), shared by the topology spread plugin, which keeps the skew
within ``maxSkew`` as replicas are placed, and the rebalancer, which lowers it afterwards.

A domain is a value of ``topologyKey`` on a node; a node without the label is in no domain.
Which nodes count, as kube-scheduler counts them (``podtopologyspread/filtering.go``,
``calPreFilterState``; ``scoring.go``, ``PreScore``; ``common.go``,
``matchNodeInclusionPolicies``), per constraint:

- only nodes that carry the ``topologyKey`` of *every* constraint of the Workload with the
  same ``whenUnsatisfiable`` (``nodeLabelsMatchSpreadConstraints``);
- ``nodeAffinityPolicy: Honor`` (the default): only nodes that pass the Workload's node
  affinity; ``Ignore``: whatever it says;
- ``nodeTaintsPolicy: Ignore`` (the default): whatever their taints; ``Honor``: only nodes
  without a ``NoSchedule``/``NoExecute`` taint the Workload does not tolerate.

A domain is *eligible* when one of its nodes counts, and the replicas counted per domain are
those on the nodes that count. What "node affinity" and "taints" are in orca's terms is the
caller's (``controller.scheduler.plugins.topology_spread.inclusion``); this module takes the masks.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from controller.api.models import NodeInclusionPolicy, TopologySpreadConstraint
from controller.scheduler.nodes import BoolArray, IntArray, NodeTable

NO_DOMAIN = -1


Domains = tuple[IntArray, tuple[str, ...]]
_CACHE: weakref.WeakKeyDictionary[NodeTable, dict[str, Domains]] = weakref.WeakKeyDictionary()


def domains(table: NodeTable, key: str) -> Domains:
    """Per node, the index of its value of label ``key`` in ``values`` (sorted), or
    ``NO_DOMAIN`` where the node lacks the label; and the values. Computed once per table
    and key (a table is immutable; the cache goes with the table)."""
    per_table = _CACHE.setdefault(table, {})
    if (hit := per_table.get(key)) is not None:
        return hit
    values = tuple(sorted({n.labels[key] for n in table.nodes if key in n.labels}))
    position: dict[str | None, int] = {v: i for i, v in enumerate(values)}
    codes = np.array([position.get(n.labels.get(key), NO_DOMAIN) for n in table.nodes], np.int64)
    codes.setflags(write=False)
    per_table[key] = (codes, values)
    return codes, values


def counts(codes: IntArray, replicas: IntArray, size: int) -> IntArray:
    """Replicas per domain: ``replicas`` is per node, ``size`` the number of domains.
    Only the nodes that hold replicas are looked at twice (few, whatever the table's size:
    the spread plugin calls this once per replica placed)."""
    held = np.flatnonzero(replicas)
    held = held[codes[held] >= 0]
    return np.bincount(codes[held], weights=replicas[held], minlength=size).astype(np.int64)


@dataclass(frozen=True)
class SpreadDomains:
    """One constraint's domains as kube-scheduler counts them, on one cycle's table.

    ``codes`` is each node's domain index (``NO_DOMAIN`` without the key), ``counted`` the
    same for the nodes that count and ``NO_DOMAIN`` for the others, ``included`` which nodes
    count, ``eligible`` per domain whether any of its nodes counts."""

    constraint: TopologySpreadConstraint
    codes: IntArray
    values: tuple[str, ...]
    has_all_keys: BoolArray
    included: BoolArray
    counted: IntArray
    eligible: BoolArray
    eligible_count: int

    @property
    def key(self) -> str:
        return self.constraint.topology_key

    @property
    def size(self) -> int:
        return len(self.values)

    def replicas(self, own: IntArray) -> IntArray:
        """This Workload's replicas per domain, on the nodes that count."""
        return counts(self.counted, own, self.size)

    def minimum(self, per_domain: IntArray) -> int:
        """kube's ``minMatchNum`` (filtering.go): the smallest count over the eligible domains,
        0 when fewer domains are eligible than ``minDomains`` asks. ``minDomains`` is at least
        1 (absent: 1), so with no eligible domain the minimum is 0, never kube's initial
        ``MaxInt32``."""
        if self.eligible_count < self.constraint.domains_needed:
            return 0
        return int(per_domain[self.eligible].min())


def spread_domains(
    table: NodeTable,
    constraints: Sequence[TopologySpreadConstraint],
    affinity: BoolArray,
    taints: BoolArray,
) -> tuple[SpreadDomains, ...]:
    """``constraints`` (all of one ``whenUnsatisfiable``) over ``table``; ``affinity`` marks
    the nodes that pass the Workload's node affinity, ``taints`` those whose taints it
    tolerates (``NoSchedule``/``NoExecute``)."""
    if not constraints:
        return ()
    found = [domains(table, c.topology_key) for c in constraints]
    has_all = np.ones(len(table), dtype=np.bool_)
    for codes, _ in found:
        has_all &= codes != NO_DOMAIN
    out = []
    for constraint, (codes, values) in zip(constraints, found, strict=True):
        included = has_all.copy()
        if constraint.node_affinity_policy is NodeInclusionPolicy.HONOR:
            included &= affinity
        if constraint.node_taints_policy is NodeInclusionPolicy.HONOR:
            included &= taints
        counted = np.where(included, codes, NO_DOMAIN)
        eligible = np.bincount(counted[included], minlength=len(values)) > 0
        out.append(
            SpreadDomains(
                constraint,
                codes,
                values,
                has_all,
                included,
                counted,
                eligible,
                int(np.count_nonzero(eligible)),
            )
        )
    return tuple(out)


def skew(per_domain: IntArray, live: BoolArray) -> int:
    """max - min replicas over the ``live`` (eligible) domains (0 when there are none)."""
    if not live.any():
        return 0
    counted = per_domain[live]
    return int(counted.max() - counted.min())
