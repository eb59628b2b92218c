"""``orca plan --drain / --add-nodes``: the what-if answers, through the command a user runs.

Every expected answer below is worked out by hand from the rules (docs/design.md 4 and 5, and
kube-scheduler's where orca follows it), in the comment beside the case, not read off the
scheduler: the placements, the moves, what finds no place, and the smallest node counts.
Capacity is in cpu only (memory requests 0, so the memory part of every score is 100 and the
cpu part decides: LeastAllocated, ``floor(free_after * 100 / allocatable)``).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.api.models import Workload
from controller.cli.whatif import AddNodes, parse_add_nodes
from controller.scheduler.ledger import Booking, ledger_from_statuses
from controller.scheduler.nodes import NodeInfo, NodeTable, unreadable_node_info
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.plugins.topology_spread import REASON_CONSTRAINTS_NOT_MATCH
from controller.scheduler.priority import PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.whatif import (
    MAX_ADDED_NODES,
    Answer,
    Capacity,
    Moved,
    Question,
    Unplaced,
    WhatIf,
    _Search,
    copies,
)
from tests.support.cli import Orca, write
from tests.support.factories import node, node_object, workload
from tests.support.factories import workload_obj as wl

ZONE = "topology.kubernetes.io/zone"
GiB = 1 << 30
NOW = "2026-12-01T10:00:00Z"
#: A PriorityClass above the default's 0, as a user writes one.
HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def zone_node(
    name: str, zone: str, cpu: str = "4", labels: dict[str, str] | None = None, **kwargs: Any
) -> dict[str, Any]:
    return node_object(name, cpu=cpu, memory="8Gi", labels={ZONE: zone, **(labels or {})}, **kwargs)


def plan(orca: Orca, nodes: Path, workloads: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", workloads, "--now", NOW, *args)
    return code, (json.loads(out) if "-o" in args and out else {}), err if code == 2 else out


def moves(answer: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {m["allocId"]: (m["from"], m["to"]) for m in answer["moved"]}


# -- drains -------------------------------------------------------------------------------------


def test_a_zone_drain_whose_replicas_fit_elsewhere(tmp_path: Path, orca: Orca) -> None:
    # Zone a: a1, a2; zone b: b1, b2; 4 cores each. web (Service, 2 x 1 core) on a1 and b1;
    # job (1 core) on a2. Draining zone a displaces web-0 and job-0; planned in file order:
    # web-0 goes where web has fewest replicas: b2 (0) rather than b1 (web-1);
    # job-0 then sees b1 (3 free -> 2 after: 50) and b2 (3 free -> 2 after: 50): a tie, the
    # lower hostname wins: b1.
    nodes = write(
        tmp_path,
        "nodes.yaml",
        [zone_node("a1", "a"), zone_node("a2", "a"), zone_node("b1", "b"), zone_node("b2", "b")],
    )
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            wl("web", placed={0: "a1", 1: "b1"}, kind="Service", count=2, resources={"cpu": "1"}),
            wl("job", placed={0: "a2"}, kind="Job", resources={"cpu": "1"}),
        ],
    )
    code, answer, _ = plan(orca, nodes, workloads, "--drain", f"{ZONE}=a", "-o", "json")
    assert code == 0
    assert answer["drained"] == ["a1", "a2"]
    assert answer["displaced"] == 2
    assert moves(answer) == {"shop/web-0": ("a1", "b2"), "shop/job-0": ("a2", "b1")}
    assert answer["unplaced"] == []
    # web-1 stays where it is: placements on other nodes do not move.
    assert "shop/web-1" not in moves(answer)


def test_a_zone_drain_where_the_spread_leaves_two_replicas_without_a_place(
    tmp_path: Path, orca: Orca
) -> None:
    # web: 6 replicas, two on each of a1, b1, c1 (16 cores each), spread over zones with
    # maxSkew 1, DoNotSchedule. Zone c also has c2, tainted NoSchedule (web does not tolerate
    # it). Drain c1: web-4 and web-5 need a place. kube counts domains over nodes that pass
    # the Workload's node affinity (Honor) whatever their taints (nodeTaintsPolicy Ignore):
    # a (2), b (2), c (0, through c2). Placing on a1 or b1 makes 3 - 0 = 3 > 1: refused;
    # c2 is refused by its taint. Both have no place; the drain's answer is exit 1.
    nodes = write(
        tmp_path,
        "nodes.yaml",
        [
            zone_node("a1", "a", cpu="16"),
            zone_node("b1", "b", cpu="16"),
            zone_node("c1", "c", cpu="16"),
            zone_node(
                "c2", "c", cpu="16", taints=[{"key": "maint", "value": "", "effect": "NoSchedule"}]
            ),
        ],
    )
    spread = [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
    placed = {0: "a1", 1: "a1", 2: "b1", 3: "b1", 4: "c1", 5: "c1"}
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            wl(
                "web",
                placed=placed,
                kind="Service",
                count=6,
                resources={"cpu": "1"},
                topologySpread=spread,
            )
        ],
    )
    code, answer, _ = plan(orca, nodes, workloads, "--drain", "c1", "-o", "json")
    assert code == 1
    assert answer["moved"] == []
    unplaced = {u["allocId"]: u for u in answer["unplaced"]}
    assert sorted(unplaced) == ["shop/web-4", "shop/web-5"]
    for u in unplaced.values():
        assert u["from"] == "c1"
        assert REASON_CONSTRAINTS_NOT_MATCH in u["reason"]
        assert "untolerated taint {maint: }" in u["reason"]


def test_daemonset_replicas_on_a_drained_node_end(tmp_path: Path, orca: Orca) -> None:
    # agent runs on a1 (index 0) and b1 (index 1); draining a1 ends agent-0 and moves nothing.
    nodes = write(tmp_path, "nodes.yaml", [zone_node("a1", "a"), zone_node("b1", "b")])
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [wl("agent", placed={0: "a1", 1: "b1"}, namespace="ops", kind="DaemonSet")],
    )
    code, answer, _ = plan(orca, nodes, workloads, "--drain", "a1", "-o", "json")
    assert code == 0
    assert answer["ended"] == [{"workload": "ops/agent", "allocId": "ops/agent-0", "node": "a1"}]
    assert answer["moved"] == [] and answer["unplaced"] == [] and answer["displaced"] == 0
    agent = next(r for r in answer["results"] if r["workload"] == "ops/agent")
    assert [p["node"] for p in agent["placements"]] == ["b1"]


def test_after_a_drain_a_higher_priority_replica_preempts_a_lower_one(
    tmp_path: Path, orca: Orca
) -> None:
    # a1 and b1, 4 cores each. critical (priority 1000, 3 cores) on a1; batch (priority 0,
    # 3 cores) on b1. Drain a1: critical needs 3 cores, b1 has 1 free; batch is lower, so
    # critical preempts it (DefaultPreemption: removing batch frees 4) and moves to b1.
    # batch, planned after it, finds 1 free core on b1: no place.
    nodes = write(tmp_path, "nodes.yaml", [zone_node("a1", "a"), zone_node("b1", "b")])
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            HIGH,
            wl(
                "critical",
                placed={0: "a1"},
                kind="Job",
                resources={"cpu": "3"},
                priorityClassName="high",
            ),
            wl("batch", placed={0: "b1"}, kind="Job", resources={"cpu": "3"}),
        ],
    )
    code, answer, _ = plan(orca, nodes, workloads, "--drain", "a1", "-o", "json")
    assert code == 1
    assert moves(answer) == {"shop/critical-0": ("a1", "b1")}
    [lost] = answer["unplaced"]
    assert lost["allocId"] == "shop/batch-0" and lost["from"] == "b1"
    assert "Insufficient cpu" in lost["reason"]
    critical = next(r for r in answer["results"] if r["workload"] == "shop/critical")
    assert critical["victims"] == [
        {"workload": "shop/batch", "allocId": "shop/batch-0", "node": "b1", "priority": 0}
    ]
    code, _, table = plan(orca, nodes, workloads, "--drain", "a1")
    assert code == 1
    assert "PREEMPTED" in table and "shop/batch-0 (priority 0) on b1 by shop/critical" in table


# -- adding nodes -------------------------------------------------------------------------------


def full_cluster(tmp_path: Path, pending: list[dict[str, Any]]) -> tuple[Path, Path]:
    """n0 (4 cores) full with one 4-core Job, and ``pending`` Workloads without status."""
    nodes = write(tmp_path, "nodes.yaml", [zone_node("n0", "a")])
    full = wl("full", placed={0: "n0"}, kind="Job", resources={"cpu": "4"})
    workloads = write(tmp_path, "workloads.yaml", [full, *pending])
    return nodes, workloads


def template(tmp_path: Path, **kwargs: Any) -> Path:
    return write(tmp_path, "big.yaml", [zone_node("big", "b", **kwargs)])


def test_auto_on_uniform_jobs_is_a_division(tmp_path: Path, orca: Orca) -> None:
    # Ten 1-core Jobs wait; n0 is full; a template has 4 cores: ceil(10 / 4) = 3 copies, and
    # with 2 copies (8 cores) two Jobs are left.
    pending = [wl(f"j{i}", kind="Job", resources={"cpu": "1"}) for i in range(10)]
    nodes, workloads = full_cluster(tmp_path, pending)
    big = template(tmp_path)
    code, answer, _ = plan(orca, nodes, workloads, "--add-nodes", f"{big}:auto", "-o", "json")
    assert code == 0
    assert answer["nodesToAdd"]["count"] == 3
    # The search: the lower bound ceil((4 + 10 - 4) / 4) = 3 places all; then 0 + 1 = 1 (six
    # left), the middle 2 (two left): adjacent. Four plans with the question without nodes.
    assert answer["nodesToAdd"]["plans"] == 4
    assert answer["nodesToAdd"]["names"] == ["big-1", "big-2", "big-3"]
    assert answer["unplaced"] == []
    assert answer["nodesToAdd"]["proof"].startswith("with 2, ")
    # The proof, checked by planning 2 copies ourselves: two Jobs find no place.
    code, fixed, _ = plan(orca, nodes, workloads, "--add-nodes", f"{big}:2", "-o", "json")
    assert code == 1
    assert len(fixed["unplaced"]) == 2
    assert all(u["from"] is None for u in fixed["unplaced"])


def test_auto_on_a_mix_needs_more_than_the_division(tmp_path: Path, orca: Orca) -> None:
    # Waiting, in file order: three 3-core Jobs, three 2-core Jobs (15 cores: the division
    # says 4 templates of 4 cores). By the rules: each 3-core Job takes an empty copy (big-1..3,
    # each then 1 core free); the 2-core Jobs fit only on empty or half-full copies: with 4
    # copies, j2-0 and j2-1 fill big-4 and j2-2 has no place; with 5, j2-0 -> big-4, j2-1 ->
    # big-5 (emptier), j2-2 -> big-4 (tie at 2 free: lower hostname). The answer is 5.
    pending = [wl(f"j3-{i}", kind="Job", resources={"cpu": "3"}) for i in range(3)]
    pending += [wl(f"j2-{i}", kind="Job", resources={"cpu": "2"}) for i in range(3)]
    nodes, workloads = full_cluster(tmp_path, pending)
    big = template(tmp_path)
    code, answer, _ = plan(orca, nodes, workloads, "--add-nodes", f"{big}:auto", "-o", "json")
    assert code == 0
    assert answer["nodesToAdd"]["count"] == 5
    # The search: the lower bound ceil(15 / 4) = 4 leaves j2-2; the secant through (0, 6 left)
    # and (4, 1 left) says 1.25 a node, so 4 + ceil(1 / 1.25) = 5: enough, adjacent. 3 plans.
    assert answer["nodesToAdd"]["plans"] == 3
    assert answer["nodesToAdd"]["proof"].startswith("with 4, shop/j2-2-0 has no place")
    placed = {r["workload"]: [p["node"] for p in r["placements"]] for r in answer["results"]}
    assert placed["shop/j2-0"] == ["big-4"]
    assert placed["shop/j2-1"] == ["big-5"]
    assert placed["shop/j2-2"] == ["big-4"]


def test_a_template_that_can_never_help_says_why_in_one_line(tmp_path: Path, orca: Orca) -> None:
    # The waiting Job needs wasm; the template offers docker only: no count helps. The
    # template is written by hand, without a Ready condition: its copies count as Ready
    # nodes (what is refused is the runtime, not the readiness).
    pending = [wl("edge", kind="Job", runtime={"oneOf": ["wasm"]}, resources={"cpu": "1"})]
    nodes, workloads = full_cluster(tmp_path, pending)
    bare = zone_node("big", "b")
    del bare["status"]["conditions"]
    big = write(tmp_path, "big.yaml", [bare])
    code, answer, _ = plan(orca, nodes, workloads, "--add-nodes", f"{big}:auto", "-o", "json")
    assert code == 1
    c = answer["nodesToAdd"]
    assert c["count"] is None
    # tried at the largest count, one per waiting replica: 1; n0 and big-1 both lack wasm
    assert c["why"] == (
        "shop/edge-0 still has no place with 1: 0/2 nodes are available: 2 runtime wasm not "
        "offered; a big node cannot take it: runtime wasm not offered (Runtime)"
    )
    assert c["plans"] == 2  # the question without nodes, then the largest count: no search
    assert c["tried"] == 1  # that largest count, one per waiting replica
    code, _, table = plan(orca, nodes, workloads, "--add-nodes", f"{big}:auto")
    assert code == 1
    [line] = [x for x in table.splitlines() if x.startswith("no count of big")]
    assert "runtime wasm not offered" in line


def test_a_fixed_count_adds_exactly_those_nodes(tmp_path: Path, orca: Orca) -> None:
    # Three 1-core Jobs, one pinned by its hostname label to the second copy: each copy's
    # kubernetes.io/hostname label is its own name.
    pinned = ['node.labels["kubernetes.io/hostname"] == "big-2"']
    pending = [wl(f"j{i}", kind="Job", resources={"cpu": "1"}) for i in range(2)]
    pending.append(wl("pinned", kind="Job", resources={"cpu": "1"}, constraints=pinned))
    nodes, workloads = full_cluster(tmp_path, pending)
    big = template(tmp_path, labels={"kubernetes.io/hostname": "big"})
    code, answer, _ = plan(orca, nodes, workloads, "--add-nodes", f"{big}:2", "-o", "json")
    assert code == 0
    assert answer["nodesToAdd"] == {
        "template": "big",
        "count": 2,
        "auto": False,
        "names": ["big-1", "big-2"],
    }
    placed = {r["workload"]: [p["node"] for p in r["placements"]] for r in answer["results"]}
    # j0: both copies empty, the lower hostname; j1: big-2 is emptier; pinned: big-2.
    assert placed == {
        "shop/full": ["n0"],
        "shop/j0": ["big-1"],
        "shop/j1": ["big-2"],
        "shop/pinned": ["big-2"],
    }


def test_a_drain_and_auto_together_place_the_displaced_replicas(tmp_path: Path, orca: Orca) -> None:
    # a1 and b1 (4 cores) each hold a 3-core Job; draining a1 displaces one, which fits on
    # no remaining node (b1 has 1 core free); one copy of a 4-core template takes it.
    nodes = write(tmp_path, "nodes.yaml", [zone_node("a1", "a"), zone_node("b1", "b")])
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            wl("x", placed={0: "a1"}, kind="Job", resources={"cpu": "3"}),
            wl("y", placed={0: "b1"}, kind="Job", resources={"cpu": "3"}),
        ],
    )
    big = template(tmp_path)
    code, answer, _ = plan(orca, nodes, workloads, "--drain", "a1", "-o", "json")
    assert code == 1 and [u["allocId"] for u in answer["unplaced"]] == ["shop/x-0"]
    args = ("--drain", "a1", "--add-nodes", f"{big}:auto", "-o", "json")
    code, answer, _ = plan(orca, nodes, workloads, *args)
    assert code == 0
    assert answer["nodesToAdd"]["count"] == 1
    assert moves(answer) == {"shop/x-0": ("a1", "big-1")}


# -- determinism and bad input ------------------------------------------------------------------


def test_the_same_inputs_give_the_same_answer_whatever_the_node_order(
    tmp_path: Path, orca: Orca
) -> None:
    zones = "aabbcc"
    nodes_list = [zone_node(f"n{i}", zones[i]) for i in range(6)]
    placed = {i: f"n{i}" for i in range(6)}
    docs = [wl("web", placed=placed, kind="Service", count=6, resources={"cpu": "3"})]
    docs += [wl(f"j{i}", kind="Job", resources={"cpu": "1"}) for i in range(4)]
    workloads = write(tmp_path, "workloads.yaml", docs)
    big = template(tmp_path)
    args = ("--drain", f"{ZONE} in (a,b)", "--add-nodes", f"{big}:auto", "-o", "json")
    answers = []
    for seed in range(3):
        random.Random(seed).shuffle(nodes_list)
        nodes = write(tmp_path, f"nodes{seed}.yaml", nodes_list)
        code, answer, _ = plan(orca, nodes, workloads, *args)
        answers.append((code, answer))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][1]["drained"] == ["n0", "n1", "n2", "n3"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--drain", "zone=nowhere"), "--drain 'zone=nowhere': matches no Node (2 in all)"),
        (("--drain", "a in b"), "--drain 'a in b': found 'b' expected: '('"),
        (("--drain", ""), "--drain: give a Node name or a label selector, not ''"),
        (("--add-nodes", "big.yaml"), "--add-nodes: 'big.yaml' is not FILE:COUNT or FILE:auto"),
        (("--add-nodes", "big.yaml:many"), "--add-nodes: 'many' is not a whole number"),
        (("--add-nodes", "big.yaml:10001"), "--add-nodes: 10001 is out of range (0..10000)"),
        # A selector too long to repeat: its first 80 characters (valid, matching nothing).
        (
            ("--drain", "a" * 30 + ".com/" + "k" * 50 + "=v"),
            f"--drain {'a' * 30 + '.com/' + 'k' * 45!r}: matches no Node (2 in all)",
        ),
        (
            ("--drain", "=" + "Z" * 100),
            f"--drain {'=' + 'Z' * 79!r}: found '=', expected: !, identifier, or 'end of string'",
        ),
        # A path too long to repeat: its first 80 characters.
        (
            ("--add-nodes", "/" + "d" * 79 + "Z" * 200),
            f"--add-nodes: {'/' + 'd' * 79!r} is not FILE:COUNT or FILE:auto",
        ),
    ],
)
def test_bad_questions_are_one_line_and_exit_2(
    tmp_path: Path, orca: Orca, args: tuple[str, ...], message: str
) -> None:
    nodes = write(tmp_path, "nodes.yaml", [zone_node("a1", "a"), zone_node("b1", "b")])
    workloads = write(tmp_path, "workloads.yaml", [wl("j", kind="Job")])
    code, _, err = plan(orca, nodes, workloads, *args)
    assert code == 2
    assert err == f"error: {message}\n"


def test_a_template_file_must_hold_one_node_and_its_copies_new_names(
    tmp_path: Path, orca: Orca
) -> None:
    nodes = write(tmp_path, "nodes.yaml", [zone_node("big-1", "a")])
    workloads = write(tmp_path, "workloads.yaml", [wl("j", kind="Job")])
    two = write(tmp_path, "two.yaml", [zone_node("x", "a"), zone_node("y", "a")])
    code, _, err = plan(orca, nodes, workloads, "--add-nodes", f"{two}:1")
    assert code == 2 and err == f"error: --add-nodes {two}: holds 2 Nodes; give the one to copy\n"
    big = template(tmp_path)
    code, _, err = plan(orca, nodes, workloads, "--add-nodes", f"{big}:1")
    assert code == 2
    assert err == "error: --add-nodes: Node big-1 is already in the cluster: rename the template\n"


# -- the search, through the API (what the command prints comes from these figures) -----------


def placed_on(*replicas: tuple[str, str]) -> dict[str, Any]:
    """A status recording ``(alloc suffix, node)`` placements in namespace shop."""
    return {"placements": [{"node": n, "allocId": f"shop/{a}", "score": 0} for a, n in replicas]}


def what_if(nodes: list[NodeInfo], workloads: list[Workload]) -> WhatIf:
    return WhatIf(ledger_from_statuses(nodes, workloads), workloads, now=NOW)


def test_auto_counts_the_daemonsets_each_copy_would_run() -> None:
    # n0 (5 cores) holds full (4) and agent (a DaemonSet of 1 core, so one on every copy too);
    # ten 1-core Jobs wait. A 4-core copy has 3 cores left once agent starts on it: the lower
    # bound is ceil(10 / 3) = 4, which places all. The search: 4 (enough), then 0 + 1 = 1
    # (7 left), the middle 2 (4 left), the middle 3 (j9 left): 4 and 3 are adjacent. Five
    # plans with the question without nodes.
    full = workload("full", kind="Job", resources={"cpu": "4"}, status=placed_on(("full-0", "n0")))
    agent = workload(
        "agent", kind="DaemonSet", resources={"cpu": "1"}, status=placed_on(("agent-0", "n0"))
    )
    jobs = [workload(f"j{i}", kind="Job", resources={"cpu": "1"}) for i in range(10)]
    # an Invalid DaemonSet starts nowhere: it takes nothing from a copy
    broken = workload("broken", kind="DaemonSet", constraints=['node.cpu == "x"'])
    capacity, answer = what_if([node("n0", cpu="5")], [full, agent, broken, *jobs]).smallest_count(
        Question(template=node("big", cpu="4"))
    )
    assert (capacity.count, capacity.tried, capacity.plans) == (4, 4, 5)
    assert capacity.names == ("big-1", "big-2", "big-3", "big-4")
    assert capacity.proof == (
        "with 3, shop/j9-0 has no place: 0/4 nodes are available: 4 Insufficient cpu."
    )
    assert answer.settled and answer.added == capacity.names


def test_auto_with_nothing_waiting_is_zero_after_one_plan() -> None:
    full = workload("full", kind="Job", resources={"cpu": "4"}, status=placed_on(("full-0", "n0")))
    whatif = what_if([node("n0")], [full])
    for _ in range(2):  # asked again: the plans of the first question are not this one's
        capacity, answer = whatif.smallest_count(Question(template=node("big")))
        assert capacity == Capacity("big", 0, True, plans=1)
        assert answer.settled and answer.added == ()


def test_a_template_that_refuses_the_waiting_one_can_still_make_room_for_it() -> None:
    # n (3 cores); b (1 core, BinPack) then a (3 cores) in file order: b takes n, a waits.
    # A 1-core template cannot take a (Insufficient cpu), so the largest count (1, one per
    # waiting replica) is tried first: b, packing, prefers the full copy (1/1 used) to n
    # (1/3), and a fits on n. One copy, two plans, the plan without it the proof.
    b = workload("b", kind="Job", resources={"cpu": "1"}, strategy="BinPack")
    a = workload("a", kind="Job", resources={"cpu": "3"})
    capacity, answer = what_if([node("n", cpu="3")], [b, a]).smallest_count(
        Question(template=node("t", cpu="1"))
    )
    assert (capacity.count, capacity.plans, capacity.names) == (1, 2, ("t-1",))
    assert capacity.proof == (
        "with 0, shop/a-0 has no place: 0/1 nodes are available: 1 Insufficient cpu."
    )
    placed = {r.workload.key: [p.node for p in r.status.placements] for r in answer.results}
    assert placed == {"shop/b": ["t-1"], "shop/a": ["n"]}


def test_an_invalid_workload_is_not_part_of_the_answer() -> None:
    # typo (invalid CEL) sits on a1: draining a1 neither moves it nor leaves it without a
    # place (it waits for a spec change, not for room), nor counts it as displaced.
    typo = workload(
        "typo", kind="Job", constraints=['node.cpu == "x"'], status=placed_on(("typo-0", "a1"))
    )
    job = workload("j", kind="Job", status=placed_on(("j-0", "a1")))
    answer = what_if([node("a1"), node("b1")], [typo, job]).answer(
        Question(drain=frozenset({"a1"}))
    )
    assert answer.moved == (Moved("shop/j", "shop/j-0", "a1", "b1"),)
    assert answer.unplaced == () and answer.ended == ()
    assert answer.displaced == 1


def test_copies_refuse_a_count_out_of_range_and_names_too_long() -> None:
    with pytest.raises(ValueError, match=r"^a count of 10001 is outside 0\.\.10000$"):
        copies(node("big"), 10_001, NodeTable(()))
    with pytest.raises(ValueError, match=r"^a count of -1 is outside 0\.\.10000$"):
        copies(node("big"), -1, NodeTable(()))
    long = "n" * 249  # a Node name may have 253 characters: n...n-999 has, n...n-1000 not
    assert [n.hostname for n in copies(node(long), 999, NodeTable(()))][-1] == f"{long}-999"
    with pytest.raises(ValueError, match=f"^{long}-1000 would be longer than 253 characters$"):
        copies(node(long), 1000, NodeTable(()))
    assert copies(node("big"), 0, NodeTable(())) == [] and copies(None, 3, NodeTable(())) == []
    most = copies(node("big"), MAX_ADDED_NODES, NodeTable(()))  # the largest count is allowed
    assert len(most) == 10_000 and most[-1].hostname == "big-10000"


def test_smallest_count_needs_a_template() -> None:
    with pytest.raises(ValueError, match=r"^smallest_count needs a template node$"):
        what_if([node("a")], []).smallest_count(Question())


def test_the_answer_lists_replicas_by_workload_then_index_as_numbers() -> None:
    # eleven 100m replicas of web on a, one of api: draining a moves all twelve to b (room for
    # all), listed api first, then web-0, web-1, ..., web-9, web-10 (not web-1, web-10, web-2).
    web = workload(
        "web",
        kind="Service",
        count=11,
        resources={"cpu": "100m"},
        status=placed_on(*((f"web-{i}", "a") for i in range(11))),
    )
    api = workload("api", kind="Job", resources={"cpu": "100m"}, status=placed_on(("api-0", "a")))
    answer = what_if([node("a"), node("b")], [web, api]).answer(Question(drain=frozenset({"a"})))
    assert [m.alloc_id for m in answer.moved] == [
        "shop/api-0",
        *(f"shop/web-{i}" for i in range(11)),
    ]
    assert {(m.source, m.target) for m in answer.moved} == {("a", "b")}
    assert answer.displaced == 12


def test_copies_are_new_ready_nodes_keeping_the_templates_own_taints() -> None:
    # A template taken from a NotReady node: its copies have registered and turned Ready, so
    # the lifecycle taints its readiness put on it are gone; a taint of its own stays.
    taints = [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
    ]
    template = node("big", ready=False, taints=taints, labels={"kubernetes.io/hostname": "big"})
    made = copies(template, 2, NodeTable([node("other")]))
    assert [n.hostname for n in made] == ["big-1", "big-2"]
    assert [n.labels["kubernetes.io/hostname"] for n in made] == ["big-1", "big-2"]
    assert all(n.ready and n.readable for n in made)
    assert [[t.key for t in n.taints] for n in made] == [["dedicated"], ["dedicated"]]
    assert made[0].cpu == template.cpu and made[0].runtimes == template.runtimes
    # a copy of a Node orca could not read is a new Node that registered: it can be read
    assert copies(unreadable_node_info("odd"), 1, NodeTable(()))[0].readable
    unlabelled = copies(node("plain"), 1, NodeTable(()))
    assert "kubernetes.io/hostname" not in unlabelled[0].labels


def test_a_replica_preempted_and_placed_again_says_who_moved_it() -> None:
    # Draining a1: critical (priority 1000, 3 cores, never on c1) finds 1 core free on b1 and
    # preempts batch (priority 0, 3 cores) there; batch, planned after it, goes to c1.
    classes = PriorityClasses.of([PriorityClass("high", 1000)])
    critical = workload(
        "critical",
        kind="Job",
        resources={"cpu": "3"},
        priorityClassName="high",
        constraints=['node.hostname != "c1"'],
        status=placed_on(("critical-0", "a1")),
    )
    batch = workload(
        "batch", kind="Job", resources={"cpu": "3"}, status=placed_on(("batch-0", "b1"))
    )
    workloads = [critical, batch]
    nodes = [node("a1"), node("b1"), node("c1")]
    whatif = WhatIf(ledger_from_statuses(nodes, workloads), workloads, classes=classes, now=NOW)
    answer = whatif.answer(Question(drain=frozenset({"a1"})))
    assert answer.moved == (
        Moved("shop/batch", "shop/batch-0", "b1", "c1", preempted_by="shop/critical"),
        Moved("shop/critical", "shop/critical-0", "a1", "b1"),
    )
    assert answer.unplaced == () and answer.displaced == 1


def boss_on_a1() -> tuple[PriorityClasses, Workload]:
    """boss: a 4-core Job of priority class high (1000), placed on a1."""
    classes = PriorityClasses.of([PriorityClass("high", 1000)])
    boss = workload(
        "boss",
        kind="Job",
        resources={"cpu": "4"},
        priorityClassName="high",
        status=placed_on(("boss-0", "a1")),
    )
    return classes, boss


def test_a_workload_not_planned_is_preempted_at_its_known_priority() -> None:
    # other (4 cores, priority 0 by what is known of it) fills b1 and is not planned; boss
    # (priority 1000) on a1 is displaced by the drain and preempts it, from b1.
    classes, boss = boss_on_a1()
    ledger = ledger_from_statuses([node("a1"), node("b1")], [boss])
    ledger.load("shop/other", [Booking("b1", "shop/other-0", 4000, 0)])

    def drained(known: dict[str, int] | None) -> Answer:
        whatif = WhatIf(ledger, [boss], classes=classes, now=NOW, known_priorities=known)
        return whatif.answer(Question(drain=frozenset({"a1"})))

    answer = drained({"shop/other": 0})
    assert answer.moved == (Moved("shop/boss", "shop/boss-0", "a1", "b1"),)
    (result,) = answer.results
    assert [(p.victim.key, p.victim.booking.node) for p in result.victims] == [("shop/other", "b1")]
    assert [u.alloc_id for u in drained(None).unplaced] == ["shop/boss-0"]  # no one to preempt


def test_the_answer_narrates_each_workload_at_its_turn() -> None:
    # orca explain --drain: the callback sees each planned Workload with the cluster as the
    # question changed it (a1 gone) just before that Workload's decision.
    job = workload("j", kind="Job", status=placed_on(("j-0", "a1")))
    seen: list[tuple[str, list[str]]] = []
    what_if([node("a1"), node("b1")], [job]).answer(
        Question(drain=frozenset({"a1"})),
        before_each=lambda w, ledger: seen.append((w.key, list(ledger.table.hostnames))),
    )
    assert seen == [("shop/j", ["b1"])]


def test_the_answer_plans_with_the_whatifs_scheduler_and_clock() -> None:
    # a went NotReady at NOW - 60 s with j on it; a Job tolerates not-ready for the default
    # 300 s (kube's DefaultTolerationSeconds): at the WhatIf's now, j stays on a, nothing moves
    # (a clock of today, days later, would have moved it). A scheduler whose default
    # toleration is 20 s has moved it to b by then.
    j = workload("j", kind="Job", status=placed_on(("j-0", "a")))
    nodes = [node("a", ready=False, since="2026-12-01T09:59:00Z"), node("b")]
    ledger = ledger_from_statuses(nodes, [j])
    assert WhatIf(ledger, [j], now=NOW).answer(Question()).moved == ()
    shorter = Scheduler(tolerations=DefaultTolerations(not_ready=20, unreachable=20))
    answer = WhatIf(ledger, [j], scheduler=shorter, now=NOW).answer(Question())
    assert answer.moved == (Moved("shop/j", "shop/j-0", "a", "b"),)


def test_a_preemption_for_the_answer_spares_the_victim_started_first() -> None:
    # boss (priority 1000, 4 cores) on a1 is displaced by the drain; b1 and c1 are full, each
    # with a Workload not planned, known at priority 0: old (created 2026-01-01) on b1, new
    # (2026-11-01) on c1. The victims tie on priority, sum and number; kube then prefers the
    # node whose victims started latest: c1, though b1 is the lower name.
    classes, boss = boss_on_a1()
    ledger = ledger_from_statuses([node("a1"), node("b1"), node("c1")], [boss])
    ledger.load("shop/old", [Booking("b1", "shop/old-0", 4000, 0)])
    ledger.load("shop/new", [Booking("c1", "shop/new-0", 4000, 0)])
    whatif = WhatIf(
        ledger,
        [boss],
        classes=classes,
        now=NOW,
        known_priorities={"shop/old": 0, "shop/new": 0},
        known_started={
            "shop/old": datetime(2026, 1, 1, tzinfo=UTC),
            "shop/new": datetime(2026, 11, 1, tzinfo=UTC),
        },
    )
    answer = whatif.answer(Question(drain=frozenset({"a1"})))
    assert answer.moved == (Moved("shop/boss", "shop/boss-0", "a1", "c1"),)
    (result,) = answer.results
    assert [p.victim.key for p in result.victims] == ["shop/new"]


def test_ended_replicas_are_listed_by_index_as_numbers_an_unindexed_id_first() -> None:
    # node-agent (a DaemonSet, a dash in its own name) records node-agent-10, -2, -0 and -x
    # (a hand-edited status: not one of its indexes) on a. Draining a ends all four: by
    # index as a number (0, 2, 10), the id without an index before them.
    ids = ["node-agent-10", "node-agent-2", "node-agent-x", "node-agent-0"]
    status = {"placements": [{"node": "a", "allocId": f"ops/{i}", "score": 0} for i in ids]}
    agent = workload("node-agent", namespace="ops", kind="DaemonSet", status=status)
    answer = what_if([node("a"), node("b")], [agent]).answer(Question(drain=frozenset({"a"})))
    assert [e.alloc_id for e in answer.ended] == [
        "ops/node-agent-x",
        "ops/node-agent-0",
        "ops/node-agent-2",
        "ops/node-agent-10",
    ]


# -- the search, plan by plan: ``plans`` and ``tried`` are printed with the answer -------------


def one_core_jobs(count: int, cpu: str = "1", **spec: Any) -> list[Workload]:
    return [workload(f"j{i}", kind="Job", resources={"cpu": cpu}, **spec) for i in range(count)]


@pytest.mark.parametrize(("waiting", "plans"), [(2, 3), (3, 3)])
def test_when_every_copy_is_taken_by_a_daemonset_the_search_ends_at_the_cap(
    waiting: int, plans: int
) -> None:
    # n0 (8 cores) holds full (4) and agent (a 4-core DaemonSet, listed first, so it starts
    # first on every copy); the waiting 1-core Jobs fit an empty copy (nothing refuses them),
    # but agent takes all of every copy. No count helps; the cap is one per waiting replica.
    # The lower bound: each copy adds 4 - 4 = 0 cores, which says nothing (1). The search:
    # 1 (all still waiting), no progress so double the step: 1 + 2 = 3, moved inside the
    # bracket: min(3, cap). With 2 waiting: 2 is the cap; with 3, 3 is. Either way 3 plans.
    agent = workload(
        "agent", kind="DaemonSet", resources={"cpu": "4"}, status=placed_on(("agent-0", "n0"))
    )
    full = workload("full", kind="Job", resources={"cpu": "4"}, status=placed_on(("full-0", "n0")))
    whatif = what_if([node("n0", cpu="8")], [agent, full, *one_core_jobs(waiting)])
    whatif.answer(Question())  # an earlier question: not counted in this search's plans
    capacity, answer = whatif.smallest_count(Question(template=node("big", cpu="4")))
    nodes = waiting + 1
    assert capacity == Capacity(
        "big",
        None,
        True,
        why=f"shop/j0-0 still has no place with {waiting}: 0/{nodes} nodes are available: "
        f"{nodes} Insufficient cpu",
        tried=waiting,
        plans=plans,
    )
    assert answer.added == tuple(f"big-{i}" for i in range(1, waiting + 1))
    assert len(answer.unplaced) == waiting


def full_n0(*more: Workload) -> list[Workload]:
    """n0's 4 cores held by one 4-core Job, then ``more``."""
    return [
        workload("full", kind="Job", resources={"cpu": "4"}, status=placed_on(("full-0", "n0"))),
        *more,
    ]


