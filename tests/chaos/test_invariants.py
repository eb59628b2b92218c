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
