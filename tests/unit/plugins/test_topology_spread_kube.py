"""TopologySpread against kube-scheduler's PodTopologySpread, v1.36.3 (issue 23).

Expected feasible nodes and scores are computed by hand from kube's Go code, never from
orca's (``pkg/scheduler/framework/plugins/podtopologyspread``):

- ``common.go``: ``filterTopologySpreadConstraints`` (defaults: ``MinDomains`` 1,
  ``NodeAffinityPolicy`` Honor, ``NodeTaintsPolicy`` Ignore); ``matchNodeInclusionPolicies``
  (Honor affinity: the node must match the Pod's required node affinity; Honor taints: no
  untolerated NoSchedule/NoExecute taint); ``nodeLabelsMatchSpreadConstraints`` (every
  topologyKey of the constraints on the node);
- ``filtering.go``: ``calPreFilterState`` (a domain is counted from the nodes that have every
  key and pass the inclusion policies; its count is the matching Pods on those nodes),
  ``minMatchNum`` (the smallest count, or 0 when fewer domains than ``minDomains``),
  ``Filter`` (a node without the key: UnschedulableAndUnresolvable; else
  ``count + 1 - min > maxSkew``: Unschedulable);
- ``scoring.go``: ``initPreScoreState``, ``PreScore``, ``Score`` (``cnt * ln(domains + 2) +
  maxSkew - 1``, summed and rounded), ``NormalizeScore`` (``100 * (max + min - s) / max``).

orca's node affinity is the Workload's runtime and constraints; a replica of the Workload is
a Pod matching the constraint's selector. orca shifts the score down by 100 (kube's 0..100 is
orca's -100..0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.models import Phase
from controller.scheduler.explain import explain
from controller.scheduler.framework import CycleState
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeInfo
from controller.scheduler.plugins.topology_spread import (
    ConstraintVerdict,
    DomainVerdict,
    TopologySpread,
    spread_lines,
)
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, ledger_for, node, rejected, workload
from tests.support.properties import examples

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
SKEW = f"node(s) didn't match pod topology spread constraints ({ZONE})"
TAINT = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]


def spread(**fields: Any) -> dict[str, Any]:
    return {"topologyKey": ZONE, "maxSkew": 1, **fields}


def zoned(name: str, zone: str | None, **kwargs: Any) -> NodeInfo:
    labels = {HOST: name, **({ZONE: zone} if zone else {}), **kwargs.pop("labels", {})}
    return node(name, labels=labels, **kwargs)


def cycle_of(ledger: Ledger, own: list[int], **spec: Any) -> CycleState:
    prepared = Scheduler().prepare(workload(kind="Service", **spec), ledger, now=NOW)
    assert prepared.filtered is not None, prepared.errors
    prepared.cycle.own[:] = own
    return prepared.cycle


def placed(ledger: Ledger, count: int, **spec: Any) -> list[str]:
    decision = Scheduler().schedule(workload(kind="Service", count=count, **spec), ledger, now=NOW)
    return [p.node for p in decision.placements]


# -- Filter ------------------------------------------------------------------------------------

# Zones a, b, c; c's only node has a NoSchedule taint the Workload does not tolerate.
TAINTED_C = (zoned("a1", "a"), zoned("b1", "b"), zoned("c1", "c", taints=TAINT))


@pytest.mark.parametrize(
    ("policy", "own", "skewed"),
    [
        # nodeTaintsPolicy Ignore (the default): c counts, with 0: min 0; a, b: 1 + 1 - 0 > 1
        ({}, [1, 1, 0], [0, 1]),
        # Honor: c does not count; min over a, b is 1; 1 + 1 - 1 <= 1 everywhere
        ({"nodeTaintsPolicy": "Honor"}, [1, 1, 0], []),
        ({"nodeTaintsPolicy": "Ignore"}, [1, 0, 0], [0]),
    ],
    ids=["ignore-default", "honor", "ignore-explicit"],
)
def test_a_tainted_zone_counts_unless_taints_are_honoured(
    policy: dict[str, str], own: list[int], skewed: list[int]
) -> None:
    cycle = cycle_of(ledger_for(*TAINTED_C), own, topologySpread=[spread(**policy)])
    assert rejected(TopologySpread().filter(cycle)) == {SKEW: skewed}


def test_issue_23_the_tainted_zone_holds_the_third_replica_back_as_in_kube() -> None:
    """3 replicas, maxSkew 1, zone c tainted: kube places a and b, then the tainted zone's 0
    keeps a and b at the limit; with nodeTaintsPolicy Honor the third goes to a."""
    ledger = ledger_for(*TAINTED_C)
    assert placed(ledger, 3, topologySpread=[spread()]) == ["a1", "b1"]
    honour = [spread(nodeTaintsPolicy="Honor")]
    assert placed(ledger, 3, topologySpread=honour) == ["a1", "b1", "a1"]


def test_cordoned_and_not_ready_nodes_are_taints_to_the_taints_policy() -> None:
    """Kubernetes taints a cordoned node node.kubernetes.io/unschedulable:NoSchedule and a
    NotReady one node.kubernetes.io/not-ready: their zones count under Ignore, not under
    Honor, unless the Workload tolerates those taints."""
    ledger = ledger_for(
        zoned("a1", "a"), zoned("b1", "b", cordoned=True), zoned("c1", "c", ready=False)
    )
    default = cycle_of(ledger, [1, 0, 0], topologySpread=[spread()])
    assert rejected(TopologySpread().filter(default)) == {SKEW: [0]}  # min 0 from b, c
    honour = cycle_of(ledger, [1, 0, 0], topologySpread=[spread(nodeTaintsPolicy="Honor")])
    assert rejected(TopologySpread().filter(honour)) == {SKEW: []}  # only a counts: min 1
    tolerant = cycle_of(
        ledger,
        [1, 0, 0],
        topologySpread=[spread(nodeTaintsPolicy="Honor")],
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
    )
    assert rejected(TopologySpread().filter(tolerant)) == {SKEW: [0]}  # b counts again


def test_node_affinity_honoured_by_default_ignored_on_request() -> None:
    """nodeAffinityPolicy: zone c fails the constraint. Honor (default): c does not count,
    3 replicas go a, b, a; Ignore: c counts with 0, the third replica has nowhere to go."""
    ledger = ledger_for(zoned("a1", "a"), zoned("b1", "b"), zoned("c1", "c"))
    no_c = [f'node.labels["{ZONE}"] != "c"']
    assert placed(ledger, 3, constraints=no_c, topologySpread=[spread()]) == ["a1", "b1", "a1"]
    ignore = [spread(nodeAffinityPolicy="Ignore")]
    assert placed(ledger, 3, constraints=no_c, topologySpread=ignore) == ["a1", "b1"]


def test_runtime_is_node_affinity_too() -> None:
    ledger = ledger_for(
        zoned("a1", "a", runtimes=("wasm",)),
        zoned("b1", "b", runtimes=("wasm",)),
        zoned("c1", "c", runtimes=("docker",)),
    )
    wasm = {"runtime": {"oneOf": ["wasm"]}}
    assert placed(ledger, 3, topologySpread=[spread()], **wasm) == ["a1", "b1", "a1"]
    ignore = [spread(nodeAffinityPolicy="Ignore")]
    assert placed(ledger, 3, topologySpread=ignore, **wasm) == ["a1", "b1"]


@pytest.mark.parametrize(
    ("min_domains", "expected"),
    [
        # 2 eligible domains < 3: min is 0, so each zone takes maxSkew (1) replica
        (3, ["a1", "b1"]),
        # 2 >= 2: the usual minimum
        (2, ["a1", "b1", "a2", "b2"]),
        (None, ["a1", "b1", "a2", "b2"]),
    ],
    ids=["fewer-domains-than-min", "enough-domains", "absent-is-1"],
)
def test_min_domains_makes_the_minimum_zero_while_domains_are_missing(
    min_domains: int | None, expected: list[str]
) -> None:
    ledger = ledger_for(zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b"))
    fields = {} if min_domains is None else {"minDomains": min_domains}
    assert placed(ledger, 4, topologySpread=[spread(**fields)]) == expected


def test_a_node_counts_only_with_every_topology_key() -> None:
    """nodeLabelsMatchSpreadConstraints: b1 lacks the rack key, so zone b is not a domain of
    the zone constraint (min over {a} only) and b1 itself fails the rack constraint."""
    ledger = ledger_for(zoned("a1", "a", labels={"rack": "r1"}), zoned("b1", "b"))
    rack = {"topologyKey": "rack", "maxSkew": 1}
    cycle = cycle_of(ledger, [1, 0], topologySpread=[spread(), rack])
    verdict = rejected(TopologySpread().filter(cycle))
    assert verdict[SKEW] == []  # a: 1 + 1 - 1 (zone b does not count)
    assert verdict[f"node(s) didn't match pod topology spread constraints ({'rack'})"] == []
    assert verdict[
        "node(s) didn't match pod topology spread constraints (missing required label rack)"
    ] == [1]
    assert placed(ledger, 2, topologySpread=[spread(), rack]) == ["a1", "a1"]


# -- Score -------------------------------------------------------------------------------------


def test_score_two_constraints_by_hand() -> None:
    """a1, a2 in zone a, b1 in b, c1 in c; replicas on a1 and b1; soft constraints zone
    (maxSkew 1) and hostname (maxSkew 2), all four nodes scored:

    zone weight ln(3 + 2) = 1.6094, hostname weight ln(4 + 2) = 1.7918;
    a1: 1*1.6094 + 0 + 1*1.7918 + 1 = 4.40 -> 4;  a2: 1.6094 + 0 + 0 + 1 = 2.61 -> 3;
    b1: 4;  c1: 0 + 0 + 0 + 1 -> 1;  max 4, min 1: 100*(5-s)/4 = 25, 50, 25, 100;
    shifted: -75, -50, -75, 0."""
    ledger = ledger_for(zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("c1", "c"))
    soft = [
        spread(whenUnsatisfiable="ScheduleAnyway"),
        {"topologyKey": HOST, "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    cycle = cycle_of(ledger, [1, 0, 1, 0], topologySpread=soft)
    score = TopologySpread().score(cycle, np.arange(4))
    assert score is not None and score.tolist() == [-75, -50, -75, 0]


def test_score_all_zero_is_kubes_max_score_for_every_node() -> None:
    """Nothing placed, maxSkew 1: every raw score is 0, so maxScore is 0 and kube gives every
    node MaxNodeScore (orca: 0); a node without the key is ignored: kube 0, orca -100."""
    ledger = ledger_for(zoned("a1", "a"), zoned("b1", "b"), zoned("x1", None))
    cycle = cycle_of(ledger, [0, 0, 0], topologySpread=[spread(whenUnsatisfiable="ScheduleAnyway")])
    score = TopologySpread().score(cycle, np.arange(3))
    assert score is not None and score.tolist() == [0, 0, -100]


def test_score_counts_only_included_nodes() -> None:
    """PreScore counts a domain's Pods on the nodes the inclusion policies keep: a1 (tainted,
    holding 2 replicas placed before its taint) is not a candidate. Ignore: zone a counts 2;
    weight ln(2 + 2): a2 2*1.386 = 2.77 -> 3, b1 0; normalised a2 0, b1 100. Honor: a1's
    replicas do not count: both 0, max 0: both 100."""
    ledger = ledger_for(zoned("a1", "a", taints=TAINT), zoned("a2", "a"), zoned("b1", "b"))
    candidates = np.array([1, 2])
    ignore = cycle_of(
        ledger, [2, 0, 0], topologySpread=[spread(whenUnsatisfiable="ScheduleAnyway")]
    )
    score = TopologySpread().score(ignore, candidates)
    assert score is not None and score.tolist() == [-100, 0]
    honour = cycle_of(
        ledger,
        [2, 0, 0],
        topologySpread=[spread(whenUnsatisfiable="ScheduleAnyway", nodeTaintsPolicy="Honor")],
    )
    score = TopologySpread().score(honour, candidates)
    assert score is not None and score.tolist() == [0, 0]


# -- orca explain and the API ------------------------------------------------------------------


def test_explain_names_the_policy_that_counted_or_ignored_each_domain() -> None:
    ledger = ledger_for(*TAINTED_C, zoned("d1", "d"))
    w = workload(
        kind="Service",
        count=2,
        constraints=[f'node.labels["{ZONE}"] != "d"'],
        topologySpread=[spread(minDomains=5)],
    )
    ledger.load(w.key, [Booking("a1", "shop/web-0", 0, 0)])
    (constraint,) = explain(Scheduler(), w, ledger, now=NOW).spread
    why = {d.domain: (d.replicas, d.counted, d.why) for d in constraint.domains}
    assert why == {
        "a": (1, True, "counted"),
        "b": (0, True, "counted"),
        "c": (
            0,
            True,
            "counted by nodeTaintsPolicy: Ignore (every node in it has a taint the Workload "
            "does not tolerate, or is cordoned or NotReady)",
        ),
        "d": (
            0,
            False,
            "ignored by nodeAffinityPolicy: Honor (no node in it passes the runtime and "
            "constraints)",
        ),
    }
    assert (constraint.eligible, constraint.minimum) == (3, 0)
    assert (
        constraint.note == "3 eligible domain(s) < minDomains 5: the global minimum is taken as 0"
    )
    assert constraint.settings() == (
        f"{ZONE} maxSkew=1 DoNotSchedule minDomains=5 nodeAffinityPolicy=Honor "
        "nodeTaintsPolicy=Ignore"
    )


def test_the_spread_as_text_and_json_shows_every_setting_and_aligns_the_domains() -> None:
    """``orca explain`` / ``orca plan``: per constraint its settings (minDomains only with
    DoNotSchedule), the minimum, the note,
    and the domains in aligned columns; the JSON carries the same, the note only when set."""
    anyway, strict = workload(
        kind="Service",
        topologySpread=[spread(whenUnsatisfiable="ScheduleAnyway"), spread(minDomains=3)],
    ).spec.topology_spread
    domains = (
        DomainVerdict("zone-long", 10, True, "counted"),
        DomainVerdict("b", 2, False, "ignored"),
    )
    verdicts = [
        ConstraintVerdict(anyway, domains, eligible=1, minimum=2),
        ConstraintVerdict(strict, domains[:1], eligible=1, minimum=0, note="1 < minDomains 3"),
    ]
    assert spread_lines(verdicts, indent="  ") == [
        f"  {ZONE} maxSkew=1 ScheduleAnyway nodeAffinityPolicy=Honor nodeTaintsPolicy=Ignore:"
        " minimum 2\n",
        "    DOMAIN      REPLICAS   VERDICT\n",
        "    zone-long   10         counted\n",
        "    b           2          ignored\n",
        f"  {ZONE} maxSkew=1 DoNotSchedule minDomains=3 nodeAffinityPolicy=Honor"
        " nodeTaintsPolicy=Ignore: minimum 0\n",
        "    1 < minDomains 3\n",
        "    DOMAIN      REPLICAS   VERDICT\n",
        "    zone-long   10         counted\n",
    ]
    assert spread_lines(verdicts[:1])[1] == "  DOMAIN      REPLICAS   VERDICT\n"  # no indent
    policies = {"nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore"}
    zone_long = {"domain": "zone-long", "replicas": 10, "counted": True, "why": "counted"}
    assert [v.to_json() for v in verdicts] == [
        {
            "topologyKey": ZONE,
            "maxSkew": 1,
            "whenUnsatisfiable": "ScheduleAnyway",
            **policies,
            "eligibleDomains": 1,
            "minimum": 2,
            "domains": [
                zone_long,
                {"domain": "b", "replicas": 2, "counted": False, "why": "ignored"},
            ],
        },
        {
            "topologyKey": ZONE,
            "maxSkew": 1,
            "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 3,
            **policies,
            "eligibleDomains": 1,
            "minimum": 0,
            "note": "1 < minDomains 3",
            "domains": [zone_long],
        },
    ]


def test_the_new_fields_default_as_in_kube_and_min_domains_needs_do_not_schedule() -> None:
    w = workload(kind="Service", topologySpread=[spread()])
    (c,) = w.spec.topology_spread
    assert (c.min_domains, c.domains_needed) == (None, 1)
    assert (c.node_affinity_policy.value, c.node_taints_policy.value) == ("Honor", "Ignore")
    with pytest.raises(ValueError, match="minDomains is only allowed when whenUnsatisfiable"):
        workload(
            kind="Service",
            topologySpread=[spread(whenUnsatisfiable="ScheduleAnyway", minDomains=2)],
        )
    with pytest.raises(ValueError, match="nodeTaintsPolicy"):
        workload(kind="Service", topologySpread=[spread(nodeTaintsPolicy="Sometimes")])


def test_a_partially_placed_service_reports_the_spread() -> None:
    decision = Scheduler().schedule(
        workload(kind="Service", count=3, topologySpread=[spread()]),
        ledger_for(*TAINTED_C),
        now=NOW,
    )
    assert decision.phase is Phase.PARTIALLY_SCHEDULED
    assert SKEW in decision.message


# -- properties: the plugin against kube's Filter and Score, transcribed ----------------------


@dataclass(frozen=True)
class KubeNode:
    """A node as the transcription sees it: labels, whether it matches the Pod's required
    node affinity, whether it has an untolerated NoSchedule/NoExecute taint."""

    name: str
    labels: dict[str, str]
    affinity: bool
    tainted: bool
    pods: int  # matching Pods (this Workload's replicas) on it


def kube_domains(nodes: list[KubeNode], constraints: list[dict[str, Any]]) -> list[dict[str, int]]:
    """calPreFilterState / PreScore's counting: per constraint {value: matching Pods}."""
    out: list[dict[str, int]] = [{} for _ in constraints]
    for n in nodes:
        if not all(c["topologyKey"] in n.labels for c in constraints):
            continue  # nodeLabelsMatchSpreadConstraints
        for i, c in enumerate(constraints):
            if c.get("nodeAffinityPolicy", "Honor") == "Honor" and not n.affinity:
                continue
            if c.get("nodeTaintsPolicy", "Ignore") == "Honor" and n.tainted:
                continue
            value = n.labels[c["topologyKey"]]
            out[i][value] = out[i].get(value, 0) + n.pods
    return out


