"""``spec.topologySpread`` as users write it: what the models refuse, in one line naming the
field, and what ``orca plan`` prints for a spread Service (placements, the spread reason)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.cli import main
from controller.scheduler.ledger import Booking, alloc_id
from controller.scheduler.plugins.topology_spread import explain_spread
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, ledger_for, node, node_object, workload, workload_obj

ZONE = "topology.kubernetes.io/zone"
GOOD = {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}

BAD: list[tuple[str, dict[str, Any], str]] = [
    (
        "max-skew-0",
        {"kind": "Service", "topologySpread": [{**GOOD, "maxSkew": 0}]},
        "spec.topologySpread[0].maxSkew: Input should be greater than or equal to 1",
    ),
    (
        "bad-key",
        {"kind": "Service", "topologySpread": [{**GOOD, "topologyKey": "zone name"}]},
        "spec.topologySpread[0].topologyKey: 'zone name' is not a valid label key: an optional"
        " DNS subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or"
        " '.' that starts and ends with a letter or digit (e.g. topology.kubernetes.io/zone)",
    ),
    (
        "key-prefix-upper",
        {"kind": "Service", "topologySpread": [{**GOOD, "topologyKey": "Topology.io/zone"}]},
        "spec.topologySpread[0].topologyKey: 'Topology.io/zone' is not a valid label key",
    ),
    (
        "on-a-job",
        {"kind": "Job", "topologySpread": [GOOD]},
        "spec: topologySpread is only allowed when kind is Service",
    ),
    (
        "on-a-daemonset",
        {"kind": "DaemonSet", "topologySpread": [GOOD]},
        "spec: topologySpread is only allowed when kind is Service",
    ),
    (
        "duplicate",
        {"kind": "Service", "topologySpread": [GOOD, {**GOOD, "maxSkew": 2}]},
        # The API server's words for the same object (the rule's own message, one source).
        "spec.topologySpread: duplicate topologyKey and whenUnsatisfiable pair",
    ),
    (
        "five",
        {"kind": "Service", "topologySpread": [{**GOOD, "topologyKey": f"k{i}"} for i in range(5)]},
        "spec.topologySpread: List should have at most 4 items",
    ),
    (
        "when-unknown",
        {"kind": "Service", "topologySpread": [{**GOOD, "whenUnsatisfiable": "Never"}]},
        "spec.topologySpread[0].whenUnsatisfiable: Input should be 'DoNotSchedule' or"
        " 'ScheduleAnyway'",
    ),
    (
        "min-domains-0",
        {"kind": "Service", "topologySpread": [{**GOOD, "minDomains": 0}]},
        "spec.topologySpread[0].minDomains: Input should be greater than or equal to 1",
    ),
    (
        "min-domains-schedule-anyway",  # kube's validation refuses it too
        {
            "kind": "Service",
            "topologySpread": [{**GOOD, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}],
        },
        "spec.topologySpread[0]: minDomains is only allowed when whenUnsatisfiable is "
        "DoNotSchedule",
    ),
    (
        "affinity-policy-unknown",
        {"kind": "Service", "topologySpread": [{**GOOD, "nodeAffinityPolicy": "honor"}]},
        "spec.topologySpread[0].nodeAffinityPolicy: Input should be 'Honor' or 'Ignore'",
    ),
    (
        "taints-policy-unknown",
        {"kind": "Service", "topologySpread": [{**GOOD, "nodeTaintsPolicy": "Always"}]},
        "spec.topologySpread[0].nodeTaintsPolicy: Input should be 'Honor' or 'Ignore'",
    ),
    (
        "label-selector",  # kube-scheduler's field; orca spreads the Workload's own replicas
        {"kind": "Service", "topologySpread": [{**GOOD, "labelSelector": {}}]},
        "spec.topologySpread[0].labelSelector: Extra inputs are not permitted",
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [(s, e) for _, s, e in BAD], ids=[i for i, *_ in BAD]
)
def test_invalid_topology_spread_is_one_line_naming_the_field(
    spec: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ValidationError) as info:
        workload(**spec)
    message = validation_message(info.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_same_key_with_both_behaviours_is_accepted() -> None:
    w = workload(
        kind="Service",
        topologySpread=[GOOD, {**GOOD, "maxSkew": 3, "whenUnsatisfiable": "ScheduleAnyway"}],
    )
    assert [c.max_skew for c in w.spec.topology_spread] == [1, 3]


def test_when_unsatisfiable_defaults_to_do_not_schedule() -> None:
    w = workload(kind="Service", topologySpread=[{"topologyKey": ZONE, "maxSkew": 1}])
    assert w.spec.topology_spread[0].when_unsatisfiable.value == "DoNotSchedule"


def plan_files(tmp_path: Path, spec: dict[str, Any]) -> tuple[Path, Path]:
    nodes = [
        node_object(f"{zone}-{i}", cpu=cpu, labels={ZONE: zone})
        for zone, cpu in [("eu-1a", "4"), ("eu-1b", "100m"), ("eu-1c", "100m")]
        for i in (1, 2)
    ]
    w = workload_obj("web", **spec)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    (tmp_path / "workloads.yaml").write_text(yaml.safe_dump(w))
    return tmp_path / "nodes.yaml", tmp_path / "workloads.yaml"


def test_orca_plan_shows_the_spread_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {"kind": "Service", "count": 3, "resources": {"cpu": "1"}, "topologySpread": [GOOD]}
    nodes, workloads = plan_files(tmp_path, spec)
    args = ["plan", "--nodes", str(nodes), "--workloads", str(workloads)]
    assert main([*args, "-o", "json"]) == 1  # 1: not everything placed
    (status,) = json.loads(capsys.readouterr().out)["results"]
    assert (status["phase"], status["placed"]) == ("PartiallyScheduled", 1)
    assert status["unschedulable"] == [
        {
            "reason": f"node(s) didn't match pod topology spread constraints ({ZONE})",
            "count": 2,
            "nodes": ["eu-1a-1", "eu-1a-2"],
            "plugin": "TopologySpread",
        },
        {
            "reason": "Insufficient cpu",
            "count": 4,
            "nodes": ["eu-1b-1", "eu-1b-2", "eu-1c-1"],
            "plugin": "ResourcesFit",
        },
    ]
    assert main(args) == 1
    table = capsys.readouterr().out
    assert f"2 node(s) didn't match pod topology spread constraints ({ZONE})" in table


def test_orca_plan_refuses_a_bad_constraint_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {"kind": "Job", "topologySpread": [GOOD]}
    nodes, workloads = plan_files(tmp_path, spec)
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(workloads)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"error: {workloads}")
    assert "spec: topologySpread is only allowed when kind is Service" in err


def _zone_spread_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], min_domains: int
) -> tuple[list[str], int, dict[str, Any]]:
    """``orca plan -o json`` of three 1-core replicas spread by zone with ``minDomains``:
    the plan's arguments (without ``-o``), its exit code and the constraint it shows."""
    spec = {
        "kind": "Service",
        "count": 3,
        "resources": {"cpu": "1"},
        "topologySpread": [{"topologyKey": ZONE, "maxSkew": 1, "minDomains": min_domains}],
    }
    nodes, workloads = plan_files(tmp_path, spec)
    args = ["plan", "--nodes", str(nodes), "--workloads", str(workloads)]
    code = main([*args, "-o", "json"])
    (status,) = json.loads(capsys.readouterr().out)["results"]
    (constraint,) = status["topologySpread"]
    return args, code, constraint


