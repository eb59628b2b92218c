"""The invariant checker must catch what it claims to catch, or every chaos figure is vacuous:
each rule is shown failing on a state that breaks it, and holding on its nearest legal twin.
Expected results are worked out by hand from the rules (docs/, docs/design.md, Kubernetes' code as
cited in ``tests/chaos/invariants.py``), never from the operator's code."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.chaos.invariants import (
    LIVENESS,
    SAFETY,
    Observer,
    Snapshot,
    Taint,
    check,
    desired_healthy,
    eviction_deadline,
    liveness,
    node_view,
    runtime_ok,
    safety,
    tolerates,
)
from tests.support.factories import node_object

NOW = 1_800_000_000.0  # a fixed wall clock for the time-based rules


def wl(
    name: str,
    placements: list[tuple[str, str]],
    generation: int = 1,
    observed: int | None = 1,
    uid: str | None = None,
    held: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Workload whose status is consistent unless told otherwise: ``held`` is the size
    ``status.resources`` records (default: the spec's), ``status`` overrides any field."""
    spec.setdefault("kind", "Job")
    desired = spec.get("count", 1)
    placed = len(placements)
    phase = (
        "Scheduled" if placed >= desired else "PartiallyScheduled" if placed else "Unschedulable"
    )
    full: dict[str, Any] = {
        "phase": phase,
        "desired": desired,
        "placed": placed,
        "placements": [{"allocId": a, "node": n, "score": 50} for a, n in placements],
        "resources": held if held is not None else spec.get("resources", {}),
    }
    if spec["kind"] == "DaemonSet":
        full["phase"] = "Scheduled"
        full["desired"] = placed
    if observed is not None:
        full["observedGeneration"] = observed
    full.update(status or {})
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": generation,
            "uid": uid or name,
            "resourceVersion": "1",
        },
        "spec": spec,
        "status": full,
    }


def versioned(obj: dict[str, Any], version: str = "1") -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = version
    return obj


NODES = [
    versioned(node_object("a", cpu="2", tags=("ssd",))),
    versioned(node_object("b", cpu="2")),
    versioned(node_object("c", cpu="2", cordoned=True)),
]
CPU1 = {"cpu": "1"}
#: A Service whose one placement fills node a, and that no other node takes: not stranded.
FULL: dict[str, Any] = {"resources": {"cpu": "2"}, "constraints": ['"ssd" in node.tags']}