def test_the_lower_bound_counts_what_can_be_placed_and_auto_ignores_a_given_count() -> None:
    # As test_auto_on_uniform_jobs_is_a_division, with an Invalid 8-core Job (it waits for a
    # spec change and needs no room: the lower bound stays ceil((4 + 10 - 4) / 4) = 3). The
    # search: 3 (all placed), 0 + 1 = 1 (six left), the middle 2 (j8 and j9 left). Four
    # plans; asked again, the same answer and the same four. A count in the question is
    # what auto replaces: 3 copies asked for change nothing.
    typo = workload("typo", kind="Job", resources={"cpu": "8"}, constraints=['node.cpu == "x"'])
    whatif = what_if([node("n0")], full_n0(typo, *one_core_jobs(10)))
    for _ in range(2):
        capacity, answer = whatif.smallest_count(Question(template=node("big"), count=3))
        assert (capacity.template, capacity.count, capacity.tried, capacity.plans) == (
            "big",
            3,
            3,
            4,
        )
        assert capacity.proof == (
            "with 2, shop/j8-0 has no place: 0/3 nodes are available: 3 Insufficient cpu."
        )
        assert answer.added == ("big-1", "big-2", "big-3") and answer.settled


def test_the_lower_bound_leaves_out_the_drained_nodes_room() -> None:
    # a1 (16 cores, drained) holds x0..x3 (3 cores each); b1 (4) holds y (3). Each displaced
    # Job takes a 4-core copy of its own (b1 keeps 1 core free): 4 copies. The lower bound
    # counts b1's 4 cores only: ceil((15 - 4) / 4) = 3 (x3 left); the secant through (0, 4
    # left) and (3, 1 left) says 1 a node: 3 + 1 = 4, enough and adjacent. Three plans.
    x = [
        workload(f"x{i}", kind="Job", resources={"cpu": "3"}, status=placed_on((f"x{i}-0", "a1")))
        for i in range(4)
    ]
    y = workload("y", kind="Job", resources={"cpu": "3"}, status=placed_on(("y-0", "b1")))
    whatif = what_if([node("a1", cpu="16"), node("b1")], [*x, y])
    capacity, _ = whatif.smallest_count(Question(frozenset({"a1"}), node("big")))
    assert (capacity.count, capacity.tried, capacity.plans) == (4, 4, 3)
    assert capacity.proof == (
        "with 3, shop/x3-0 has no place: 0/4 nodes are available: 4 Insufficient cpu."
    )