def test_orca_plan_notes_min_domains_only_when_too_few_domains_are_eligible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three zones are eligible: minDomains 3 is met, so the minimum is the real one and
    nothing is noted (kube takes the global minimum as 0 only below minDomains)."""
    _, _, constraint = _zone_spread_plan(tmp_path, capsys, min_domains=3)
    assert constraint["eligibleDomains"] == 3
    assert "note" not in constraint


def test_orca_plan_shows_every_field_of_the_constraint_and_its_domains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSON has each constraint with kube's defaults filled in, and per domain the
    replicas counted and the policy that counted it; the table has the same in words."""
    args, code, constraint = _zone_spread_plan(tmp_path, capsys, min_domains=4)
    assert code == 1
    assert constraint == {
        "topologyKey": ZONE,
        "maxSkew": 1,
        "whenUnsatisfiable": "DoNotSchedule",
        "minDomains": 4,
        "nodeAffinityPolicy": "Honor",
        "nodeTaintsPolicy": "Ignore",
        "eligibleDomains": 3,
        "minimum": 0,
        "note": "3 eligible domain(s) < minDomains 4: the global minimum is taken as 0",
        "domains": [
            {"domain": "eu-1a", "replicas": 1, "counted": True, "why": "counted"},
            {"domain": "eu-1b", "replicas": 0, "counted": True, "why": "counted"},
            {"domain": "eu-1c", "replicas": 0, "counted": True, "why": "counted"},
        ],
    }
    assert main(args) == 1
    table = capsys.readouterr().out
    section = table.split("TOPOLOGY SPREAD\n")[1]
    assert section.splitlines()[:4] == [
        "shop/web",
        f"  {ZONE} maxSkew=1 DoNotSchedule minDomains=4 nodeAffinityPolicy=Honor "
        "nodeTaintsPolicy=Ignore: minimum 0",
        "    3 eligible domain(s) < minDomains 4: the global minimum is taken as 0",
        "    DOMAIN   REPLICAS   VERDICT",
    ]


