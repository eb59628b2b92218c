"""The invariants every chaos scenario checks, read from the API as a user would see them.

An independent checker: every rule below is restated here from the API reference (docs/,
docs/design.md 2-5, docs/workloads.md) and from Kubernetes' own code where orca borrows its
semantics; nothing of the scheduler's or the models' behaviour is imported (only the parsing
of quantities, which is the kubernetes client's). A rule the operator gets wrong and this module
copies could never fail.

Safety (must hold at *every* observation; ``safety``, ``Observer``):

* capacity        no node takes a placement beyond its room: for every resource a placement
                  new on the node asks (cpu, memory, ephemeral-storage, huge pages, each
                  extended resource such as ``nvidia.com/gpu``), and for its Pod (every replica
                  is one, against allocatable ``pods``; a Node that states none has no limit),
                  everything booked there at the size each Workload's ``status.resources``
                  records (the size the placements hold, DESIGN 5; never the spec's, never the
                  operator's ledger) is at most the node's ``status.allocatable`` (a resource it
                  does not list: 0). Only new placements are judged, as kube's ``fitsRequest``
                  judges only the Pod being placed and only the resources it requests
                  (docs/workloads.md, "Resources fit"): capacity never evicts, so a node that
                  shrank under its placements keeps them, and a resource a placement does not
                  ask for is not its concern. A placement is new at an observation when its
                  allocId was not on that node at the previous one, or holds more of some
                  resource than it did (a resize is checked again); at the first observation, and
                  in the stateless ``safety``, every placement is new.
* replicas        exact counts: a Job has at most 1 placement, a Service at most ``count`` (of
                  the spec its status describes), a DaemonSet at most one per node
* status          ``status.placed`` is the number of placements listed; ``status.desired`` is
                  1 for a Job, ``count`` for a Service; ``phase`` says what was placed
                  (Scheduled: all, PartiallyScheduled: some, Unschedulable: none; DESIGN 4)
* allocIds        unique cluster-wide, and ``<namespace>/<name>-<index>`` of their Workload
* kept            (``Observer``, between two observations) a placement does not vanish or move
                  without a cause: its Workload deleted, recreated or given a new spec, or its
                  node deleted, failing the placement's filters, or changed in between; or its
                  gang released (below)
* gang            (``Observer``) a gang (``spec.gang``) is never placed in between 0 and
                  ``minCount`` for longer than its ``timeoutSeconds`` plus ``GANG_SLACK``
                  (docs/workloads.md, "All or nothing: gangs": a placed gang that lost replicas
                  keeps the rest for ``timeoutSeconds``, then every placement is released). Its
                  release is a cause for its placements to go: when it was below ``minCount`` at
                  the previous observation, or the placements its nodes took left it below, and
                  it is not below now (released, or released and placed whole again)
* budget          (``Observer``, between two observations) no Workload with a disruption budget
                  (``spec.disruption``, PodDisruptionBudget's arithmetic) loses, to replicas
                  that vanish or move without any cause of "kept" or a gang's release, so many
                  that fewer than its desired healthy count stay: what is left is orca's own
                  voluntary move (preemption, rebalancing), which a budget forbids (a node gone,
                  tainted NoExecute, cordoned, is no voluntary disruption of orca's)

Liveness (hold once the operator has caught up; ``liveness``):

* decided         every Workload's status describes its current spec (observedGeneration)
* filters         every placement is on a node that exists, is not cordoned, whose NoExecute
                  taints (a not-Ready node's implicit one included) are tolerated or still
                  within their ``tolerationSeconds``, that offers the runtime and passes the
                  constraints (a DaemonSet in EveryNode mode: no constraints); constraints that
                  read free capacity are not re-checked
* stranded        no Job/Service short of replicas while a node that passes its filters has
                  room for one (room: every resource its spec asks, and a Pod), no DaemonSet
                  missing from such a node, and no gang with nothing placed while the nodes have
                  room for ``minCount`` of its replicas (a Service's replicas go to any node with
                  room, so the room is the sum over the nodes of the replicas each one fits)

The scenarios use neither PriorityClasses (preemption) nor the rebalancer, so the only causes
of a move are the ones listed under "kept", and "budget" holds unless the operator moves a
replica it had no cause to move.

A scenario's "converge" figure is the time from the end of its fault (the restart, the thaw,
the server back, the cuts stopped) to the first observation where the liveness invariants hold
as well.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import celpy
from celpy.adapter import json_to_cel

from controller.api.models import quantity_to_int  # the kubernetes client's parser

# DESIGN 3: how a Node advertises itself.
RUNTIME_PREFIX = "runtime.orca.cloudinit.dev/"
TAG_PREFIX = "tag.orca.cloudinit.dev/"
KIND_LABEL = "orca.cloudinit.dev/kind"
PROXMOX_RUNTIMES = frozenset({"pve-vm", "pve-ct", "proxmox"})

# Kubernetes' node lifecycle taints (k8s.io/api core/v1 well_known_taints.go).
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NO_EXECUTE, NO_SCHEDULE = "NoExecute", "NoSchedule"
#: DefaultTolerationSeconds admission plugin's default (DESIGN 5: Jobs and Services).
DEFAULT_TOLERATION_SECONDS = 300

# Resources (docs/workloads.md, "Any resource a Node offers"; Kubernetes' resource names).
CPU, MEMORY, PODS = "cpu", "memory", "pods"
#: A gang's ``timeoutSeconds`` when not given (KEP-4671's default; docs/workloads.md).
DEFAULT_GANG_TIMEOUT = 300
#: How much longer than its ``timeoutSeconds`` a gang may be seen half placed. The operator
#: releases it by a timer set for the deadline (``Decision.look_again_at``), so in calm
#: weather a decision and one status write late; what holds the release back longer in the
#: scenarios is the operator unable to act: killed and started again (it decides every
#: Workload once it runs; up to ~30 s on the loaded 2-core machine), frozen until the
#: standby takes the Lease (15 s), the API server down (15-20 s) or the network cut (12 s,
#: writes retried with back-off); plus the monitor's half-second poll. 60 s covers the longest
#: of these with room to spare, and is five times shorter than the periodic resync
#: (``orca run --resync-seconds``, 300 s): a release that waited for a resync instead of its
#: timer is still caught.
GANG_SLACK = 60.0

SAFETY = frozenset(
    {
        "over-capacity",
        "unsized",
        "job-replicas",
        "service-replicas",
        "daemonset-node",
        "placed-count",
        "desired",
        "phase",
        "duplicate-alloc",
        "alloc-owner",
        "lost",
        "gang-half-placed",
        "budget",
    }
)
LIVENESS = frozenset(
    {"undecided", "no-node", "ineligible", "taint", "runtime", "constraint", "stranded"}
)

_ENV = celpy.Environment()
_ALLOC = re.compile(r"(?P<owner>.+)-(?P<index>0|[1-9][0-9]*)")


@dataclass(frozen=True)
class Violation:
    kind: str  # one of SAFETY or LIVENESS (or a scenario's own: operator-exited, ...)
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.subject}: {self.detail}"

    @property
    def safety(self) -> bool:
        return self.kind not in LIVENESS


# -- Nodes, read from the Node object (DESIGN 3) -------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str
    added: float | None = None  # timeAdded, seconds since the epoch


@dataclass(frozen=True)
class NodeView:
    """What the rules need of one Node, straight from its JSON."""

    name: str
    version: str  # metadata.resourceVersion: a change of any kind shows here
    labels: Mapping[str, str]
    cpu: int  # millicores
    memory: int  # bytes
    ready: str  # the Ready condition's status: "True", "False", "Unknown", "" (none)
    ready_since: float | None  # its lastTransitionTime
    unschedulable: bool
    taints: tuple[Taint, ...]
    readable: bool = True
    #: Every other resource of ``status.allocatable`` in its unit (bytes, a count), ``pods``
    #: included: what the node offers beside cpu and memory.
    others: Mapping[str, int] = field(default_factory=dict)

    def allocatable(self, resource: str) -> int | None:
        """How much of ``resource`` the node offers (cpu in millicores); 0 when it does not
        list it, but None for ``pods`` when it does not say: no limit (docs/workloads.md,
        "Deliberate differences": kube would take no Pod there)."""
        if resource == CPU:
            return self.cpu
        if resource == MEMORY:
            return self.memory
        if resource == PODS:
            return self.others.get(PODS)
        return self.others.get(resource, 0)

    @property
    def eligible(self) -> bool:
        """DESIGN 3: Ready condition True and ``spec.unschedulable`` not set."""
        return self.readable and self.ready == "True" and not self.unschedulable

    @property
    def runtimes(self) -> frozenset[str]:
        """Labels ``runtime.orca.cloudinit.dev/<name>: "true"``, names case-insensitive."""
        return frozenset(
            key[len(RUNTIME_PREFIX) :].lower()
            for key, value in self.labels.items()
            if key.startswith(RUNTIME_PREFIX) and value.lower() == "true"
        )

    @property
    def tags(self) -> frozenset[str]:
        return frozenset(k[len(TAG_PREFIX) :] for k in self.labels if k.startswith(TAG_PREFIX))

    @property
    def kind(self) -> str:
        return (self.labels.get(KIND_LABEL) or "linux").lower()

    def cel(self) -> dict[str, Any]:
        """The CEL ``node`` variable (DESIGN 3), free capacity left out: a constraint that reads
        it depends on the moment of the decision and is not re-checked."""
        return {
            "hostname": self.name,
            "runtimes": sorted(self.runtimes),
            "tags": sorted(self.tags),
            "labels": dict(self.labels),
            "kind": self.kind,
            "cpu": self.cpu,
            "memory": self.memory,
        }

    def no_execute(self) -> tuple[Taint, ...]:
        """Its NoExecute taints, with the one DESIGN 5 implies for a node that is not Ready and
        carries no lifecycle taint yet: ``not-ready`` (``unreachable`` when Unknown) since the
        Ready condition's lastTransitionTime. That is ``orca run --node-lifecycle=ready``; the
        lab's operators find kube-controller-manager's Lease and follow its taints alone, so
        this rule could tell them apart only on a Node that is not Ready, which a chaos run
        already reports as ``node-lost`` (lab.py)."""
        taints = tuple(t for t in self.taints if t.effect == NO_EXECUTE)
        if self.ready != "True" and not any(t.key in (NOT_READY, UNREACHABLE) for t in taints):
            key = UNREACHABLE if self.ready == "Unknown" else NOT_READY
            taints += (Taint(key, "", NO_EXECUTE, self.ready_since),)
        return taints


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def node_view(obj: Mapping[str, Any]) -> NodeView:
    """A Node's view; one whose quantities do not parse is kept as unreadable (docs/usage.md: the
    operator treats it as not ready, so its replicas move and it takes nothing new)."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    ready, since = "", None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            ready = str(condition.get("status") or "")
            since = _timestamp(condition.get("lastTransitionTime"))
    taints = tuple(
        Taint(
            str(t.get("key") or ""),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
            _timestamp(t.get("timeAdded")),
        )
        for t in spec.get("taints") or []
    )
    allocatable = status.get("allocatable") or {}
    try:
        cpu = quantity_to_int(allocatable.get(CPU, 0), 1000)
        memory = quantity_to_int(allocatable.get(MEMORY, 0))
        others = {
            str(name): quantity_to_int(value)
            for name, value in allocatable.items()
            if name not in (CPU, MEMORY)
        }
        readable = True
    except ValueError:
        cpu = memory = 0
        others = {}
        readable = False
    return NodeView(
        name=meta["name"],
        version=str(meta.get("resourceVersion") or ""),
        labels=dict(meta.get("labels") or {}),
        cpu=cpu,
        memory=memory,
        ready=ready,
        ready_since=since,
        unschedulable=spec.get("unschedulable") is True,
        taints=taints,
        readable=readable,
        others=others,
    )