def test_the_lower_bound_counts_no_room_on_a_node_booked_past_its_size() -> None:
    # n0 (4 cores) books 8 for hog, n1 (4) 4 for snug, neither planned: no room on either,
    # and n0's overbooking takes none from n2's 4 free cores. Waiting: twelve 1-core Jobs and
    # tiny (1 millicore): 12001m against 4000m, so ceil(8001 / 4000) = 3 copies at least,
    # and 3 places all (2 leave tiny). The search: 3, then 1 (j8..j11 and tiny left), the
    # middle 2: four plans.
    ledger = ledger_from_statuses([node("n0"), node("n1"), node("n2")], [])
    ledger.load("shop/hog", [Booking("n0", "shop/hog-0", 8000, 0)])
    ledger.load("shop/snug", [Booking("n1", "shop/snug-0", 4000, 0)])
    tiny = workload("tiny", kind="Job", resources={"cpu": "1m"})
    whatif = WhatIf(ledger, [*one_core_jobs(12), tiny], now=NOW)
    capacity, _ = whatif.smallest_count(Question(template=node("big")))
    assert (capacity.count, capacity.tried, capacity.plans) == (3, 3, 4)
    assert capacity.proof == (
        "with 2, shop/tiny-0 has no place: 0/5 nodes are available: 5 Insufficient cpu."
    )