def test_a_replica_on_a_node_the_policy_leaves_out_is_not_counted_in_its_zone() -> None:
    """nodeTaintsPolicy Honor (podtopologyspread/common.go, matchNodeInclusionPolicies): a1
    has a taint web does not tolerate, so its replica (there since before the taint: a
    NoSchedule taint never evicts) is not counted; eu-1a is still eligible through a2, and
    orca explain shows it with 0 replicas counted, as kube-scheduler counts it. eu-1c's only
    node is tainted too: ignored by the policy; d1 lacks the rack key: ignored for that."""
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    rack = "example.com/rack"
    ledger = ledger_for(
        node("a1", labels={ZONE: "eu-1a", rack: "r1"}, taints=taint),
        node("a2", labels={ZONE: "eu-1a", rack: "r1"}),
        node("b1", labels={ZONE: "eu-1b", rack: "r2"}),
        node("c1", labels={ZONE: "eu-1c", rack: "r3"}, taints=taint),
        node("d1", labels={ZONE: "eu-1d"}),  # no rack: counted by neither constraint (kube asks
        # every key of the constraints of one kind, nodeLabelsMatchSpreadConstraints)
    )
    spread = [
        {"topologyKey": ZONE, "maxSkew": 1, "nodeTaintsPolicy": "Honor"},
        {"topologyKey": rack, "maxSkew": 1},
    ]
    w = workload(kind="Service", count=1, topologySpread=spread)
    ledger.load(w.key, [Booking("a1", alloc_id("shop", "web", 0), 0, 0)])
    prepared = Scheduler().prepare(w, ledger, now=NOW)
    assert [b.node for b in prepared.kept.values()] == ["a1"]
    zones, _ = explain_spread(prepared.cycle)
    assert [(d.domain, d.replicas, d.counted, d.why) for d in zones.domains] == [
        ("eu-1a", 0, True, "counted"),
        ("eu-1b", 0, True, "counted"),
        (
            "eu-1c",
            0,
            False,
            "ignored by nodeTaintsPolicy: Honor (every node in it has a taint the Workload "
            "does not tolerate, or is cordoned or NotReady)",
        ),
        ("eu-1d", 0, False, "ignored: its nodes lack another constraint's topologyKey"),
    ]