def kinds(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> list[str]:
    return sorted(v.kind for v in check(nodes, workloads, now=NOW))


@pytest.mark.parametrize(
    ("workloads", "expected"),
    [
        pytest.param([wl("j", [("ns/j-0", "a")], resources=CPU1)], [], id="healthy"),
        pytest.param([wl("j", [], resources={"cpu": "3"})], [], id="unschedulable-ok"),
        pytest.param([wl("j", [("ns/j-0", "a")], generation=2)], ["undecided"], id="undecided"),
        pytest.param(
            [
                wl("j", [("ns/j-0", "a")], resources={"cpu": "1500m"}),
                wl("k", [("ns/k-0", "a")], resources=CPU1),
            ],
            ["over-capacity"],
            id="over-capacity",
        ),
        pytest.param(
            # The spec was resized down, the status still holds 1500m: the node is full.
            [
                wl("j", [("ns/j-0", "a")], held={"cpu": "1500m"}, resources={"cpu": "100m"}),
                wl("k", [("ns/k-0", "a")], resources=CPU1),
            ],
            ["over-capacity"],
            id="over-capacity-by-status-resources",
        ),
        pytest.param(
            # The spec was resized up (not decided yet): the placements still hold 500m each.
            [
                wl("j", [("ns/j-0", "a")], generation=2, held={"cpu": "500m"}, resources=CPU1),
                wl("k", [("ns/k-0", "a")], generation=2, held={"cpu": "500m"}, resources=CPU1),
                wl("l", [("ns/l-0", "a")], held=CPU1, resources=CPU1),
            ],
            ["undecided", "undecided"],
            id="not-over-by-status-resources",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "a")], status={"resources": None})], ["unsized"], id="unsized"
        ),
        pytest.param([wl("j", [("ns/j-0", "gone")])], ["no-node"], id="no-node"),
        pytest.param([wl("j", [("ns/j-0", "c")])], ["ineligible"], id="cordoned"),
        pytest.param(
            [wl("j", [("ns/j-0", "b")], constraints=['"ssd" in node.tags'])],
            ["constraint"],
            id="constraint",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "a")], constraints=['node.labels["zone"] == "x"'])],
            ["constraint"],
            id="constraint-evaluation-error-filters",
        ),
        pytest.param(
            [wl("d", [("ns/d-0", "b")], kind="DaemonSet", constraints=['"ssd" in node.tags'])],
            ["stranded"],  # EveryNode ignores constraints; it misses a (not c: cordoned)
            id="daemonset-every-node-ignores-constraints",
        ),
        pytest.param(
            [
                wl(
                    "d",
                    [("ns/d-0", "a"), ("ns/d-1", "b")],
                    kind="DaemonSet",
                    schedule={"mode": "Matching"},
                    constraints=['"ssd" in node.tags'],
                )
            ],
            ["constraint"],
            id="daemonset-matching-uses-constraints",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "a")], runtime={"oneOf": ["wasm"]})], ["runtime"], id="runtime"
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "a")]), wl("k", [("ns/j-0", "b")])],
            ["alloc-owner", "duplicate-alloc"],
            id="duplicate-alloc",
        ),
        pytest.param([wl("j", [("ns/k-0", "a")])], ["alloc-owner"], id="alloc-owner"),
        pytest.param([wl("j", [], resources=CPU1)], ["stranded"], id="stranded-job"),
        pytest.param(
            [wl("d", [("ns/d-0", "a")], kind="DaemonSet")], ["stranded"], id="stranded-daemonset"
        ),
        # -- exact replica counts (issue 19: check() returned [] for each of these) --
        pytest.param(
            [wl("j", [("ns/j-0", "a"), ("ns/j-1", "b")], status={"desired": 1})],
            ["job-replicas"],
            id="job-twice",
        ),
        pytest.param(
            [
                wl(
                    "s",
                    [("ns/s-0", "a"), ("ns/s-1", "b"), ("ns/s-2", "a")],
                    kind="Service",
                    count=1,
                    status={"desired": 1},
                )
            ],
            ["service-replicas"],
            id="service-count-1-three-placed",
        ),
        pytest.param(
            [wl("d", [("ns/d-0", "a"), ("ns/d-1", "a"), ("ns/d-2", "b")], kind="DaemonSet")],
            ["daemonset-node"],
            id="daemonset-twice-on-one-node",
        ),
        pytest.param(
            [wl("s", [("ns/s-0", "a")], kind="Service", count=2, status={"placed": 2}, **FULL)],
            ["placed-count"],
            id="placed-count",
        ),
        pytest.param(
            [wl("s", [("ns/s-0", "a")], kind="Service", count=2, status={"desired": 1}, **FULL)],
            ["desired"],
            id="desired",
        ),
        pytest.param(
            [
                wl(
                    "s",
                    [("ns/s-0", "a")],
                    kind="Service",
                    count=2,
                    status={"phase": "Scheduled"},
                    **FULL,
                )
            ],
            ["phase"],
            id="phase-scheduled-but-short",
        ),
        pytest.param(
            [wl("j", [], status={"phase": "Scheduled"}, resources={"cpu": "3"})],
            ["phase"],
            id="phase-scheduled-but-none",
        ),
        pytest.param(
            # Scaled down 3 -> 1, not decided yet: the status still describes count 3.
            [
                wl(
                    "s",
                    [("ns/s-0", "a"), ("ns/s-1", "b"), ("ns/s-2", "a")],
                    generation=2,
                    kind="Service",
                    count=1,
                    status={"desired": 3},
                )
            ],
            ["undecided"],
            id="scale-down-not-decided-yet",
        ),
        pytest.param(
            # Invalid keeps its placements (docs/design.md 2), even beyond a new count.
            [
                wl(
                    "s",
                    [("ns/s-0", "a"), ("ns/s-1", "b")],
                    generation=2,
                    observed=2,
                    kind="Service",
                    count=1,
                    status={"phase": "Invalid", "desired": 1},
                )
            ],
            [],
            id="invalid-keeps",
        ),
    ],
)
def test_each_invariant_is_caught(workloads: list[dict[str, Any]], expected: list[str]) -> None:
    assert kinds(NODES, workloads) == expected


def test_every_rule_is_safety_or_liveness() -> None:
    assert not SAFETY & LIVENESS
    safe = [wl("j", [("ns/j-0", "a"), ("ns/j-1", "b")], status={"desired": 1})]
    assert [v.kind for v in safety(NODES, safe)] == ["job-replicas"]
    assert liveness(NODES, safe, NOW) == []  # both on eligible nodes, decided


def test_a_stale_status_is_held_to_the_count_of_the_generation_it_describes() -> None:
    # Generation 1 had count 2; the status (observedGeneration 1) lists 3 and claims 3.
    seen = wl("s", [("ns/s-0", "a"), ("ns/s-1", "b")], kind="Service", count=2)
    stale = wl(
        "s",
        [("ns/s-0", "a"), ("ns/s-1", "b"), ("ns/s-2", "a")],
        generation=2,
        kind="Service",
        count=5,
        status={"desired": 3, "phase": "Scheduled"},
    )
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    assert observer.observe([seen], NODES, 1.0) == []
    assert sorted(v.kind for v in observer.observe([stale], NODES, 2.0)) == [
        "desired",
        "service-replicas",
    ]
    assert safety(NODES, [stale]) == []  # without memory only the status's own claim is known


