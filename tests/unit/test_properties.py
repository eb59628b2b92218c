"""Property tests over random clusters and workloads (hypothesis).

Each property is a promise a cluster operator relies on: no node over capacity, every
placement passes every filter, Service replicas balanced, the same answer whatever order the
nodes are listed in, and a short Service/DaemonSet leaves no fitting node unused. Clusters
carry taints (NoSchedule, NoExecute, PreferNoSchedule), linux nodes with ``pve-*`` runtime
labels and a ``rack`` label some nodes lack; Workloads carry tolerations, CEL and Workload-name
affinity, every DaemonSet mode, and Services topology spread over ``zone`` or ``rack``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api.models import NodeInfo, Phase, Taint, Workload
from controller.core.decision import Decision
from controller.core.ledger import Ledger
from controller.core.nodes import NodeTable
from controller.core.plugins.runtime import normalize_runtime
from controller.core.scheduler import Scheduler
from tests.factories import workload

RUNTIMES = ["docker", "process", "wasmtime", "pve-vm"]  # pve-vm on a linux node: ignored
TAGS = ["ssd", "gpu", "edge"]
ZONES = ["z1", "z2", "z3"]
RACKS = ["r1", "r2", "r3", None]  # None: the node has no rack label
SPREAD_KEYS = ["zone", "rack"]
CONSTRAINTS = [
    '"ssd" in node.tags',
    '!("gpu" in node.tags)',
    'node.labels["zone"] != "z3"',
    "node.cpu >= 4000",
    'node.kind == "linux"',
]

TAINTS = [
    Taint(key="node-role.kubernetes.io/control-plane", effect="NoSchedule"),
    Taint(key="dedicated", value="ml", effect="NoSchedule"),
    Taint(key="maintenance", value="now", effect="NoExecute"),
    Taint(key="spot", value="true", effect="PreferNoSchedule"),
]
TOLERATIONS: list[dict[str, str]] = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
    {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "web"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
    {"operator": "Exists", "effect": "PreferNoSchedule"},
]
AFFINITY = [
    {"target": '"gpu" in node.tags', "weight": 40},
    {"target": 'node.labels["zone"] == "z2"', "weight": -30},
    {"target": "w0", "weight": 50},  # a Workload name: the first of the batch
    {"target": "w1", "weight": -100},
]

node_infos = st.builds(
    lambda i, cpu, mem, runtimes, tags, zone, rack, proxmox, ready, cordoned, taints: NodeInfo(
        hostname=f"node-{i}",
        runtimes=tuple(sorted(runtimes)),
        tags=tuple(sorted(tags)),
        labels={"zone": zone, **({"rack": rack} if rack else {})},
        kind="proxmox" if proxmox else "linux",
        cpu=cpu,
        memory=mem,
        ready=ready,
        unschedulable=cordoned,
        taints=tuple(sorted(taints, key=lambda t: (t.key, t.effect.value, t.value))),
    ),
    st.integers(0, 10_000),
    st.sampled_from([0, 1000, 2000, 4000, 8000]),
    st.sampled_from([0, 1 << 30, 4 << 30, 16 << 30]),
    st.sets(st.sampled_from(RUNTIMES), max_size=2),
    st.sets(st.sampled_from(TAGS), max_size=2),
    st.sampled_from(ZONES),
    st.sampled_from(RACKS),
    st.booleans(),
    st.sampled_from([True, True, True, False]),  # mostly ready
    st.sampled_from([False, False, False, True]),  # mostly not cordoned
    st.one_of(st.just(set()), st.sets(st.sampled_from(TAINTS), max_size=2)),
)

clusters = st.lists(node_infos, min_size=0, max_size=12, unique_by=lambda n: n.hostname)


spread_constraints = st.lists(
    st.fixed_dictionaries(
        {
            "topologyKey": st.sampled_from(SPREAD_KEYS),
            "maxSkew": st.integers(1, 2),
            "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
        }
    ),
    max_size=2,
    unique_by=lambda c: (c["topologyKey"], c["whenUnsatisfiable"]),
)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["Job", "Service", "DaemonSet"]))
    spec: dict[str, Any] = {
        "kind": kind,
        "resources": {
            "cpu": f"{draw(st.sampled_from([0, 100, 500, 1000, 3000]))}m",
            "memory": f"{draw(st.sampled_from([0, 256, 1024, 4096]))}Mi",
        },
        "constraints": draw(st.lists(st.sampled_from(CONSTRAINTS), max_size=2, unique=True)),
        "strategy": draw(st.sampled_from(["Spread", "BinPack"])),
        "tolerations": draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique_by=str)),
        "affinity": draw(st.lists(st.sampled_from(AFFINITY), max_size=3, unique_by=str)),
    }
    runtimes = draw(st.lists(st.sampled_from([*RUNTIMES, "wasm", "pve-vm"]), max_size=2))
    if runtimes:
        spec["runtime"] = {"oneOf": runtimes}
    if kind == "Service":
        spec["count"] = draw(st.integers(1, 8))
        spec["topologySpread"] = draw(spread_constraints)
    if kind == "DaemonSet":
        modes = ["EveryNode", "Matching", "Mandatory"]
        spec["schedule"] = {"mode": draw(st.sampled_from(modes))}
    return spec


batches = st.lists(specs(), min_size=1, max_size=6)


def plan_all(nodes: list[NodeInfo], batch: list[dict[str, Any]]) -> tuple[Ledger, list[Decision]]:
    ledger = Ledger(NodeTable(nodes))
    scheduler = Scheduler()
    decisions = []
    for i, spec in enumerate(batch):
        decision = scheduler.schedule(workload(name=f"w{i}", **spec), ledger)
        ledger.load(f"shop/w{i}", decision.bookings)
        decisions.append(decision)
    return ledger, decisions


def tolerated(taint: Taint, tolerations: list[dict[str, str]]) -> bool:
    """Kubernetes' ToleratesTaint, restated from the API reference."""
    for t in tolerations:
        if t.get("effect") not in (None, taint.effect.value):
            continue
        if t.get("key") not in (None, taint.key):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.value:
            return True
    return False