def test_each_domain_says_which_inclusion_policy_counted_or_ignored_it() -> None:
    """Every ``why`` orca explain gives a domain, worked out from kube's per-node rule
    (podtopologyspread/common.go, matchNodeInclusionPolicies: a node counts unless a Honor
    policy excludes it; a domain is eligible when one of its nodes counts). web runs on docker
    and tolerates no taint; n2, n4 and n5 offer only podman; n3, n4 and n6 are tainted.
    Domains are listed by name.

    The same zones under two constraints (one per whenUnsatisfiable, so each is its own group):
    with both policies Ignore every zone counts, and the why names the policy that let in a
    zone no node of which would otherwise count; with both Honor, the zones no node of which
    passes are ignored, each for the policy that excludes it (affinity asked first, as both
    would). web's replica on n6 stays (a NoSchedule taint never evicts): counted in z-split
    under Ignore, shown but not counted under Honor."""
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    podman = ("podman",)
    ledger = ledger_for(
        node("n1", labels={ZONE: "z-ok"}),
        node("n2", labels={ZONE: "z-podman"}, runtimes=podman),
        node("n3", labels={ZONE: "z-tainted"}, taints=taint),
        node("n4", labels={ZONE: "z-both"}, runtimes=podman, taints=taint),
        node("n5", labels={ZONE: "z-split"}, runtimes=podman),
        node("n6", labels={ZONE: "z-split"}, taints=taint),
    )
    policies = {"nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Ignore"}
    spread = [
        {"topologyKey": ZONE, "maxSkew": 1, **policies},
        {
            "topologyKey": ZONE,
            "maxSkew": 1,
            "whenUnsatisfiable": "ScheduleAnyway",
            **{k: "Honor" for k in policies},
        },
    ]
    w = workload(kind="Service", count=2, runtime={"oneOf": ["docker"]}, topologySpread=spread)
    ledger.load(w.key, [Booking("n6", alloc_id("shop", "web", 0), 0, 0)])
    prepared = Scheduler().prepare(w, ledger, now=NOW)
    assert [b.node for b in prepared.kept.values()] == ["n6"]
    ignoring, honoring = explain_spread(prepared.cycle)

    by_affinity = "nodeAffinityPolicy: Ignore (no node in it passes the runtime and constraints)"
    by_taints = (
        "nodeTaintsPolicy: Ignore (every node in it has a taint the Workload does not "
        "tolerate, or is cordoned or NotReady)"
    )
    assert [(d.domain, d.replicas, d.counted, d.why) for d in ignoring.domains] == [
        ("z-both", 0, True, f"counted by {by_affinity} and {by_taints}"),
        ("z-ok", 0, True, "counted"),
        ("z-podman", 0, True, f"counted by {by_affinity}"),
        ("z-split", 1, True, "counted"),
        ("z-tainted", 0, True, f"counted by {by_taints}"),
    ]
    assert (ignoring.eligible, ignoring.minimum) == (5, 0)

    assert [(d.domain, d.replicas, d.counted, d.why) for d in honoring.domains] == [
        (
            "z-both",
            0,
            False,
            "ignored by nodeAffinityPolicy: Honor (no node in it passes the runtime and "
            "constraints)",
        ),
        ("z-ok", 0, True, "counted"),
        (
            "z-podman",
            0,
            False,
            "ignored by nodeAffinityPolicy: Honor (no node in it passes the runtime and "
            "constraints)",
        ),
        (
            "z-split",
            1,
            False,
            "ignored by nodeAffinityPolicy: Honor and nodeTaintsPolicy: Honor (each node "
            "fails the runtime and constraints or has an untolerated taint)",
        ),
        (
            "z-tainted",
            0,
            False,
            "ignored by nodeTaintsPolicy: Honor (every node in it has a taint the Workload "
            "does not tolerate, or is cordoned or NotReady)",
        ),
    ]
    assert honoring.eligible == 1
