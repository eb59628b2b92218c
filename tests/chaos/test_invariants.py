"""The invariant checker must catch what it claims to catch, or every chaos figure is vacuous."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.invariants import Snapshot, check
from tests.factories import node_object


def wl(
    name: str,
    placements: list[tuple[str, str]],
    generation: int = 1,
    observed: int | None = 1,
    uid: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    spec.setdefault("kind", "Job")
    status: dict[str, Any] = {
        "phase": "Scheduled" if placements else "Unschedulable",
        "placements": [{"allocId": a, "node": n} for a, n in placements],
    }
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {"name": name, "namespace": "ns", "generation": generation, "uid": uid or name},
        "spec": spec,
        "status": status,
    }


NODES = [
    node_object("a", cpu="2", tags=("ssd",)),
    node_object("b", cpu="2"),
    node_object("c", cpu="2", cordoned=True),
]
TAINTED = {
    **node_object("t", cpu="2"),
    "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]},
}
CPU1 = {"cpu": "1"}


@pytest.mark.parametrize(
    ("workloads", "kinds"),
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
        pytest.param([wl("j", [("ns/j-0", "gone")])], ["no-node"], id="no-node"),
        pytest.param([wl("j", [("ns/j-0", "c")])], ["ineligible"], id="cordoned"),
        pytest.param(
            [wl("j", [("ns/j-0", "b")], constraints=['"ssd" in node.tags'])],
            ["constraint"],
            id="constraint",
        ),
        pytest.param(
            [wl("j", [("ns/j-0", "a")], runtime={"oneOf": ["wasm"]})], ["runtime"], id="runtime"
        ),
        pytest.param(
            [wl("j", [("ns/x-0", "a")]), wl("k", [("ns/x-0", "b")])],
            ["duplicate-alloc"],
            id="duplicate-alloc",
        ),
        pytest.param([wl("j", [], resources=CPU1)], ["stranded"], id="stranded-job"),
        pytest.param(
            [wl("d", [("ns/d-0", "a")], kind="DaemonSet")], ["stranded"], id="stranded-daemonset"
        ),
    ],
)
def test_each_invariant_is_caught(workloads: list[dict[str, Any]], kinds: list[str]) -> None:
    assert sorted(v.kind for v in check(NODES, workloads)) == kinds


def test_an_untolerated_noexecute_taint_is_caught() -> None:
    on_tainted = [wl("j", [("ns/j-0", "t")])]
    assert [v.kind for v in check([TAINTED], on_tainted)] == ["taint"]
    tolerates = [{"key": "dedicated", "operator": "Exists"}]
    assert check([TAINTED], [wl("j", [("ns/j-0", "t")], tolerations=tolerates)]) == []


def test_a_placement_recorded_before_a_fault_must_still_be_there() -> None:
    before = Snapshot.take([wl("j", [("ns/j-0", "a")], resources=CPU1)])
    moved = [wl("j", [("ns/j-0", "b")], resources=CPU1)]
    assert [v.kind for v in check(NODES, moved, before)] == ["lost"]
    respecified = [wl("j", [("ns/j-0", "b")], generation=2, observed=2, resources=CPU1)]
    assert check(NODES, respecified, before) == []  # a new spec may move it
    recreated = [wl("j", [("ns/j-0", "b")], uid="other", resources=CPU1)]
    assert check(NODES, recreated, before) == []
