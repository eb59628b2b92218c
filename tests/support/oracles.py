"""orca's scheduling rules restated from the documents, for the property tests to check against.

Every rule here is written from docs/design.md (sections 2-4) and from Kubernetes' own Go sources
(each function cites the file and function it restates), never from orca's code: this module
imports nothing of ``controller`` (``test_properties`` checks that), so a rule the scheduler
gets wrong cannot be repeated here by sharing one of its helpers. It reads what a user writes:
Node objects as the API server returns them and Workload specs as plain dicts, with the
kubernetes client's quantity parser (docs/design.md 3: "parsed with the client's quantity parser")
and cel-python called directly for the CEL expressions.

Deliberately absent: BinPack's score and topology spread's domain counting (issue 23 is
changing both; their properties belong with that change), and the PreferNoSchedule part of the
score (docs/design.md 4 says only that it "lowers the score"; the properties that compare scores
use clusters without such taints).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import celpy
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError
from kubernetes.utils import quantity

parse_quantity = cast(Callable[[str | int], Decimal], quantity.parse_quantity)

Spec = Mapping[str, Any]
"""A Workload's ``spec`` as the user writes it (camelCase keys, quantities as strings)."""

# docs/design.md 3: the labels a Node carries for orca.
RUNTIME_PREFIX = "runtime.orca.cloudinit.dev/"
TAG_PREFIX = "tag.orca.cloudinit.dev/"
KIND_LABEL = "orca.cloudinit.dev/kind"

# docs/design.md 3, runtime matching: these three names mean "a node whose kind is proxmox".
PROXMOX_RUNTIMES = frozenset({"pve-vm", "pve-ct", "proxmox"})
# docs/design.md 2: an affinity target that is a DNS-1123 label names a Workload.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore


# -- quantities ----------------------------------------------------------------------------------


def millicores(quantity: str | int) -> int:
    """cpu in millicores, rounded up as ``resource.Quantity.MilliValue`` does."""
    return math.ceil(parse_quantity(quantity) * 1000)


def byte_count(quantity: str | int) -> int:
    """memory in bytes, rounded up as ``resource.Quantity.Value`` does."""
    return math.ceil(parse_quantity(quantity))


def request(spec: Spec) -> tuple[int, int]:
    """(millicores, bytes) one replica asks for; absent resources are zero (docs/design.md 2)."""
    resources = spec.get("resources") or {}
    cpu, memory = resources.get("cpu"), resources.get("memory")
    return (
        0 if cpu is None else millicores(cpu),
        0 if memory is None else byte_count(memory),
    )


# -- nodes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A Node object, read as docs/design.md 3's table says (allocatable, labels, taints, Ready)."""

    name: str
    labels: Mapping[str, str]
    cpu: int  # allocatable, millicores
    memory: int  # allocatable, bytes
    ready: bool
    cordoned: bool
    taints: tuple[Mapping[str, str], ...]

    @property
    def runtimes(self) -> list[str]:
        """Labels ``runtime.orca.cloudinit.dev/<name>: "true"``: the names as written."""
        return [
            key.removeprefix(RUNTIME_PREFIX)
            for key, value in self.labels.items()
            if key.startswith(RUNTIME_PREFIX) and value == "true"
        ]

    @property
    def tags(self) -> list[str]:
        return sorted(k.removeprefix(TAG_PREFIX) for k in self.labels if k.startswith(TAG_PREFIX))

    @property
    def kind(self) -> str:
        return self.labels.get(KIND_LABEL, "linux")

    @property
    def eligible(self) -> bool:
        """Ready condition True and not cordoned."""
        return self.ready and not self.cordoned


def read_node(obj: Mapping[str, Any]) -> Node:
    metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    allocatable = status.get("allocatable") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return Node(
        name=metadata["name"],
        labels=dict(metadata.get("labels") or {}),
        cpu=millicores(allocatable.get("cpu", 0)),
        memory=byte_count(allocatable.get("memory", 0)),
        ready=ready,
        cordoned=bool(spec.get("unschedulable")),
        taints=tuple(spec.get("taints") or ()),
    )


# -- filters -------------------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``(*Toleration).ToleratesTaint`` of k8s.io/api v0.36.3, ``core/v1/toleration.go``:
    an empty effect matches every effect, an empty key every key; operator ``Exists``
    matches any value, ``Equal`` (or empty, its default) only the same value (an absent
    value is the empty string). orca's API has no ``Lt``/``Gt``: they never match here."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint["effect"]:
        return False
    key = toleration.get("key") or ""
    if key and key != taint["key"]:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_blocking_taint(node: Node, spec: Spec) -> bool:
    """docs/design.md 4: a NoSchedule or NoExecute taint that no toleration tolerates filters the
    node (kube-scheduler's TaintToleration Filter); PreferNoSchedule never does."""
    tolerations = spec.get("tolerations") or []
    return any(
        taint["effect"] in ("NoSchedule", "NoExecute")
        and not any(tolerates(t, taint) for t in tolerations)
        for taint in node.taints
    )