def test_the_lower_bound_in_memory_counts_every_replica_and_the_daemonsets_share() -> None:
    # Memory only (no cpu asked). n0 (4Gi) books 8Gi for hog, n1 (4Gi) 4Gi for snug, neither
    # planned: no room. agent (a DaemonSet of 1Gi, only on the copies) leaves 3Gi of each
    # 4Gi copy. Waiting: web (a Service of 2 x 1Gi), j0..j3 (1Gi each), tiny (1 byte):
    # 6Gi + 1 byte, so ceil((6Gi + 1) / 3Gi) = 3 copies at least, and 3 place all (2 leave
    # tiny). The search: 3, then 1 (j1..j3 and tiny left), the middle 2: four plans.
    ledger = ledger_from_statuses([node("n0", memory="4Gi"), node("n1", memory="4Gi")], [])
    ledger.load("shop/hog", [Booking("n0", "shop/hog-0", 0, 8 * GiB)])
    ledger.load("shop/snug", [Booking("n1", "shop/snug-0", 0, 4 * GiB)])
    agent = workload(
        "agent",
        kind="DaemonSet",
        resources={"memory": "1Gi"},
        constraints=['node.hostname.startsWith("big")'],
    )
    web = workload("web", kind="Service", count=2, resources={"memory": "1Gi"})
    jobs = [workload(f"j{i}", kind="Job", resources={"memory": "1Gi"}) for i in range(4)]
    tiny = workload("tiny", kind="Job", resources={"memory": "1"})
    whatif = WhatIf(ledger, [agent, web, *jobs, tiny], now=NOW)
    capacity, _ = whatif.smallest_count(Question(template=node("big", memory="4Gi")))
    assert (capacity.count, capacity.tried, capacity.plans) == (3, 3, 4)
    assert capacity.proof == (
        "with 2, shop/tiny-0 has no place: 0/4 nodes are available: 4 Insufficient memory."
    )