def kube_filter(nodes: list[KubeNode], constraints: list[dict[str, Any]]) -> set[str]:
    """Filter: the nodes refused for skew (nodes without a key are refused as unresolvable,
    a separate reason)."""
    counts = kube_domains(nodes, constraints)
    skewed = set()
    for n in nodes:
        for i, c in enumerate(constraints):
            value = n.labels.get(c["topologyKey"])
            if value is None:
                break
            min_match = min(counts[i].values(), default=2**31 - 1)
            if len(counts[i]) < c.get("minDomains", 1):
                min_match = 0
            if counts[i].get(value, 0) + 1 - min_match > c["maxSkew"]:
                skewed.add(n.name)
                break
    return skewed


def kube_score(
    nodes: list[KubeNode], filtered: list[KubeNode], constraints: list[dict[str, Any]]
) -> dict[str, int]:
    """PreScore + Score + NormalizeScore, the hostname special case left out (no key here
    is kubernetes.io/hostname)."""
    ignored = {
        n.name for n in filtered if not all(c["topologyKey"] in n.labels for c in constraints)
    }
    values = [
        {n.labels[c["topologyKey"]] for n in filtered if n.name not in ignored} for c in constraints
    ]
    counts = kube_domains(nodes, constraints)
    raw: dict[str, int] = {}
    for n in filtered:
        if n.name in ignored:
            continue
        score = 0.0
        for i, c in enumerate(constraints):
            cnt = counts[i].get(n.labels[c["topologyKey"]], 0)
            score += float(cnt) * math.log(len(values[i]) + 2) + float(c["maxSkew"] - 1)
        raw[n.name] = math.floor(score + 0.5)  # math.Round, score >= 0
    low = min(raw.values(), default=2**63 - 1)
    high = max(raw.values(), default=0)
    out = {}
    for n in filtered:
        if n.name in ignored:
            out[n.name] = 0
        elif high == 0:
            out[n.name] = 100
        else:
            out[n.name] = 100 * (high + low - raw[n.name]) // high
    return out