# -- Workload rules ------------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes' ``(*Toleration).ToleratesTaint`` (k8s.io/api v0.36.3, core/v1/toleration.go):
    an empty effect matches every effect, an empty key every key (operator Exists), Exists every
    value, Equal (or no operator) the same value. ``Lt``/``Gt`` match only behind the alpha
    feature gate TaintTolerationComparisonOperators (off by default; orca's CRD refuses them)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return bool((toleration.get("value") or "") == taint.value)
    return bool(operator == "Exists")


def _tolerations(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The spec's tolerations, with what Kubernetes adds to a Pod for the node lifecycle taints
    (DESIGN 5). A DaemonSet tolerates not-ready and unreachable forever: the DaemonSet
    controller's ``AddOrUpdateDaemonPodTolerations`` (pkg/controller/daemon/util) calls
    ``AddOrUpdateTolerationInPodSpec`` (pkg/apis/core/v1/helper), which replaces a toleration
    with the same key, operator, value and effect, else appends. A Job or Service: 300 s,
    appended unless one of its own tolerations has that key or an empty one, and effect
    NoExecute or empty (the DefaultTolerationSeconds admission plugin's ``Admit``,
    plugin/pkg/admission/defaulttolerationseconds)."""
    own = list(spec.get("tolerations") or [])
    daemon = spec.get("kind") == "DaemonSet"
    for key in (NOT_READY, UNREACHABLE):
        if daemon:
            forever = {"key": key, "operator": "Exists", "effect": NO_EXECUTE}
            same = [
                i
                for i, t in enumerate(own)
                if (t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "")
                == (key, "Exists", "")
                and (t.get("effect") or "") == NO_EXECUTE
            ]
            for i in same:
                own[i] = forever
            if not same:
                own.append(forever)
            continue
        covered = any(
            (t.get("key") or "") in (key, "") and (t.get("effect") or "") in (NO_EXECUTE, "")
            for t in own
        )
        if not covered:
            own.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": NO_EXECUTE,
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    return own


def eviction_deadline(node: NodeView, spec: Mapping[str, Any]) -> float:
    """When a replica on ``node`` must have moved because of its NoExecute taints (DESIGN 5):
    ``-inf`` at once (a taint no toleration tolerates), ``inf`` never. The taint eviction
    controller (pkg/controller/tainteviction/taint_eviction.go, ``processPodOnNode``) takes,
    per taint, the first toleration that tolerates it (``GetMatchingTolerations``), then the
    smallest ``tolerationSeconds`` of those (``getMinTolerationTime``: none: forever; <= 0: at
    once); here each counted from its taint's ``timeAdded``."""
    tolerations = _tolerations(spec)
    deadline = math.inf
    for taint in node.no_execute():
        used = next((t for t in tolerations if tolerates(t, taint)), None)
        if used is None:
            return -math.inf
        seconds = used.get("tolerationSeconds")
        if seconds is None:
            continue
        if seconds <= 0:
            return -math.inf
        if taint.added is not None:  # no time recorded: not judged (never a false alarm)
            deadline = min(deadline, taint.added + seconds)
    return deadline


def blocks_new(node: NodeView, spec: Mapping[str, Any]) -> bool:
    """A NoSchedule or NoExecute taint no toleration tolerates keeps new replicas off the node
    (kube-scheduler's TaintToleration ``Filter``: ``DoNotScheduleTaintsFilterFunc``), the
    spec's own tolerations only (a not-Ready node is refused by eligibility already)."""
    own = list(spec.get("tolerations") or [])
    return any(
        t.effect in (NO_SCHEDULE, NO_EXECUTE) and not any(tolerates(x, t) for x in own)
        for t in node.taints
    )


def runtime_ok(node: NodeView, wanted: Sequence[str]) -> bool:
    """DESIGN 3: absent or empty = any runtime; case-insensitive; ``wasm`` and ``wasmtime`` are
    one runtime; ``pve-vm``, ``pve-ct`` and ``proxmox`` match exactly the nodes of kind
    proxmox (and no runtime label stands in for that kind)."""
    if not wanted:
        return True
    same = {"wasmtime": "wasm"}
    wants = {same.get(w.lower(), w.lower()) for w in wanted}
    if node.kind == "proxmox" and wants & PROXMOX_RUNTIMES:
        return True
    offered = {same.get(r, r) for r in node.runtimes - PROXMOX_RUNTIMES}
    return bool(offered & (wants - PROXMOX_RUNTIMES))


def uses_constraints(spec: Mapping[str, Any]) -> bool:
    """A DaemonSet in ``EveryNode`` mode (its default) ignores its constraints (DESIGN 4; the
    mode was spelled ``every-node`` before issue 22, accepted too)."""
    if spec.get("kind") != "DaemonSet":
        return True
    mode = (spec.get("schedule") or {}).get("mode") or "EveryNode"
    return mode not in ("every-node", "EveryNode")


class Constraints:
    """CEL constraints evaluated with celpy over the node view, memoised per node version."""

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}
        self._memo: dict[tuple[str, str, str], bool] = {}

    def passes(self, source: str, node: NodeView) -> bool | None:
        """True/False, or None when not checkable here (it reads free capacity)."""
        if "free" in source:
            return None
        key = (source, node.name, node.version)
        if (hit := self._memo.get(key)) is None:
            hit = self._memo[key] = self._evaluate(source, node)
        return hit

    def all_pass(self, spec: Mapping[str, Any], node: NodeView) -> bool | None:
        """All of the spec's constraints that apply: True, False, or None (unverifiable)."""
        if not uses_constraints(spec):
            return True
        results = [self.passes(c, node) for c in spec.get("constraints") or []]
        if False in results:
            return False
        return None if None in results else True

    def _evaluate(self, source: str, node: NodeView) -> bool:
        program = self._programs.get(source)
        if program is None:
            program = self._programs[source] = _ENV.program(_ENV.compile(source))
        try:
            result = program.evaluate({"node": json_to_cel(node.cel())})
        except Exception:
            return False  # DESIGN 3: an expression that fails to evaluate filters the node out
        return isinstance(result, bool | celpy.celtypes.BoolType) and bool(result)


def _key(w: Mapping[str, Any]) -> str:
    return f"{w['metadata'].get('namespace')}/{w['metadata']['name']}"


def amounts(resources: Mapping[str, Any] | None) -> dict[str, int]:
    """What one replica asks or holds, by resource: cpu in millicores, everything else in its
    unit, each rounded up (docs/workloads.md); amounts of 0 left out (a resource a replica
    does not request is never checked, kube's ``fitsRequest``)."""
    out = {}
    for name, value in (resources or {}).items():
        amount = quantity_to_int(value, 1000 if name == CPU else 1)
        if amount:
            out[str(name)] = amount
    return out


#: Per node, what every placement there books: resource -> amount, ``pods`` the placements.
Booked = Mapping[str, Mapping[str, int]]


def booked(workloads: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per node, the sum of what each placement there holds (its Workload's
    ``status.resources``) and, under ``pods``, how many placements (each one Pod)."""
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for w in workloads:
        status = w.get("status") or {}
        held = amounts(status.get("resources"))
        for p in status.get("placements") or []:
            on = used[p["node"]]
            on[PODS] += 1
            for name, amount in held.items():
                on[name] += amount
    return used


def fits(view: NodeView, have: Mapping[str, int], ask: Mapping[str, int]) -> int | None:
    """How many more replicas asking ``ask`` the node has room for, given what is booked there
    (``have``): the fewest, over the resources asked and the Pod, of (allocatable - booked) //
    asked; None when nothing bounds it (nothing asked, and no ``pods`` stated)."""
    room: int | None = None
    for name, amount in {**ask, PODS: 1}.items():
        offered = view.allocatable(name)
        if offered is None:
            continue
        n = max(offered - have.get(name, 0), 0) // amount
        room = n if room is None else min(room, n)
    return room


def wanted_replicas(spec: Mapping[str, Any]) -> int | None:
    """1 for a Job, ``count`` (default 1) for a Service, None for a DaemonSet (per node)."""
    kind = spec.get("kind")
    if kind == "Job":
        return 1
    if kind == "Service":
        return int(spec.get("count") or 1)
    return None


def decided(w: Mapping[str, Any]) -> bool:
    status = w.get("status") or {}
    return bool(
        status.get("phase") and status.get("observedGeneration") == w["metadata"].get("generation")
    )


# -- safety --------------------------------------------------------------------------------------


#: A placement as an observation records it: (its Workload's uid, allocId) -> (node, what it
#: holds). The uid: a Workload deleted and created again under its name places anew.
Held = Mapping[tuple[str, str], tuple[str, Mapping[str, int]]]


def held(
    workloads: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], tuple[str, dict[str, int]]]:
    """Every placement of ``workloads``: (uid, allocId) -> (its node, what it holds there)."""
    out = {}
    for w in workloads:
        status = w.get("status") or {}
        size = amounts(status.get("resources"))
        uid = str(w["metadata"].get("uid") or "")
        for p in status.get("placements") or []:
            out[uid, p["allocId"]] = (p["node"], size)
    return out


def _asked_new(workloads: Iterable[Mapping[str, Any]], before: Held | None) -> dict[str, set[str]]:
    """Per node, the resources its new placements ask (``pods`` for any new one): a placement
    is new when ``before`` (the previous observation; None: none) did not have its allocId on
    that node, or had it holding less of some resource."""
    out: dict[str, set[str]] = defaultdict(set)
    for alloc, (node, size) in held(workloads).items():
        old = before.get(alloc) if before is not None else None
        grew = {n for n, a in size.items() if old is None or a > old[1].get(n, 0)}
        if old is None or old[0] != node:
            out[node] |= {PODS, *size}
        elif grew:
            out[node] |= grew
    return out


def safety(
    nodes: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    specs: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
    before: Held | None = None,
) -> list[Violation]:
    """What must hold at every observation. ``specs``: the spec seen for a (uid, generation),
    so a status that describes an older generation is held to that generation's count;
    ``before``: the placements of the previous observation, so only new ones are judged
    against the room of their node (None: every placement is new)."""
    views = {v.name: v for v in map(node_view, nodes)}
    out: list[Violation] = []
    owners: dict[str, list[str]] = defaultdict(list)
    for w in workloads:
        key, spec, status = _key(w), w.get("spec") or {}, w.get("status") or {}
        placements = status.get("placements") or []
        if placements and status.get("resources") is None:
            out.append(Violation("unsized", key, "placements without status.resources"))
        for p in placements:
            owners[p["allocId"]].append(key)
            owner = _ALLOC.fullmatch(p["allocId"])
            if owner is None or owner["owner"] != key:
                out.append(Violation("alloc-owner", key, f"{p['allocId']} is not {key}-<index>"))
        out.extend(_counts(key, w, spec, status, specs or {}))
        if status.get("phase") and status.get("placed") != len(placements):
            detail = f"status.placed {status.get('placed')}, {len(placements)} listed"
            out.append(Violation("placed-count", key, detail))
    used = booked(workloads)
    for node, asked in sorted(_asked_new(workloads, before).items()):
        view = views.get(node)
        if view is None or not view.readable:
            continue
        over = [
            f"{name} {used[node].get(name, 0)}/{offered}"
            for name in sorted(asked)
            if (offered := view.allocatable(name)) is not None and used[node].get(name, 0) > offered
        ]
        if over:
            out.append(Violation("over-capacity", node, ", ".join(over)))
    for alloc, keys in owners.items():
        if len(keys) > 1:
            out.append(Violation("duplicate-alloc", alloc, ", ".join(keys)))
    return out


def _counts(
    key: str,
    w: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    specs: Mapping[tuple[str, int], Mapping[str, Any]],
) -> list[Violation]:
    """Exact replica counts and what the status says about them (DESIGN 4: Kinds)."""
    placements = status.get("placements") or []
    out: list[Violation] = []
    if spec.get("kind") == "DaemonSet":
        per_node: dict[str, int] = defaultdict(int)
        for p in placements:
            per_node[p["node"]] += 1
        twice = sorted(n for n, c in per_node.items() if c > 1)
        if twice:
            out.append(Violation("daemonset-node", key, f"more than one placement on {twice}"))
        return out
    if spec.get("kind") == "Job" and len(placements) > 1:
        out.append(Violation("job-replicas", key, f"{len(placements)} placements"))
    # The spec the status describes: the current one once decided, else the one seen at the
    # generation it observed, else what the status itself claims.
    observed = status.get("observedGeneration")
    if observed == w["metadata"].get("generation"):
        described: Mapping[str, Any] | None = spec
    else:
        described = specs.get((w["metadata"].get("uid") or "", observed or 0))
    want = wanted_replicas(described) if described is not None else status.get("desired")
    phase = status.get("phase")
    if not phase or want is None:
        return out
    if described is not None and status.get("desired") != want:
        out.append(
            Violation("desired", key, f"status.desired {status.get('desired')}, want {want}")
        )
    if phase == "Invalid":
        return out  # docs/workloads.md: an Invalid Workload keeps its placements as they were
    placed = len(placements)
    if spec.get("kind") == "Service" and placed > want:
        out.append(Violation("service-replicas", key, f"{placed} placements, count {want}"))
    expected = {
        "Scheduled": placed >= want,
        "PartiallyScheduled": 0 < placed < want,
        "Unschedulable": placed == 0,
    }.get(phase, True)
    if not expected:
        out.append(Violation("phase", key, f"{phase} with {placed}/{want} placed"))
    return out


# -- liveness ------------------------------------------------------------------------------------


def liveness(
    nodes: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    now: float | None = None,
    cel: Constraints | None = None,
) -> list[Violation]:
    """What holds once the operator has caught up with every change."""
    now = time.time() if now is None else now
    cel = cel or Constraints()
    views = {v.name: v for v in map(node_view, nodes)}
    out: list[Violation] = []
    used = booked(workloads)
    for w in workloads:
        key, spec, status = _key(w), w.get("spec") or {}, w.get("status") or {}
        if not decided(w):
            out.append(Violation("undecided", key, f"generation {w['metadata'].get('generation')}"))
        wanted = (spec.get("runtime") or {}).get("oneOf") or []
        for p in status.get("placements") or []:
            where = f"{p['allocId']} on {p['node']}"
            view = views.get(p["node"])
            if view is None:
                out.append(Violation("no-node", key, where))
                continue
            if view.unschedulable or not view.readable:
                out.append(Violation("ineligible", key, f"{where} (cordoned or unreadable)"))
            deadline = eviction_deadline(view, spec)
            if deadline <= now:
                taints = [f"{t.key}:{t.effect}" for t in view.no_execute()]
                out.append(Violation("taint", key, f"{where} past its toleration of {taints}"))
            if not runtime_ok(view, wanted):
                out.append(Violation("runtime", key, f"{where} lacks {wanted}"))
            if uses_constraints(spec):
                for source in spec.get("constraints") or []:
                    if cel.passes(source, view) is False:
                        out.append(Violation("constraint", key, f"{where} fails {source}"))
        out.extend(_stranded(key, w, views, used, cel))
    return out


def room_for(
    spec: Mapping[str, Any],
    node: NodeView,
    used: Booked,
    cel: Constraints,
) -> int | None:
    """How many new replicas of ``spec`` may go to ``node`` now (every filter, then its room
    for every resource the spec asks and a Pod each: ``fits``); None: no bound. An
    unverifiable constraint counts as no room (never reported as stranding)."""
    if not node.eligible or blocks_new(node, spec):
        return 0
    if not runtime_ok(node, (spec.get("runtime") or {}).get("oneOf") or []):
        return 0
    if cel.all_pass(spec, node) is not True:
        return 0
    return fits(node, used.get(node.name, {}), amounts(spec.get("resources")))


def fits_new(
    spec: Mapping[str, Any],
    node: NodeView,
    used: Booked,
    cel: Constraints,
) -> bool:
    """A new replica of ``spec`` may go to ``node`` now (``room_for`` one at least)."""
    room = room_for(spec, node, used, cel)
    return room is None or room >= 1


def gang_of(spec: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """A Service's gang, (minCount, timeoutSeconds), or None (docs/workloads.md)."""
    gang = (spec or {}).get("gang")
    if not isinstance(gang, Mapping) or (spec or {}).get("kind") != "Service":
        return None
    return int(gang.get("minCount") or 1), int(gang.get("timeoutSeconds", DEFAULT_GANG_TIMEOUT))


def _stranded(
    key: str,
    w: Mapping[str, Any],
    views: Mapping[str, NodeView],
    used: Booked,
    cel: Constraints,
) -> list[Violation]:
    spec, status = w.get("spec") or {}, w.get("status") or {}
    if status.get("phase") in (None, "Invalid"):
        return []
    placements = status.get("placements") or []
    want = wanted_replicas(spec)
    if want is None:  # DaemonSet: one on every node that passes and has room
        have = {p["node"] for p in placements}
        missing = [
            n for n, v in sorted(views.items()) if n not in have and fits_new(spec, v, used, cel)
        ]
        if missing:
            return [Violation("stranded", key, f"DaemonSet misses {missing[:3]}")]
        return []
    if len(placements) >= want:
        return []
    gang = gang_of(spec)
    if gang is not None and not placements:  # nothing placed: owed only minCount at once
        each = {n: room_for(spec, v, used, cel) for n, v in sorted(views.items())}
        total = sum(want if r is None else r for r in each.values())
        if total >= gang[0]:
            where = [n for n, r in each.items() if r is None or r > 0]
            detail = f"0/{want} placed, room for {total} >= minCount {gang[0]} on {where[:3]}"
            return [Violation("stranded", key, detail)]
        return []
    room = [n for n, v in sorted(views.items()) if fits_new(spec, v, used, cel)]
    if room:
        detail = f"{len(placements)}/{want} placed, room on {room[:3]}"
        return [Violation("stranded", key, detail)]
    return []


def desired_healthy(spec: Mapping[str, Any], status: Mapping[str, Any]) -> int | None:
    """How many replicas a Workload's disruption budget keeps placed, or None without one:
    kube's ``getExpectedPodCount`` (pkg/controller/disruption/disruption.go): ``minAvailable``
    as it is, or a percentage of the expected count rounded up; the expected count less
    ``maxUnavailable`` (a percentage rounded up), never below 0. The expected count: 1 for
    a Job, ``count`` for a Service, the nodes it wants (``status.desired``) for a DaemonSet."""
    budget = spec.get("disruption")
    if not isinstance(budget, Mapping):
        return None
    expected = wanted_replicas(spec)
    if expected is None:
        expected = int(status.get("desired") or 0)
    if budget.get("maxUnavailable") is not None:
        return max(expected - _scaled(budget["maxUnavailable"], expected), 0)
    if budget.get("minAvailable") is not None:
        return _scaled(budget["minAvailable"], expected)
    return None


def _scaled(value: int | str, total: int) -> int:
    """apimachinery's ``GetScaledValueFromIntOrPercent(value, total, roundUp=true)``
    (pkg/util/intstr/intstr.go): an int as it is, ``"P%"`` as ceil(P * total / 100)."""
    if isinstance(value, str):
        percent = int(value.removesuffix("%"))
        return -(-percent * total // 100)
    return int(value)


# -- nothing lost --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    """One placement as recorded in a status at some moment."""

    workload: str  # namespace/name
    uid: str
    generation: int
    alloc_id: str
    node: str


@dataclass
class Snapshot:
    """Placements of decided Workloads at one moment (before a fault)."""

    placed: list[Placed] = field(default_factory=list)

    @classmethod
    def take(cls, workloads: Iterable[Mapping[str, Any]]) -> Snapshot:
        snap = cls()
        for w in workloads:
            if not decided(w):
                continue  # not decided for this spec: nothing promised yet
            meta = w["metadata"]
            for p in (w.get("status") or {}).get("placements") or []:
                snap.placed.append(
                    Placed(_key(w), meta["uid"], meta["generation"], p["allocId"], p["node"])
                )
        return snap


def _keeps(view: NodeView | None, spec: Mapping[str, Any], cel: Constraints) -> bool:
    """The placement's node still holds it by every rule of DESIGN 5 (exists, eligible, no
    NoExecute taint at all, runtime, constraints): anything less is a cause to move."""
    if view is None or not view.eligible or view.no_execute():
        return False
    if not runtime_ok(view, (spec.get("runtime") or {}).get("oneOf") or []):
        return False
    return cel.all_pass(spec, view) is True


def lost(
    before: Snapshot,
    nodes: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    cel: Constraints | None = None,
) -> list[Violation]:
    """Placements of ``before`` gone or moved without a cause visible now (the Workload
    deleted, recreated or respecified; the node gone or no longer keeping it)."""
    cel = cel or Constraints()
    views = {v.name: v for v in map(node_view, nodes)}
    current = {_key(w): w for w in workloads}
    out: list[Violation] = []
    for p in before.placed:
        w = current.get(p.workload)
        if (
            w is None
            or w["metadata"]["uid"] != p.uid
            or w["metadata"]["generation"] != p.generation
        ):
            continue
        spec = w.get("spec") or {}
        if not _keeps(views.get(p.node), spec, cel):
            continue
        now = {q["allocId"]: q["node"] for q in (w.get("status") or {}).get("placements") or []}
        if now.get(p.alloc_id) != p.node:
            where = now.get(p.alloc_id, "nowhere")
            out.append(Violation("lost", p.workload, f"{p.alloc_id} was on {p.node}, now {where}"))
    return out


def check(
    nodes: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    before: Snapshot | None = None,
    now: float | None = None,
) -> list[Violation]:
    """Every violated invariant of one observation (empty: all hold)."""
    cel = Constraints()
    out = safety(nodes, workloads) + liveness(nodes, workloads, now, cel)
    if before is not None:
        out.extend(lost(before, nodes, workloads, cel))
    return out


@dataclass(frozen=True)
class _Seen:
    workload: str
    uid: str
    generation: int  # metadata.generation
    observed: int  # the generation the status described (status.observedGeneration)
    node: str


class Observer:
    """The safety invariants at every observation, and "kept", "gang" and "budget" between
    consecutive ones.

    A caller reads the Nodes once (``nodes_read``), then at every observation the Workloads and
    after them the Nodes (``observe``). A placement that vanished or moved since the previous
    observation needs a cause: its Workload deleted, recreated or respecified, or its node gone,
    no longer keeping it, or changed (another resourceVersion) since the last Node read at least
    ``margin`` seconds before the previous observation (an operator may act on a node event a
    little late: a node cordoned and uncordoned between two observations leaves only its
    resourceVersion behind), or its gang released. The Nodes are read after the Workloads, so
    the change that caused a move is always in the read that follows the move.

    A gang is timed from the first observation that shows it half placed, so the time it is
    held to is never more than the time it really was (the operator decided it before any
    read could show it); ``gang_slack`` is what it may take beyond its timeoutSeconds
    (``GANG_SLACK``).

    ``exercised`` counts what the rules of issue 46 had to judge (new placements on a node
    checked for an extended resource or against a ``pods`` limit, gangs seen half placed or
    released, Workloads with a budget), so a run shows they were put to the test, not only
    that they held."""

    def __init__(self, margin: float = 5.0, gang_slack: float = GANG_SLACK) -> None:
        self.margin = margin
        self.gang_slack = gang_slack
        self.polls = 0
        self._node_reads: deque[tuple[float, dict[str, str]]] = deque()
        self._placed: dict[str, _Seen] = {}
        self._held: dict[tuple[str, str], tuple[str, dict[str, int]]] | None = None
        self._counts: dict[str, int] = {}  # uid -> placements at the previous observation
        self._below: dict[str, float] = {}  # uid -> first read_at of its half-placed streak
        self._specs: dict[tuple[str, int], Mapping[str, Any]] = {}
        self._last_read: float | None = None
        self.cel = Constraints()
        self.exercised: Counter[str] = Counter()

    def nodes_read(self, nodes: Sequence[Mapping[str, Any]], at: float) -> None:
        """Record the Nodes' resourceVersions as read at ``at`` (monotonic seconds)."""
        versions = {n["metadata"]["name"]: str(n["metadata"].get("resourceVersion")) for n in nodes}
        self._node_reads.append((at, versions))
        horizon = (self._last_read if self._last_read is not None else at) - self.margin
        while len(self._node_reads) > 1 and self._node_reads[1][0] <= horizon:
            self._node_reads.popleft()  # the oldest kept is the baseline of the next check

    def _baseline(self, node: str, since: float) -> str | None:
        """The node's resourceVersion in the last read at least ``margin`` before ``since``
        (else the first read kept), or in the first read after that which has the node."""
        reads = list(self._node_reads)
        start = 0
        for i, (at, _) in enumerate(reads):
            if at <= since - self.margin:
                start = i
        for _, versions in reads[start:]:
            if node in versions:
                return versions[node]
        return None

    def _described(self, w: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The spec its status describes (of the generation it observed), None if not seen."""
        meta, status = w["metadata"], w.get("status") or {}
        observed = status.get("observedGeneration")
        if observed == meta.get("generation"):
            spec: Mapping[str, Any] = w.get("spec") or {}
            return spec
        return self._specs.get((meta.get("uid") or "", observed or 0))

    def observe(
        self,
        workloads: Sequence[Mapping[str, Any]],
        nodes: Sequence[Mapping[str, Any]],
        read_at: float,
    ) -> list[Violation]:
        """Safety violations of this observation (Workloads read at ``read_at``, monotonic;
        Nodes just after): every rule of ``safety`` (new placements judged against their
        node's room), placements lost since the previous observation, budgets broken by them,
        and gangs half placed for too long."""
        self.polls += 1
        baseline_at = self._last_read if self._last_read is not None else read_at
        for w in workloads:
            meta = w["metadata"]
            self._specs.setdefault((meta.get("uid") or "", meta.get("generation") or 0), w["spec"])
        out = safety(nodes, workloads, self._specs, self._held)
        views = {v.name: v for v in map(node_view, nodes)}
        current = {_key(w): w for w in workloads}
        placed: dict[str, _Seen] = {}
        for key, w in current.items():
            meta = w["metadata"]
            for p in (w.get("status") or {}).get("placements") or []:
                observed = (w.get("status") or {}).get("observedGeneration") or 0
                generation = meta.get("generation") or 0
                seen = _Seen(key, meta["uid"], generation, observed, p["node"])
                placed[p["allocId"]] = seen
        unexplained: dict[str, list[str]] = defaultdict(list)  # key -> what went, no cause
        caused: dict[str, int] = defaultdict(int)  # key -> placements its nodes took
        for alloc, old in self._placed.items():
            now = current.get(old.workload)
            if now is None or now["metadata"]["uid"] != old.uid:
                continue  # deleted or recreated
            observed = (now.get("status") or {}).get("observedGeneration") or 0
            if (now["metadata"].get("generation") or 0, observed) != (old.generation, old.observed):
                continue  # a new spec (or a status now describing it) may move it
            here = placed.get(alloc)
            if here is not None and here.workload == old.workload and here.node == old.node:
                continue
            view = views.get(old.node)
            if not _keeps(view, now.get("spec") or {}, self.cel) or (
                view is not None and view.version != self._baseline(old.node, baseline_at)
            ):
                caused[old.workload] += 1  # its node is gone, no longer holds it, or changed
                continue
            where = f"{here.node} ({here.workload})" if here else "nowhere"
            unexplained[old.workload].append(f"{alloc} was on {old.node}, now {where}")
        for key, gone in sorted(unexplained.items()):
            w = current[key]
            before = self._counts.get(w["metadata"]["uid"], 0)
            if self._released(w, before, caused[key]):
                continue  # a gang let go of every placement (docs/workloads.md)
            out.extend(Violation("lost", key, detail) for detail in gone)
            status = w.get("status") or {}
            needs = desired_healthy(self._described(w) or w.get("spec") or {}, status)
            if needs is not None and before - len(gone) < needs:
                detail = (
                    f"{len(gone)} of its {before} placements went without a cause, leaving "
                    f"{before - len(gone)} of the {needs} its disruption budget keeps"
                )
                out.append(Violation("budget", key, detail))
        out.extend(self._gangs(workloads, read_at))
        self._count_exercised(workloads, views)
        self.nodes_read(nodes, time.monotonic())
        self._placed = placed
        self._held = held(workloads)
        self._counts = {
            w["metadata"]["uid"]: len((w.get("status") or {}).get("placements") or [])
            for w in workloads
        }
        self._last_read = read_at
        return out

    def _count_exercised(
        self, workloads: Sequence[Mapping[str, Any]], views: Mapping[str, NodeView]
    ) -> None:
        for node, asked in _asked_new(workloads, self._held).items():
            view = views.get(node)
            if view is None:
                continue
            if asked - {CPU, MEMORY, PODS}:
                self.exercised["nodes judged for an extended resource"] += 1
            if view.allocatable(PODS) is not None:
                self.exercised["nodes judged against a pods limit"] += 1
        for w in workloads:
            spec = self._described(w)
            placed = len((w.get("status") or {}).get("placements") or [])
            gang = gang_of(spec)
            if gang is not None and placed >= gang[0]:
                self.exercised["gangs seen placed"] += 1
            if gang is not None and 0 < placed < gang[0]:
                self.exercised["gangs seen half placed"] += 1
            before = self._counts.get(w["metadata"]["uid"], 0)
            if gang is not None and 0 < before < gang[0] and placed == 0:
                self.exercised["gangs seen released"] += 1
            if spec is not None and spec.get("disruption"):
                self.exercised["Workloads with a budget"] += 1

    def _released(self, w: Mapping[str, Any], before: int, caused: int) -> bool:
        """A gang's release explains its placements going: it was below its minCount at the
        previous observation, or what its nodes took ``caused`` took it below, and it is not
        half placed now (none placed: released; at least minCount: released and placed whole
        again between the two observations)."""
        gang = gang_of(self._described(w))
        if gang is None:
            return False
        minimum = gang[0]
        now = len((w.get("status") or {}).get("placements") or [])
        was_below = 0 < before < minimum or before - caused < minimum
        return was_below and not 0 < now < minimum

    def _gangs(self, workloads: Sequence[Mapping[str, Any]], read_at: float) -> list[Violation]:
        """Gangs seen half placed (0 < placed < minCount) in every observation for longer than
        their timeoutSeconds plus ``gang_slack``."""
        out = []
        below: dict[str, float] = {}
        for w in workloads:
            gang = gang_of(self._described(w))
            placed = len((w.get("status") or {}).get("placements") or [])
            if gang is None or not 0 < placed < gang[0]:
                continue
            uid = w["metadata"]["uid"]
            since = below[uid] = self._below.get(uid, read_at)
            minimum, timeout = gang
            if read_at - since > timeout + self.gang_slack:
                detail = (
                    f"{placed} placed, fewer than minCount {minimum}, for longer than its "
                    f"timeoutSeconds {timeout} + {self.gang_slack:.0f}s"
                )
                out.append(Violation("gang-half-placed", _key(w), detail))
        self._below = below
        return out


def summary(violations: Sequence[Violation]) -> str:
    """``kind=count`` pairs, for one line of figures."""
    counts: dict[str, int] = defaultdict(int)
    for v in violations:
        counts[v.kind] += 1
    return ", ".join(f"{k}={n}" for k, n in sorted(counts.items())) or "none"


def dump(violations: Sequence[Violation], limit: int = 20) -> str:
    return json.dumps([str(v) for v in violations[:limit]], indent=1)
