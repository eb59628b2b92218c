"""The ledger's assume/confirm/forget and the status built from a decision."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.models import MAX_SCALED_QUANTITY, Phase, Workload, WorkloadStatus
from controller.scheduler.decision import Decision
from controller.scheduler.ledger import (
    Booking,
    Ledger,
    bookings_from_object,
    bookings_from_status,
    gives_back,
    held_until_written,
    ledger_from_objects,
)
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.status import nodes_summary, status_from_decision
from tests.support.factories import NOW, node
from tests.support.properties import examples


def test_assume_books_and_forget_restores() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    ledger.load("ns/w", [Booking("a", "ns/w-0", 1000, 0)])
    assumption = ledger.assume(
        "ns/w", [Booking("a", "ns/w-0", 1000, 0), Booking("a", "ns/w-1", 1000, 0)]
    )
    assert int(ledger.used_cpu[0]) == 2000
    assert int(ledger.replicas[0]) == 2
    ledger.forget(assumption)
    assert int(ledger.used_cpu[0]) == 1000
    ledger.forget(assumption)  # idempotent
    assert int(ledger.used_cpu[0]) == 1000
    assert int(ledger.replicas[0]) == 1


def walked(ledger: Ledger, node_name: str) -> set[str]:
    """The oracle: who has a replica on ``node_name``, by walking every booking."""
    return {
        key
        for key in ledger.workload_keys()
        if any(b.node == node_name for b in ledger.bookings(key))
    }


def test_the_node_index_follows_every_way_a_booking_changes() -> None:
    """``keys_on`` (what a Node change queues) is what walking every booking finds, through
    loads, moves, assumptions forgotten and held, removals, copies and nodes that left."""
    ledger = Ledger(NodeTable([node("a", cpu="8"), node("b", cpu="8")]))
    ledger.load("ns/w", [Booking("a", "ns/w-0", 1, 0), Booking("a", "ns/w-1", 1, 0)])
    ledger.load("ns/v", [Booking("b", "ns/v-0", 1, 0)])
    moved = ledger.assume("ns/w", [Booking("a", "ns/w-0", 1, 0), Booking("b", "ns/w-1", 1, 0)])
    assert ledger.keys_on("a") == {"ns/w"} and ledger.keys_on("b") == {"ns/v", "ns/w"}
    ledger.forget(moved)  # both back on a
    assert ledger.keys_on("b") == {"ns/v"}
    held = ledger.assume("ns/v", [Booking("a", "ns/v-0", 1, 0)])
    ledger.hold(held)  # both outcomes booked: a and b
    assert ledger.keys_on("a") == {"ns/w", "ns/v"} and ledger.keys_on("b") == {"ns/v"}
    scratch = ledger.copy()
    scratch.remove("ns/w")
    assert ledger.keys_on("a") == {"ns/w", "ns/v"}  # the copy's index is its own
    ledger.rebind(NodeTable([node("a", cpu="8")]))  # b left the table: its bookings stay
    ledger.remove("ns/v")
    assert ledger.keys_on("b") == set() and ledger.keys_on("gone") == set()
    for name in ("a", "b"):
        assert ledger.keys_on(name) == walked(ledger, name)
        assert scratch.keys_on(name) == walked(scratch, name)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.integers(0, 4000), st.integers(0, 1 << 33)),
        max_size=12,
    ),
    st.sets(st.sampled_from("abcdefx")),
    st.booleans(),
)
def test_nodes_leaving_keep_each_remaining_nodes_usage_as_counted_anew(
    placed: list[tuple[str, int, int]], gone: set[str], how: bool
) -> None:
    """Usage per node is the sum of the bookings on it: after nodes left (``rebind`` to a
    table without them, or ``what_if(remove=...)``), each remaining node's is what a ledger
    built on the remaining nodes from the same bookings counts."""
    nodes = [node(n, cpu="8", memory="64Gi") for n in "abcdef"]
    ledger = Ledger(NodeTable(nodes))
    for i, (where, cpu, memory) in enumerate(placed):
        ledger.load(f"ns/w{i}", [Booking(where, f"ns/w{i}-0", cpu, memory, 0)])
    remaining = NodeTable(n for n in nodes if n.hostname not in gone)
    anew = Ledger(remaining)
    for i, (where, cpu, memory) in enumerate(placed):
        anew.load(f"ns/w{i}", [Booking(where, f"ns/w{i}-0", cpu, memory, 0)])
    if how:
        ledger = ledger.what_if(remove=gone)
    else:
        ledger.rebind(remaining)
    assert ledger.table.hostnames == remaining.hostnames
    assert usage(ledger) == usage(anew)


def usage(ledger: Ledger) -> dict[str, Any]:
    """Every per-node column a ledger keeps (each array attribute, and each array in a mapping
    of them), as lists: a column added to ``Ledger`` later is compared too."""
    out: dict[str, Any] = {}
    for name, value in vars(ledger).items():
        if isinstance(value, np.ndarray):
            out[name] = value.tolist()
        elif isinstance(value, dict) and all(isinstance(v, np.ndarray) for v in value.values()):
            out[name] = {k: v.tolist() for k, v in value.items() if v.any()}
    return out


def test_the_journal_names_every_row_whose_usage_changed_between_two_positions() -> None:
    """``position`` and ``rows_changed``: each way usage changes (load, assume, forget,
    remove) notes its rows; the rows between two positions are the same in either order; a
    rebind that keeps the rows keeps the journal, one that moves them starts a new epoch (a
    row number means another node there), as does a copy (its own journal): ``None``, read
    every row."""
    ledger = Ledger(NodeTable([node(n, cpu="4") for n in "abcd"]))
    start = ledger.position
    ledger.load("ns/w", [Booking("b", "ns/w-0", 100, 0)])
    loaded = ledger.position
    assumption = ledger.assume("ns/w", [Booking("c", "ns/w-0", 100, 0)])
    ledger.forget(assumption)
    ledger.load("ns/x", [Booking("gone", "ns/x-0", 100, 0)])  # on no node of the table
    ledger.remove("ns/w")
    end = ledger.position
    assert ledger.rows_changed(start, loaded) == [1]
    assert sorted(set(ledger.rows_changed(loaded, end) or ())) == [1, 2]
    assert ledger.rows_changed(end, start) == ledger.rows_changed(start, end)
    assert ledger.rows_changed(end, end) == []
    ledger.rebind(ledger.table.replaced([node("a", cpu="8")]))  # same rows
    assert ledger.rows_changed(start, ledger.position) == ledger.rows_changed(start, end)
    ledger.rebind(NodeTable([node(n, cpu="4") for n in "acd"]))  # b left: the rows moved
    assert ledger.rows_changed(start, ledger.position) is None
    assert ledger.rows_changed(end, end) is None
    copy = ledger.copy()
    assert copy.rows_changed(ledger.position, copy.position) is None
    assert copy.rows_changed(copy.position, copy.position) == []


def test_free_capacity_follows_every_booking_and_every_table() -> None:
    """The free cpu, memory and Pods the ledger keeps row by row are allocatable less the
    usage after every change: bookings, a node's allocatable changed in place (the same
    rows), nodes gone, a new node; a copy's are its own, and a cycle's copy too."""
    ledger = Ledger(
        NodeTable([node(n, cpu="4", memory="8Gi", allocatable={"pods": "10"}) for n in "abc"])
    )

    def agrees() -> None:
        free_cpu, free_memory = ledger.free()
        table = ledger.table
        assert free_cpu.tolist() == (table.cpu - ledger.used_cpu).tolist()
        assert free_memory.tolist() == (table.memory - ledger.used_memory).tolist()
        assert ledger.free_pods().tolist() == (table.pods - ledger.replicas).tolist()

    ledger.load("ns/w", [Booking("a", "ns/w-0", 1000, 2**30), Booking("b", "ns/w-1", 500, 0)])
    agrees()
    assumption = ledger.assume("ns/w", [Booking("c", "ns/w-0", 1000, 2**30)])
    agrees()
    ledger.forget(assumption)
    agrees()
    ledger.rebind(
        ledger.table.replaced([node("a", cpu="8", memory="8Gi", allocatable={"pods": "10"})])
    )
    agrees()
    assert ledger.free()[0].tolist() == [7000, 3500, 4000]
    ledger.rebind(
        NodeTable([node(n, cpu="4", memory="8Gi", allocatable={"pods": "10"}) for n in "ab"])
    )
    agrees()
    ledger.rebind(
        NodeTable([node(n, cpu="4", memory="8Gi", allocatable={"pods": "10"}) for n in "abd"])
    )
    agrees()
    copy = ledger.copy()
    copy.load("ns/x", [Booking("d", "ns/x-0", 4000, 0)])
    agrees()
    assert copy.free()[0].tolist() == [3000, 3500, 0]
    mine, _ = ledger.free()
    mine[0] = -1  # the caller's own copy
    agrees()


def test_forget_never_undoes_a_newer_decision() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    old = ledger.assume("ns/w", [Booking("a", "ns/w-0", 1000, 0)])
    ledger.assume("ns/w", [Booking("a", "ns/w-0", 3000, 0)])
    ledger.forget(old)
    assert int(ledger.used_cpu[0]) == 3000


def test_confirmed_assumption_is_not_forgotten() -> None:
    ledger = Ledger(NodeTable([node("a")]))
    assumption = ledger.assume("ns/w", [Booking("a", "ns/w-0", 500, 0)])
    ledger.confirm(assumption)
    ledger.forget(assumption)
    assert int(ledger.used_cpu[0]) == 500


def test_an_assumption_is_assumed_until_settled_once() -> None:
    """``assumed`` is the one record of a write in flight: set by ``assume``, cleared by the
    first of confirm, hold or forget (the others then do nothing), and by ``remove``."""
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    first = ledger.assume("ns/w", [Booking("a", "ns/w-0", 1000, 0)])
    assert ledger.assumed("ns/w") and not ledger.assumed("ns/other")
    ledger.confirm(first)
    assert not ledger.assumed("ns/w")
    ledger.forget(first)  # settled already: nothing
    assert int(ledger.used_cpu[0]) == 1000
    second = ledger.assume("ns/w", [Booking("a", "ns/w-0", 2000, 0)])
    ledger.remove("ns/w")  # the Workload went while its write was in flight
    assert not ledger.assumed("ns/w")
    ledger.forget(second)
    assert int(ledger.used_cpu[0]) == 0  # nothing restored for a Workload that is gone


def test_hold_books_both_outcomes_of_a_write_that_got_no_answer() -> None:
    """Moved from a to b and shrunk: held, the replica is on both nodes at its larger size
    (the write may have landed or not) until the Workload is read back."""
    ledger = Ledger(NodeTable([node("a", cpu="4"), node("b", cpu="4")]))
    ledger.load("ns/w", [Booking("a", "ns/w-0", 2000, 0)])
    assumption = ledger.assume("ns/w", [Booking("b", "ns/w-0", 1000, 0)])
    ledger.hold(assumption)
    assert not ledger.assumed("ns/w")
    assert [int(c) for c in ledger.used_cpu] == [2000, 1000]
    ledger.forget(assumption)  # settled by hold: nothing restored
    assert [int(c) for c in ledger.used_cpu] == [2000, 1000]


def test_held_until_written_books_each_replica_at_its_larger_size_wherever_either_puts_it() -> None:
    """While a write is in flight: every decided booking; a replica the decision keeps on its
    node at the larger of its two sizes, each resource on its own (its new score); a replica
    it moves or drops also where it was, as it was."""
    previous = (
        Booking("a", "ns/w-0", 2000, 1024, 1),  # kept on a: cpu shrinks, memory grows
        Booking("b", "ns/w-1", 1000, 4096, 2),  # moved to c
        Booking("d", "ns/w-2", 300, 300, 4),  # kept on d, unchanged
    )
    decided = (
        Booking("a", "ns/w-0", 1000, 2048, 5),
        Booking("c", "ns/w-1", 500, 0, 3),
        Booking("d", "ns/w-2", 300, 300, 6),
    )
    assert held_until_written(previous, decided) == (
        Booking("a", "ns/w-0", 2000, 2048, 5),
        Booking("c", "ns/w-1", 500, 0, 3),
        Booking("d", "ns/w-2", 300, 300, 6),
        Booking("b", "ns/w-1", 1000, 4096, 2),
    )


def test_rebind_keeps_bookings_on_nodes_that_left() -> None:
    ledger = Ledger(NodeTable([node("a"), node("b")]))
    ledger.load("ns/w", [Booking("b", "ns/w-0", 500, 0)])
    ledger.rebind(NodeTable([node("a")]))
    assert ledger.bookings("ns/w") == (Booking("b", "ns/w-0", 500, 0),)
    assert ledger.used_cpu.tolist() == [0]
    assert ledger.replicas.tolist() == [0]  # counted on no node of the table
    ledger.rebind(NodeTable([node("a"), node("b")]))
    assert ledger.used_cpu.tolist() == [0, 500]
    assert ledger.replicas.tolist() == [0, 1]
    ledger.remove("ns/w")
    assert ledger.used_cpu.tolist() == [0, 0]
    assert ledger.replicas.tolist() == [0, 0]
    assert len(ledger) == 0


def test_usage_is_exact_up_to_the_quantity_bound() -> None:
    """Bookings as large as a quantity may be (``MAX_SCALED_QUANTITY``, 2**53) come and go
    and a 1-millicore, 1-byte replica beside them is still counted: 2**53 + 1 is no float, so
    usage kept as floats would round it away and free a node that is full. Checked on the
    ledger's own arrays and on those a rebind to a new table recomputes."""
    big = [Booking("a", "ns/big-0", MAX_SCALED_QUANTITY, MAX_SCALED_QUANTITY)]
    ledger = Ledger(NodeTable([NodeInfo(hostname="a", cpu=1, memory=1)]))
    ledger.load("ns/big", big)
    ledger.load("ns/w", [Booking("a", "ns/w-0", 1, 1)])
    ledger.remove("ns/big")
    assert [column.tolist() for column in ledger.free()] == [[0], [0]]
    ledger.load("ns/big", big)
    ledger.rebind(NodeTable([NodeInfo(hostname="a", cpu=1, memory=1), NodeInfo(hostname="b")]))
    ledger.remove("ns/big")
    assert [column.tolist() for column in ledger.free()] == [[0, 0], [0, 0]]


