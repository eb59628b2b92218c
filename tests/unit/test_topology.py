"""Topology domains and skew, the one definition spread and rebalancing share."""

from __future__ import annotations

import numpy as np

from controller.api.models import NodeInfo
from controller.core.nodes import NodeTable
from controller.core.topology import NO_DOMAIN, counts, domains, live_domains, skew

ZONE = "topology.kubernetes.io/zone"


def _table() -> NodeTable:
    zones = {"a1": "a", "a2": "a", "b1": "b", "c1": "c", "none": None}
    return NodeTable(NodeInfo(hostname=h, labels={ZONE: z} if z else {}) for h, z in zones.items())


def test_domains_are_label_values_and_unlabelled_nodes_are_in_none() -> None:
    table = _table()
    codes, values = domains(table, ZONE)
    assert values == ("a", "b", "c")
    by_host = dict(zip(table.hostnames, codes.tolist(), strict=True))
    assert by_host == {"a1": 0, "a2": 0, "b1": 1, "c1": 2, "none": NO_DOMAIN}
    assert domains(table, ZONE)[0] is codes  # once per table and key


def test_skew_counts_only_domains_with_a_candidate_node() -> None:
    table = _table()
    codes, values = domains(table, ZONE)
    replicas = np.array([2, 1, 0, 1, 5])  # a1 a2 b1 c1 none (hostname order)
    order = [table.index[h] for h in ("a1", "a2", "b1", "c1", "none")]
    per_node = np.zeros(len(table), dtype=np.int64)
    per_node[order] = replicas
    per_domain = counts(codes, per_node, len(values))
    assert per_domain.tolist() == [3, 0, 1]  # the unlabelled node's replicas are in no domain
    everywhere = np.ones(len(table), dtype=np.bool_)
    assert skew(per_domain, live_domains(codes, everywhere, len(values))) == 3
    not_b = np.array([h != "b1" for h in table.hostnames])
    assert skew(per_domain, live_domains(codes, not_b, len(values))) == 2
    nothing = np.zeros(len(table), dtype=np.bool_)
    assert skew(per_domain, live_domains(codes, nothing, len(values))) == 0