def test_the_lower_bound_of_a_one_millicore_template() -> None:
    # Four 1m Jobs wait, n0 is full, a copy has 1 millicore: the lower bound is
    # ceil((4004 - 4000) / 1) = 4, all placed. The search: 4, the middle 2 (two left), the
    # secant through (0, 4) and (2, 2) says 2 + 2 = 4, moved inside the bracket: 3 (one
    # left). Four plans.
    whatif = what_if([node("n0")], full_n0(*one_core_jobs(4, cpu="1m")))
    capacity, _ = whatif.smallest_count(Question(template=node("big", cpu="1m")))
    assert (capacity.count, capacity.tried, capacity.plans) == (4, 4, 4)


# -- the search's rule, step by step (``smallest_count`` plans each probe it makes) ----------


def leaving(waiting: int) -> Answer:
    """An answer that leaves ``waiting`` replicas without a place: all the search reads."""
    unplaced = tuple(Unplaced("shop/j", f"shop/j-{i}", None, "no room") for i in range(waiting))
    return Answer(Question(), [], (), unplaced, (), (), 0)


def search_from(waiting: int, cap: int = 100) -> _Search:
    """The search after the plan without added nodes left ``waiting`` replicas."""
    return _Search(0, leaving(waiting).unplaced, cap)