# -- taints and tolerations, as Kubernetes defines them ---------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Worked from ToleratesTaint (k8s.io/api core/v1/toleration.go), one rule per row.
        ({"key": "k", "operator": "Equal", "value": "v"}, ("k", "v", "NoSchedule"), True),
        ({"key": "k", "value": "v"}, ("k", "v", "NoExecute"), True),  # "" operator = Equal
        ({"key": "k", "operator": "Equal", "value": "w"}, ("k", "v", "NoSchedule"), False),
        ({"key": "k", "operator": "Equal"}, ("k", "", "NoSchedule"), True),  # "" == ""
        ({"key": "k", "operator": "Exists"}, ("k", "v", "NoSchedule"), True),
        ({"key": "j", "operator": "Exists"}, ("k", "v", "NoSchedule"), False),
        ({"operator": "Exists"}, ("anything", "v", "NoExecute"), True),  # empty key: all keys
        ({"operator": "Exists", "effect": "NoSchedule"}, ("k", "v", "NoExecute"), False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, ("k", "", "NoExecute"), True),
        ({"key": "k", "operator": "Lt", "value": "5"}, ("k", "3", "NoSchedule"), False),  # gated
    ],
)
def test_toleration_matching(
    toleration: dict[str, Any], taint: tuple[str, str, str], expected: bool
) -> None:
    assert tolerates(toleration, Taint(*taint)) is expected


def _tainted(effect: str, added: str | None = None, name: str = "t") -> dict[str, Any]:
    taint = {"key": "dedicated", "value": "ml", "effect": effect}
    if added:
        taint["timeAdded"] = added
    return versioned(node_object(name, cpu="2", taints=[taint]))


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def test_an_untolerated_noexecute_taint_is_caught() -> None:
    on = [wl("j", [("ns/j-0", "t")])]
    assert kinds([_tainted("NoExecute")], on) == ["taint"]
    tolerates_it = [{"key": "dedicated", "operator": "Exists"}]
    assert (
        kinds([_tainted("NoExecute")], [wl("j", [("ns/j-0", "t")], tolerations=tolerates_it)]) == []
    )
    # NoSchedule added later moves nothing; it only keeps new replicas off (not stranded here:
    # the Job is placed).
    assert kinds([_tainted("NoSchedule")], on) == []
    assert kinds([_tainted("NoSchedule")], [wl("j", [], resources=CPU1)]) == []


def test_toleration_seconds_count_from_time_added() -> None:
    ten = [
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
    ]
    within = _tainted("NoExecute", _iso(NOW - 5))
    past = _tainted("NoExecute", _iso(NOW - 11))
    assert kinds([within], [wl("j", [("ns/j-0", "t")], tolerations=ten)]) == []
    assert kinds([past], [wl("j", [("ns/j-0", "t")], tolerations=ten)]) == ["taint"]
    # Two tolerations match: the smallest tolerationSeconds wins (getMinTolerationTime).
    forever = [*ten, {"key": "dedicated", "operator": "Exists"}]
    assert kinds([past], [wl("j", [("ns/j-0", "t")], tolerations=forever)]) == ["taint"]
    zero = [{"key": "dedicated", "operator": "Exists", "tolerationSeconds": 0}]
    assert eviction_deadline(node_view(within), {"kind": "Job", "tolerations": zero}) < NOW


def _not_ready(since: float, status: str = "False") -> dict[str, Any]:
    obj = versioned(node_object("n", cpu="2"))
    obj["status"]["conditions"] = [
        {"type": "Ready", "status": status, "lastTransitionTime": _iso(since)}
    ]
    return obj


def test_a_not_ready_node_counts_as_tainted_since_its_transition() -> None:
    """DESIGN 5: Jobs and Services tolerate not-ready/unreachable for 300 s unless they list
    their own toleration; DaemonSets forever."""
    job = wl("j", [("ns/j-0", "n")])
    assert kinds([_not_ready(NOW - 299)], [job]) == []
    assert kinds([_not_ready(NOW - 301)], [job]) == ["taint"]
    assert kinds([_not_ready(NOW - 301, "Unknown")], [job]) == ["taint"]
    daemon = wl("d", [("ns/d-0", "n")], kind="DaemonSet")
    assert kinds([_not_ready(NOW - 10_000)], [daemon]) == []
    own = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 15}]
    short = wl("j", [("ns/j-0", "n")], tolerations=own)
    assert kinds([_not_ready(NOW - 20, "Unknown")], [short]) == ["taint"]
    assert kinds([_not_ready(NOW - 20, "False")], [short]) == []  # not-ready: the default 300 s
    # A lifecycle taint the controller put there replaces the implicit one.
    tainted = _not_ready(NOW - 1000)
    tainted["spec"]["taints"] = [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": _iso(NOW - 5)}
    ]
    assert kinds([tainted], [job]) == []


