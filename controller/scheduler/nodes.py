"""The scheduler's node types (``NodeInfo``, ``Taint``), Node objects to ``NodeInfo``
(docs/design.md 3), and the ``NodeTable`` the scheduler works on.

The table is an immutable snapshot of the cluster's nodes, sorted by hostname so that array
index order *is* the tie-break order, with the per-node numbers the filters and scores need
held in numpy arrays: one vector operation per workload instead of a Python loop per node.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, ValidationError, field_validator

from controller.api import resources as names
from controller.api.models import (
    DNS1123_SUBDOMAIN_PATTERN,
    MAX_NAME_LENGTH,
    MAX_SCALED_QUANTITY,
    MAX_TAINTS,
    MODEL_CONFIG,
    Compact,
    TaintEffect,
    quantity_to_int,
)
from controller.api.resources import Scalars

#: Where the Node objects this module reads are listed (core/v1).
NODES_PATH = "/api/v1/nodes"
RUNTIME_LABEL_PREFIX = "runtime.orca.cloudinit.dev/"
TAG_LABEL_PREFIX = "tag.orca.cloudinit.dev/"
KIND_LABEL = "orca.cloudinit.dev/kind"
DEFAULT_KIND = "linux"
#: A Node annotated so (value ``"true"``) is never proposed for removal by ``orca plan
#: --consolidate`` (as Karpenter's ``karpenter.sh/do-not-disrupt`` and cluster-autoscaler's
#: ``cluster-autoscaler.kubernetes.io/scale-down-disabled`` keep a node).
DO_NOT_CONSOLIDATE = "orca.cloudinit.dev/do-not-consolidate"

# Label syntax as apimachinery validates it (IsQualifiedName, IsValidLabelValue).
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_PATTERN.removesuffix("$") + r"\Z")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
MAX_LABEL_NAME_LENGTH = 63
MAX_LABEL_PREFIX_LENGTH = 253
MAX_LABEL_VALUE_LENGTH = 63
_MAX_SHOWN = 40

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


#: The taints Kubernetes' node lifecycle controller puts on a Node whose Ready condition is
#: ``False`` (not-ready) or ``Unknown`` (unreachable: its kubelet went silent), with both effects.
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"


class Taint(Compact):
    """A node taint (``spec.taints`` of a Node; fields other than these are ignored).

    ``time_added`` (``timeAdded``, RFC 3339, as seconds since the epoch) is when a NoExecute
    taint was put on: a replica that tolerates it for ``tolerationSeconds`` moves that long
    after. None when the Node does not say (the API server does not fill it in; ``kubectl
    taint`` and the node lifecycle controller do): the operator then counts from when it first
    saw the taint, and ``orca plan`` and ``explain`` from the moment they look (``--now``), as
    kube's taint-eviction controller counts from when it first saw it.
    """

    model_config = ConfigDict(**{**MODEL_CONFIG, "extra": "ignore"})

    key: str
    value: str = ""
    effect: TaintEffect
    time_added: float | None = None

    @field_validator("time_added", mode="before")
    @classmethod
    def _rfc3339(cls, value: Any) -> Any:
        if isinstance(value, str):
            return rfc3339_to_epoch(value)
        if isinstance(value, datetime):  # a YAML timestamp
            return value.timestamp()
        return value

    @property
    def same(self) -> tuple[str, str, TaintEffect]:
        """What makes two taints the same taint (kube's ``Taint.MatchTaint`` plus value)."""
        return (self.key, self.value, self.effect)

    def __str__(self) -> str:
        """kube-scheduler's rendering in its reasons: ``{key: value}``."""
        return f"{{{self.key}: {self.value}}}"


class NodeInfo(Compact):
    """The scheduler's view of a Node (docs/design.md 3); free capacity lives in the ledger.

    ``runtimes`` and ``tags`` are sorted and lower-cased so two Nodes with the same labels give
    equal NodeInfos whatever order the API server listed their labels in.
    """

    model_config = MODEL_CONFIG

    hostname: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    runtimes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    kind: str = "linux"
    cpu: int = Field(default=0, ge=0, le=MAX_SCALED_QUANTITY, description="millicores")
    memory: int = Field(default=0, ge=0, le=MAX_SCALED_QUANTITY, description="bytes")
    #: Allocatable ``pods``: how many replicas the node takes (of every Workload). None when
    #: the Node does not say: no limit (kube would take none, ``GetAllowedPodNumber`` 0; a
    #: kubelet always says, a Node written by hand often does not).
    pods: int | None = Field(default=None, ge=0, le=MAX_SCALED_QUANTITY)
    #: Allocatable ephemeral-storage, huge pages and extended resources, by name (sorted):
    #: what a Workload may ask for beside cpu and memory (``controller.api.resources``).
    scalars: Scalars = ()
    ready: bool = True  # the Ready condition is True (else: takes nothing new)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    readable: bool = True  # False: orca could not read the Node (it takes nothing)
    do_not_consolidate: bool = False  # annotated ``DO_NOT_CONSOLIDATE: "true"``

    @property
    def eligible(self) -> bool:
        """Takes new placements: Ready and not cordoned."""
        return self.ready and not self.unschedulable


class NodeError(ValueError):
    """A Node object that cannot be read (what is wrong, in the user's field names)."""


def node_info_from_node(node: Mapping[str, Any], *, imply_lifecycle: bool = True) -> NodeInfo:
    """Map a Node object (as a dict, the API's JSON) to the scheduler's ``NodeInfo``.

    ``imply_lifecycle``: a Node whose Ready condition is not True and that carries no
    lifecycle NoExecute taint counts as carrying one (``_with_lifecycle_taint``), for a cluster
    without Kubernetes' node lifecycle controller. False where that controller runs: only the
    taints it sets count, as for kube-scheduler and the taint-eviction controller, so its
    per-zone rate limiter and disruption modes hold moves back as they hold evictions back.

    Every field orca reads is checked the way the API server checks it (a DNS-1123 name, label
    syntax, quantities), plus orca's own bound on quantities (``MAX_SCALED_QUANTITY``), so
    ``orca plan`` accepts what ``kubectl apply`` accepts and a Node from a live cluster that
    orca cannot represent is refused with a ``NodeError`` naming the field, never half-read.
    One reader per NodeInfo field: a new field is one line here and one small function.
    """
    if not isinstance(node, Mapping):
        raise NodeError(f"expected an object, got {_type(node)}")
    metadata = _object(node, "metadata", "metadata")
    spec = _object(node, "spec", "spec")
    status = _object(node, "status", "status")
    labels = _labels(metadata)
    allocatable = _object(status, "allocatable", "status.allocatable")
    ready, since = _ready_condition(status)
    taints = _taints(spec.get("taints"))
    return NodeInfo(
        hostname=_name(metadata),
        runtimes=_runtimes(labels),
        tags=_tags(labels),
        labels=labels,
        kind=labels.get(KIND_LABEL, DEFAULT_KIND).lower() or DEFAULT_KIND,
        cpu=_allocatable(allocatable, "cpu", 1000),
        memory=_allocatable(allocatable, "memory", 1),
        pods=None if allocatable.get(names.PODS) is None else _allocatable(allocatable, "pods", 1),
        scalars=_scalars(allocatable),
        ready=ready == "True",
        unschedulable=_unschedulable(spec),
        taints=_with_lifecycle_taint(taints, ready, since) if imply_lifecycle else taints,
        do_not_consolidate=_annotation(metadata, DO_NOT_CONSOLIDATE) == "true",
    )


#: What ``node_info_from_node`` reads of a Node besides its name and labels, as the object has
#: it (``read_parts``).
NodeParts = tuple[Any, ...]


def read_parts(node: Mapping[str, Any]) -> NodeParts | None:
    """The parts of a Node object ``node_info_from_node`` reads, other than its name and
    labels, as they are in the object: allocatable (every resource), ``spec.unschedulable``,
    ``spec.taints``, the Ready condition's status and ``lastTransitionTime``, and the
    ``DO_NOT_CONSOLIDATE`` annotation. Two objects of
    the same Node with equal parts and equal labels give the same ``NodeInfo``, so the
    operator compares these before reading an update again: a heartbeat (only conditions'
    ``lastHeartbeatTime``, addresses, images...) costs a few comparisons, not a rebuild.
    kube-scheduler asks the same of an update before requeueing Pods
    (``NodeSchedulingPropertiesChange``, pkg/scheduler/framework/events.go). None when the
    object is not shaped so that the parts can be told (the full read then says what is
    wrong)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        return None
    allocatable = status.get("allocatable") or {}
    conditions = status.get("conditions") or ()
    if not isinstance(allocatable, Mapping) or not isinstance(conditions, list):
        return None
    ready: list[tuple[Any, Any]] = []
    for condition in conditions:
        if not isinstance(condition, Mapping):
            return None
        if condition.get("type") == "Ready":
            ready.append((condition.get("status"), condition.get("lastTransitionTime")))
    metadata = node.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return (
        tuple(allocatable.items()),  # every resource (the API server lists them sorted)
        spec.get("unschedulable"),
        spec.get("taints"),
        tuple(ready),
        annotations.get(DO_NOT_CONSOLIDATE) if isinstance(annotations, Mapping) else None,
    )


def node_name(node: Mapping[str, Any]) -> str | None:
    """The Node's ``metadata.name`` if it is a valid one (to key a Node that is otherwise
    unreadable), else None."""
    metadata = node.get("metadata") if isinstance(node, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    try:
        return _name(metadata)
    except NodeError:
        return None


def with_taint_times(info: NodeInfo, seen: float, previous: NodeInfo | None = None) -> NodeInfo:
    """``info`` with a time on every NoExecute taint that has none: the time ``previous`` (the
    same Node as seen before) had for the same taint, else ``seen``, when it was first seen.
    The operator does this where it reads a Node (``ClusterState.upsert_node``), so a taint's
    time holds across its heartbeats and decisions; ``orca plan`` and ``explain``, which look
    once, leave it to the scheduler to count such a taint from their ``now``."""
    if all(t.time_added is not None or t.effect is not TaintEffect.NO_EXECUTE for t in info.taints):
        return info
    known = {t.same: t.time_added for t in previous.taints} if previous is not None else {}
    taints = tuple(
        t
        if t.time_added is not None or t.effect is not TaintEffect.NO_EXECUTE
        else t.model_copy(update={"time_added": known.get(t.same) or seen})
        for t in info.taints
    )
    return info.model_copy(update={"taints": taints})


def unreadable_node_info(name: str) -> NodeInfo:
    """What the scheduler sees of a Node orca cannot read: a node that is not ready, with no
    capacity and no labels. It takes nothing new, and the replicas on it move at once (or, for
    a DaemonSet, are dropped), as from a cordoned node; never a stale NodeInfo."""
    return NodeInfo(hostname=name, ready=False, readable=False)


# -- one reader per field ------------------------------------------------------------------------


def _object(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise NodeError(f"{path}: expected an object, got {_type(value)}")
    return value


def _name(metadata: Mapping[str, Any]) -> str:
    name = metadata.get("name")
    if name is None or name == "":
        raise NodeError("metadata.name is required")
    if not isinstance(name, str):
        raise NodeError(f"metadata.name: expected a string, got {_type(name)}")
    if len(name) > MAX_NAME_LENGTH or not _DNS1123_SUBDOMAIN.match(name):
        raise NodeError(
            f"metadata.name: {_shown(name)} is not a valid Node name (a DNS-1123 subdomain: "
            f"lower-case letters, digits, '-' and '.', at most {MAX_NAME_LENGTH} characters)"
        )
    return name


def _labels(metadata: Mapping[str, Any]) -> dict[str, str]:
    labels = _object(metadata, "labels", "metadata.labels")
    for key, value in labels.items():
        if isinstance(key, str) and isinstance(value, str) and _valid_label(key, value):
            continue  # the usual case, decided once per distinct label: say why otherwise
        if not isinstance(key, str):
            raise NodeError(
                f"metadata.labels: key {_shown(str(key))} is {_type(key)}, not a string"
            )
        problem = label_key_problem(key)
        if problem:
            raise NodeError(f"metadata.labels: key {_shown(key)} {problem}")
        if not isinstance(value, str):
            raise NodeError(f"metadata.labels[{key}]: expected a string, got {_type(value)}")
        if not valid_label_value(value):
            raise NodeError(
                f"metadata.labels[{key}]: {_shown(value)} is not a valid label value (at most "
                f"{MAX_LABEL_VALUE_LENGTH} letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit)"
            )
    return dict(labels)


@functools.lru_cache(maxsize=16384)
def _valid_label(key: str, value: str) -> bool:
    """Whether ``key: value`` is a valid label. Cached: a cluster's Nodes repeat a few dozen
    keys and values (zone, instance type, os...), so each is checked once, not per Node."""
    return label_key_problem(key) is None and valid_label_value(value)


def valid_label_value(value: str) -> bool:
    return not value or (
        len(value) <= MAX_LABEL_VALUE_LENGTH and bool(_LABEL_NAME.fullmatch(value))
    )


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a label key (``[prefix/]name``), or None when it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (
        not prefix or len(prefix) > MAX_LABEL_PREFIX_LENGTH or not _DNS1123_SUBDOMAIN.match(prefix)
    ):
        return "has a prefix that is not a DNS-1123 subdomain"
    if not name or len(name) > MAX_LABEL_NAME_LENGTH or not _LABEL_NAME.fullmatch(name):
        return (
            f"is not a valid label key (a name of at most {MAX_LABEL_NAME_LENGTH} letters, digits,"
            " '-', '_' or '.', optionally after a DNS-1123 prefix and '/')"
        )
    return None


def _annotation(metadata: Mapping[str, Any], key: str) -> str | None:
    """One annotation's value (None when absent); annotations are otherwise not read."""
    annotations = _object(metadata, "annotations", "metadata.annotations")
    value = annotations.get(key)
    if value is not None and not isinstance(value, str):
        raise NodeError(f"metadata.annotations[{key}]: expected a string, got {_type(value)}")
    return value