def test_the_search_probes_where_the_waiting_run_out_at_the_last_nodes_rate() -> None:
    # The secant through the last two failing points. (0, 10 left) and (4, 6 left): one
    # replica a node, so 6 more nodes: 10.
    search = search_from(10)
    search.record(4, leaving(6))
    assert search.next_probe() == 10
    # (4, 6 left) and (6, 3 left): 1.5 a node, 3 / 1.5 = 2 more: 8.
    search.record(6, leaving(3))
    assert search.next_probe() == 8
    # (4, 6 left) and (5, 4 left): the one node between placed 2, 4 / 2 = 2 more: 7.
    search = search_from(10)
    search.record(4, leaving(6))
    search.record(5, leaving(4))
    assert search.next_probe() == 7


def test_the_search_doubles_its_step_when_the_last_nodes_placed_nothing() -> None:
    search = search_from(10)
    search.record(4, leaving(10))  # from 0 to 4, nothing placed: the step of 4 doubled
    assert search.next_probe() == 12
    search = search_from(10)
    search.record(1, leaving(10))  # a step of 1: 1 + 2
    assert search.next_probe() == 3
    search.record(3, leaving(10))  # a step of 2 (from 1): 3 + 4
    assert search.next_probe() == 7


def test_the_search_bisects_after_a_probe_that_did_not_halve_the_bracket() -> None:
    # 10 wait without added nodes, the cap is 100: the bracket is 0..101 (nothing enough yet).
    search = search_from(10)
    assert search.clamp(16) == 16
    search.record(16, leaving(2))  # 0..101 became 16..101
    assert search.clamp(70) == 70  # the bracket 85 wide before this probe
    search.record(70, leaving(0))  # 16..70: 54 wide, more than half of 85: its middle
    assert search.next_probe() == 43
    # Here the probe halves it: the secant again. (0, 10 left), (32, 2 left): a quarter
    # of a replica a node, 2 / 0.25 = 8 more: 40, moved strictly inside 32..40: 39.
    search = search_from(10)
    search.clamp(32)
    search.record(32, leaving(2))
    assert search.clamp(40) == 40  # 69 wide before (32..101)
    search.record(40, leaving(0))  # 32..40: 8 wide, not more than half of 69
    assert search.next_probe() == 40 and search.clamp(40) == 39
    # Exactly half is not more than half: cap 9 (0..10), 5 places all (0..5: 5 of 10). No
    # failing point but 0, so no secant: 0 + 1.
    search = search_from(10, cap=9)
    assert search.clamp(5) == 5
    search.record(5, leaving(0))
    assert search.next_probe() == 1