NOT_READY_NO_SCHEDULE = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def test_a_registering_node_is_owed_nothing_until_ready_and_untainted() -> None:
    """The living cluster's new Node: created as kubelets register (no Ready condition) and
    tainted ``not-ready:NoSchedule`` by TaintNodesByCondition admission; then Ready (kwok)
    with the taint still on; then the node lifecycle controller lifts it. No replica is owed
    there before both (DESIGN 3: the Ready condition True; kube-scheduler's TaintToleration
    ``Filter`` for the taint), everything that fits after."""
    registering = versioned(node_object("n", cpu="2", taints=[NOT_READY_NO_SCHEDULE]))
    del registering["status"]["conditions"]
    ready_tainted = versioned(node_object("n", cpu="2", taints=[NOT_READY_NO_SCHEDULE]))
    lifted = versioned(node_object("n", cpu="2"))
    short = [wl("j", [], resources=CPU1), wl("d", [], kind="DaemonSet", resources=CPU1)]
    assert kinds([registering], short) == []
    assert kinds([ready_tainted], short) == []
    assert kinds([lifted], short) == ["stranded", "stranded"]
    # A Workload that tolerates the taint is owed a place once the Node is Ready, not before.
    tolerant = [wl("t", [], resources=CPU1, tolerations=[NOT_READY_NO_SCHEDULE])]
    assert kinds([registering], tolerant) == []
    assert kinds([ready_tainted], tolerant) == ["stranded"]
    # A placement there is not judged by time: no transition recorded, no taint timeAdded.
    assert kinds([registering], [wl("j", [("ns/j-0", "n")], resources=CPU1)]) == []


@pytest.mark.parametrize(
    ("labels", "kind", "wanted", "expected"),
    [
        (["docker"], None, [], True),
        (["docker"], None, ["wasm"], False),
        (["wasmtime"], None, ["wasm"], True),
        (["WasmTime"], None, ["WASM"], True),
        (["wasm"], None, ["wasmtime"], True),
        (["docker"], "proxmox", ["pve-vm"], True),
        (["docker"], "Proxmox", ["proxmox"], True),
        (["pve-vm"], None, ["pve-vm"], False),  # a label does not make a node proxmox
        (["docker"], "proxmox", ["docker"], True),
    ],
)
def test_runtime_rule(
    labels: list[str], kind: str | None, wanted: list[str], expected: bool
) -> None:
    view = node_view(node_object("x", runtimes=tuple(labels), kind=kind))
    assert runtime_ok(view, wanted) is expected


# -- nothing lost ---------------------------------------------------------------------------------


def test_a_placement_recorded_before_a_fault_must_still_be_there() -> None:
    before = Snapshot.take([wl("j", [("ns/j-0", "a")], resources=CPU1)])
    moved = [wl("j", [("ns/j-0", "b")], resources=CPU1)]
    assert [v.kind for v in check(NODES, moved, before, NOW)] == ["lost"]
    respecified = [wl("j", [("ns/j-0", "b")], generation=2, observed=2, resources=CPU1)]
    assert check(NODES, respecified, before, NOW) == []  # a new spec may move it
    recreated = [wl("j", [("ns/j-0", "b")], uid="other", resources=CPU1)]
    assert check(NODES, recreated, before, NOW) == []


def test_the_observer_flags_a_placement_that_vanished_between_two_polls() -> None:
    observer = Observer(margin=5.0)
    observer.nodes_read(NODES, 0.0)
    assert observer.observe([wl("j", [("ns/j-0", "a")], resources=CPU1)], NODES, 10.0) == []
    gone = wl("j", [], resources=CPU1)
    assert [v.kind for v in observer.observe([gone], NODES, 20.0)] == ["lost"]
    assert observer.polls == 2


def test_the_observer_accepts_a_move_its_node_explains() -> None:
    def run(later_nodes: list[dict[str, Any]], **changes: Any) -> list[str]:
        observer = Observer(margin=5.0)
        observer.nodes_read(NODES, 0.0)
        observer.observe([wl("j", [("ns/j-0", "a")], resources=CPU1)], NODES, 10.0)
        moved = wl("j", [("ns/j-0", "b")], resources=CPU1, **changes)
        return [v.kind for v in observer.observe([moved], later_nodes, 20.0)]

    assert run(NODES) == ["lost"]
    # Cordoned and uncordoned in between: only its resourceVersion says so.
    assert run([versioned(node_object("a", cpu="2", tags=("ssd",)), "7"), *NODES[1:]]) == []
    assert (
        run([versioned(node_object("a", cpu="2", tags=("ssd",), cordoned=True)), *NODES[1:]]) == []
    )
    assert run(NODES[1:]) == []  # node deleted
    assert run(NODES, generation=2, observed=2) == []  # a new spec