# (previous, current, whether current gives capacity back on some node), worked out per node
# as previous minus current, cpu and memory each on its own.
GIVING_BACK = [
    ("grows-in-place", [("a", 100, 100)], [("a", 150, 100)], False),
    ("cpu-for-memory", [("a", 200, 100)], [("a", 100, 200)], True),  # cpu +100 back
    ("memory-shrinks", [("a", 100, 200)], [("a", 100, 100)], True),
    ("one-millicore", [("a", 101, 100)], [("a", 100, 100)], True),
    ("one-byte", [("a", 100, 101)], [("a", 100, 100)], True),
    ("unchanged", [("a", 100, 100)], [("a", 100, 100)], False),
]


@pytest.mark.parametrize(
    ("previous", "current", "back"),
    [(p, c, b) for _, p, c, b in GIVING_BACK],
    ids=[i for i, *_ in GIVING_BACK],
)
def test_gives_back_is_any_node_holding_less_of_either_resource(
    previous: list[tuple[str, int, int]], current: list[tuple[str, int, int]], back: bool
) -> None:
    def booked(sizes: list[tuple[str, int, int]]) -> tuple[Booking, ...]:
        return tuple(Booking(n, f"ns/w-{i}", c, m) for i, (n, c, m) in enumerate(sizes))

    assert gives_back(booked(previous), booked(current)) is back