def _runtimes(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(
        sorted(
            {
                key[len(RUNTIME_LABEL_PREFIX) :].lower()
                for key, value in labels.items()
                if key.startswith(RUNTIME_LABEL_PREFIX) and value.lower() == "true"
            }
        )
    )


def _tags(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(
        sorted({key[len(TAG_LABEL_PREFIX) :] for key in labels if key.startswith(TAG_LABEL_PREFIX)})
    )


def _allocatable(allocatable: Mapping[str, Any], resource: str, scale: int) -> int:
    try:
        return quantity_to_int(allocatable.get(resource, 0), scale)
    except ValueError as exc:
        raise NodeError(f"status.allocatable.{resource}: {exc}") from None


#: What every Node's allocatable holds that is not a scalar resource.
_COMMON: Final = frozenset({names.CPU, names.MEMORY, names.PODS})


def _scalars(allocatable: Mapping[str, Any]) -> Scalars:
    """Allocatable resources a Workload may ask for beside cpu and memory: ephemeral-storage,
    huge pages and extended resources, as kube's ``Resource.Add`` counts them (``Value()``,
    rounded up). Others (``pods``, ``attachable-volumes-*``, names in the ``kubernetes.io``
    domain) are Kubernetes' own and not asked for by name."""
    if len(allocatable) > names.MAX_NODE_RESOURCES:
        raise NodeError(
            f"status.allocatable: {len(allocatable)} resources, more than orca reads "
            f"({names.MAX_NODE_RESOURCES})"
        )
    out = []
    for name in allocatable:
        if name in _COMMON or not isinstance(name, str):
            continue
        if names.name_problem(name) is None:
            out.append((name, _allocatable(allocatable, name, 1)))
    return tuple(sorted(out))


def rfc3339_to_epoch(value: str) -> float:
    """An RFC 3339 timestamp (``2026-12-01T10:00:00Z``) as seconds since the epoch."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{_shown(value)} is not an RFC 3339 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{_shown(value)} has no time zone (RFC 3339 needs Z or an offset)")
    return parsed.timestamp()


def _ready_condition(status: Mapping[str, Any]) -> tuple[str, float | None]:
    """The Ready condition's status (``True``, ``False``, ``Unknown``; ``""`` when the Node
    has none: not ready) and its ``lastTransitionTime`` (None when absent). Only the last
    transition is read, never ``lastHeartbeatTime``: a heartbeat changes nothing here."""
    conditions = status.get("conditions")
    if conditions is None:
        return "", None
    if not isinstance(conditions, list):
        raise NodeError(f"status.conditions: expected a list, got {_type(conditions)}")
    ready: tuple[str, float | None] = ("", None)
    for i, condition in enumerate(conditions):
        if not isinstance(condition, Mapping):
            raise NodeError(f"status.conditions[{i}]: expected an object, got {_type(condition)}")
        if condition.get("type") == "Ready":
            state = condition.get("status")
            since = condition.get("lastTransitionTime")
            if state == "True":
                ready = ("True", None)  # when it became Ready matters to no rule
                continue
            if since is None:
                ready = (str(state or ""), None)
                continue
            try:
                ready = (str(state), rfc3339_to_epoch(str(since)))
            except ValueError as exc:
                raise NodeError(f"status.conditions[{i}].lastTransitionTime: {exc}") from None
    return ready


def _with_lifecycle_taint(
    taints: tuple[Taint, ...], ready: str, since: float | None
) -> tuple[Taint, ...]:
    """A Node whose Ready condition is not True carries the NoExecute taint the node lifecycle
    controller would put on it (``unreachable`` when Unknown, else ``not-ready``) since the
    condition's ``lastTransitionTime``, unless it already carries one of the two: a cluster
    without that controller (or before it acts) evicts on the same clock as one with it."""
    if ready == "True" or any(
        t.effect is TaintEffect.NO_EXECUTE and t.key in (TAINT_NOT_READY, TAINT_UNREACHABLE)
        for t in taints
    ):
        return taints
    key = TAINT_UNREACHABLE if ready == "Unknown" else TAINT_NOT_READY
    implied = Taint(key=key, effect=TaintEffect.NO_EXECUTE, time_added=since)
    return tuple(sorted((*taints, implied), key=_taint_order))


#: Allocatable pods of a node that does not say: more than any booking count reaches.
NO_POD_LIMIT: Final = MAX_SCALED_QUANTITY


def _pod_limit(info: NodeInfo) -> int:
    return NO_POD_LIMIT if info.pods is None else info.pods


def _scalar_columns(nodes: tuple[NodeInfo, ...]) -> dict[str, IntArray]:
    """Allocatable per scalar resource, a column per name some node offers (more than 0 of:
    ``NodeTable.scalar`` answers zeros for any other name)."""
    columns: dict[str, IntArray] = {}
    for i, info in enumerate(nodes):
        for name, amount in info.scalars:
            column = columns.get(name)
            if column is None:
                column = columns[name] = np.zeros(len(nodes), dtype=np.int64)
            column[i] = amount
    return {name: column for name, column in columns.items() if column.any()}


def _taint_order(t: Taint) -> tuple[str, str, str]:
    return (t.key, t.effect.value, t.value)


def _unschedulable(spec: Mapping[str, Any]) -> bool:
    value = spec.get("unschedulable")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise NodeError(f"spec.unschedulable: expected true or false, got {_type(value)}")
    return value


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
        if not isinstance(item, Mapping):
            raise NodeError(f"spec.taints[{i}]: expected an object, got {_type(item)}")
        try:
            taints.append(Taint.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise NodeError(f"spec.taints[{i}].{field}: {first['msg']}") from None
    return tuple(sorted(set(taints), key=_taint_order))


def _type(value: object) -> str:
    """A value's type in JSON's words, with its article, for messages."""
    names = {list: "a list", str: "a string", int: "an integer", float: "a number"}
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "an object"
    return names.get(type(value), type(value).__name__)


def _shown(value: str) -> str:
    """A user's string in a message: quoted, escaped, cut short."""
    return repr(value if len(value) <= _MAX_SHOWN else value[: _MAX_SHOWN - 3] + "...")


class NodeTable:
    """An immutable, hostname-sorted snapshot of the nodes, with numpy columns.

    Two counters key the caches built on a table. ``version`` is new for every table: a cache
    of anything a node can change (readiness, cordon, taints) keys on it. ``shape`` is new
    only when a node was added or removed, or changed what CEL expressions and capacity read
    (``SHAPE_FIELDS``: name, labels, runtimes, tags, kind, allocatable); a cache of those
    (CEL outcomes and groups, static filters over them, capacity scores) keys on it and
    survives a node going NotReady and back, which on a large cluster happens between nearly
    every two decisions. Caches keyed on *values* survive both.
    """

    _next_version = 0

    #: How many earlier tables ``changed_since`` remembers.
    LINEAGE: Final = 16
    #: The NodeInfo fields a change of which gives the table a new ``shape``.
    SHAPE_FIELDS: Final = (
        "hostname",
        "runtimes",
        "tags",
        "labels",
        "kind",
        "cpu",
        "memory",
        "pods",
        "scalars",
    )

    def __init__(self, nodes: Iterable[NodeInfo]) -> None:
        by_name: dict[str, NodeInfo] = {}
        for info in nodes:
            by_name[info.hostname] = info  # last one wins, like an API watch
        self.nodes: tuple[NodeInfo, ...] = tuple(by_name[h] for h in sorted(by_name))
        self.index: dict[str, int] = {n.hostname: i for i, n in enumerate(self.nodes)}
        self.hostnames: tuple[str, ...] = tuple(n.hostname for n in self.nodes)
        self.cpu: IntArray = np.array([n.cpu for n in self.nodes], dtype=np.int64)
        self.memory: IntArray = np.array([n.memory for n in self.nodes], dtype=np.int64)
        self.pods: IntArray = np.array([_pod_limit(n) for n in self.nodes], dtype=np.int64)
        #: Allocatable per scalar resource a node of the table offers (0 on the others).
        self.scalars: dict[str, IntArray] = _scalar_columns(self.nodes)
        self.ready: BoolArray = np.array([n.ready for n in self.nodes], dtype=np.bool_)
        self.cordoned: BoolArray = np.array([n.unschedulable for n in self.nodes], dtype=np.bool_)
        self.readable: BoolArray = np.array([n.readable for n in self.nodes], dtype=np.bool_)
        # Most nodes carry no taint: the taint plugin looks only at those that do.
        self.tainted: tuple[int, ...] = tuple(i for i, n in enumerate(self.nodes) if n.taints)
        self._derive()
        self.version = self.shape = NodeTable._new_version()
        #: For the last few tables this one was made from by ``replaced``: their version ->
        #: the rows replaced since (empty for a table built anew), so a plugin that kept
        #: per-row answers for one of them redoes only those rows (``TaintToleration``).
        self.changed_since: dict[int, frozenset[int]] = {}

    @staticmethod
    def _new_version() -> int:
        NodeTable._next_version += 1
        return NodeTable._next_version

    def _derive(self) -> None:
        """The columns computed from others, and every column made read-only."""
        self.eligible: BoolArray = self.ready & ~self.cordoned
        # Divisors for the capacity scores: allocatable as float, inf where there is none.
        self.cpu_divisor: FloatArray = np.where(self.cpu > 0, self.cpu, np.inf)
        self.memory_divisor: FloatArray = np.where(self.memory > 0, self.memory, np.inf)
        self._zeros: IntArray = np.zeros(len(self.nodes), dtype=np.int64)
        for arr in (
            self.cpu,
            self.memory,
            self.pods,
            *self.scalars.values(),
            self._zeros,
            self.ready,
            self.cordoned,
            self.readable,
            self.eligible,
            self.cpu_divisor,
            self.memory_divisor,
        ):
            arr.setflags(write=False)

    def replaced(self, infos: Iterable[NodeInfo]) -> NodeTable:
        """This table with the NodeInfos of some of its nodes replaced: a new table (this one
        is not changed) built in the time the changed rows take, not the whole table's, as
        kube-scheduler's snapshot copies only the nodes whose generation moved
        (``Cache.UpdateSnapshot``, pkg/scheduler/backend/cache/cache.go). The same hostnames
        in the same rows (so ``index`` and ``hostnames`` are shared, and a ledger's usage
        arrays stay valid); ``shape`` is kept unless a changed node differs in a
        ``SHAPE_FIELDS`` field. A hostname not in the table is a ``KeyError``: adding or
        removing a node is a new ``NodeTable``."""
        rows = {self.index[info.hostname]: info for info in infos}
        table = object.__new__(NodeTable)
        nodes = list(self.nodes)
        cpu, memory, pods = self.cpu.copy(), self.memory.copy(), self.pods.copy()
        scalars = {name: column.copy() for name, column in self.scalars.items()}
        for info in rows.values():
            for name, _ in info.scalars:
                if name not in scalars:
                    scalars[name] = np.zeros(len(nodes), dtype=np.int64)
        ready, cordoned, readable = self.ready.copy(), self.cordoned.copy(), self.readable.copy()
        tainted = set(self.tainted)
        reshaped = False
        for i, info in rows.items():
            old = nodes[i]
            reshaped = reshaped or any(
                getattr(old, f) != getattr(info, f) for f in NodeTable.SHAPE_FIELDS
            )
            nodes[i] = info
            cpu[i], memory[i], pods[i] = info.cpu, info.memory, _pod_limit(info)
            offered = dict(info.scalars)
            for name, column in scalars.items():
                column[i] = offered.get(name, 0)
            ready[i], cordoned[i], readable[i] = info.ready, info.unschedulable, info.readable
            if info.taints:
                tainted.add(i)
            else:
                tainted.discard(i)
        table.nodes = tuple(nodes)
        table.index, table.hostnames = self.index, self.hostnames
        table.cpu, table.memory, table.pods = cpu, memory, pods
        table.scalars = {name: column for name, column in scalars.items() if column.any()}
        table.ready, table.cordoned, table.readable = ready, cordoned, readable
        table.tainted = tuple(sorted(tainted))
        table._derive()
        table.version = NodeTable._new_version()
        table.shape = table.version if reshaped else self.shape
        replaced = frozenset(rows)
        table.changed_since = {self.version: replaced}
        for version, before in list(self.changed_since.items())[: NodeTable.LINEAGE - 1]:
            table.changed_since[version] = before | replaced
        return table

    def without(self, names: Iterable[str]) -> NodeTable:
        """This table without the nodes ``names`` (a drain, a failure domain lost; names not
        in it are ignored): the table ``NodeTable`` would build from the other nodes, made
        from this one's columns by slicing them rather than from every NodeInfo again. The
        resilience what-if makes one per failure domain (``controller.scheduler.resilience``:
        5,000 of them for N-1 at 5,000 nodes), where building each anew cost 4 ms. A new
        ``version`` and ``shape``: nodes left."""
        keep = np.ones(len(self.nodes), dtype=np.bool_)
        keep[[self.index[n] for n in names if n in self.index]] = False
        rows = np.flatnonzero(keep)
        table = object.__new__(NodeTable)
        picked = rows.tolist()
        nodes, hostnames = self.nodes, self.hostnames
        table.nodes = tuple([nodes[i] for i in picked])
        table.hostnames = tuple([hostnames[i] for i in picked])
        table.index = dict(zip(table.hostnames, range(len(picked)), strict=True))
        table.cpu, table.memory = self.cpu[rows], self.memory[rows]
        table.pods = self.pods[rows]
        table.scalars = {name: column[rows] for name, column in self.scalars.items()}
        table.scalars = {name: column for name, column in table.scalars.items() if column.any()}
        table.ready, table.cordoned = self.ready[rows], self.cordoned[rows]
        table.readable = self.readable[rows]
        row_of = np.cumsum(keep) - 1  # each kept row's place in the new table
        table.tainted = tuple(int(row_of[i]) for i in self.tainted if keep[i])
        table._derive()
        table.version = table.shape = NodeTable._new_version()
        table.changed_since = {}
        return table

    def __len__(self) -> int:
        return len(self.nodes)

    def scalar(self, name: str) -> IntArray:
        """Allocatable ``name`` per node (read-only; zeros where no node offers it)."""
        return self.scalars.get(name, self._zeros)

    def names(self, mask: BoolArray, limit: int) -> list[str]:
        """The first ``limit`` hostnames where ``mask`` is true (for rejection reasons)."""
        return [self.hostnames[i] for i in np.flatnonzero(mask)[:limit]]