def passes_filters(n: NodeInfo, w: Workload) -> bool:
    """An independent, per-node statement of DESIGN.md 4's filters (no numpy, no caches)."""
    if not n.eligible:
        return False
    tolerations = [t.model_dump(exclude_none=True) for t in w.spec.tolerations]
    for taint in n.taints:
        if taint.effect.value != "PreferNoSchedule" and not tolerated(taint, tolerations):
            return False
    wants = {normalize_runtime(r) for r in w.spec.runtimes}
    if wants:
        # pve-vm/pve-ct/proxmox mean "a node of kind proxmox", whatever labels a node has.
        pve = {"pve-vm", "pve-ct", "proxmox"}
        proxmox = n.kind == "proxmox" and bool(wants & pve)
        offered = {normalize_runtime(r) for r in n.runtimes} - pve
        if not proxmox and not wants & offered:
            return False
    if w.spec.kind == "DaemonSet" and w.spec.mode == "EveryNode":
        return True
    if not passes_constraints(n, w):
        return False
    # Topology spread's per-node part: DoNotSchedule excludes nodes without the key.
    return all(k in n.labels for k in hard_spread_keys(w))


def passes_constraints(n: NodeInfo, w: Workload) -> bool:
    for c in w.spec.constraints:
        ok = {
            '"ssd" in node.tags': "ssd" in n.tags,
            '!("gpu" in node.tags)': "gpu" not in n.tags,
            'node.labels["zone"] != "z3"': n.labels["zone"] != "z3",
            "node.cpu >= 4000": n.cpu >= 4000,
            'node.kind == "linux"': n.kind == "linux",
        }[c]
        if not ok:
            return False
    return True


def hard_spread_keys(w: Workload) -> list[str]:
    return [
        c.topology_key
        for c in w.spec.topology_spread
        if c.when_unsatisfiable.value == "DoNotSchedule"
    ]