def test_a_status_books_the_size_it_records_not_the_spec() -> None:
    """A valid Workload whose spec changed since its placements were decided: they hold the
    size the status records (``status.resources``), resource by resource; a resource the spec
    asks for and the recorded size leaves out is booked at the spec's amount, as a guess
    (``sized`` False: the scheduler checks the node holds it), never as 0 (which would hand
    out room the replica may hold). The parsed and the raw object read the same."""
    obj = _raw({"kind": "Job", "resources": {"cpu": "1", "memory": "1Ki"}}, PLACED)
    obj["status"]["resources"] = {"cpu": "2", "memory": "2Ki"}
    assert [(b.cpu, b.memory, b.sized) for b in bookings_from_object(obj)] == [
        (2000, 2048, True)
    ] * 2
    obj["status"]["resources"] = {"cpu": "2"}
    bookings = bookings_from_status(Workload.model_validate(obj))
    assert [(b.cpu, b.memory, b.sized) for b in bookings] == [(2000, 1024, False)] * 2
    assert bookings_from_object(obj) == bookings
    obj["spec"]["resources"]["cpu"] = "lots"  # the spec no longer parses: the raw reading
    assert [(b.cpu, b.memory, b.sized) for b in bookings_from_object(obj)] == [
        (2000, 1024, False)
    ] * 2


