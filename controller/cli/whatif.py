"""``orca plan --drain SELECTOR --add-nodes FILE:COUNT|auto`` (and ``orca explain --drain``):
the what-if questions' flags, and how the answers are shown.

``--drain`` (repeatable) takes a Node's name, or a label selector as ``kubectl -l`` takes it
(``topology.kubernetes.io/zone=a``); a value that names no Node and matches none is bad input.
``--add-nodes FILE:COUNT`` adds COUNT copies of the one Node in FILE, ``FILE:auto`` finds the
smallest count that places every replica without a place (``controller.scheduler.whatif``).
Exit codes, as ``orca plan``'s: 0 when every replica the question is about has a place and no
disruption budget (or gang minCount) is broken (and, with ``auto``, a count was found), 1
otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from controller.cli.flags import whole_number
from controller.cli.table import write_table
from controller.inputs.manifests import ManifestError, load_nodes, read_manifests
from controller.inputs.selector import SelectorError, parse_selector
from controller.scheduler.nodes import NodeInfo
from controller.scheduler.whatif import (
    MAX_ADDED_NODES,
    Answer,
    BrokenBudget,
    Capacity,
    Moved,
    Question,
    Unplaced,
    WhatIf,
)

MAX_LISTED = 50  # rows per section in the table (-o json lists them all)


@dataclass(frozen=True)
class AddNodes:
    """``--add-nodes FILE:COUNT``: ``count`` None means ``auto``."""

    path: Path
    count: int | None


@dataclass(frozen=True)
class Asked:
    """The what-if flags of one command line."""

    drain: tuple[str, ...] = ()
    add: AddNodes | None = None


@dataclass(frozen=True)
class Outcome:
    """A question's answer, and with ``--add-nodes`` how many nodes."""

    answer: Answer
    capacity: Capacity | None = None

    @property
    def exit_code(self) -> int:
        found = self.capacity is None or self.capacity.count is not None
        return 0 if self.answer.settled and found else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--drain`` and ``--add-nodes`` on a command's parser."""
    p.add_argument(
        "--drain",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="what if these nodes were gone: a Node name or a label selector as kubectl -l "
        "takes it (repeatable); lists what moves where and what finds no place",
    )
    p.add_argument(
        "--add-nodes",
        metavar="FILE:COUNT",
        help="what if COUNT copies of the Node in FILE were added (named after it); "
        "FILE:auto finds the smallest count that places every replica without a place",
    )


def asked(args: argparse.Namespace) -> Asked | None:
    """The question on the command line, or None; ``ValueError`` (one line) for a bad value."""
    drain = tuple(args.drain)
    for value in drain:
        if not value.strip():
            raise ValueError("--drain: give a Node name or a label selector, not ''")
    add = parse_add_nodes(args.add_nodes) if args.add_nodes is not None else None
    return Asked(drain, add) if drain or add else None


def parse_add_nodes(text: str) -> AddNodes:
    """``FILE:COUNT`` or ``FILE:auto`` (the last colon splits, so a path may hold colons)."""
    path, colon, count = text.rpartition(":")
    if not colon or not path:
        raise ValueError(f"--add-nodes: {text[:80]!r} is not FILE:COUNT or FILE:auto")
    if count == "auto":
        return AddNodes(Path(path), None)
    return AddNodes(Path(path), whole_number("--add-nodes", count, 0, MAX_ADDED_NODES))


def drained(selectors: Sequence[str], nodes: Sequence[NodeInfo]) -> frozenset[str]:
    """The nodes ``--drain`` names (``selected``)."""
    return selected("--drain", selectors, nodes)


def selected(flag: str, selectors: Sequence[str], nodes: Sequence[NodeInfo]) -> frozenset[str]:
    """The nodes a flag names: each value a Node's name, else a label selector; one that
    matches no Node is a ``ManifestError`` (bad input)."""
    names = {n.hostname for n in nodes}
    out: set[str] = set()
    for value in selectors:
        if value in names:
            out.add(value)
            continue
        try:
            selector = parse_selector(value)
        except SelectorError as exc:
            raise ManifestError(f"{flag} {value[:80]!r}: {exc}") from None
        matched = {n.hostname for n in nodes if selector.matches(n.labels)}
        if not matched:
            raise ManifestError(f"{flag} {value[:80]!r}: matches no Node ({len(nodes)} in all)")
        out |= matched
    return frozenset(out)


def template_of(add: AddNodes) -> NodeInfo:
    """The one Node in ``--add-nodes``' FILE."""
    nodes = load_nodes(read_manifests(add.path))
    if len(nodes) != 1:
        raise ManifestError(
            f"--add-nodes {add.path}: holds {len(nodes)} Nodes; give the one to copy"
        )
    return nodes[0]


def question_of(question: Asked, nodes: Sequence[NodeInfo]) -> Question:
    """The scheduler's question for the flags, on these nodes."""
    add = question.add
    return Question(
        drain=drained(question.drain, nodes),
        template=template_of(add) if add is not None else None,
        count=(add.count or 0) if add is not None else 0,
    )


def answer(whatif: WhatIf, flags: Asked, question: Question) -> Outcome:
    """Ask ``whatif`` the question; ``auto`` searches the count. A name clash of the copies
    with the cluster's Nodes is bad input."""
    try:
        if flags.add is not None and flags.add.count is None:
            smallest, found = whatif.smallest_count(question)
            return Outcome(found, smallest)
        result = whatif.answer(question)
    except ValueError as exc:
        raise ManifestError(f"--add-nodes: {exc}") from None
    capacity: Capacity | None = None
    if question.template is not None:
        capacity = Capacity(question.template.hostname, question.count, False, names=result.added)
    return Outcome(result, capacity)


