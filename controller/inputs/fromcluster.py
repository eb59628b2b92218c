"""Listed cluster objects as the scheduler's inputs: what ``orca plan --from-cluster``,
``orca rebalance --from-cluster`` and ``orca explain`` plan from.

A dry run, the ``nomad job plan`` of this world: Nodes, every Workload (their
``status.placements`` are the ledger) and the PriorityClasses, read as the operator reads
them. Pure: ``controller.cli.cluster`` lists them through the operator's client and hands
them here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import Workload, key_of
from controller.scheduler.ledger import Ledger, ledger_from_objects
from controller.scheduler.nodes import (
    NodeError,
    NodeInfo,
    node_info_from_node,
    node_name,
    unreadable_node_info,
)
from controller.scheduler.priority import (
    NO_CLASSES,
    PriorityClass,
    PriorityClassError,
    PriorityClasses,
    priority_class_from_object,
)


class ClusterError(RuntimeError):
    """The cluster cannot be read: one line saying why."""


@dataclass(frozen=True)
class ClusterView:
    """What a dry run needs: the nodes, every Workload object as listed (their statuses are
    the ledger, parseable or not), and one line per object orca could not fully read."""

    nodes: list[NodeInfo]
    workloads: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    parsed: dict[str, Workload] = field(default_factory=dict)  # by key: those that parse
    classes: PriorityClasses = NO_CLASSES  # the cluster's PriorityClasses

    def ledger(self) -> Ledger:
        """Every Workload's recorded placements booked, as the operator books them."""
        return ledger_from_objects(self.nodes, self.workloads)


def view_of(
    raw_nodes: list[dict[str, Any]],
    raw_workloads: list[dict[str, Any]],
    raw_classes: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
    *,
    imply_lifecycle: bool = True,
) -> ClusterView:
    """The ``ClusterView`` of listed objects: a Node orca cannot read is there but not ready
    (so nothing lands on it and its replicas move), and a Workload the models refuse still
    holds the capacity its status records. ``imply_lifecycle``: as the operator reads NotReady
    Nodes (``node_info_from_node``; ``controller.operator.lifecycle``)."""
    nodes: list[NodeInfo] = []
    warnings = list(warnings or [])
    classes: list[PriorityClass] = []
    for obj in raw_classes or []:
        try:
            classes.append(priority_class_from_object(obj))
        except PriorityClassError as exc:
            warnings.append(f"{exc}; ignored")
    for obj in raw_nodes:
        try:
            nodes.append(node_info_from_node(obj, imply_lifecycle=imply_lifecycle))
        except NodeError as exc:
            name = node_name(obj)
            if name is None:
                warnings.append(f"a Node without a valid name is ignored: {exc}")
                continue
            warnings.append(f"Node {name}: {exc}; treated as not ready")
            nodes.append(unreadable_node_info(name))
    parsed: dict[str, Workload] = {}
    for obj in raw_workloads:
        try:
            workload = Workload.model_validate(obj)
            parsed[workload.key] = workload
        except ValidationError as exc:
            warnings.append(
                f"Workload {key_of(obj)}: {validation_message(exc)}; its placements stay booked"
            )
    return ClusterView(nodes, raw_workloads, warnings, parsed, PriorityClasses.of(classes))
