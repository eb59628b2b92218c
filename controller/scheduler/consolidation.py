"""Consolidation: the nodes that could be removed together with every replica still placed
(``orca plan --consolidate [--select SELECTOR]``).

cluster-autoscaler asks one node at a time whether its Pods fit elsewhere, and Karpenter's
consolidation misses whole sets of under-used nodes whose Pods would fit together on fewer.
This search proves the whole set at once:

    candidates  the nodes ``--select`` names (every node by default), least utilised first:
                a node's utilisation is the larger of its cpu and memory booked over its
                allocatable (cluster-autoscaler's ``utilization.Calculate``; a resource the
                node has none of is left out), ties to the lower hostname;
    kept        a cordoned node (someone is draining it already, and replicas move off it
                anyway) and one annotated ``orca.cloudinit.dev/do-not-consolidate: "true"``
                are never proposed, and say so in ``blocked``;
    at once     the longest run of candidates, from the least utilised, that can go together
                (Karpenter's multi-node consolidation: a binary search over the sorted
                candidates): a bracket of a count proven to go and one proven not to, each
                probe the drain what-if of that many (``DomainLoss``: exactly ``orca plan
                --drain`` of those nodes), until the two are adjacent;
    one by one  then each later candidate in order joins only if the what-if of the set so
                far with it leaves every replica placed, else it is blocked with the first
                replica that would have no place and why. After ``MAX_BLOCKED_IN_A_ROW``
                blocked in a row (each a what-if of the whole set, the search's cost) the
                rest are not tried, and ``blocked`` says so for each;
    proof       the what-if of the final set: its moves are the answer's, DaemonSet
                replicas on the removed nodes end with them.

Every acceptance is a what-if of the whole set so far, so the set is proven at once, not
node by node; a test plans the cluster again without the removable nodes and finds every
replica placed. Placing is greedy, as the operator's is, so the set is a good one, not
always the largest.

A check stops at the first replica without a place (``DomainLoss.first_stranded``), so a
blocked node costs the plans up to its first casualty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np

from controller.scheduler.nodes import DO_NOT_CONSOLIDATE, NodeInfo
from controller.scheduler.resilience import DomainLoss
from controller.scheduler.whatif import Answer, Unplaced

REASON_CORDONED: Final = "cordoned (spec.unschedulable): kept"
REASON_ANNOTATED: Final = f'annotated {DO_NOT_CONSOLIDATE}: "true": kept'


@dataclass(frozen=True)
class Blocked:
    """A node that cannot go: the replica that would find no place and why, or (``replica``
    None) why it is kept."""

    node: str
    replica: str | None
    reason: str
    source: str | None = None  # where that replica is now


@dataclass(frozen=True)
class Consolidation:
    """The removable set, its what-if, and the candidates that could not join it."""

    removable: tuple[str, ...]  # in the order they were accepted (least utilised first)
    answer: Answer  # the drain what-if of the whole removable set
    blocked: tuple[Blocked, ...]  # in the order they were tried (kept nodes first)
    candidates: int  # the nodes considered (selected)
    checks: int  # the what-ifs made (one per candidate tried, plus the final one)


def utilisation(loss: DomainLoss) -> dict[str, float]:
    """Per node, the larger of its cpu and memory booked over its allocatable (a resource it
    has none of left out: 0 when it has neither)."""
    ledger = loss.whatif.ledger
    table = ledger.table
    free_cpu, free_memory = ledger.free()
    shares = []
    for allocatable, free in ((table.cpu, free_cpu), (table.memory, free_memory)):
        used = (allocatable - free).astype(np.float64)
        shares.append(np.where(allocatable > 0, used / np.maximum(allocatable, 1), 0.0))
    most = np.maximum(*shares)
    return dict(zip(table.hostnames, most.tolist(), strict=True))


def consolidate(
    loss: DomainLoss,
    selected: Iterable[NodeInfo] | None = None,
    on_check: Callable[[int, bool], None] | None = None,
) -> Consolidation:
    """The search of the module's docstring over ``selected`` (default: every node of the
    snapshot). ``on_check`` hears each what-if's size and whether everything kept a place."""
    nodes = list(loss.whatif.ledger.table.nodes if selected is None else selected)
    blocked: list[Blocked] = []
    candidates: list[str] = []
    for node in nodes:
        if node.unschedulable:
            blocked.append(Blocked(node.hostname, None, REASON_CORDONED))
        elif node.do_not_consolidate:
            blocked.append(Blocked(node.hostname, None, REASON_ANNOTATED))
        else:
            candidates.append(node.hostname)
    used = utilisation(loss)
    candidates.sort(key=lambda name: (used[name], name))
    search = _Search(loss, on_check)
    already = search.stranded(())
    if already is not None:  # the cluster as it is leaves a replica without a place
        blocked += [_blocked(name, already, ALREADY) for name in candidates]
        return search.done((), blocked, len(nodes))
    going, failing = search.longest_run(candidates)
    removable = list(candidates[:going])
    in_a_row = 0
    for i, name in enumerate(candidates[going:], start=going):
        if in_a_row >= MAX_BLOCKED_IN_A_ROW:
            blocked.append(Blocked(name, None, not_tried(MAX_BLOCKED_IN_A_ROW)))
            continue
        lost = failing if i == going else search.stranded((*removable, name))
        if lost is None:
            removable.append(name)
            in_a_row = 0
        else:
            blocked.append(_blocked(name, lost))
            in_a_row += 1
    return search.done(tuple(removable), blocked, len(nodes))


#: Blocked candidates in a row after which the search stops (each costs a what-if of the
#: whole set); the nodes left are more utilised than any that was tried.
MAX_BLOCKED_IN_A_ROW: Final = 20
ALREADY: Final = "even with no node removed"


def not_tried(limit: int) -> str:
    return (
        f"not tried: the search stopped after {limit} candidates in a row could not go "
        "(this one is more utilised than each of them)"
    )


def _blocked(node: str, lost: Unplaced, prefix: str = "") -> Blocked:
    reason = f"{prefix}: {lost.reason}" if prefix else lost.reason
    return Blocked(node, lost.alloc_id, reason, lost.source)


class _Search:
    """The what-ifs the search makes, counted."""

    def __init__(self, loss: DomainLoss, on_check: Callable[[int, bool], None] | None) -> None:
        self.loss = loss
        self.on_check = on_check
        self.checks = 0

    def stranded(self, names: Iterable[str]) -> Unplaced | None:
        drain = frozenset(names)
        lost = self.loss.first_stranded(drain)
        self.checks += 1
        if self.on_check is not None:
            self.on_check(len(drain), lost is None)
        return lost

    def longest_run(self, candidates: list[str]) -> tuple[int, Unplaced | None]:
        """How many of ``candidates``, from the first, can go together (every one of them
        when the what-if of all says so), and what the what-if of one more leaves without a
        place (None when all can go). The bracket (``going`` proven, ``failing`` proven not)
        narrows by halves: a probe is the what-if of the first ``count``."""
        going, failing_count, failing = 0, len(candidates) + 1, None
        if candidates:
            lost = self.stranded(candidates)
            if lost is None:
                return len(candidates), None
            failing_count, failing = len(candidates), lost
        while failing_count - going > 1:
            count = (going + failing_count) // 2
            lost = self.stranded(candidates[:count])
            if lost is None:
                going = count
            else:
                failing_count, failing = count, lost
        return going, failing

    def done(self, removable: tuple[str, ...], blocked: list[Blocked], size: int) -> Consolidation:
        answer = self.loss.answer(frozenset(removable))
        return Consolidation(removable, answer, tuple(blocked), size, self.checks + 1)
