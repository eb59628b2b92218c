"""The informers' handlers: each kind's events into the operator's view, and who may need a
decision again into the scheduling queue.

Nothing is queued before the start-up gate opens (``StartupGate``): until every informer has
listed once the view is partial (a Workload naming a PriorityClass not listed yet would be
decided Invalid), and routing a Node change then would look at every Workload for each of
thousands of Nodes. The gate queues every Workload at once when it opens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from controller.api.models import key_of
from controller.operator.heap import building_the_view
from controller.operator.kube.informer import Informer
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState, WorkloadRecord
from controller.operator.workqueue import WorkQueue
from controller.scheduler.ledger import gives_back

logger = logging.getLogger("orca.informer")

Obj = dict[str, Any]


class StartupGate:
    """ "Nothing decided before every informer has listed once": ``ready`` is set when each
    informer's ``synced`` is, and every Workload is queued then (nothing says which ones
    need a decision). The collector waits while the view is built (``heap``)."""

    def __init__(
        self, state: ClusterState, queue: WorkQueue, ready: asyncio.Event | None = None
    ) -> None:
        self.state = state
        self.queue = queue
        self.ready = ready if ready is not None else asyncio.Event()

    async def open(self, informers: Iterable[Informer]) -> None:
        with building_the_view():
            await asyncio.gather(*(informer.synced.wait() for informer in informers))
        state = self.state
        self.queue.add_all(state.records)
        self.ready.set()
        logger.info(
            "initial listing complete: %d nodes, %d workloads, %d placements",
            len(state.nodes),
            len(state.records),
            len(state.ledger),
        )


class WorkloadEvents:
    """A Workload added or changed is queued if it may need a decision (not the echo of our
    own status write); one deleted, or changed so that it books less (its status read while
    a write of it was held, another replica's write), frees capacity for whoever waits for
    some, as kube-scheduler moves unschedulable Pods back on an assigned Pod's update or
    deletion; after a relist every Workload is looked at again. Who waits for capacity is
    found by walking every Workload, so that is done once per turn of the event loop in
    which capacity was freed (``flush``), not once per Workload deleted (a namespace of
    thousands deleted at once)."""

    def __init__(self, state: ClusterState, queue: WorkQueue, gate: StartupGate) -> None:
        self.state, self.queue, self.ready = state, queue, gate.ready
        self._freed = False  # capacity freed since the last ``flush``

    def added(self, obj: Obj) -> None:
        key = key_of(obj)
        before = self.state.ledger.bookings(key)
        rules = _preemptible_as(self.state.records.get(key))
        record = self.state.upsert_workload(obj)
        if record is not None and self.ready.is_set():
            self.queue.add(record.key)
            if gives_back(before, self.state.ledger.bookings(key)) or (
                rules is not None and _preemptible_as(record) != rules
            ):
                self._free()

    modified = added

    def deleted(self, obj: Obj) -> None:
        if self.state.delete_workload(key_of(obj)) and self.ready.is_set():
            self._free()

    def _free(self) -> None:
        if not self._freed:
            self._freed = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Queue whoever waits for capacity, once for all that was freed since the last."""
        if self._freed:
            self._freed = False
            # Freed capacity changes nobody's priority: who already waits keeps its place.
            self.queue.add_all(self.state.keys_waiting_for_capacity(), reprioritise=False)

    def listed(self, initial: bool) -> None:
        if not initial and self.ready.is_set():
            self.queue.add_all(self.state.records)


def _preemptible_as(record: WorkloadRecord | None) -> tuple[Any, ...] | None:
    """What decides how many of a Workload's replicas a preemption may take: its disruption
    budget, its gang and its priority class. A change of them (a budget relaxed, a lower
    class) may let a preemptor waiting for capacity take room it could not before, though
    no booking shrank: it wakes them, as freed room does. None: no such Workload (yet)."""
    if record is None or record.workload is None:
        return None
    spec = record.workload.spec
    return (spec.disruption, spec.gang, spec.priority_class_name)


class NodeEvents:
    """A Node added, changed (in what the scheduler reads: not a heartbeat) or deleted: who
    could care are the Workloads with replicas on it, DaemonSets, and whatever a node could
    cure.

    Who to queue is worked out once per turn of the event loop for every Node changed in it,
    not once per Node: the DaemonSets and the Workloads a node could cure are found by
    walking every Workload, and a mass change (thousands of kwok Nodes turned Unknown and
    back while the machine was loaded, a network partition, a relist) walked them once per
    Node: 88% of the operator's CPU in a 5,000-Node backlog, 45 placements/s instead of 300.
    The Nodes' Workloads come from the ledger's index (``Ledger.keys_on``)."""

    def __init__(self, state: ClusterState, queue: WorkQueue, gate: StartupGate) -> None:
        self.state, self.queue, self.ready = state, queue, gate.ready
        self._pending: set[str] = set()  # Nodes changed since the last ``flush``

    def added(self, obj: Obj) -> None:
        self._changed(self.state.upsert_node(obj))

    modified = added

    def deleted(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name")
        self._changed(name if isinstance(name, str) and self.state.delete_node(name) else None)

    def listed(self, initial: bool) -> None:
        """Each Node that changed while nobody watched was delivered on its own."""

    def _changed(self, name: str | None) -> None:
        if name and self.ready.is_set():
            if not self._pending:
                asyncio.get_running_loop().call_soon(self.flush)
            self._pending.add(name)

    def flush(self) -> None:
        """Queue who the Nodes changed since the last flush concern (see the class)."""
        names, self._pending = self._pending, set()
        if not names:
            return
        state = self.state
        keys = state.daemon_keys() | state.keys_waiting_for_nodes()
        for name in names:
            keys |= state.keys_on_node(name)
        # A Node changes nobody's priority: a Workload already waiting keeps its place without
        # its priority resolved again (a backlog's undecided Workloads, once per Node change).
        self.queue.add_all(keys, reprioritise=False)


class PriorityClassEvents:
    """A class created, changed or deleted: decide again the Workloads that name it (and
    those that name none, when the globalDefault changed)."""

    def __init__(
        self, state: ClusterState, queue: WorkQueue, gate: StartupGate, priorities: PriorityIndex
    ) -> None:
        self.state, self.queue, self.ready = state, queue, gate.ready
        self.priorities = priorities

    def added(self, obj: Obj) -> None:
        self._touched(self.priorities.upsert(obj))

    modified = added

    def deleted(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name")
        self._touched(self.priorities.delete(name) if isinstance(name, str) else None)

    def listed(self, initial: bool) -> None:
        """Each class that changed while nobody watched was delivered on its own."""

    def _touched(self, names: set[str | None] | None) -> None:
        if names and self.ready.is_set():
            self.queue.add_all(self.priorities.keys_naming(self.state, names))