def test_the_observer_counts_a_move_to_another_workload_as_lost() -> None:
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    observer.observe([wl("j", [("ns/j-0", "a")]), wl("k", [])], NODES, 10.0)
    found = observer.observe([wl("j", []), wl("k", [("ns/j-0", "a")])], NODES, 20.0)
    assert sorted(v.kind for v in found) == ["alloc-owner", "lost"]


def test_a_scale_down_seen_before_its_decision_is_a_cause() -> None:
    """The spec changed (generation 2) while the status still described generation 1; the
    next observation shows the decision for 2 dropping the highest index: not lost."""
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    two = [("ns/s-0", "a"), ("ns/s-1", "b")]
    stale = wl("s", two, generation=2, observed=1, kind="Service", count=1)
    stale["status"]["desired"] = 2  # what generation 1 asked for
    observer.observe([wl("s", two, kind="Service", count=2)], NODES, 1.0)
    assert observer.observe([stale], NODES, 2.0) == []
    decided = wl("s", two[:1], generation=2, observed=2, kind="Service", count=1)
    assert observer.observe([decided], NODES, 3.0) == []


# -- every resource, and the Pod (issue 46) -------------------------------------------------------

GPU = "nvidia.com/gpu"
#: g offers 2 GPUs and 3 Pods; a (above) offers neither GPUs nor a pods limit.
GPU_NODES = [
    *NODES,
    versioned(node_object("g", cpu="8", allocatable={GPU: "2", "pods": "3"})),
]


def gpus(n: int, cpu: str = "100m") -> dict[str, Any]:
    return {"cpu": cpu, GPU: n}


@pytest.mark.parametrize(
    ("workloads", "expected"),
    [
        pytest.param(
            [wl("j", [("ns/j-0", "g")], resources=gpus(2))], [], id="gpus-within-allocatable"
        ),
        pytest.param(
            [
                wl("j", [("ns/j-0", "g")], resources=gpus(2)),
                wl("k", [("ns/k-0", "g")], resources=gpus(1)),
            ],
            ["over-capacity"],  # 3 GPUs booked on a node of 2
            id="gpus-over",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "a")], resources=gpus(1))],
            ["over-capacity"],  # a lists no GPU: it offers 0
            id="gpu-on-a-node-without-any",
        ),
        pytest.param(
            [
                wl(
                    "s", [("ns/s-0", "g"), ("ns/s-1", "g")], kind="Service", count=2, resources=CPU1
                ),
                wl("j", [("ns/j-0", "g")], resources=CPU1),
            ],
            [],  # 3 Pods on a node of 3
            id="pods-at-the-limit",
        ),
        pytest.param(
            [
                wl(
                    "s",
                    [("ns/s-0", "g"), ("ns/s-1", "g"), ("ns/s-2", "g")],
                    kind="Service",
                    count=3,
                    resources=CPU1,
                ),
                wl("j", [("ns/j-0", "g")], resources=CPU1),
            ],
            ["over-capacity"],  # 4 Pods on a node of 3, whatever they ask
            id="pods-over",
        ),
        pytest.param(
            [
                wl(
                    "s",
                    [(f"ns/s-{i}", "a") for i in range(20)],
                    kind="Service",
                    count=20,
                    resources={"cpu": "10m"},
                )
            ],
            [],  # a states no pods: no limit (docs/workloads.md)
            id="no-pods-stated-no-limit",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "g")], resources={"ephemeral-storage": "1Gi"})],
            ["over-capacity"],  # g lists no ephemeral-storage
            id="ephemeral-storage-not-offered",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "g")], held=gpus(3), resources=gpus(1))],
            ["over-capacity"],  # the status holds 3: what counts is what placements hold
            id="gpus-over-by-status-resources",
        ),
    ],
)
def test_every_resource_and_the_pod_are_checked(
    workloads: list[dict[str, Any]], expected: list[str]
) -> None:
    found = safety(GPU_NODES, workloads)
    assert sorted(v.kind for v in found) == expected, found


def test_over_capacity_names_each_resource_over() -> None:
    crowded = [
        wl(f"j{i}", [(f"ns/j{i}-0", "g")], resources=gpus(1)) for i in range(4)
    ]  # 4 GPUs, 4 Pods on a node of 2 GPUs and 3 Pods
    (violation,) = safety(GPU_NODES, crowded)
    assert (violation.kind, violation.subject) == ("over-capacity", "g")
    assert violation.detail == "nvidia.com/gpu 4/2, pods 4/3"


