"""Topology domains: the values of a node label, and how a Workload's replicas spread over them.

One definition of "domain" and "skew" (DESIGN.md 4, kube-scheduler's PodTopologySpread for
one Workload's own replicas), shared by the topology spread plugin, which keeps the skew
within ``maxSkew`` as replicas are placed, and the rebalancer, which lowers it afterwards.

A domain is a value of ``topologyKey`` on a node; a node without the label is in no domain.
Only domains with at least one node that passes the Workload's other filters count (a zone
whose nodes all fail the constraints is not a place the replicas could go, so it must not
hold the minimum at zero forever).
"""

from __future__ import annotations

import weakref

import numpy as np

from controller.core.nodes import BoolArray, IntArray, NodeTable

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


def live_domains(codes: IntArray, candidates: BoolArray, size: int) -> BoolArray:
    """Domains with at least one node in ``candidates`` (the nodes passing the other filters)."""
    inside = candidates & (codes >= 0)
    return np.bincount(codes[inside], minlength=size) > 0


def skew(per_domain: IntArray, live: BoolArray) -> int:
    """max - min replicas over the live domains (0 when there are none)."""
    if not live.any():
        return 0
    counted = per_domain[live]
    return int(counted.max() - counted.min())