def test_a_status_books_every_resource_it_records() -> None:
    """Extended resources are booked as cpu and memory are: the recorded amount, else the
    spec's as a guess; a resource only the status records (the spec dropped it) stays held
    until the scheduler decides the replica again."""
    spec = {"kind": "Job", "resources": {"cpu": "1", "nvidia.com/gpu": 2}}
    obj = _raw(spec, PLACED)
    obj["status"]["resources"] = {"cpu": "1", "nvidia.com/gpu": 1, "example.com/foo": 3}
    bookings = bookings_from_status(Workload.model_validate(obj))
    assert [(b.scalars, b.sized) for b in bookings] == [
        ((("example.com/foo", 3), ("nvidia.com/gpu", 1)), True)
    ] * 2
    obj["status"]["resources"] = {"cpu": "1"}
    bookings = bookings_from_status(Workload.model_validate(obj))
    assert [(b.scalars, b.sized) for b in bookings] == [((("nvidia.com/gpu", 2),), False)] * 2
    assert bookings_from_object(obj) == bookings


def _decision(phase: Phase) -> Decision:
    return Decision(phase=phase, reason="R", desired=1, placements=(), message="m")


def test_last_transition_time_moves_only_when_the_condition_status_changes() -> None:
    first = status_from_decision(_decision(Phase.UNSCHEDULABLE), 1, None, "t1")
    same = status_from_decision(_decision(Phase.UNSCHEDULABLE), 2, first, "t2")
    assert same.conditions[0].last_transition_time == "t1"
    assert same.conditions[0].observed_generation == 2
    flipped = status_from_decision(_decision(Phase.SCHEDULED), 2, same, "t3")
    assert flipped.conditions[0].status == "True"
    assert flipped.conditions[0].last_transition_time == "t3"