def spread_counts(
    nodes: list[NodeInfo], w: Workload, placed_on: list[str], key: str
) -> tuple[dict[str, int], set[str]]:
    """DESIGN.md 4 restated: replicas per value of ``key``, and the live domains (values of
    ``key`` on nodes that pass the Workload's filters other than spread and capacity)."""
    by_name = {n.hostname: n for n in nodes}
    per_domain = Counter(by_name[h].labels[key] for h in placed_on if key in by_name[h].labels)
    others = w.model_copy(update={"spec": w.spec.model_copy(update={"topology_spread": []})})
    live = {n.labels[key] for n in nodes if key in n.labels and passes_filters(n, others)}
    return {d: per_domain.get(d, 0) for d in live | set(per_domain)}, live


def skew_blocks(nodes: list[NodeInfo], w: Workload, placed_on: list[str], n: NodeInfo) -> bool:
    """Whether one more replica on ``n`` would break a DoNotSchedule constraint: its domain's
    count + 1 - the minimum over the live domains > maxSkew (kube-scheduler's test)."""
    for c in w.spec.topology_spread:
        if c.when_unsatisfiable.value != "DoNotSchedule" or c.topology_key not in n.labels:
            continue
        per_domain, live = spread_counts(nodes, w, placed_on, c.topology_key)
        if (
            live
            and per_domain[n.labels[c.topology_key]] + 1 - min(per_domain[d] for d in live)
            > c.max_skew
        ):
            return True
    return False


common = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(clusters, batches)
def test_no_node_is_over_capacity(nodes: list[NodeInfo], batch: list[dict[str, Any]]) -> None:
    ledger, _ = plan_all(nodes, batch)
    free_cpu, free_memory = ledger.free()
    assert (free_cpu >= 0).all()
    assert (free_memory >= 0).all()


@common
@given(clusters, batches)
def test_every_placement_passes_every_filter(
    nodes: list[NodeInfo], batch: list[dict[str, Any]]
) -> None:
    _, decisions = plan_all(nodes, batch)
    by_name = {n.hostname: n for n in nodes}
    for i, (spec, decision) in enumerate(zip(batch, decisions, strict=True)):
        w = workload(name=f"w{i}", **spec)
        for p in decision.placements:
            assert passes_filters(by_name[p.node], w), (p.node, spec)


@common
@given(clusters, batches, st.randoms(use_true_random=False))
def test_same_result_under_any_node_order(
    nodes: list[NodeInfo], batch: list[dict[str, Any]], rng: Any
) -> None:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    _, first = plan_all(nodes, batch)
    _, second = plan_all(shuffled, batch)
    assert first == second


@common
@given(clusters, st.integers(1, 10))
def test_service_replicas_are_balanced_within_one_where_room_allows(
    nodes: list[NodeInfo], count: int
) -> None:
    # A zero-sized Service: room is never the limit, so spread must be even.
    _, (decision,) = plan_all(nodes, [{"kind": "Service", "count": count}])
    service = workload(kind="Service", count=count)
    eligible = [n for n in nodes if passes_filters(n, service)]
    if not eligible:
        assert decision.phase is Phase.UNSCHEDULABLE
        return
    per_node = Counter(p.node for p in decision.placements)
    loads = [per_node.get(n.hostname, 0) for n in eligible]
    assert decision.placed == count
    assert max(loads) - min(loads) <= 1


@common
@given(clusters, batches)
def test_a_short_workload_leaves_no_fitting_node_unused(
    nodes: list[NodeInfo], batch: list[dict[str, Any]]
) -> None:
    ledger = Ledger(NodeTable(nodes))
    scheduler = Scheduler()
    for i, spec in enumerate(batch):
        w = workload(name=f"w{i}", **spec)
        decision = scheduler.schedule(w, ledger)
        ledger.load(w.key, decision.bookings)
        free_cpu, free_memory = ledger.free()
        placed_on = {p.node for p in decision.placements}
        short = decision.placed < decision.desired or decision.phase is Phase.UNSCHEDULABLE
        daemon = spec["kind"] == "DaemonSet"
        if not (short or daemon):
            continue
        placements = [p.node for p in decision.placements]
        for idx, n in enumerate(ledger.table.nodes):
            fits = (
                passes_filters(n, w)
                and free_cpu[idx] >= w.spec.cpu_millis
                and free_memory[idx] >= w.spec.memory_bytes
                and not skew_blocks(nodes, w, placements, n)
            )
            if daemon:
                assert not fits or n.hostname in placed_on, (n.hostname, spec)
            else:
                assert not fits, (n.hostname, spec, decision.message)