def shrunk_g() -> list[dict[str, Any]]:
    """g after a restart of its device plugin: it advertises 1 GPU, not 2."""
    return [*NODES, versioned(node_object("g", cpu="8", allocatable={GPU: "1", "pods": "3"}), "2")]


def test_capacity_never_evicts_only_new_placements_are_judged() -> None:
    """Two GPUs booked on g, which now offers 1: the placements stay (DESIGN 5), and a new
    placement that asks no GPU may still go there (kube's fitsRequest checks only what the
    Pod requests); one that asks a GPU may not."""
    gpu_job = wl("j", [("ns/j-0", "g")], resources=gpus(2))
    observer = Observer()
    observer.nodes_read(GPU_NODES, 0.0)
    assert observer.observe([gpu_job], GPU_NODES, 1.0) == []
    assert observer.observe([gpu_job], shrunk_g(), 2.0) == []  # kept: never judged again
    cpu_job = wl("k", [("ns/k-0", "g")], resources=CPU1)
    assert observer.observe([gpu_job, cpu_job], shrunk_g(), 3.0) == []
    another = wl("l", [("ns/l-0", "g")], resources=gpus(1))
    found = observer.observe([gpu_job, cpu_job, another], shrunk_g(), 4.0)
    assert [(v.kind, v.detail) for v in found] == [("over-capacity", "nvidia.com/gpu 3/1")]
    # Without the previous observation every placement is new: the stateless check flags g.
    assert [v.kind for v in safety(shrunk_g(), [gpu_job])] == ["over-capacity"]


def test_a_placement_that_grows_is_judged_again() -> None:
    """A resize re-checks fit: the same allocId on the same node, now holding 3 GPUs of 2."""
    observer = Observer()
    observer.nodes_read(GPU_NODES, 0.0)
    assert observer.observe([wl("j", [("ns/j-0", "g")], resources=gpus(1))], GPU_NODES, 1.0) == []
    grown = wl("j", [("ns/j-0", "g")], generation=2, observed=2, resources=gpus(3))
    assert [v.kind for v in observer.observe([grown], GPU_NODES, 2.0)] == ["over-capacity"]


def test_a_workload_created_again_under_its_name_places_anew() -> None:
    """Deleted and created again (another uid): ns/j-0 on g is a new placement, judged."""
    observer = Observer()
    observer.nodes_read(shrunk_g(), 0.0)
    old = wl("j", [("ns/j-0", "g")], resources=gpus(2))
    observer.observe([old], shrunk_g(), 1.0)  # first observation: judged (and flagged) once
    again = wl("j", [("ns/j-0", "g")], uid="j-again", resources=gpus(2))
    assert [v.kind for v in observer.observe([again], shrunk_g(), 2.0)] == ["over-capacity"]
    assert observer.observe([again], shrunk_g(), 3.0) == []  # the same one since: kept


def test_room_for_a_replica_is_every_resource_it_asks_and_a_pod() -> None:
    """Not stranded while no node has room for what it asks; stranded once one has."""
    waiting = wl("w", [], resources=gpus(1))
    assert kinds(NODES, [waiting]) == []  # a and b have cpu, but no GPU
    assert kinds(GPU_NODES, [waiting]) == ["stranded"]  # g has 2 free
    full_pods = [
        wl(f"p{i}", [(f"ns/p{i}-0", "g")], resources={"cpu": "10m"}) for i in range(3)
    ]  # g's 3 Pods taken
    assert kinds(GPU_NODES, [waiting, *full_pods]) == []
    full_gpus = [wl("t", [("ns/t-0", "g")], resources=gpus(2))]
    assert kinds(GPU_NODES, [waiting, *full_gpus]) == []


# -- gangs ----------------------------------------------------------------------------------------


def gang(
    name: str,
    placements: list[tuple[str, str]],
    minimum: int,
    timeout: int | None = 10,
    count: int = 4,
    **extra: Any,
) -> dict[str, Any]:
    spec_gang: dict[str, Any] = {"minCount": minimum}
    if timeout is not None:
        spec_gang["timeoutSeconds"] = timeout
    return wl(
        name, placements, kind="Service", count=count, resources=CPU1, gang=spec_gang, **extra
    )


TWO_ON_A = [("ns/t-0", "a"), ("ns/t-1", "a")]


def gang_polls(
    times: list[float], placed: list[list[tuple[str, str]]], **gang_args: Any
) -> list[list[str]]:
    """The Observer's violations at each observation of gang t (minCount 4 by default)."""
    observer = Observer(gang_slack=60.0)
    observer.nodes_read(NODES, 0.0)
    args = {"minimum": 4, **gang_args}
    return [
        [v.kind for v in observer.observe([gang("t", p, **args)], NODES, at)]
        for at, p in zip(times, placed, strict=True)
    ]