def test_same_decision_on_same_status_is_identical() -> None:
    first = status_from_decision(_decision(Phase.SCHEDULED), 1, None, "t1")
    again = status_from_decision(_decision(Phase.SCHEDULED), 1, first, "t9")
    assert again == first
    assert isinstance(again, WorkloadStatus)


def test_nodes_summary_is_distinct_and_bounded() -> None:
    assert nodes_summary(["b", "a", "b"]) == "b,a"
    assert nodes_summary([f"n{i}" for i in range(8)]) == "n0,n1,n2,n3,n4,+3"
    assert nodes_summary([f"n{i}" for i in range(6)]) == "n0,n1,n2,n3,n4,+1"
    assert nodes_summary([f"n{i}" for i in range(5)]) == "n0,n1,n2,n3,n4"  # none more: no +0
    assert nodes_summary([]) == ""


def _raw(spec: object, placements: object) -> dict[str, Any]:
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": spec,
        "status": {"placements": placements},
    }


PLACED = [
    {"node": "a", "allocId": "ns/w-0", "score": 3},
    {"node": "b", "allocId": "ns/w-1", "score": 4},
]

RAW_BOOKINGS = [
    (
        "parseable",
        {"kind": "Job", "resources": {"cpu": "1", "memory": "1Ki"}},
        PLACED,
        (1000, 1024),
        2,
    ),
    ("spec-refused", {"kind": "Job", "count": 3, "resources": {"cpu": "1"}}, PLACED, (1000, 0), 2),
    (
        "cpu-refused",
        {"kind": "CronJob", "resources": {"cpu": "8Ei", "memory": "1Ki"}},
        PLACED,
        (0, 1024),
        2,
    ),
    ("resources-not-object", {"kind": "Job", "resources": ["1"]}, PLACED, (0, 0), 2),
    ("spec-not-object", "Job", PLACED, (0, 0), 2),
    ("one-placement-refused", {"kind": "Job"}, [PLACED[0], {"node": "b"}], (0, 0), 1),
    ("placements-not-list", {"kind": "Job"}, "a", (0, 0), 0),
]


@pytest.mark.parametrize(
    ("spec", "placements", "size", "booked"),
    [(s, p, z, b) for _, s, p, z, b in RAW_BOOKINGS],
    ids=[i for i, *_ in RAW_BOOKINGS],
)
def test_raw_workloads_keep_their_bookings_parseable_or_not(
    spec: object, placements: object, size: tuple[int, int], booked: int
) -> None:
    bookings = bookings_from_object(_raw(spec, placements))
    assert [(b.node, b.alloc_id, b.score) for b in bookings] == [
        (p["node"], p["allocId"], p["score"]) for p in PLACED[:booked]
    ]
    assert all((b.cpu, b.memory) == size for b in bookings)