def _one_runtime(name: str) -> str:
    """docs/design.md 3: case-insensitive, and ``wasm`` and ``wasmtime`` are one runtime."""
    lowered = name.lower()
    return "wasm" if lowered == "wasmtime" else lowered


def offers_runtime(node: Node, spec: Spec) -> bool:
    """docs/design.md 3's runtime matching: no ``runtime.oneOf`` = any runtime; ``pve-vm``,
    ``pve-ct`` and ``proxmox`` match exactly the nodes whose kind is proxmox (whatever runtime
    labels a node carries); the other names match a node's runtime labels."""
    wanted = {_one_runtime(r) for r in (spec.get("runtime") or {}).get("oneOf") or []}
    if not wanted:
        return True
    if wanted & PROXMOX_RUNTIMES and node.kind == "proxmox":
        return True
    offered = {_one_runtime(r) for r in node.runtimes} - PROXMOX_RUNTIMES
    return bool((wanted - PROXMOX_RUNTIMES) & offered)


def cel_view(node: Node, free_cpu: int, free_memory: int) -> dict[str, Any]:
    """The ``node`` variable of docs/design.md 3's CEL environment, from the Node's fields."""
    return {
        "hostname": node.name,
        "runtimes": sorted(r.lower() for r in node.runtimes),
        "tags": node.tags,
        "labels": dict(node.labels),
        "kind": node.kind,
        "cpu": node.cpu,
        "memory": node.memory,
        "freeCpu": free_cpu,
        "freeMemory": free_memory,
    }


@functools.cache
def _program(expression: str) -> Any:
    env = _environment()
    return env.program(env.compile(expression))


@functools.cache
def _environment() -> Any:
    return celpy.Environment()


@functools.lru_cache(maxsize=65536)
def _evaluate(expression: str, view_json: str) -> bool | None:
    try:
        result = _program(expression).evaluate({"node": json_to_cel(json.loads(view_json))})
    except CELEvalError:
        return None
    if isinstance(result, celpy.celtypes.BoolType):
        return bool(result)
    return None  # an error (celpy returns some as a CELEvalError value), or not a bool


def cel_holds(expression: str, view: Mapping[str, Any]) -> bool | None:
    """The expression's value on ``view`` by cel-python itself; None when it fails to
    evaluate (a missing label, say), which docs/design.md 3 says filters the node out (a
    constraint) or adds nothing (an affinity rule)."""
    return _evaluate(expression, json.dumps(view, sort_keys=True))


def hard_spread_keys(spec: Spec) -> list[str]:
    return [
        c["topologyKey"]
        for c in spec.get("topologySpread") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]


def every_node_daemonset(spec: Spec) -> bool:
    """docs/design.md 4: a DaemonSet in ``EveryNode`` mode (the default) ignores constraints."""
    mode = (spec.get("schedule") or {}).get("mode", "EveryNode")
    return bool(spec["kind"] == "DaemonSet" and mode == "EveryNode")


def passes_filters(node: Node, spec: Spec, free_cpu: int, free_memory: int) -> bool:
    """docs/design.md 4's filters that do not depend on this Workload's own replicas: eligible, no
    untolerated NoSchedule/NoExecute taint, runtime offered, every constraint true (not for
    an EveryNode DaemonSet), and for each DoNotSchedule topology spread constraint the node
    has the key. ``free_*`` is what the CEL view shows as ``freeCpu``/``freeMemory``: the
    allocatable minus every other Workload's placements on the node."""
    if not node.eligible or untolerated_blocking_taint(node, spec):
        return False
    if not offers_runtime(node, spec):
        return False
    if not every_node_daemonset(spec):
        view = cel_view(node, free_cpu, free_memory)
        if not all(cel_holds(c, view) is True for c in spec.get("constraints") or []):
            return False
    return all(key in node.labels for key in hard_spread_keys(spec))


def fits(free_cpu: int, free_memory: int, cpu: int, memory: int) -> bool:
    """kube-scheduler's NodeResourcesFit (``fitsRequest``, pkg/scheduler/framework/plugins/
    noderesources/fit.go): a resource is insufficient only when the request is above zero and
    above allocatable minus requested; so a zero request fits anywhere."""
    return not (cpu > 0 and cpu > free_cpu) and not (memory > 0 and memory > free_memory)


# -- usage ---------------------------------------------------------------------------------------


