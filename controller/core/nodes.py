"""Node objects to ``NodeInfo`` (DESIGN.md 3) and the ``NodeTable`` the scheduler works on.

The table is an immutable snapshot of the cluster's nodes, sorted by hostname so that array
index order *is* the tie-break order, with the per-node numbers the filters and scores need
held in numpy arrays: one vector operation per workload instead of a Python loop per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from controller.api.models import MAX_TAINTS, NodeInfo, Taint, quantity_to_int

RUNTIME_LABEL_PREFIX = "runtime.orca.cloudinit.dev/"
TAG_LABEL_PREFIX = "tag.orca.cloudinit.dev/"
KIND_LABEL = "orca.cloudinit.dev/kind"
DEFAULT_KIND = "linux"

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


class NodeError(ValueError):
    """A Node object that cannot be read (what is wrong, in the user's field names)."""


def node_info_from_node(node: Mapping[str, Any]) -> NodeInfo:
    """Map a Node object (as a dict, the API's JSON) to the scheduler's ``NodeInfo``."""
    metadata = node.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise NodeError("metadata.name is required")
    labels: dict[str, str] = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    runtimes = sorted(
        {
            key[len(RUNTIME_LABEL_PREFIX) :].lower()
            for key, value in labels.items()
            if key.startswith(RUNTIME_LABEL_PREFIX) and value.lower() == "true"
        }
    )
    tags = sorted(
        {key[len(TAG_LABEL_PREFIX) :] for key in labels if key.startswith(TAG_LABEL_PREFIX)}
    )
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    try:
        cpu = quantity_to_int(allocatable.get("cpu", 0), 1000)
        memory = quantity_to_int(allocatable.get("memory", 0))
    except ValueError as exc:
        raise NodeError(f"status.allocatable: {exc}") from exc
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    spec = node.get("spec") or {}
    return NodeInfo(
        hostname=str(name),
        runtimes=tuple(runtimes),
        tags=tuple(tags),
        labels=labels,
        kind=labels.get(KIND_LABEL, DEFAULT_KIND).lower() or DEFAULT_KIND,
        cpu=max(cpu, 0),
        memory=max(memory, 0),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=_taints(spec.get("taints")),
    )


def _taints(raw: Any) -> tuple[Taint, ...]:
    """``spec.taints`` as the scheduler sees them: sorted, so listing order does not matter."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise NodeError("spec.taints: expected a list")
    if len(raw) > MAX_TAINTS:
        raise NodeError(f"spec.taints: more than {MAX_TAINTS} taints")
    taints: list[Taint] = []
    for i, item in enumerate(raw):
        try:
            taints.append(Taint.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise NodeError(f"spec.taints[{i}].{field}: {first['msg']}") from None
    return tuple(sorted(set(taints), key=lambda t: (t.key, t.effect.value, t.value)))


class NodeTable:
    """An immutable, hostname-sorted snapshot of the nodes, with numpy columns.

    ``version`` is a counter the CEL caches key on; a new table (node added, removed,
    relabelled, resized) gets a new version, while caches keyed on *values* survive.
    """

    _next_version = 0

    def __init__(self, nodes: Iterable[NodeInfo]) -> None:
        by_name: dict[str, NodeInfo] = {}
        for info in nodes:
            by_name[info.hostname] = info  # last one wins, like an API watch
        self.nodes: tuple[NodeInfo, ...] = tuple(by_name[h] for h in sorted(by_name))
        self.index: dict[str, int] = {n.hostname: i for i, n in enumerate(self.nodes)}
        self.hostnames: tuple[str, ...] = tuple(n.hostname for n in self.nodes)
        self.cpu: IntArray = np.array([n.cpu for n in self.nodes], dtype=np.int64)
        self.memory: IntArray = np.array([n.memory for n in self.nodes], dtype=np.int64)
        self.ready: BoolArray = np.array([n.ready for n in self.nodes], dtype=np.bool_)
        self.cordoned: BoolArray = np.array([n.unschedulable for n in self.nodes], dtype=np.bool_)
        self.eligible: BoolArray = self.ready & ~self.cordoned
        # Most nodes carry no taint: the taint plugin looks only at those that do.
        self.tainted: tuple[int, ...] = tuple(i for i, n in enumerate(self.nodes) if n.taints)
        # Divisors for the capacity scores: allocatable as float, inf where there is none.
        self.cpu_divisor: FloatArray = np.where(self.cpu > 0, self.cpu, np.inf)
        self.memory_divisor: FloatArray = np.where(self.memory > 0, self.memory, np.inf)
        for arr in (
            self.cpu,
            self.memory,
            self.ready,
            self.cordoned,
            self.eligible,
            self.cpu_divisor,
            self.memory_divisor,
        ):
            arr.setflags(write=False)
        NodeTable._next_version += 1
        self.version = NodeTable._next_version

    def __len__(self) -> int:
        return len(self.nodes)

    def names(self, mask: BoolArray, limit: int) -> list[str]:
        """The first ``limit`` hostnames where ``mask`` is true (for rejection reasons)."""
        return [self.hostnames[i] for i in np.flatnonzero(mask)[:limit]]