# A spec the models refuse (count on a Job), its status's recorded size (status.resources) as
# written: (cpu millicores, memory bytes, sized). The status's size wins, each of cpu and memory
# on its own; the replica is sized only when the status records both (else the scheduler
# re-checks it fits, as for a guess).
HELD_SIZES = [
    ("both-recorded", {"cpu": "2", "memory": "2Ki"}, (2000, 2048, True)),
    ("cpu-recorded", {"cpu": "2"}, (2000, 1024, False)),
    ("memory-recorded", {"memory": "2Ki"}, (1000, 2048, False)),
    ("cpu-refused", {"cpu": "8Ei", "memory": "2Ki"}, (1000, 2048, False)),
    ("memory-refused", {"cpu": "2", "memory": "-1Ki"}, (2000, 1024, False)),
    ("not-an-object", ["2"], (1000, 1024, False)),
    ("none", None, (1000, 1024, False)),
]


@pytest.mark.parametrize(
    ("held", "size"), [(h, z) for _, h, z in HELD_SIZES], ids=[i for i, *_ in HELD_SIZES]
)
def test_a_refused_spec_books_the_size_its_status_records(
    held: object, size: tuple[int, int, bool]
) -> None:
    obj = _raw({"kind": "Job", "count": 3, "resources": {"cpu": "1", "memory": "1Ki"}}, PLACED)
    if held is not None:
        obj["status"]["resources"] = held
    bookings = bookings_from_object(obj)
    assert [(b.node, b.cpu, b.memory, b.sized) for b in bookings] == [
        ("a", *size),
        ("b", *size),
    ]


def test_a_refused_placement_does_not_stop_those_after_it() -> None:
    obj = _raw({"kind": "Job", "count": 3}, [{"node": "b"}, PLACED[0], 7, PLACED[1]])
    assert [b.alloc_id for b in bookings_from_object(obj)] == ["ns/w-0", "ns/w-1"]


@pytest.mark.parametrize(
    "status", [["placements"], {"placements": None}, {"placements": 7}], ids=str
)
def test_a_status_without_a_list_of_placements_books_nothing(status: object) -> None:
    obj = _raw({"kind": "Job", "count": 3}, PLACED)
    obj["status"] = status
    assert bookings_from_object(obj) == []


def test_hold_after_the_write_was_confirmed_changes_nothing() -> None:
    """An assumption settles once: a late ``hold`` (after ``confirm``) must not book the
    previous placement again beside the confirmed one."""
    ledger = Ledger(NodeTable([node("a", cpu="4"), node("b", cpu="4")]))
    ledger.load("ns/w", [Booking("a", "ns/w-0", 2000, 0)])
    assumption = ledger.assume("ns/w", [Booking("b", "ns/w-0", 1000, 0)])
    ledger.confirm(assumption)
    ledger.hold(assumption)
    assert [int(c) for c in ledger.used_cpu] == [0, 1000]
    assert ledger.bookings("ns/w") == (Booking("b", "ns/w-0", 1000, 0),)


def test_ledger_from_objects_books_what_the_models_refuse() -> None:
    refused = _raw({"kind": "Job", "count": 3, "resources": {"cpu": "3"}}, PLACED[:1])
    ledger = ledger_from_objects([node("a", cpu="4")], [refused])
    assert int(ledger.used_cpu[0]) == 3000
    assert [b.alloc_id for b in ledger.bookings("ns/w")] == ["ns/w-0"]


def test_a_status_validates_back_from_its_json_unchanged() -> None:
    """What ``status_from_decision`` builds, written as JSON and read back (as the operator's
    status round-trips through the API server), is the same status, for every phase."""
    from controller.scheduler.scheduler import Scheduler
    from tests.support.factories import ledger_for, workload

    ledger = ledger_for(node("a", cpu="4"), node("b", cpu="1", runtimes=("wasmtime",)))
    cases = [
        workload(kind="Service", count=2, resources={"cpu": "1", "memory": "1Gi"}),
        workload(kind="Service", count=9, resources={"cpu": "1"}),
        workload(kind="Job", runtime={"oneOf": ["process"]}),
        workload(kind="Job", constraints=["node.("]),
        workload(kind="DaemonSet", schedule={"mode": "Mandatory"}, resources={"cpu": "2"}),
    ]
    previous = None
    for w in cases:
        decision = Scheduler().schedule(w, ledger, now=NOW)
        built = status_from_decision(decision, 3, previous, "2026-01-01T00:00:00Z")
        wire = built.model_dump(by_alias=True, mode="json", exclude_none=True)
        assert WorkloadStatus.model_validate(wire) == built
        assert (
            WorkloadStatus.model_validate(wire).model_dump(
                by_alias=True, mode="json", exclude_none=True
            )
            == wire
        )
        previous = built