# -- output ---------------------------------------------------------------------------------------


def to_json(outcome: Outcome) -> dict[str, Any]:
    """The sections a script reads: ``drained``, ``displaced``, ``moved``, ``unplaced``,
    ``ended``, ``budgets`` and, with ``--add-nodes``, ``nodesToAdd``."""
    a = outcome.answer
    out: dict[str, Any] = {
        "drained": sorted(a.question.drain),
        "displaced": a.displaced,
        "moved": [moved_json(m) for m in a.moved],
        "unplaced": [unplaced_json(u) for u in a.unplaced],
        "ended": [{"workload": e.workload, "allocId": e.alloc_id, "node": e.node} for e in a.ended],
        "budgets": [budget_json(b) for b in a.budgets],
    }
    c = outcome.capacity
    if c is not None:
        out["nodesToAdd"] = {
            "template": c.template,
            "count": c.count,
            "auto": c.auto,
            "names": list(c.names),
            **({"proof": c.proof} if c.proof else {}),
            **({"why": c.why} if c.why else {}),
            **({"tried": c.tried, "plans": c.plans} if c.auto else {}),
        }
    return out


def moved_json(m: Moved) -> dict[str, Any]:
    """A replica that moves, as ``-o json`` shows it."""
    return {
        "workload": m.workload,
        "allocId": m.alloc_id,
        "from": m.source,
        "to": m.target,
        **({"preemptedBy": m.preempted_by} if m.preempted_by else {}),
    }


def unplaced_json(u: Unplaced) -> dict[str, Any]:
    """A replica without a place, as ``-o json`` shows it."""
    return {"workload": u.workload, "allocId": u.alloc_id, "from": u.source, "reason": u.reason}


def budget_json(b: BrokenBudget) -> dict[str, Any]:
    """A Workload left below its budget, as ``-o json`` shows it."""
    return {"workload": b.workload, "budget": b.budget, "keeps": b.keeps, "needs": b.needs}


def render(outcome: Outcome, out: TextIO) -> None:
    """The answer as tables, a section each, then one line that sums it up."""
    a = outcome.answer
    if a.question.drain:
        names = sorted(a.question.drain)
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        out.write(f"\nDRAIN {len(names)} node(s): {shown}\n")
    if a.moved:
        out.write(f"\nMOVED ({len(a.moved)})\n")
        rows: list[tuple[str, ...]] = [("REPLICA", "FROM", "TO", "NOTE")]
        rows += [
            (
                m.alloc_id,
                m.source,
                m.target,
                f"preempted by {m.preempted_by}" if m.preempted_by else "",
            )
            for m in a.moved[:MAX_LISTED]
        ]
        write_table(out, rows)
        _more(out, len(a.moved))
    if a.unplaced:
        out.write(f"\nUNPLACED ({len(a.unplaced)})\n")
        rows = [("REPLICA", "FROM", "REASON")]
        rows += [(u.alloc_id, u.source or "(pending)", u.reason) for u in a.unplaced[:MAX_LISTED]]
        write_table(out, rows)
        _more(out, len(a.unplaced))
    if a.ended:
        out.write(f"\nENDED: DaemonSet replicas on drained nodes ({len(a.ended)})\n")
        write_table(
            out, [("REPLICA", "NODE"), *[(e.alloc_id, e.node) for e in a.ended[:MAX_LISTED]]]
        )
        _more(out, len(a.ended))
    if a.budgets:
        out.write(f"\nBUDGETS: Workloads left below their budget ({len(a.budgets)})\n")
        rows = [("WORKLOAD", "BUDGET", "KEEPS", "NEEDS")]
        rows += [(b.workload, b.budget, str(b.keeps), str(b.needs)) for b in a.budgets]
        write_table(out, rows[: MAX_LISTED + 1])
        _more(out, len(a.budgets))
    c = outcome.capacity
    if c is not None:
        out.write("\nNODES TO ADD\n")
        out.write(_capacity_line(c) + "\n")
    out.write("\n" + summary(outcome) + "\n")


def _capacity_line(c: Capacity) -> str:
    if c.count is None:
        return f"no count of {c.template} places everything: {c.why}"
    names = ", ".join(c.names[:5]) + (f" ... {c.names[-1]}" if len(c.names) > 5 else "")
    line = f"{c.count} x {c.template}" + (f" ({names})" if names else "")
    if c.auto:
        line += ": the smallest count" if c.count else ": none needed"
        if c.proof:
            line += f"; {c.proof}"
        line += f" ({c.plans} plans)"
    return line


def summary(outcome: Outcome) -> str:
    """One line: does the question's every replica have a place?"""
    a = outcome.answer
    parts = []
    if a.question.drain:
        parts.append(f"{a.displaced} replica(s) displaced, {len(a.moved)} moved")
    if a.ended:
        parts.append(f"{len(a.ended)} DaemonSet replica(s) end")
    if a.unplaced:
        parts.append(f"{len(a.unplaced)} find no place")
    else:
        parts.append("every replica has a place")
    if a.budgets:
        parts.append(f"{len(a.budgets)} Workload(s) below their budget")
    return "; ".join(parts)


def _more(out: TextIO, count: int) -> None:
    if count > MAX_LISTED:
        out.write(f"... and {count - MAX_LISTED} more (-o json lists them all)\n")
