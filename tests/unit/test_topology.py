"""Topology domains and skew, the one definition spread and rebalancing share."""

from __future__ import annotations

import numpy as np
import pytest

from controller.api.models import TopologySpreadConstraint
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.topology import NO_DOMAIN, counts, domains, skew, spread_domains

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


def test_skew_counts_only_the_eligible_domains() -> None:
    table = _table()
    codes, values = domains(table, ZONE)
    replicas = np.array([2, 1, 0, 1, 5])  # a1 a2 b1 c1 none (hostname order)
    order = [table.index[h] for h in ("a1", "a2", "b1", "c1", "none")]
    per_node = np.zeros(len(table), dtype=np.int64)
    per_node[order] = replicas
    per_domain = counts(codes, per_node, len(values))
    assert per_domain.tolist() == [3, 0, 1]  # the unlabelled node's replicas are in no domain
    assert per_domain.dtype == np.int64  # counts, exact whatever their size (bincount gives floats)
    assert skew(per_domain, np.array([True, True, True])) == 3
    assert skew(per_domain, np.array([True, False, True])) == 2
    assert skew(per_domain, np.array([False, False, False])) == 0


def _constraint(key: str, **policies: str) -> TopologySpreadConstraint:
    return TopologySpreadConstraint.model_validate({"topologyKey": key, "maxSkew": 1, **policies})


def test_spread_domains_follow_the_inclusion_policies() -> None:
    """podtopologyspread/common.go matchNodeInclusionPolicies: Honor drops the nodes that
    fail the mask, Ignore keeps them; a domain is eligible when one of its nodes counts."""
    table = _table()  # hostname order: a1 a2 b1 c1 none
    affinity = np.array([True, True, False, True, True])  # b1 fails the node affinity
    taints = np.array([False, True, True, False, True])  # a1, c1 have untolerated taints
    cases = {
        (): ([True, True, False, True, False], [True, False, True]),  # Honor, Ignore
        (("nodeAffinityPolicy", "Ignore"),): ([True, True, True, True, False], [True] * 3),
        (("nodeTaintsPolicy", "Honor"),): (
            [False, True, False, False, False],
            [True, False, False],
        ),
        (("nodeAffinityPolicy", "Ignore"), ("nodeTaintsPolicy", "Honor")): (
            [False, True, True, False, False],
            [True, True, False],
        ),
    }
    for policies, (included, eligible) in cases.items():
        (d,) = spread_domains(table, [_constraint(ZONE, **dict(policies))], affinity, taints)
        assert d.included.tolist() == included, policies
        assert d.eligible.tolist() == eligible, policies
        assert d.counted.tolist() == [
            c if i else NO_DOMAIN for c, i in zip(d.codes.tolist(), included, strict=True)
        ]


def test_a_node_counts_only_with_every_key_of_its_group() -> None:
    """nodeLabelsMatchSpreadConstraints: ALL topology keys must be on the node."""
    nodes = [
        NodeInfo(hostname="a1", labels={ZONE: "a", "rack": "r1"}),
        NodeInfo(hostname="b1", labels={ZONE: "b"}),  # no rack: counts for neither
    ]
    table = NodeTable(nodes)
    everywhere = np.ones(2, dtype=np.bool_)
    zone, rack = spread_domains(
        table, [_constraint(ZONE), _constraint("rack")], everywhere, everywhere
    )
    assert zone.included.tolist() == [True, False]
    assert zone.eligible.tolist() == [True, False]  # zone b: its only node lacks rack
    (alone,) = spread_domains(table, [_constraint(ZONE)], everywhere, everywhere)
    assert alone.eligible.tolist() == [True, True]
    assert rack.values == ("r1",)


def test_the_domains_kept_for_a_table_cannot_be_changed_by_a_caller() -> None:
    """Every cycle on the table shares the codes: a caller writing into them would change
    the domains of the next cycle."""
    codes, _ = domains(_table(), ZONE)
    with pytest.raises(ValueError, match="read-only"):
        codes[0] = 2


def test_a_cluster_without_nodes_has_no_domains() -> None:
    table = NodeTable([])
    codes, values = domains(table, ZONE)
    assert (codes.tolist(), values) == ([], ())
    assert codes.dtype == np.int64  # a code indexes: an empty list would otherwise be floats
    nothing = np.ones(0, dtype=np.bool_)
    (d,) = spread_domains(table, [_constraint(ZONE)], nothing, nothing)
    assert (d.eligible.tolist(), d.eligible_count) == ([], 0)
    assert d.replicas(np.zeros(0, dtype=np.int64)).tolist() == []


def test_the_minimum_is_the_smallest_eligible_count_or_zero_short_of_min_domains() -> None:
    """kube's minMatchNum (podtopologyspread/filtering.go): the smallest count over the
    eligible domains, or 0 when fewer domains are eligible than minDomains (absent: 1). No
    eligible domain at all is fewer than 1: the minimum is 0."""
    table = _table()  # hostname order: a1 a2 b1 c1 none
    everywhere = np.ones(len(table), dtype=np.bool_)
    own = np.array([2, 1, 1, 3, 0], dtype=np.int64)  # a: 3, b: 1, c: 3
    (d,) = spread_domains(table, [_constraint(ZONE)], everywhere, everywhere)
    assert d.minimum(d.replicas(own)) == 1  # b
    nowhere = np.zeros(len(table), dtype=np.bool_)
    (d,) = spread_domains(table, [_constraint(ZONE)], nowhere, everywhere)
    assert d.eligible_count == 0
    assert d.minimum(d.replicas(own)) == 0
    four = TopologySpreadConstraint.model_validate(
        {"topologyKey": ZONE, "maxSkew": 1, "minDomains": 4}
    )
    (d,) = spread_domains(table, [four], everywhere, everywhere)
    assert d.minimum(d.replicas(own)) == 0  # 3 eligible < minDomains 4
