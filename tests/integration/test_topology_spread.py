"""Topology spread with the operator on a real kube-apiserver + etcd (docs/design.md 4, issue 12):
a Service spread over three zones, a constraint that cannot be met (its status message, and the
requeue when capacity frees), and the API server refusing invalid ``topologySpread``."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from tests.support.factories import node_object, workload_obj
from tests.support.harness import Cluster, OperatorProcess, orca_explain, phase, placed, placements

pytestmark = pytest.mark.controlplane

ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}


def zoned(name: str, zone: str, cpu: str = "4") -> dict[str, Any]:
    return node_object(name, cpu=cpu, labels={ZONE: zone})


def zones_of(cluster: Cluster, obj: dict[str, Any]) -> Counter[str]:
    zone = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in cluster.nodes()}
    return Counter(zone[node] for _, node in placements(obj))


def test_five_replicas_spread_two_two_one_over_three_zones(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    # Zone eu-1a has the most nodes and the most room: without the constraint, Spread
    # alone would put three replicas there.
    cluster.apply(
        *(zoned(f"a{i}", "eu-1a", cpu="16") for i in range(4)),
        zoned("b1", "eu-1b"),
        zoned("b2", "eu-1b"),
        zoned("c1", "eu-1c"),
    )
    cluster.apply(
        workload_obj(
            "web",
            namespace,
            kind="Service",
            count=5,
            resources={"cpu": "500m"},
            topologySpread=[DO_NOT_SCHEDULE],
        )
    )
    web = placed(cluster, namespace, "web", 5)
    assert phase(web) == "Scheduled"
    assert sorted(zones_of(cluster, web).values()) == [1, 2, 2]
    assert len({node for _, node in placements(web)}) == 5  # distinct nodes within the zones


def test_an_unsatisfiable_constraint_says_why_and_is_retried_when_capacity_frees(
    cluster: Cluster, namespace: str, operator: OperatorProcess, control_plane: ControlPlane
) -> None:
    cluster.apply(zoned("a1", "eu-1a", cpu="2"), zoned("b1", "eu-1b", cpu="2"))
    cluster.apply(zoned("c1", "eu-1c", cpu="2"))
    # A hog fills zones b and c, so only zone a has room.
    cluster.apply(
        workload_obj(
            "hog",
            namespace,
            kind="Service",
            count=2,
            resources={"cpu": "2"},
            constraints=[f'node.labels["{ZONE}"] != "eu-1a"'],
        )
    )
    placed(cluster, namespace, "hog", 2)
    cluster.apply(
        workload_obj(
            "web",
            namespace,
            kind="Service",
            count=3,
            resources={"cpu": "1"},
            topologySpread=[DO_NOT_SCHEDULE],
        )
    )
    web = placed(cluster, namespace, "web", 1)
    assert phase(web) == "PartiallyScheduled"
    assert web["status"]["message"] == (
        "1/3 replicas placed; 0/3 nodes are available: 1 node(s) didn't match pod topology"
        f" spread constraints ({ZONE}), 2 Insufficient cpu."
    )
    conditions = {c["type"]: c for c in web["status"]["conditions"]}
    assert conditions["Scheduled"]["status"] == "False"
    # Two nodes lack room: capacity may come, so it waits (Reconciling) with the diagnosis.
    reconciling = conditions["Reconciling"]
    assert (reconciling["status"], reconciling["message"]) == ("True", web["status"]["message"])
    explained = orca_explain(control_plane, "web", "-n", namespace, "-o", "json")
    assert explained.returncode == 0, explained.stderr
    verdicts = {n["node"]: n.get("reason") for n in json.loads(explained.stdout)["nodes"]}
    assert verdicts == {
        "a1": f"node(s) didn't match pod topology spread constraints ({ZONE})",
        "b1": "Insufficient cpu",
        "c1": "Insufficient cpu",
    }
    cluster.run("delete", "workload", "hog", "-n", namespace)
    web = placed(cluster, namespace, "web", 3)
    assert phase(web) == "Scheduled"
    assert zones_of(cluster, web) == {"eu-1a": 1, "eu-1b": 1, "eu-1c": 1}


BAD_SPREAD: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "max-skew-0",
        {"kind": "Service", "topologySpread": [{**DO_NOT_SCHEDULE, "maxSkew": 0}]},
        ["spec.topologySpread[0].maxSkew", "should be greater than or equal to 1"],
    ),
    (
        "bad-key",
        {"kind": "Service", "topologySpread": [{**DO_NOT_SCHEDULE, "topologyKey": "zone name"}]},
        [
            'spec.topologySpread[0].topologyKey: Invalid value: "zone name": must be a valid'
            " label key: an optional DNS subdomain prefix and '/', then a name of at most 63"
            " letters, digits, '-', '_' or '.' that starts and ends with a letter or digit"
            " (e.g. topology.kubernetes.io/zone)"
        ],
    ),
    (
        "on-a-job",
        {"kind": "Job", "topologySpread": [DO_NOT_SCHEDULE]},
        ["spec.topologySpread", "topologySpread is only allowed when kind is Service"],
    ),
    (
        "duplicate",
        {"kind": "Service", "topologySpread": [DO_NOT_SCHEDULE, {**DO_NOT_SCHEDULE, "maxSkew": 2}]},
        ["spec.topologySpread", "duplicate topologyKey and whenUnsatisfiable pair"],
    ),
    (
        "five",
        {
            "kind": "Service",
            "topologySpread": [{**DO_NOT_SCHEDULE, "topologyKey": f"k{i}"} for i in range(5)],
        },
        ["spec.topologySpread", "must have at most 4 items"],
    ),
    (
        "when-unknown",
        {"kind": "Service", "topologySpread": [{**DO_NOT_SCHEDULE, "whenUnsatisfiable": "Never"}]},
        ["spec.topologySpread[0].whenUnsatisfiable", '"DoNotSchedule", "ScheduleAnyway"'],
    ),
    (
        "min-domains-schedule-anyway",
        {
            "kind": "Service",
            "topologySpread": [
                {**DO_NOT_SCHEDULE, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}
            ],
        },
        [
            "spec.topologySpread[0].minDomains",
            "minDomains is only allowed when whenUnsatisfiable is DoNotSchedule",
        ],
    ),
    (
        "taints-policy-unknown",
        {"kind": "Service", "topologySpread": [{**DO_NOT_SCHEDULE, "nodeTaintsPolicy": "Always"}]},
        ["spec.topologySpread[0].nodeTaintsPolicy", '"Honor", "Ignore"'],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [(s, e) for _, s, e in BAD_SPREAD], ids=[i for i, *_ in BAD_SPREAD]
)
def test_the_api_server_refuses_invalid_topology_spread(
    kubectl: KubectlRunner,
    cluster: Cluster,
    namespace: str,
    spec: dict[str, Any],
    expected: list[str],
) -> None:
    name = f"bad-{uuid.uuid4().hex[:6]}"
    result = kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(workload_obj(name, namespace, **spec))
    )
    assert result.returncode != 0, result.stdout
    assert "is invalid" in result.stderr, result.stderr
    for part in expected:
        assert part in result.stderr, result.stderr
    missing = kubectl("get", "workloads", name, "-n", namespace)
    assert "NotFound" in missing.stderr


def test_a_tainted_zone_counts_by_default_as_in_kube_and_explain_says_which_policy(
    cluster: Cluster, namespace: str, operator: OperatorProcess, control_plane: ControlPlane
) -> None:
    """kube's defaults (nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore): zone eu-1c's only
    node has a NoSchedule taint the Workload does not tolerate, yet eu-1c counts with 0
    replicas, so a third replica cannot go to eu-1a or eu-1b (skew 2 - 0 > 1). The API server
    fills in the defaults; with nodeTaintsPolicy Honor the third replica is placed."""
    taint = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    cluster.apply(
        zoned("a1", "eu-1a"),
        zoned("b1", "eu-1b"),
        {**zoned("c1", "eu-1c"), "spec": {"taints": taint}},
    )
    cluster.apply(
        workload_obj(
            "web",
            namespace,
            kind="Service",
            count=3,
            topologySpread=[{"topologyKey": ZONE, "maxSkew": 1}],
        )
    )
    web = placed(cluster, namespace, "web", 2)
    assert phase(web) == "PartiallyScheduled"
    (stored,) = web["spec"]["topologySpread"]
    assert stored == {
        "topologyKey": ZONE,
        "maxSkew": 1,
        "whenUnsatisfiable": "DoNotSchedule",
        "nodeAffinityPolicy": "Honor",
        "nodeTaintsPolicy": "Ignore",
    }
    explained = orca_explain(control_plane, "web", "-n", namespace, "-o", "json")
    assert explained.returncode == 0, explained.stderr
    (constraint,) = json.loads(explained.stdout)["topologySpread"]
    why = {d["domain"]: d["why"] for d in constraint["domains"]}
    assert why["eu-1a"] == "counted"
    assert why["eu-1c"].startswith("counted by nodeTaintsPolicy: Ignore")
    table = orca_explain(control_plane, "web", "-n", namespace)
    assert "TOPOLOGY SPREAD" in table.stdout and "nodeTaintsPolicy=Ignore" in table.stdout

    honour = {"topologyKey": ZONE, "maxSkew": 1, "nodeTaintsPolicy": "Honor"}
    cluster.apply(workload_obj("web", namespace, kind="Service", count=3, topologySpread=[honour]))
    web = placed(cluster, namespace, "web", 3)
    assert zones_of(cluster, web) == {"eu-1a": 2, "eu-1b": 1}