def test_the_no_count_line_keeps_the_reason_whole_but_its_final_period() -> None:
    # A constraint no Node passes, ending in a label key X: the reason quotes it, and the
    # line drops the message's final period only (not the X before it).
    never = "node.labels.X != node.labels.X"
    odd = workload("odd", kind="Job", constraints=[never])
    whatif = what_if([node("n0", labels={"X": "a"})], [odd])
    capacity, _ = whatif.smallest_count(Question(template=node("big", labels={"X": "a"})))
    reason = f"node(s) didn't match constraint {never}"
    assert capacity.why == (
        f"shop/odd-0 still has no place with 1: 0/2 nodes are available: 2 {reason}; "
        f"a big node cannot take it: {reason} (CelConstraints)"
    )


def test_auto_when_nothing_waits_adds_nothing_and_exits_0(tmp_path: Path, orca: Orca) -> None:
    """Every replica has a place: ``auto`` answers 0 nodes, and that is an answer found (exit
    0), not a count it could not find (exit 1)."""
    nodes, workloads = full_cluster(tmp_path, [])
    code, answer, _ = plan(
        orca, nodes, workloads, "--add-nodes", f"{template(tmp_path)}:auto", "-o", "json"
    )
    assert code == 0
    assert answer["nodesToAdd"]["count"] == 0
    assert answer["nodesToAdd"]["names"] == []


