"""``orca plan --resilience KEY`` and ``orca plan --consolidate [--select SELECTOR]``: the
questions asked of every failure domain, and of every node at once, and how their answers
are shown.

``--resilience KEY``: for each value of the node label KEY (``topology.kubernetes.io/zone``;
``kubernetes.io/hostname`` for N-1), the drain what-if of all its nodes at once
(``controller.scheduler.resilience``): exit 0 when no single domain's loss leaves a replica
without a place, 1 otherwise. ``--consolidate``: the nodes that could go together with every
replica still placed (``controller.scheduler.consolidation``), among those ``--select``
names (a Node's name or a label selector, as ``--drain`` takes them; repeatable): exit 0
unless the cluster as it is already leaves a replica without a place. Bad input (a KEY that
is not a label key, a selector that matches nothing, flags that do not go together) is one
line and exit 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from controller.api.models import Workload
from controller.cli.table import write_table
from controller.cli.whatif import budget_json, moved_json, selected, unplaced_json
from controller.inputs.manifests import ManifestError
from controller.scheduler.consolidation import Consolidation, consolidate
from controller.scheduler.ledger import Ledger
from controller.scheduler.nodes import NodeInfo, label_key_problem
from controller.scheduler.priority import PriorityClasses
from controller.scheduler.resilience import (
    UNLABELLED,
    DomainAnswer,
    DomainLoss,
    ResilienceError,
    domains_of,
    worst_first,
)

REASON_WIDTH = 100  # characters of the first unplaced replica's reason in the table


@dataclass(frozen=True)
class Survey:
    """The question of one command line: ``key`` (``--resilience``) or ``consolidate``
    among ``select`` (every node when empty)."""

    key: str | None = None
    consolidate: bool = False
    select: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """A survey's answer: one per domain, or the consolidation."""

    key: str | None
    domains: tuple[DomainAnswer, ...] = ()
    consolidation: Consolidation | None = None

    @property
    def exit_code(self) -> int:
        if self.consolidation is not None:
            return 0 if self.consolidation.answer.settled else 1
        return 0 if all(d.settled for d in self.domains) else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags, in a group of their own."""
    group = p.add_argument_group("failure domains and consolidation")
    group.add_argument(
        "--resilience",
        metavar="KEY",
        help="what if each failure domain were lost: one drain what-if per value of the node "
        "label KEY (topology.kubernetes.io/zone; kubernetes.io/hostname for every node "
        "alone), worst first; nodes without the label are a domain of their own",
    )
    group.add_argument(
        "--consolidate",
        action="store_true",
        help="the nodes that could be removed together with every replica still placed "
        "(least utilised first; cordoned and orca.cloudinit.dev/do-not-consolidate nodes "
        "are kept), what would move, and why each other node cannot go",
    )
    group.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="with --consolidate: only these nodes may go, a Node name or a label selector "
        "as kubectl -l takes it (repeatable)",
    )


def asked(args: argparse.Namespace) -> Survey | None:
    """The survey on the command line, or None; ``ValueError`` (one line) for a bad value or
    flags that do not go together."""
    key = getattr(args, "resilience", None)
    consolidating = bool(getattr(args, "consolidate", False))
    select = tuple(getattr(args, "select", None) or ())
    if select and not consolidating:
        raise ValueError("--select needs --consolidate")
    if key is None and not consolidating:
        return None
    if key is not None and consolidating:
        raise ValueError("--resilience and --consolidate are separate questions: ask one")
    if getattr(args, "drain", None) or getattr(args, "add_nodes", None):
        flag = "--resilience" if key is not None else "--consolidate"
        raise ValueError(f"{flag} asks of the cluster as it is: leave out --drain and --add-nodes")
    if key is not None:
        problem = label_key_problem(key)
        if problem is not None:
            raise ValueError(f"--resilience {key[:80]!r} {problem}")
    for value in select:
        if not value.strip():
            raise ValueError("--select: give a Node name or a label selector, not ''")
    return Survey(key, consolidating, select)


def answer(
    survey: Survey,
    nodes: Sequence[NodeInfo],
    ledger: Ledger,
    workloads: Sequence[Workload],
    classes: PriorityClasses,
    now: str,
    known_priorities: dict[str, int] | None = None,
    known_started: dict[str, datetime] | None = None,
) -> Report:
    """Ask the survey of one snapshot (shared by every domain's what-if)."""
    chosen = selected("--select", survey.select, nodes) if survey.select else None
    loss = DomainLoss(
        ledger,
        workloads,
        now=now,
        classes=classes,
        known_priorities=known_priorities,
        known_started=known_started,
    )
    if survey.consolidate:
        picked = None if chosen is None else [n for n in nodes if n.hostname in chosen]
        return Report(None, consolidation=consolidate(loss, picked))
    assert survey.key is not None
    try:
        domains = domains_of(survey.key, ledger.table.nodes)
    except ResilienceError as exc:
        raise ManifestError(f"--resilience {exc}") from None
    return Report(survey.key, tuple(DomainAnswer(d, loss.answer(d.nodes)) for d in domains))


# -- output ---------------------------------------------------------------------------------------


def to_json(report: Report) -> dict[str, Any]:
    """``resilience``: one entry per domain, in the domains' order (``{domain, nodes,
    displaced, moved, unplaced, budgets}``: ``budgets`` the Workloads the loss leaves below
    their disruption budget or gang minCount); or ``consolidation``: ``{removable, moves,
    blocked}``."""
    c = report.consolidation
    if c is not None:
        return {
            "consolidation": {
                "removable": list(c.removable),
                "moves": [moved_json(m) for m in c.answer.moved],
                "blocked": [
                    {"node": b.node, "replica": b.replica, "reason": b.reason} for b in c.blocked
                ],
            }
        }
    return {
        "topologyKey": report.key,
        "resilience": [
            {
                "domain": d.domain.name,
                "nodes": sorted(d.domain.nodes),
                "displaced": d.answer.displaced,
                "moved": [moved_json(m) for m in d.answer.moved],
                "unplaced": [unplaced_json(u) for u in d.answer.unplaced],
                "budgets": [budget_json(b) for b in d.answer.budgets],
            }
            for d in report.domains
        ],
    }


def render(report: Report, out: TextIO) -> None:
    """The answer as a table and one line that sums it up."""
    if report.consolidation is not None:
        _render_consolidation(report.consolidation, out)
        return
    domains = worst_first(report.domains)
    out.write(f"LOSS OF EACH {report.key} ({len(domains)} domain(s)), worst first\n")
    rows: list[tuple[str, ...]] = [
        ("DOMAIN", "NODES", "DISPLACED", "MOVED", "UNPLACED", "FIRST WITHOUT A PLACE")
    ]
    for d in domains:
        a = d.answer
        first = ""
        if a.unplaced:
            u = a.unplaced[0]
            first = _cut(f"{u.alloc_id} (on {u.source}): {u.reason}")
        rows.append(
            (
                d.domain.name if d.domain.name != UNLABELLED else f"{UNLABELLED} (no label)",
                str(len(d.domain.nodes)),
                str(a.displaced),
                str(len(a.moved)),
                str(len(a.unplaced)),
                first,
            )
        )
    write_table(out, rows)
    out.write("\n" + resilience_summary(report) + "\n")


def resilience_summary(report: Report) -> str:
    stranding = [d for d in report.domains if not d.settled]
    total = len(report.domains)
    if not stranding:
        return f"the loss of any one of {total} domain(s) leaves every replica a place"
    worst = worst_first(stranding)[0]
    return (
        f"the loss of {len(stranding)} of {total} domain(s) leaves replicas without a place "
        f"(the most: {len(worst.answer.unplaced)}, losing {worst.domain.name})"
    )


def _render_consolidation(c: Consolidation, out: TextIO) -> None:
    out.write(f"\nREMOVABLE ({len(c.removable)} of {c.candidates} node(s))\n")
    if c.removable:
        out.write(", ".join(c.removable) + "\n")
    if c.answer.moved:
        out.write(f"\nMOVES ({len(c.answer.moved)})\n")
        rows: list[tuple[str, ...]] = [("REPLICA", "FROM", "TO")]
        rows += [(m.alloc_id, m.source, m.target) for m in c.answer.moved]
        write_table(out, rows)
    if c.answer.ended:
        out.write(f"\nENDED: DaemonSet replicas on removed nodes ({len(c.answer.ended)})\n")
    if c.blocked:
        out.write(f"\nBLOCKED ({len(c.blocked)})\n")
        rows = [("NODE", "REPLICA", "ON", "WHY")]
        rows += [(b.node, b.replica or "-", b.source or "-", _cut(b.reason)) for b in c.blocked]
        write_table(out, rows)
    out.write(
        f"\n{len(c.removable)} node(s) can go together, {len(c.answer.moved)} replica(s) "
        f"move; {len(c.blocked)} stay ({c.checks} what-ifs)\n"
    )


def _cut(text: str) -> str:
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 3] + "..."