def usage(
    decided: Iterable[tuple[Spec, Sequence[str]]],
) -> tuple[Counter[str], Counter[str]]:
    """(millicores, bytes) used per node: for each Workload, its spec's size times the
    number of its placements on the node. ``decided`` is (spec, placements' node names)."""
    cpu: Counter[str] = Counter()
    memory: Counter[str] = Counter()
    for spec, nodes in decided:
        c, m = request(spec)
        for name in nodes:
            cpu[name] += c
            memory[name] += m
    return cpu, memory


# -- scores --------------------------------------------------------------------------------------


def least_allocated(node: Node, free_cpu_after: int, free_memory_after: int) -> int:
    """docs/design.md 4's Spread score, kube-scheduler's LeastAllocated
    (``leastResourceScorer`` and ``leastRequestedScore``, pkg/scheduler/framework/plugins/
    noderesources/least_allocated.go, weight 1 each): per resource
    ``(allocatable - requested) * 100 / allocatable`` in integers (0 when requested is over
    allocatable), a resource with zero allocatable left out, the sum divided by the number of
    resources counted (0 when none)."""
    total = counted = 0
    for allocatable, free_after in ((node.cpu, free_cpu_after), (node.memory, free_memory_after)):
        if allocatable == 0:
            continue
        counted += 1
        total += 0 if free_after < 0 else free_after * MAX_NODE_SCORE // allocatable
    return total // counted if counted else 0


def affinity(
    node: Node, spec: Spec, replicas: Mapping[str, Counter[str]], free_cpu: int, free_memory: int
) -> int:
    """docs/design.md 4's affinity part: for a CEL target, ``+weight`` where it is true (an error
    adds nothing); for a Workload-name target (a DNS-1123 label, docs/design.md 2), ``+weight``
    per replica of that Workload already placed on the node (``replicas``: name -> node ->
    count, same namespace)."""
    total = 0
    view = cel_view(node, free_cpu, free_memory)
    for rule in spec.get("affinity") or []:
        target, weight = rule["target"], rule["weight"]
        if DNS1123_LABEL.match(target):
            total += weight * replicas.get(target, Counter())[node.name]
        elif cel_holds(target, view) is True:
            total += weight
    return total


# -- every resource, gangs and disruption budgets (issue 46) -------------------------------------

#: Where a Node states no allocatable ``pods``: orca's documented reading, no limit
#: (controller/scheduler/nodes.py; kube-scheduler's ``GetAllowedPodNumber`` would say 0).
NO_POD_LIMIT = None


def amounts(spec: Spec) -> dict[str, int]:
    """What one replica holds, per resource name, in one unit each (cpu in millicores, as
    ``MilliValue``; every other resource as ``Value``, rounded up), plus ``pods: 1``: every
    replica is one Pod (kube's ``fitsRequest`` counts the node's Pods against allocatable
    ``pods``)."""
    out = {"pods": 1}
    for name, value in (spec.get("resources") or {}).items():
        out[name] = millicores(value) if name == "cpu" else byte_count(value)
    return out


def allocatable(obj: Mapping[str, Any]) -> dict[str, int | None]:
    """A Node object's ``status.allocatable``, per resource in ``amounts``' units; ``pods``
    is ``NO_POD_LIMIT`` when the Node does not state it."""
    stated = (obj.get("status") or {}).get("allocatable") or {}
    out: dict[str, int | None] = {
        name: millicores(q) if name == "cpu" else byte_count(q) for name, q in stated.items()
    }
    out.setdefault("pods", NO_POD_LIMIT)
    return out


def booked(decided: Iterable[tuple[Spec, Sequence[str]]]) -> dict[str, Counter[str]]:
    """Per node, per resource, what the Workloads hold there: each spec's ``amounts`` times
    its placements on the node (``decided``: (spec, placements' node names))."""
    out: dict[str, Counter[str]] = {}
    for spec, nodes in decided:
        per_replica = amounts(spec)
        for name in nodes:
            held = out.setdefault(name, Counter())
            for resource, amount in per_replica.items():
                held[resource] += amount
    return out


def scaled(value: int | str, total: int) -> int:
    """apimachinery's ``GetScaledValueFromIntOrPercent(value, total, roundUp=true)``
    (pkg/util/intstr/intstr.go): an int as it is, ``"P%"`` as ``ceil(P * total / 100)`` in
    floating point, as kube computes it."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.removesuffix("%")) * total / 100)


def desired_healthy(disruption: Mapping[str, Any], expected: int) -> int:
    """The replicas a PodDisruptionBudget keeps, kube's ``getExpectedPodCount``
    (pkg/controller/disruption/disruption.go): ``maxUnavailable`` -> ``expected - scaled``
    (never below 0); ``minAvailable`` -> its number, or its percentage of ``expected``
    rounded up."""
    if "maxUnavailable" in disruption:
        return max(expected - scaled(disruption["maxUnavailable"], expected), 0)
    return scaled(disruption["minAvailable"], expected)