def test_a_template_path_may_hold_colons(tmp_path: Path, orca: Orca) -> None:
    """The last colon splits FILE from COUNT (a path such as ``C:/nodes/big.yaml`` or
    ``nodes:v2/big.yaml`` keeps its own)."""
    pending = [wl("j", kind="Job", resources={"cpu": "1"})]
    nodes, workloads = full_cluster(tmp_path, pending)
    folder = tmp_path / "nodes:v2"
    folder.mkdir()
    big = write(folder, "big.yaml", [zone_node("big", "b")])
    code, answer, _ = plan(orca, nodes, workloads, "--add-nodes", f"{big}:1", "-o", "json")
    assert code == 0
    assert answer["nodesToAdd"]["names"] == ["big-1"]
    assert parse_add_nodes("a:b:c.yaml:auto") == AddNodes(Path("a:b:c.yaml"), None)


@pytest.mark.parametrize(
    ("text", "count"),
    [("big.yaml:0", 0), ("big.yaml:1", 1), (f"big.yaml:{MAX_ADDED_NODES}", MAX_ADDED_NODES)],
)
def test_a_count_takes_both_ends_of_its_range(text: str, count: int) -> None:
    assert parse_add_nodes(text) == AddNodes(Path("big.yaml"), count)
    with pytest.raises(ValueError, match=r"out of range \(0\.\.10000\)"):
        parse_add_nodes(f"big.yaml:{MAX_ADDED_NODES + 1}")
    with pytest.raises(ValueError, match="is not FILE:COUNT or FILE:auto"):
        parse_add_nodes(":3")


def test_the_json_answer_names_each_replica_its_workload_and_who_preempted_it(
    tmp_path: Path, orca: Orca
) -> None:
    # a1 has 8 cores, b1 4, c1 2. a1 holds critical (priority 1000, 3 cores) and big (5);
    # b1 holds batch (2). Draining a1, critical goes first: 2 cores free on b1 and c1, so it
    # preempts batch on b1, and batch moves to c1. big then fits nowhere (1 core left on b1,
    # none on c1).
    nodes = write(
        tmp_path,
        "nodes.yaml",
        [zone_node("a1", "a", cpu="8"), zone_node("b1", "b"), zone_node("c1", "c", cpu="2")],
    )
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            HIGH,
            wl(
                "critical",
                placed={0: "a1"},
                kind="Job",
                resources={"cpu": "3"},
                priorityClassName="high",
            ),
            wl("batch", placed={0: "b1"}, kind="Job", resources={"cpu": "2"}),
            wl("big", placed={0: "a1"}, kind="Job", resources={"cpu": "5"}),
        ],
    )
    code, answer, _ = plan(orca, nodes, workloads, "--drain", "a1", "-o", "json")
    assert code == 1
    assert answer["moved"] == [
        {
            "workload": "shop/batch",
            "allocId": "shop/batch-0",
            "from": "b1",
            "to": "c1",
            "preemptedBy": "shop/critical",
        },
        {"workload": "shop/critical", "allocId": "shop/critical-0", "from": "a1", "to": "b1"},
    ]
    [big] = answer["unplaced"]
    assert set(big) == {"workload", "allocId", "from", "reason"}
    assert (big["workload"], big["allocId"], big["from"]) == ("shop/big", "shop/big-0", "a1")
    assert "Insufficient cpu" in big["reason"]