def test_a_gang_half_placed_longer_than_its_timeout_and_the_slack_is_caught() -> None:
    """2 of minCount 4 placed from the first observation (t=0), timeoutSeconds 10, slack 60:
    seen so at 70 s is still legal, at 71 s it is not."""
    assert gang_polls([0.0, 30.0, 70.0], [TWO_ON_A] * 3) == [[], [], []]
    assert gang_polls([0.0, 30.0, 71.0], [TWO_ON_A] * 3) == [[], [], ["gang-half-placed"]]
    # Without timeoutSeconds: KEP-4671's 300 s.
    assert gang_polls([0.0, 360.0], [TWO_ON_A] * 2, timeout=None) == [[], []]
    assert gang_polls([0.0, 361.0], [TWO_ON_A] * 2, timeout=None) == [[], ["gang-half-placed"]]


def test_a_gang_whole_or_released_in_between_starts_its_clock_again() -> None:
    released: list[tuple[str, str]] = []
    polls = gang_polls([0.0, 40.0, 50.0, 111.0], [TWO_ON_A, released, TWO_ON_A, TWO_ON_A])
    assert polls == [[], [], [], []]  # half placed since 50 s: 61 s, within 70
    # Whole at 40 s, b deleted at 50 s: half placed again since 50 s.
    whole = [*TWO_ON_A, ("ns/t-2", "b"), ("ns/t-3", "b")]
    without_b = [n for n in NODES if n["metadata"]["name"] != "b"]
    observer = Observer(gang_slack=60.0)
    observer.nodes_read(NODES, 0.0)
    seen = [
        observer.observe([gang("t", placed, 4)], nodes, at)
        for at, placed, nodes in (
            (0.0, TWO_ON_A, NODES),
            (40.0, whole, NODES),
            (50.0, TWO_ON_A, without_b),
            (111.0, TWO_ON_A, without_b),
            (121.0, TWO_ON_A, without_b),
        )
    ]
    assert [[v.kind for v in found] for found in seen] == [[], [], [], [], ["gang-half-placed"]]
    # A Service without a gang may stay partially placed for ever.
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    ssd = ['"ssd" in node.tags']  # only a, which the two fill
    partial = wl("t", TWO_ON_A, kind="Service", count=4, resources=CPU1, constraints=ssd)
    assert observer.observe([partial], NODES, 0.0) == []
    assert observer.observe([partial], NODES, 10_000.0) == []


def test_a_gang_released_after_it_fell_below_loses_nothing() -> None:
    """2 of minCount 4 held on a, then released: its placements go, for the gang's rule."""
    assert gang_polls([0.0, 20.0], [TWO_ON_A, []]) == [[], []]
    # The same of a Service without a gang: lost without a cause.
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    observer.observe([wl("t", TWO_ON_A, kind="Service", count=4, resources=CPU1)], NODES, 0.0)
    gone = wl("t", [], kind="Service", count=4, resources=CPU1)
    assert [v.kind for v in observer.observe([gone], NODES, 20.0)] == ["lost", "lost"]


def test_a_gang_holds_what_it_keeps_while_below() -> None:
    """While below its minCount and not released, a gang keeps what it holds: one of the 2
    gone (nothing took it) is lost."""
    assert gang_polls([0.0, 5.0], [TWO_ON_A, TWO_ON_A[:1]]) == [[], ["lost"]]


def test_a_node_lost_under_a_whole_gang_may_release_it_at_once() -> None:
    """Whole on a and b; b deleted and the gang released (timeoutSeconds 0) between two
    observations: the 2 on a go for the gang's rule. With every node there, the same drop is
    lost."""
    whole = [*TWO_ON_A, ("ns/t-2", "b"), ("ns/t-3", "b")]
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    observer.observe([gang("t", whole, 4, timeout=0)], NODES, 0.0)
    without_b = [n for n in NODES if n["metadata"]["name"] != "b"]
    assert observer.observe([gang("t", [], 4, timeout=0)], without_b, 10.0) == []
    observer = Observer()
    observer.nodes_read(NODES, 0.0)
    observer.observe([gang("t", whole, 4, timeout=0)], NODES, 0.0)
    found = observer.observe([gang("t", [], 4, timeout=0)], NODES, 10.0)
    assert [v.kind for v in found] == ["lost"] * 4


def test_a_released_gang_with_room_for_min_count_is_stranded() -> None:
    """Nothing placed: owed only when the nodes have room for minCount replicas in all. a and
    b have 2 cpu each (4 replicas of 1 cpu); c is cordoned."""
    assert kinds(NODES, [gang("t", [], 4)]) == ["stranded"]
    assert kinds(NODES, [gang("t", [], 4), wl("j", [("ns/j-0", "a")], resources=CPU1)]) == []
    # Half placed in its grace: owed a replica wherever one fits, as any Service.
    assert kinds(NODES, [gang("t", [("ns/t-0", "a")], 4)]) == ["stranded"]