@common
@given(clusters, batches)
def test_replanning_a_placed_batch_changes_nothing(
    nodes: list[NodeInfo], batch: list[dict[str, Any]]
) -> None:
    """Level-triggered: the same cluster state gives the same placements (nothing moves)."""
    ledger, decisions = plan_all(nodes, batch)
    scheduler = Scheduler()
    for i, (spec, decision) in enumerate(zip(batch, decisions, strict=True)):
        again = scheduler.schedule(workload(name=f"w{i}", **spec), ledger)
        assert set(again.placements) >= set(decision.placements)
    free_cpu, _ = ledger.free()
    assert np.all(free_cpu >= 0)


@common
@given(clusters, batches)
def test_do_not_schedule_keeps_every_skew_within_max_skew(
    nodes: list[NodeInfo], batch: list[dict[str, Any]]
) -> None:
    """Under DoNotSchedule, placed from scratch, the skew over the live domains never exceeds
    maxSkew (complete or not), and no replica lands on a node without the key."""
    _, decisions = plan_all(nodes, batch)
    by_name = {n.hostname: n for n in nodes}
    for i, (spec, decision) in enumerate(zip(batch, decisions, strict=True)):
        w = workload(name=f"w{i}", **spec)
        placed_on = [p.node for p in decision.placements]
        for c in w.spec.topology_spread:
            if c.when_unsatisfiable.value != "DoNotSchedule":
                continue
            assert all(c.topology_key in by_name[h].labels for h in placed_on), spec
            per_domain, live = spread_counts(nodes, w, placed_on, c.topology_key)
            if live:
                counted = [per_domain[d] for d in live]
                assert max(counted) - min(counted) <= c.max_skew, (spec, per_domain, live)


uniform_clusters = st.lists(
    st.builds(
        lambda i, zone, ready, cordoned: NodeInfo(
            hostname=f"node-{i}",
            labels={"zone": zone} if zone else {},
            cpu=4000,
            memory=8 << 30,
            ready=ready,
            unschedulable=cordoned,
        ),
        st.integers(0, 10_000),
        st.sampled_from([*ZONES, None]),
        st.sampled_from([True, True, True, False]),
        st.sampled_from([False, False, False, True]),
    ),
    min_size=1,
    max_size=12,
    unique_by=lambda n: n.hostname,
)


@common
@given(uniform_clusters, st.integers(1, 12), st.integers(1, 3))
def test_schedule_anyway_picks_the_least_loaded_domain(
    nodes: list[NodeInfo], count: int, max_skew: int
) -> None:
    """Nodes alike, a zero-sized Service: each replica, in index order, goes to a node with the
    fewest replicas (the node-level rule comes first) and, among those, to one in the domain
    with the fewest replicas so far; a node without the key only when no candidate has it."""
    spread = [{"topologyKey": "zone", "maxSkew": max_skew, "whenUnsatisfiable": "ScheduleAnyway"}]
    _, (decision,) = plan_all(
        nodes, [{"kind": "Service", "count": count, "topologySpread": spread}]
    )
    eligible = [n for n in nodes if n.eligible]
    assert decision.placed == (count if eligible else 0)
    by_name = {n.hostname: n for n in nodes}
    per_node: Counter[str] = Counter()
    per_zone: Counter[str] = Counter()
    for p in decision.placements:
        fewest = min(per_node[n.hostname] for n in eligible)
        candidates = [n for n in eligible if per_node[n.hostname] == fewest]
        zones = [per_zone[n.labels["zone"]] for n in candidates if "zone" in n.labels]
        chosen = by_name[p.node]
        assert per_node[p.node] == fewest
        if zones:
            assert "zone" in chosen.labels, (p.node, decision.placements)
            assert per_zone[chosen.labels["zone"]] == min(zones), (p.node, decision.placements)
            per_zone[chosen.labels["zone"]] += 1
        per_node[p.node] += 1