_NODE = st.tuples(
    st.sampled_from(["a", "b", "c", None]),  # zone
    st.sampled_from(["r1", "r2", None]),  # rack
    st.booleans(),  # passes the node affinity (tag "ok")
    st.sampled_from(["none", "taint", "cordon"]),  # why it is tainted, if it is
    st.integers(0, 3),  # replicas on it
)
_CONSTRAINT = st.fixed_dictionaries(
    {"topologyKey": st.sampled_from([ZONE, "rack"]), "maxSkew": st.integers(1, 3)},
    optional={
        "nodeAffinityPolicy": st.sampled_from(["Honor", "Ignore"]),
        "nodeTaintsPolicy": st.sampled_from(["Honor", "Ignore"]),
        "minDomains": st.integers(1, 4),
    },
)


def _cluster(
    shapes: list[tuple[str | None, str | None, bool, str, int]],
) -> tuple[Ledger, list[KubeNode], list[int]]:
    infos, kube, own = [], [], []
    for i, (zone, rack, ok, taint, pods) in enumerate(shapes):
        labels = {**({ZONE: zone} if zone else {}), **({"rack": rack} if rack else {})}
        name = f"n{i:02d}"
        infos.append(
            node(
                name,
                labels=labels,
                tags=("ok",) if ok else (),
                taints=TAINT if taint == "taint" else None,
                cordoned=taint == "cordon",
            )
        )
        kube.append(KubeNode(name, labels, ok, taint != "none", pods))
        own.append(pods)
    return ledger_for(*infos), kube, own