# -- disruption budgets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "count", "budget", "desired", "needs"),
    [
        # Worked from getExpectedPodCount (pkg/controller/disruption/disruption.go) by hand.
        ("Service", 5, {"minAvailable": 3}, None, 3),
        ("Service", 5, {"minAvailable": "50%"}, None, 3),  # ceil(2.5)
        ("Service", 5, {"minAvailable": 7}, None, 7),  # more than desired: as written
        ("Service", 5, {"maxUnavailable": 1}, None, 4),
        ("Service", 5, {"maxUnavailable": "30%"}, None, 3),  # 5 - ceil(1.5)
        ("Service", 3, {"maxUnavailable": 5}, None, 0),  # never below 0
        ("Job", None, {"minAvailable": "1%"}, None, 1),  # ceil(0.01)
        ("DaemonSet", None, {"maxUnavailable": "25%"}, 8, 6),  # status.desired 8: 8 - 2
        ("Service", 5, None, None, None),
    ],
)
def test_a_budget_reads_as_a_pod_disruption_budget(
    kind: str,
    count: int | None,
    budget: dict[str, Any] | None,
    desired: int | None,
    needs: int | None,
) -> None:
    spec: dict[str, Any] = {"kind": kind}
    if count is not None:
        spec["count"] = count
    if budget is not None:
        spec["disruption"] = budget
    assert desired_healthy(spec, {"desired": desired} if desired else {}) == needs


THREE = [("ns/web-0", "a"), ("ns/web-1", "b"), ("ns/web-2", "t")]


def web(placements: list[tuple[str, str]], budget: dict[str, Any] | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"disruption": budget} if budget else {}
    return wl("web", placements, kind="Service", count=3, resources=CPU1, **extra)


def budget_polls(
    budget: dict[str, Any] | None, after: list[tuple[str, str]], nodes_after: Any = None
) -> list[str]:
    """web placed on a, b and t; then ``after``: the second observation's violations."""
    nodes = [*NODES, versioned(node_object("t", cpu="2"))]
    observer = Observer()
    observer.nodes_read(nodes, 0.0)
    assert observer.observe([web(THREE, budget)], nodes, 0.0) == []
    found = observer.observe([web(after, budget)], nodes_after or nodes, 10.0)
    return sorted(v.kind for v in found)


def test_a_replica_taken_without_a_cause_below_the_budget_is_caught() -> None:
    """web keeps 3 (minAvailable 3); one replica goes with its node still there and keeping it:
    orca's own move (a preemption), below the budget."""
    assert budget_polls({"minAvailable": 3}, THREE[:2]) == ["budget", "lost"]
    # A move is a disruption too (the rebalancer's: one in motion, placed - 1 < 3).
    moved = [*THREE[:2], ("ns/web-2", "b")]
    assert budget_polls({"minAvailable": 3}, moved) == ["budget", "lost"]
    # Within the budget, the same is only lost (no budget in the way: a scenario's own bug).
    assert budget_polls({"minAvailable": 2}, THREE[:2]) == ["lost"]
    assert budget_polls({"maxUnavailable": "50%"}, THREE[:2]) == ["lost"]  # 3 - ceil(1.5) = 1
    assert budget_polls(None, THREE[:2]) == ["lost"]


def test_a_node_lost_is_not_orcas_disruption() -> None:
    """t deleted: its replica goes, budget or not (a node failure is not voluntary)."""
    without_t = NODES
    assert budget_polls({"minAvailable": 3}, THREE[:2], without_t) == []
    # t cordoned: the user's drain, not orca's move.
    cordoned = [*NODES, versioned(node_object("t", cpu="2", cordoned=True), "2")]
    assert budget_polls({"minAvailable": 3}, THREE[:2], cordoned) == []


def test_the_observer_counts_what_the_new_rules_judged() -> None:
    """A run's figures say the rules were put to the test: a GPU placement new on g (which
    states pods), a gang seen half placed then released, a Workload with a budget."""
    observer = Observer()
    observer.nodes_read(GPU_NODES, 0.0)
    gpu_job = wl("j", [("ns/j-0", "g")], resources=gpus(1), disruption={"minAvailable": 1})
    observer.observe([gpu_job, gang("t", TWO_ON_A, 4)], GPU_NODES, 1.0)
    observer.observe([gpu_job, gang("t", [], 4)], GPU_NODES, 2.0)
    assert dict(observer.exercised) == {
        "nodes judged for an extended resource": 1,  # g, once: its placement is new only once
        "nodes judged against a pods limit": 1,  # g (a, where the gang is, states none)
        "gangs seen half placed": 1,
        "gangs seen released": 1,  # and never seen placed (minCount or more)
        "Workloads with a budget": 2,  # j, at each observation
    }
