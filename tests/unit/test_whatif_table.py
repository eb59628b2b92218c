"""``orca plan --drain`` and ``--add-nodes`` as a table, the way an operator reads the answer
before a maintenance window: a section per kind of outcome (DRAIN, MOVED, UNPLACED, ENDED,
BUDGETS, NODES TO ADD), each with its header and one row per replica, long lists cut at 50
rows with a line that says how many more ``-o json`` lists, then one summary line.
``tests/unit/test_whatif.py`` checks the answers themselves (in JSON); this checks how the
table says them. Cells are compared with their padding collapsed: the column widths are
``write_table``'s (``tests/unit/test_cli_table.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Orca, write
from tests.support.factories import node_object
from tests.support.factories import workload_obj as wl
from tests.unit.test_whatif import HIGH

ZONE = "topology.kubernetes.io/zone"
NOW = "2026-12-01T10:00:00Z"


def zone_node(name: str, zone: str, cpu: str = "4") -> dict[str, Any]:
    return node_object(name, cpu=cpu, memory="8Gi", labels={ZONE: zone})


def table(orca: Orca, nodes: Path, workloads: Path, *args: str) -> tuple[int, list[str]]:
    """The answer's lines with each run of blanks made one (the table's padding)."""
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", workloads, "--now", NOW, *args)
    assert code in (0, 1), err
    return code, [" ".join(line.split()) for line in out.splitlines()]


def planned(
    orca: Orca, tmp_path: Path, nodes: list[Any], workloads: list[Any], *args: str
) -> tuple[int, list[str]]:
    """``table`` on these Nodes and Workloads, written to files first."""
    return table(
        orca,
        write(tmp_path, "nodes.yaml", nodes),
        write(tmp_path, "workloads.yaml", workloads),
        *args,
    )


def section(lines: list[str], heading: str) -> list[str]:
    """The lines of the section that starts with ``heading`` (heading excluded), up to the
    blank line that ends it."""
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return lines[start + 1 : end]


def test_a_zone_drain_says_each_outcome_in_its_own_section(tmp_path: Path, orca: Orca) -> None:
    # Zone a: d01..d11, zone b: k1; 4 cores each. Draining zone a displaces, in file order:
    # web-0 (1 core) -> k1; db-0 (2 cores) -> k1, leaving k1 0.9 cores (agent holds 100m);
    # db-1 and big-0 (4 cores) find no place; agent-0, the DaemonSet's replica on d05, ends.
    # db's budget (minAvailable 2) is left with 1 replica of the 2 it needs.
    nodes = [zone_node(f"d{i:02}", "a") for i in range(1, 12)] + [zone_node("k1", "b")]
    workloads = [
        wl("web", placed={0: "d01"}, kind="Job", resources={"cpu": "1"}),
        wl(
            "db",
            placed={0: "d02", 1: "d03"},
            kind="Service",
            count=2,
            resources={"cpu": "2"},
            disruption={"minAvailable": 2},
        ),
        wl("big", placed={0: "d04"}, kind="Job", resources={"cpu": "4"}),
        wl("agent", placed={0: "d05", 1: "k1"}, kind="DaemonSet", resources={"cpu": "100m"}),
    ]
    code, lines = planned(orca, tmp_path, nodes, workloads, "--drain", f"{ZONE}=a")
    assert code == 1  # some replica finds no place
    # Eleven drained nodes: the first ten by name, then how many more.
    names = ", ".join(f"d{i:02}" for i in range(1, 11))
    assert f"DRAIN 11 node(s): {names} and 1 more" in lines
    assert section(lines, "MOVED (2)") == [
        "REPLICA FROM TO NOTE",
        "shop/db-0 d02 k1",
        "shop/web-0 d01 k1",
    ]
    no_cpu = "0/1 nodes are available: 1 Insufficient cpu."
    assert section(lines, "UNPLACED (2)") == [
        "REPLICA FROM REASON",
        f"shop/big-0 d04 {no_cpu}",
        f"shop/db-1 d03 1/2 replicas placed; {no_cpu}",
    ]
    assert section(lines, "ENDED: DaemonSet replicas on drained nodes (1)") == [
        "REPLICA NODE",
        "shop/agent-0 d05",
    ]
    assert section(lines, "BUDGETS: Workloads left below their budget (1)") == [
        "WORKLOAD BUDGET KEEPS NEEDS",
        "shop/db minAvailable 2 1 2",
    ]
    assert lines[-1] == (
        "4 replica(s) displaced, 2 moved; 1 DaemonSet replica(s) end; 2 find no place; "
        "1 Workload(s) below their budget"
    )
    assert not any(line.startswith("... and") for line in lines)  # no section was cut


def test_ten_drained_nodes_are_all_named(tmp_path: Path, orca: Orca) -> None:
    nodes = [zone_node(f"d{i:02}", "a") for i in range(1, 11)] + [zone_node("k1", "b")]
    workloads = [wl("web", placed={0: "d01"}, kind="Job", resources={"cpu": "1"})]
    code, lines = planned(orca, tmp_path, nodes, workloads, "--drain", f"{ZONE}=a")
    assert code == 0
    names = ", ".join(f"d{i:02}" for i in range(1, 11))
    assert f"DRAIN 10 node(s): {names}" in lines
    assert section(lines, "MOVED (1)") == ["REPLICA FROM TO NOTE", "shop/web-0 d01 k1"]
    # Nothing else happened: no section for it.
    assert not [line for line in lines if line.startswith(("UNPLACED", "ENDED", "BUDGETS"))]
    assert lines[-1] == "1 replica(s) displaced, 1 moved; every replica has a place"


def test_a_replica_moved_because_it_was_preempted_says_by_whom(tmp_path: Path, orca: Orca) -> None:
    # a1 and b1 have 4 cores, c1 2. critical (priority 1000, 3 cores) on a1, batch (2 cores) on
    # b1. Draining a1, critical fits nowhere (2 cores free on b1 and c1) but preempts batch on
    # b1; batch then moves to c1. Both moved; batch's note says why it moved.
    nodes = [zone_node("a1", "a"), zone_node("b1", "b"), zone_node("c1", "c", cpu="2")]
    workloads = [
        HIGH,
        wl(
            "critical",
            placed={0: "a1"},
            kind="Job",
            resources={"cpu": "3"},
            priorityClassName="high",
        ),
        wl("batch", placed={0: "b1"}, kind="Job", resources={"cpu": "2"}),
    ]
    code, lines = planned(orca, tmp_path, nodes, workloads, "--drain", "a1")
    assert code == 0
    assert "DRAIN 1 node(s): a1" in lines
    assert section(lines, "MOVED (2)") == [
        "REPLICA FROM TO NOTE",
        "shop/batch-0 b1 c1 preempted by shop/critical",
        "shop/critical-0 a1 b1",
    ]


def test_a_long_section_lists_fifty_rows_and_says_how_many_more(tmp_path: Path, orca: Orca) -> None:
    # 52 one-core Jobs on d1 move to k1 (64 cores): 50 rows, then the two the table leaves out.
    nodes = [zone_node("d1", "a", cpu="64"), zone_node("k1", "b", cpu="64")]
    workloads = [
        wl(f"j{i:02}", placed={0: "d1"}, kind="Job", resources={"cpu": "1"}) for i in range(52)
    ]
    code, lines = planned(orca, tmp_path, nodes, workloads, "--drain", "d1")
    assert code == 0
    moved = section(lines, "MOVED (52)")
    assert moved[0] == "REPLICA FROM TO NOTE"
    assert moved[1:51] == [f"shop/j{i:02}-0 d1 k1" for i in range(50)]
    assert moved[51:] == ["... and 2 more (-o json lists them all)"]


def test_the_nodes_to_add_line_names_the_copies_and_how_the_count_was_found(
    tmp_path: Path, orca: Orca
) -> None:
    # n0 (4 cores) is full; seven 4-core Jobs wait; a 4-core template. A fixed count of 7
    # places them all: the copies are named, the first five then the last. auto finds the
    # same 7 as the smallest count, with its proof and how many plans it took.
    nodes = write(tmp_path, "nodes.yaml", [zone_node("n0", "a")])
    full = wl("full", placed={0: "n0"}, kind="Job", resources={"cpu": "4"})
    pending = [wl(f"j{i}", kind="Job", resources={"cpu": "4"}) for i in range(7)]
    workloads = write(tmp_path, "workloads.yaml", [full, *pending])
    big = write(tmp_path, "big.yaml", [zone_node("big", "b")])

    code, lines = table(orca, nodes, workloads, "--add-nodes", f"{big}:7")
    assert code == 0
    assert section(lines, "NODES TO ADD") == [
        "7 x big (big-1, big-2, big-3, big-4, big-5 ... big-7)"
    ]
    assert lines[-1] == "every replica has a place"

    # Six copies: the sixth is both the first after five and the last; j6 still waits, and a
    # replica that was pending before the question says so where it came from.
    code, lines = table(orca, nodes, workloads, "--add-nodes", f"{big}:6")
    assert code == 1
    assert section(lines, "NODES TO ADD") == [
        "6 x big (big-1, big-2, big-3, big-4, big-5 ... big-6)"
    ]
    assert section(lines, "UNPLACED (1)") == [
        "REPLICA FROM REASON",
        "shop/j6-0 (pending) 0/7 nodes are available: 7 Insufficient cpu.",
    ]
    assert lines[-1] == "1 find no place"

    code, lines = table(orca, nodes, workloads, "--add-nodes", f"{big}:auto")
    assert code == 0
    # The proof: with one copy fewer, the last Job in the plan's order (j6) finds no place
    # on n0 or the six copies, all full.
    [line] = section(lines, "NODES TO ADD")
    start = "7 x big (big-1, big-2, big-3, big-4, big-5 ... big-7): the smallest count; "
    proof = "with 6, shop/j6-0 has no place: 0/7 nodes are available: 7 Insufficient cpu."
    assert line.startswith(start + proof + " ("), line
    plans = line.removeprefix(start + proof + " (")
    assert plans.endswith(" plans)") and int(plans.removesuffix(" plans)")) >= 2


def test_five_copies_are_all_named_and_none_needed_says_so(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [zone_node("n0", "a")])
    full = wl("full", placed={0: "n0"}, kind="Job", resources={"cpu": "4"})
    pending = [wl(f"j{i}", kind="Job", resources={"cpu": "4"}) for i in range(5)]
    big = write(tmp_path, "big.yaml", [zone_node("big", "b")])
    code, lines = table(
        orca, nodes, write(tmp_path, "workloads.yaml", [full, *pending]), "--add-nodes", f"{big}:5"
    )
    assert code == 0
    assert section(lines, "NODES TO ADD") == ["5 x big (big-1, big-2, big-3, big-4, big-5)"]

    # Nothing waits: auto needs no copy, and the line says it without naming any.
    code, lines = table(
        orca, nodes, write(tmp_path, "placed.yaml", [full]), "--add-nodes", f"{big}:auto"
    )
    assert code == 0
    # One plan: the question without any copy, which places everything already.
    assert section(lines, "NODES TO ADD") == ["0 x big: none needed (1 plans)"]


@pytest.mark.parametrize(
    ("jobs", "more"), [(51, []), (52, ["... and 1 more (-o json lists them all)"])]
)
def test_every_long_section_is_cut_at_fifty_rows(
    tmp_path: Path, orca: Orca, jobs: int, more: list[str]
) -> None:
    # d00..d51 (zone a) and k1 (zone b), 2 cores each, each running the DaemonSet agent
    # (10m); a 1-core Job on each of the first ``jobs`` d nodes. Draining zone a: one Job
    # moves to k1 (1.99 cores free, then 0.99), the others find no place: 50 are all listed,
    # 51 are 50 and a line; 52 agent replicas end: 50 listed.
    drained = [f"d{i:02}" for i in range(52)]
    nodes = [zone_node(name, "a", cpu="2") for name in drained] + [zone_node("k1", "b", cpu="2")]
    agent = wl(
        "agent",
        placed=dict(enumerate([*drained, "k1"])),
        kind="DaemonSet",
        resources={"cpu": "10m"},
    )
    placed = [
        wl(f"j{i:02}", placed={0: d}, kind="Job", resources={"cpu": "1"})
        for i, d in enumerate(drained[:jobs])
    ]
    code, lines = planned(orca, tmp_path, nodes, [agent, *placed], "--drain", f"{ZONE}=a")
    assert code == 1
    unplaced = section(lines, f"UNPLACED ({jobs - 1})")
    assert unplaced[0] == "REPLICA FROM REASON"
    assert len(unplaced) == 1 + 50 + len(more)
    assert all(row.startswith("shop/j") for row in unplaced[1:51])
    assert unplaced[51:] == more
    ended = section(lines, "ENDED: DaemonSet replicas on drained nodes (52)")
    assert ended[0] == "REPLICA NODE"
    assert ended[1:51] == [f"shop/agent-{i} d{i:02}" for i in range(50)]
    assert ended[51:] == ["... and 2 more (-o json lists them all)"]


@pytest.mark.parametrize(
    ("services", "more"), [(50, []), (52, ["... and 2 more (-o json lists them all)"])]
)
def test_the_budgets_section_is_cut_at_fifty_rows_too(
    tmp_path: Path, orca: Orca, services: int, more: list[str]
) -> None:
    # One-replica Services on d1, each with minAvailable 1; d1 drained and nothing else to
    # go to: every one keeps 0 of the 1 it needs. 50 are all listed; 52 are 50 and a line.
    workloads = [
        wl(
            f"s{i:02}",
            placed={0: "d1"},
            kind="Service",
            count=1,
            resources={"cpu": "1"},
            disruption={"minAvailable": 1},
        )
        for i in range(services)
    ]
    code, lines = planned(
        orca, tmp_path, [zone_node("d1", "a", cpu="64")], workloads, "--drain", "d1"
    )
    assert code == 1
    budgets = section(lines, f"BUDGETS: Workloads left below their budget ({services})")
    assert budgets[0] == "WORKLOAD BUDGET KEEPS NEEDS"
    rows = budgets[1:51]
    assert len(set(rows)) == len(rows) == 50
    assert all(row.startswith("shop/s") and row.endswith(" minAvailable 1 0 1") for row in rows)
    assert budgets[51:] == more


def test_the_plan_table_has_a_row_for_each_workload_the_what_if_changes(
    tmp_path: Path, orca: Orca
) -> None:
    # a1, b1: 4 cores; c1: 2; d1: 1, held by calm. web (1 core) on a1, batch (3 cores) on b1;
    # urgent (priority 1000, 4 cores) waits. Draining a1: urgent, planned first, fits only
    # where batch is and preempts it (it has victims, and moved nowhere); batch then finds
    # no place (unplaced, preempted); web moves to c1. calm is untouched: no row.
    nodes = [
        zone_node("a1", "a"),
        zone_node("b1", "b"),
        zone_node("c1", "c", cpu="2"),
        zone_node("d1", "d", cpu="1"),
    ]
    workloads = [
        HIGH,
        wl("web", placed={0: "a1"}, kind="Job", resources={"cpu": "1"}),
        wl("batch", placed={0: "b1"}, kind="Job", resources={"cpu": "3"}),
        wl("calm", placed={0: "d1"}, kind="Job", resources={"cpu": "1"}),
        wl("urgent", kind="Job", resources={"cpu": "4"}, priorityClassName="high"),
    ]
    code, lines = planned(orca, tmp_path, nodes, workloads, "--drain", "a1")
    assert code == 1  # batch finds no place
    assert section(lines, "MOVED (1)") == ["REPLICA FROM TO NOTE", "shop/web-0 a1 c1"]
    assert section(lines, "UNPLACED (1)")[1].startswith("shop/batch-0 b1 ")
    plan_table = lines[: lines.index("")]  # the plan's table comes first
    assert plan_table[0].split()[0] == "WORKLOAD"
    assert sorted(row.split()[0] for row in plan_table[1:]) == [
        "shop/batch",
        "shop/urgent",
        "shop/web",
    ]


def test_a_what_if_plans_at_the_given_time(tmp_path: Path, orca: Orca) -> None:
    """``--now`` is the what-if's clock as it is the plan's: the conditions that change are
    dated with it, so the same files and ``--now`` answer the same."""
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    workloads = [wl("web", placed={0: "a1"}, kind="Job", resources={"cpu": "1"})]
    code, out, err = orca(
        "plan",
        "--nodes",
        write(tmp_path, "nodes.yaml", nodes),
        "--workloads",
        write(tmp_path, "workloads.yaml", workloads),
        "--drain",
        "a1",
        "--now",
        NOW,
        "-o",
        "json",
    )
    assert (code, err) == (0, "")
    (result,) = json.loads(out)["results"]
    assert [p["node"] for p in result["placements"]] == ["b1"]
    times = {c["type"]: c["lastTransitionTime"] for c in result["conditions"]}
    assert times == {"Ready": NOW, "Scheduled": NOW}