def _unique_keys(constraints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for c in constraints:
        seen.setdefault(c["topologyKey"], c)
    return list(seen.values())


@settings(max_examples=examples(300), deadline=None)
@given(
    shapes=st.lists(_NODE, min_size=1, max_size=10),
    constraints=st.lists(_CONSTRAINT, min_size=1, max_size=2),
)
def test_do_not_schedule_is_kubes_filter(
    shapes: list[tuple[str | None, str | None, bool, str, int]],
    constraints: list[dict[str, Any]],
) -> None:
    hard = _unique_keys(constraints)
    ledger, kube, own = _cluster(shapes)
    cycle = cycle_of(ledger, own, topologySpread=hard, constraints=['"ok" in node.tags'])
    verdict = TopologySpread().filter(cycle)
    skewed = {
        ledger.table.hostnames[i]
        for r in verdict.rejections
        if "missing required label" not in r.reason
        for i in np.flatnonzero(~r.passed).tolist()
    }
    missing = {n.name for n in kube if not all(c["topologyKey"] in n.labels for c in hard)}
    # A node kube refuses for a missing key never reaches the skew test; orca reports the
    # missing key as its own reason and may also flag the skew: compare the rest.
    assert skewed - missing == kube_filter(kube, hard) - missing


@settings(max_examples=examples(300), deadline=None)
@given(
    shapes=st.lists(_NODE, min_size=1, max_size=10),
    constraints=st.lists(_CONSTRAINT, min_size=1, max_size=2),
    picked=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_schedule_anyway_is_kubes_score(
    shapes: list[tuple[str | None, str | None, bool, str, int]],
    constraints: list[dict[str, Any]],
    picked: list[bool],
) -> None:
    soft = [
        {**{k: v for k, v in c.items() if k != "minDomains"}, "whenUnsatisfiable": "ScheduleAnyway"}
        for c in _unique_keys(constraints)
    ]
    ledger, kube, own = _cluster(shapes)
    cycle = cycle_of(ledger, own, topologySpread=soft, constraints=['"ok" in node.tags'])
    candidates = np.array(
        [i for i in range(len(kube)) if picked[i]], dtype=np.intp
    )  # any subset: the nodes orca scores
    score = TopologySpread().score(cycle, candidates)
    filtered = [kube[i] for i in candidates.tolist()]
    expected = kube_score(kube, filtered, soft)
    if candidates.size == 0:
        assert score is None
        return
    assert score is not None
    assert dict(zip([n.name for n in filtered], (score + 100).tolist(), strict=True)) == expected
