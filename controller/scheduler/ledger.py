"""The placement ledger: every Workload's placements, and the capacity they use per node.

The ledger is the only code that changes booked capacity. The scheduler reads it (free
capacity, replicas per node for name affinity, a Workload's current placements) and never
writes it; whoever acts on a decision books it here.

A Workload's bookings move through these states (kube-scheduler's assume/bind, in miniature)::

      (none) --assume--> ASSUMED --confirm--> CONFIRMED
                            |  |
                            |  +--hold--> HELD: the write got no answer; both outcomes booked
                            |             (each replica where either puts it), until read back
                            +--forget--> previous   (forget restores what was there before)

``load`` sets CONFIRMED bookings directly (status read from the API server). ``assume``
returns an ``Assumption``; ``confirm``, ``hold`` and ``forget`` take it, each settles it once
(the first one wins; the others do nothing), and ``forget`` only restores when the Workload's
bookings are still the assumed ones, so a newer decision is never undone by an older failure.
While an assumption is not settled its status write is in flight: ``assumed`` says so, and
that is the one place the operator keeps that fact.

Every change of a node's usage is also noted in a journal of rows (``position``,
``rows_changed``), so a reader that computed something per node from the free capacity (the
capacity scores of a request, kept from one cycle to the next) redoes the rows that changed
since, not the whole table: at 15,000 nodes comparing every row's free capacity per replica
placed was a seventh of ``orca plan``'s time. The journal starts over, in a new epoch, when the
rows themselves change (``rebind`` to other nodes, ``copy``) and when it grows past
``JOURNAL_LIMIT``; a position of another epoch says "read every row".
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
from pydantic import ValidationError

from controller.api import resources as names
from controller.api.models import (
    Placement,
    Resources,
    Workload,
    WorkloadStatus,
    key_of,
    workload_key,
)
from controller.api.resources import Scalars
from controller.scheduler.nodes import BoolArray, IntArray, NodeInfo, NodeTable

MAX_INDEX_DIGITS = 9
#: Rows a ledger's journal notes before it starts over in a new epoch (``Ledger.position``).
JOURNAL_LIMIT = 1 << 16
#: Journal epochs, unique across ledgers: a position is only ever compared with its own.
_EPOCHS = itertools.count()


def alloc_id(namespace: str, name: str, index: int) -> str:
    """``<namespace>/<name>-<index>`` (the Workload's key, then the index): stable for the
    life of the replica."""
    return f"{workload_key(namespace, name)}-{index}"


def alloc_index(workload_key: str, value: str) -> int | None:
    """The replica index of an AllocID of this Workload, or None if it is not one of its ids:
    ``<workload_key>-<index>``, the index in decimal without leading zeros, at most 9 digits
    (the planners ask this per replica they lift, so it is plain string tests, no regex)."""
    size = len(workload_key)
    if not value.startswith(workload_key) or value[size : size + 1] != "-":
        return None
    digits = value[size + 1 :]
    if not (
        0 < len(digits) <= MAX_INDEX_DIGITS
        and digits.isascii()
        and digits.isdigit()
        and (digits[0] != "0" or digits == "0")
    ):
        return None
    return int(digits)


# -- the capacity rule ---------------------------------------------------------------------------


@overload
def has_room(free: int, request: int) -> bool: ...
@overload
def has_room(free: IntArray, request: int) -> BoolArray: ...
def has_room(free: int | IntArray, request: int) -> bool | BoolArray:
    """Whether ``free`` (one node's, or every node's) holds ``request`` of one resource: the
    one capacity rule every part of orca asks (the ResourcesFit filter, a resized replica
    kept, preemption's dry runs, the rebalancer's reference packing).

    kube-scheduler's ``fitsRequest`` (noderesources/fit.go): a resource the Pod does not
    request never fails, even on a node that is over-committed for it; otherwise the request
    must not exceed allocatable minus what is requested there already."""
    if isinstance(free, np.ndarray):
        return free >= request if request else np.ones(len(free), dtype=np.bool_)
    return not request or free >= request


def fits(free_cpu: int, free_memory: int, cpu: int, memory: int) -> bool:
    """Whether one node with this much free cpu and memory holds a replica of (``cpu``,
    ``memory``): ``has_room`` for both."""
    return has_room(free_cpu, cpu) and has_room(free_memory, memory)


def scalar_amount(scalars: Scalars, name: str) -> int:
    """The amount of ``name`` in ``scalars`` (0 when absent)."""
    for n, amount in scalars:
        if n == name:
            return amount
    return 0


@dataclass(frozen=True, slots=True)
class Booking:
    """One placed replica and the resources it holds on its node.

    ``sized`` is False when the size is a guess: a status that does not record the size its
    placements hold (written by hand, or by an older orca). The scheduler then re-checks
    that the node holds the replica, as for a resize.
    """

    node: str
    alloc_id: str
    cpu: int
    memory: int
    score: int = 0
    sized: bool = True
    #: Every other resource it holds (``Resources.scalars``), shared by a Workload's bookings.
    scalars: Scalars = ()


@dataclass(eq=False)
class Assumption:
    """A decision booked before its status write; confirm or forget it exactly once."""

    key: str
    bookings: tuple[Booking, ...]
    previous: tuple[Booking, ...]
    settled: bool = field(default=False)


class Ledger:
    """Bookings per Workload key (``<namespace>/<name>``), with per-node usage arrays."""

    def __init__(self, table: NodeTable | None = None) -> None:
        self._bookings: dict[str, tuple[Booking, ...]] = {}
        self._assumed: dict[str, Assumption] = {}  # key -> its assumption not yet settled
        self.table = table if table is not None else NodeTable(())
        self.used_cpu: IntArray = np.zeros(len(self.table), dtype=np.int64)
        self.used_memory: IntArray = np.zeros(len(self.table), dtype=np.int64)
        #: Replicas booked per node (of every Workload): the Pods counted against allocatable
        #: ``pods``, and the per-node gauge, kept in step.
        self.replicas: IntArray = np.zeros(len(self.table), dtype=np.int64)
        #: Booked per scalar resource (ephemeral-storage, huge pages, extended), per node: a
        #: column for each name some booking holds.
        self.used_scalars: dict[str, IntArray] = {}
        #: Node name -> {Workload key: its replicas there}: who a node change concerns,
        #: without walking every booking (``keys_on``).
        self._on_node: dict[str, dict[str, int]] = {}
        #: The rows whose usage changed, in order, in this epoch (see the module).
        self._journal: list[int] = []
        self._epoch = next(_EPOCHS)
        #: Allocatable less the usage, kept row by row beside it: every scheduling cycle
        #: copies these (``free``, ``free_pods``) rather than subtract the whole table again.
        self._free_cpu, self._free_memory, self._free_pods = self._computed_free()

    def _computed_free(self) -> tuple[IntArray, IntArray, IntArray]:
        table = self.table
        pods = table.pods - self.replicas
        return table.cpu - self.used_cpu, table.memory - self.used_memory, pods

    # -- reading -----------------------------------------------------------------------------

    def bookings(self, key: str) -> tuple[Booking, ...]:
        return self._bookings.get(key, ())

    def assumed(self, key: str) -> bool:
        """Whether ``key`` has an assumption not yet settled: its status write is in flight."""
        return key in self._assumed

    def placed(self, key: str) -> int:
        """How many of Workload ``key``'s replicas are booked on a node of the table: what a
        disruption budget counts as placed (a replica on a node gone or drained is not)."""
        index = self.table.index
        return sum(b.node in index for b in self._bookings.get(key, ()))

    def healthy(self, key: str) -> int:
        """How many of Workload ``key``'s replicas are booked on a Ready node of the table:
        what a disruption budget counts as available. kube's disruption controller counts
        Ready Pods (``countHealthyPods``), and the node lifecycle controller marks a NotReady
        node's Pods not ready, so a replica kept on a NotReady node is placed but not
        available."""
        index, ready = self.table.index, self.table.ready
        return sum(
            bool(ready[i])
            for b in self._bookings.get(key, ())
            if (i := index.get(b.node)) is not None
        )

    def keys_on(self, node: str) -> set[str]:
        """Keys of the Workloads with a replica booked on ``node``."""
        return set(self._on_node.get(node, ()))

    def workload_keys(self) -> Iterator[str]:
        """Keys of the Workloads that hold bookings."""
        return iter(self._bookings)

    def __len__(self) -> int:
        return sum(len(b) for b in self._bookings.values())

    @property
    def position(self) -> tuple[int, int]:
        """Where the usage stands now: (epoch, rows noted so far). Free capacity copied now
        differs from the ledger's at a later position only in ``rows_changed`` between them."""
        return self._epoch, len(self._journal)

    def rows_changed(self, a: tuple[int, int], b: tuple[int, int]) -> list[int] | None:
        """The rows whose usage may differ between positions ``a`` and ``b`` of this ledger
        (in either order, rows repeated); None when either is not of its current epoch: any
        row may then differ."""
        if a[0] != self._epoch or b[0] != self._epoch:
            return None
        low, high = (a[1], b[1]) if a[1] <= b[1] else (b[1], a[1])
        return self._journal[low:high]

    def _new_epoch(self) -> None:
        self._journal = []
        self._epoch = next(_EPOCHS)

    def free(self) -> tuple[IntArray, IntArray]:
        """Free cpu and memory per node of the bound table (allocatable minus bookings): the
        caller's own copies."""
        return self._free_cpu.copy(), self._free_memory.copy()

    def free_pods(self) -> IntArray:
        """Pods each node still takes (allocatable ``pods`` minus the replicas booked): the
        caller's own copy."""
        return self._free_pods.copy()

    def free_scalar(self, name: str) -> IntArray:
        """Free ``name`` per node: allocatable minus bookings (negative where a node offers
        less than is booked there: it shrank, or stopped offering it)."""
        used = self.used_scalars.get(name)
        allocatable = self.table.scalar(name)
        return allocatable - used if used is not None else allocatable.copy()

    def resource_names(self) -> list[str]:
        """Every scalar resource a node offers or a booking holds, sorted."""
        return sorted({*self.table.scalars, *self.used_scalars})

    def replicas_per_node(self, key: str) -> IntArray:
        """How many replicas of Workload ``key`` each node holds (for name affinity)."""
        counts = np.zeros(len(self.table), dtype=np.int64)
        for booking in self._bookings.get(key, ()):
            i = self.table.index.get(booking.node)
            if i is not None:
                counts[i] += 1
        return counts

    def copy(self) -> Ledger:
        """A scratch copy on the same table (the rebalancer plans its moves on one): the
        bookings are shared (immutable tuples), the usage arrays are its own."""
        other = Ledger(self.table)
        other._bookings = dict(self._bookings)
        other.used_cpu = self.used_cpu.copy()
        other.used_memory = self.used_memory.copy()
        other.replicas = self.replicas.copy()
        other.used_scalars = {name: used.copy() for name, used in self.used_scalars.items()}
        other._on_node = {node: dict(keys) for node, keys in self._on_node.items()}
        other._free_cpu, other._free_memory = self.free()
        other._free_pods = self.free_pods()
        return other

    def what_if(
        self,
        *,
        lift: Mapping[str, Collection[Booking]] | None = None,
        remove: Collection[str] = (),
        add: Iterable[NodeInfo] = (),
    ) -> Ledger:
        """The cluster as it would be after a change, as a scratch ledger (this one is not
        changed): the one way a planner asks "what if" of the whole cluster.

        - ``lift``: per Workload key, bookings given back, as if those replicas were gone
          (preemption's victims);
        - ``remove``: nodes gone (a drain, a zone lost). What they held stays recorded, as
          on a live cluster whose node was deleted: the scheduler finds those replicas'
          node gone and places them again, a DaemonSet's simply end;
        - ``add``: nodes added, empty (capacity bought). A name that would be there twice is
          a ``ValueError``. A node removed and added in the same change is replaced: the one
          added is empty, and what the removed one held is displaced as from any removed
          node (its bookings are recorded as on a node that is gone, ``REMOVED``).
        """
        other = self.copy()
        added = tuple(add)
        if remove or added:
            gone = set(remove)
            staying = [n for n in self.table.nodes if n.hostname not in gone]
            hostnames = {n.hostname for n in staying}
            for node in added:
                if node.hostname in hostnames:
                    raise ValueError(f"node {node.hostname} is already in the cluster")
                hostnames.add(node.hostname)
            replaced = gone & hostnames
            for key in {k for node in replaced for k in other.keys_on(node)}:
                other.load(
                    key, (_gone(b) if b.node in replaced else b for b in other.bookings(key))
                )
            other.rebind(NodeTable([*staying, *added]) if added else self.table.without(gone))
        for key, lifted in (lift or {}).items():
            gone_ids = {(b.node, b.alloc_id) for b in lifted}
            other.load(
                key, (b for b in other.bookings(key) if (b.node, b.alloc_id) not in gone_ids)
            )
        return other

    # -- writing -----------------------------------------------------------------------------

    def rebind(self, table: NodeTable) -> None:
        """Follow a new node table: usage is recomputed from the bookings (nothing is lost;
        bookings on nodes that left the table keep their place until rescheduled). A table
        with the same hostnames in the same rows (``NodeTable.replaced``: a node changed, none
        came or went) keeps the usage as it is: it is per row, and every booking is already
        counted on its row; one without a new node (nodes left) takes each row's usage from
        the row its node had."""
        same_rows = (
            table.hostnames is self.table.hostnames or table.hostnames == self.table.hostnames
        )
        rows = None if same_rows else list(map(self.table.index.get, table.hostnames))
        self.table = table
        if same_rows:
            # A node's allocatable may have changed: free capacity is read from it again.
            self._free_cpu, self._free_memory, self._free_pods = self._computed_free()
            return
        self._new_epoch()  # rows moved: a position of the old rows means nothing here
        if rows is not None and None not in rows:
            # No node is new: each row's usage is still the sum of the bookings on its node.
            taken = np.array(rows, dtype=np.intp)
            self.used_cpu, self.used_memory = self.used_cpu[taken], self.used_memory[taken]
            self.replicas = self.replicas[taken]
            self.used_scalars = {name: used[taken] for name, used in self.used_scalars.items()}
            self._free_cpu, self._free_memory, self._free_pods = self._computed_free()
            return
        self.used_cpu = np.zeros(len(table), dtype=np.int64)
        self.used_memory = np.zeros(len(table), dtype=np.int64)
        self.replicas = np.zeros(len(table), dtype=np.int64)
        self.used_scalars = {}
        self._free_cpu, self._free_memory, self._free_pods = self._computed_free()
        for bookings in self._bookings.values():
            self._apply(bookings, +1)

    def load(self, key: str, bookings: Iterable[Booking]) -> None:
        """Record a Workload's confirmed bookings (read from its status)."""
        self._replace(key, tuple(bookings))

    def remove(self, key: str) -> None:
        """A Workload is gone: its capacity is free again (and a write of it in flight is
        moot: its assumption is no longer the key's)."""
        self._assumed.pop(key, None)
        self._replace(key, ())

    def assume(self, key: str, bookings: Iterable[Booking]) -> Assumption:
        """Book a decision before its status write lands; returns what to settle."""
        new = tuple(bookings)
        previous = self._replace(key, new)
        assumption = Assumption(key=key, bookings=new, previous=previous)
        self._assumed[key] = assumption
        return assumption

    def confirm(self, assumption: Assumption) -> None:
        """The status write landed: the assumed bookings are the truth."""
        self._settle(assumption)

    def hold(self, assumption: Assumption) -> None:
        """The status write got no answer: it may have landed or not, so both outcomes stay
        booked (``held_until_written`` of the two) until the Workload is read back."""
        if (
            self._settle(assumption)
            and self._bookings.get(assumption.key, ()) == assumption.bookings
        ):
            held = held_until_written(assumption.previous, assumption.bookings)
            self._replace(assumption.key, held)

    def forget(self, assumption: Assumption) -> None:
        """The status write failed: restore the previous bookings (if not superseded)."""
        if (
            self._settle(assumption)
            and self._bookings.get(assumption.key, ()) == assumption.bookings
        ):
            self._replace(assumption.key, assumption.previous)

    def _settle(self, assumption: Assumption) -> bool:
        """Settle ``assumption``; False if it was settled already."""
        if assumption.settled:
            return False
        assumption.settled = True
        if self._assumed.get(assumption.key) is assumption:
            del self._assumed[assumption.key]
        return True

    def _replace(self, key: str, new: tuple[Booking, ...]) -> tuple[Booking, ...]:
        old = self._bookings.pop(key, ())
        self._apply(old, -1)
        self._index(key, old, -1)
        if new:
            self._bookings[key] = new
        self._apply(new, +1)
        self._index(key, new, +1)
        return old

    def _index(self, key: str, bookings: Iterable[Booking], sign: int) -> None:
        for b in bookings:
            keys = self._on_node.setdefault(b.node, {})
            count = keys.get(key, 0) + sign
            if count > 0:
                keys[key] = count
            else:
                keys.pop(key, None)
                if not keys:
                    del self._on_node[b.node]

    def _apply(self, bookings: Iterable[Booking], sign: int) -> None:
        index = self.table.index
        journal = self._journal
        for b in bookings:
            i = index.get(b.node)
            if i is not None:
                journal.append(i)
                self.used_cpu[i] += sign * b.cpu
                self.used_memory[i] += sign * b.memory
                self.replicas[i] += sign
                self._free_cpu[i] -= sign * b.cpu
                self._free_memory[i] -= sign * b.memory
                self._free_pods[i] -= sign
                for name, amount in b.scalars:
                    used = self.used_scalars.get(name)
                    if used is None:
                        used = self.used_scalars[name] = np.zeros(len(self.table), np.int64)
                    used[i] += sign * amount
        if len(journal) > JOURNAL_LIMIT:
            self._new_epoch()


#: Where ``Ledger.what_if`` records what a node replaced in the same change held: no node's
#: name (a Node's name is never empty), so it counts nowhere and the scheduler places it again.
REMOVED = ""


def _gone(b: Booking) -> Booking:
    return Booking(REMOVED, b.alloc_id, b.cpu, b.memory, b.score, b.sized, b.scalars)


def held_until_written(
    previous: tuple[Booking, ...], decided: tuple[Booking, ...]
) -> tuple[Booking, ...]:
    """What to book while a decision's write is in flight: the decided bookings, plus every
    previous one it gives up, each replica at the larger of its two sizes where it stays.

    Capacity a decision frees is not free until its status write lands. Handing it out at once
    let another Workload's write land first; a crash (or a 409) then lost the first write and
    left both on the node, over capacity, which nothing repairs. (docs/design.md asks the same
    order of preemption: victims' writes confirmed before the preemptor's.)"""
    held = {(b.node, b.alloc_id): b for b in decided}
    for b in previous:
        now = held.get((b.node, b.alloc_id))
        if now is None:
            held[(b.node, b.alloc_id)] = b
        elif b.cpu > now.cpu or b.memory > now.memory or b.scalars != now.scalars:
            held[(b.node, b.alloc_id)] = Booking(
                b.node,
                b.alloc_id,
                max(b.cpu, now.cpu),
                max(b.memory, now.memory),
                now.score,
                scalars=larger(b.scalars, now.scalars),
            )
    return tuple(held.values())


def larger(a: Scalars, b: Scalars) -> Scalars:
    """Per resource, the larger of the two amounts (a resource in one only: its amount)."""
    if a == b:
        return a
    merged = dict(a)
    for name, amount in b:
        merged[name] = max(merged.get(name, 0), amount)
    return tuple(sorted(merged.items()))


def gives_back(previous: tuple[Booking, ...], current: tuple[Booking, ...]) -> bool:
    """Whether ``current`` gives capacity back on some node, next to ``previous`` (a replica
    moved away, fewer replicas, or smaller ones), of any resource (a Pod counted as one)."""
    usage: dict[str, dict[str, int]] = {}
    for sign, bookings in ((1, previous), (-1, current)):
        for b in bookings:
            node = usage.setdefault(b.node, {})
            for name, amount in (
                (names.PODS, 1),
                (names.CPU, b.cpu),
                (names.MEMORY, b.memory),
                *b.scalars,
            ):
                node[name] = node.get(name, 0) + sign * amount
    return any(amount > 0 for node in usage.values() for amount in node.values())


def bookings_from_status(workload: Workload) -> list[Booking]:
    """A Workload's recorded placements (its ``status``), booked at the size the status
    records (``status.resources``), each resource the spec asks for and the status does not
    record at the spec's amount, marked as a guess (``Booking.sized``)."""
    status = workload.status
    if status is None:
        return []
    cpu, memory, scalars, sized = booked_size(status.resources, workload.spec.resources)
    return [
        Booking(p.node, p.alloc_id, cpu, memory, p.score, sized, scalars) for p in status.placements
    ]


def booked_size(held: Resources | None, wanted: Resources | None) -> tuple[int, int, Scalars, bool]:
    """(cpu, memory, scalars, sized): what a placement holds, per resource as the status
    records it (``held``), else as the spec asks (``wanted``); sized when the status records
    every resource the spec asks for (a status without ``resources``, written by hand or by
    an older orca, is a guess throughout)."""
    if held is None:
        held = _NOTHING
        sized = False
    else:
        sized = wanted is None or all(held.given(name) for name in wanted.root)
    if wanted is None or sized:
        return held.cpu_millis, held.memory_bytes, held.scalars, sized
    cpu = held.cpu_millis if held.given(names.CPU) else wanted.cpu_millis
    memory = held.memory_bytes if held.given(names.MEMORY) else wanted.memory_bytes
    scalars = dict(held.scalars)
    for name, amount in wanted.scalars:
        if not held.given(name):
            scalars[name] = amount
    return cpu, memory, tuple(sorted(scalars.items())), sized


_NOTHING = Resources()


def ledger_from_statuses(nodes: Iterable[NodeInfo], workloads: Iterable[Workload]) -> Ledger:
    """The ledger as the operator rebuilds it on start: every Workload's recorded placements."""
    ledger = Ledger(NodeTable(nodes))
    for workload in workloads:
        ledger.load(workload.key, bookings_from_status(workload))
    return ledger


def bookings_from_object(obj: Mapping[str, Any]) -> list[Booking]:
    """The placements recorded in a raw Workload object's status, whether or not its spec
    parses: capacity a Workload holds stays held until the Workload is fixed or deleted.

    Best effort on what the models refuse: each placement is read on its own (one that does
    not parse is not booked; it names no node orca can account to). The size is the one the
    status records (``status.resources``), else the spec's (``spec.resources``, marked as a
    guess like ``bookings_from_status`` does), each resource read on its own; one that does
    not parse either way books zero (the replica keeps its node and allocId, not that
    capacity).
    """
    try:
        return bookings_from_status(Workload.model_validate(obj))
    except ValidationError:
        pass
    status, spec = obj.get("status"), obj.get("spec")
    held = _resources_of(status.get("resources") if isinstance(status, Mapping) else None)
    wanted = _resources_of(spec.get("resources") if isinstance(spec, Mapping) else None)
    cpu, memory, scalars, sized = booked_size(held, wanted)
    return [
        Booking(p.node, p.alloc_id, cpu, memory, p.score, sized, scalars)
        for p in placements_of(obj)
    ]


def placements_of(obj: Mapping[str, Any]) -> list[Placement]:
    """``status.placements`` of a raw Workload object, those that parse, in order."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return []
    try:
        return WorkloadStatus.model_validate(status).placements
    except ValidationError:
        pass
    raw = status.get("placements")
    placements = []
    for item in raw if isinstance(raw, list) else ():
        try:
            placements.append(Placement.model_validate(item))
        except ValidationError:
            continue
    return placements


def _resources_of(raw: object) -> Resources | None:
    """The resources of a raw ``resources`` object that parse, each on its own (the first
    ``MAX_RESOURCES`` of them); None when it is not an object."""
    if not isinstance(raw, Mapping):
        return None
    valid: dict[str, Any] = {}
    for name, value in raw.items():
        if len(valid) >= names.MAX_RESOURCES:
            break
        with contextlib.suppress(ValidationError):
            Resources.model_validate({name: value})
            valid[name] = value
    return Resources.model_validate(valid)


def ledger_from_objects(nodes: Iterable[NodeInfo], objects: Iterable[Mapping[str, Any]]) -> Ledger:
    """The ledger from raw Workload objects (a LIST from the API server), parseable or not."""
    ledger = Ledger(NodeTable(nodes))
    for obj in objects:
        if isinstance(obj.get("metadata"), Mapping):
            ledger.load(key_of(obj), bookings_from_object(obj))
    return ledger
