"""The invariants every chaos scenario checks, read from the API as a user would see them.

``check`` restates the scheduler's promises independently of the operator's code (it shares
only the Node-to-NodeInfo mapping and quantity parsing with it):

* decided     every Workload's status describes its current spec (observedGeneration)
* capacity    no node holds more than its allocatable, summing every placement in status
* filters     every placement is on a node that exists, is eligible (Ready, not cordoned),
              has no NoExecute taint the Workload does not tolerate, offers the runtime and
              passes the constraints (DaemonSet EveryNode: no constraints); constraints that
              read free capacity are not re-checked
* allocIds    unique cluster-wide
* kept        a placement recorded before a fault, whose Workload spec was already decided
              and is unchanged, and whose node still exists and passes, is still there
* stranded    (liveness) no Job/Service is short of replicas while a node that passes its
              filters has room for one, and no DaemonSet misses such a node

Most of these hold only eventually (a placement on a Node deleted a moment ago is fine until
the operator has seen the deletion), so a scenario polls ``check`` until nothing is violated:
that moment is its "time to converge"; what is still violated at its timeout is reported.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy.adapter import json_to_cel

from controller.api.models import NodeInfo, TaintEffect, Toleration, quantity_to_int
from controller.core.nodes import NodeError, node_info_from_node

_PROXMOX_RUNTIMES = frozenset({"pve-vm", "pve-ct", "proxmox"})
_ENV = celpy.Environment()


@dataclass(frozen=True)
class Violation:
    kind: str  # undecided | over-capacity | no-node | ineligible | runtime | constraint | ...
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.subject}: {self.detail}"


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
            meta, status = w["metadata"], w.get("status") or {}
            if status.get("observedGeneration") != meta.get("generation"):
                continue  # not decided for this spec: nothing promised yet
            for p in status.get("placements") or []:
                snap.placed.append(
                    Placed(_key(w), meta["uid"], meta["generation"], p["allocId"], p["node"])
                )
        return snap


def _key(w: Mapping[str, Any]) -> str:
    return f"{w['metadata'].get('namespace')}/{w['metadata']['name']}"


def _uses_constraints(spec: Mapping[str, Any]) -> bool:
    """A DaemonSet in ``EveryNode`` mode (its default) ignores its constraints."""
    if spec.get("kind") != "DaemonSet":
        return True
    mode = (spec.get("schedule") or {}).get("mode", "EveryNode")
    return bool(mode != "EveryNode")


def _runtime_ok(node: NodeInfo, wanted: Sequence[str]) -> bool:
    """DESIGN.md 3, restated: case-insensitive, wasm == wasmtime, pve-*/proxmox = kind."""
    if not wanted:
        return True
    norm = {"wasmtime": "wasm"}
    wants = {norm.get(r.lower(), r.lower()) for r in wanted}
    if node.kind == "proxmox" and wants & _PROXMOX_RUNTIMES:
        return True
    offered = {norm.get(r, r) for r in node.runtimes if r not in _PROXMOX_RUNTIMES}
    return bool(offered & wants)


def _untolerated(
    node: NodeInfo, spec: Mapping[str, Any], effects: frozenset[TaintEffect]
) -> list[str]:
    """The node's taints with one of ``effects`` that no toleration of the spec tolerates."""
    tolerations = [Toleration.model_validate(t) for t in spec.get("tolerations") or []]
    return [
        str(t)
        for t in node.taints
        if t.effect in effects and not any(tol.tolerates(t) for tol in tolerations)
    ]


_EVICTING = frozenset({TaintEffect.NO_EXECUTE})
_FILTERING = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})


class _Constraints:
    """CEL constraints compiled once per source, evaluated per node with celpy directly."""

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}
        self._memo: dict[tuple[str, str], bool] = {}  # per check(): hostname is enough

    def passes(self, source: str, node: NodeInfo) -> bool | None:
        """True/False, or None when not checkable here (reads free capacity)."""
        if "free" in source:
            return None
        if (hit := self._memo.get((source, node.hostname))) is None:
            hit = self._memo[(source, node.hostname)] = self._evaluate(source, node)
        return hit

    def _evaluate(self, source: str, node: NodeInfo) -> bool:
        program = self._programs.get(source)
        if program is None:
            program = self._programs[source] = _ENV.program(_ENV.compile(source))
        try:
            result = program.evaluate({"node": json_to_cel(node.cel_view(0, 0))})
        except Exception:
            return False  # an evaluation error filters the node out
        return bool(result) if isinstance(result, bool | celpy.celtypes.BoolType) else False


def check(
    nodes: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    before: Snapshot | None = None,
) -> list[Violation]:
    """Every violated invariant (empty: all hold)."""
    infos: dict[str, NodeInfo] = {}
    for obj in nodes:
        try:
            parsed = node_info_from_node(obj)
        except NodeError:
            continue
        infos[parsed.hostname] = parsed
    cel = _Constraints()
    out: list[Violation] = []
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    owners: dict[str, list[str]] = defaultdict(list)
    current: dict[str, tuple[str, int, dict[str, str]]] = {}
    for w in workloads:
        key, meta, spec = _key(w), w["metadata"], w.get("spec") or {}
        status = w.get("status") or {}
        if status.get("observedGeneration") != meta.get("generation") or not status.get("phase"):
            out.append(Violation("undecided", key, f"generation {meta.get('generation')}"))
        resources = spec.get("resources") or {}
        cpu = quantity_to_int(resources.get("cpu", 0), 1000)
        memory = quantity_to_int(resources.get("memory", 0))
        wanted = (spec.get("runtime") or {}).get("oneOf") or []
        constraints = (spec.get("constraints") or []) if _uses_constraints(spec) else []
        allocs: dict[str, str] = {}
        for p in status.get("placements") or []:
            alloc, node = p["allocId"], p["node"]
            allocs[alloc] = node
            owners[alloc].append(key)
            used[node][0] += cpu
            used[node][1] += memory
            where = f"{alloc} on {node}"
            if (info := infos.get(node)) is None:
                out.append(Violation("no-node", key, where))
                continue
            if not info.eligible:
                out.append(Violation("ineligible", key, where))
            if taints := _untolerated(info, spec, _EVICTING):
                out.append(Violation("taint", key, f"{where} has {taints}"))
            if not _runtime_ok(info, wanted):
                out.append(Violation("runtime", key, f"{where} lacks {wanted}"))
            for source in constraints:
                if cel.passes(source, info) is False:
                    out.append(Violation("constraint", key, f"{where} fails {source}"))
        current[key] = (meta["uid"], meta.get("generation") or 0, allocs)
    for node, (cpu, memory) in used.items():
        held = infos.get(node)
        if held is not None and (cpu > held.cpu or memory > held.memory):
            detail = f"cpu {cpu}/{held.cpu}m, memory {memory}/{held.memory}"
            out.append(Violation("over-capacity", node, detail))
    for alloc, keys in owners.items():
        if len(keys) > 1:
            out.append(Violation("duplicate-alloc", alloc, ", ".join(keys)))
    out.extend(_stranded(infos, workloads, used, cel))
    if before is not None:
        out.extend(_lost(before, current, infos, workloads, cel))
    return out


def _fits_somewhere(
    spec: Mapping[str, Any],
    candidates: Iterable[NodeInfo],
    used: Mapping[str, list[int]],
    cel: _Constraints,
    use_constraints: bool = True,
) -> list[str]:
    resources = spec.get("resources") or {}
    cpu = quantity_to_int(resources.get("cpu", 0), 1000)
    memory = quantity_to_int(resources.get("memory", 0))
    wanted = (spec.get("runtime") or {}).get("oneOf") or []
    constraints = spec.get("constraints") or [] if use_constraints else []
    fits = []
    for info in candidates:
        if not info.eligible or not _runtime_ok(info, wanted):
            continue
        if _untolerated(info, spec, _FILTERING):
            continue
        checks = [cel.passes(c, info) for c in constraints]
        if None in checks or not all(checks):
            continue  # unverifiable constraints are never counted as stranding
        have = used.get(info.hostname, [0, 0])
        if info.cpu - have[0] >= cpu and info.memory - have[1] >= memory:
            fits.append(info.hostname)
    return fits


def _stranded(
    infos: Mapping[str, NodeInfo],
    workloads: Sequence[Mapping[str, Any]],
    used: Mapping[str, list[int]],
    cel: _Constraints,
) -> list[Violation]:
    out: list[Violation] = []
    for w in workloads:
        spec, status = w.get("spec") or {}, w.get("status") or {}
        if status.get("phase") in (None, "Invalid"):
            continue
        placements = status.get("placements") or []
        kind = spec.get("kind")
        if kind == "DaemonSet":
            have = {p["node"] for p in placements}
            room = _fits_somewhere(spec, infos.values(), used, cel, _uses_constraints(spec))
            missing = [n for n in room if n not in have]
            if missing:
                out.append(Violation("stranded", _key(w), f"DaemonSet misses {missing[:3]}"))
            continue
        desired = spec.get("count", 1) if kind == "Service" else 1
        if len(placements) < desired:
            room = _fits_somewhere(spec, infos.values(), used, cel)
            if room:
                detail = f"{len(placements)}/{desired} placed, room on {room[:3]}"
                out.append(Violation("stranded", _key(w), detail))
    return out


def _lost(
    before: Snapshot,
    current: Mapping[str, tuple[str, int, dict[str, str]]],
    infos: Mapping[str, NodeInfo],
    workloads: Sequence[Mapping[str, Any]],
    cel: _Constraints,
) -> list[Violation]:
    specs = {_key(w): w.get("spec") or {} for w in workloads}
    out: list[Violation] = []
    for p in before.placed:
        now = current.get(p.workload)
        info = infos.get(p.node)
        if now is None or now[0] != p.uid or now[1] != p.generation or info is None:
            continue  # deleted, recreated, spec changed, or node gone: may move
        spec = specs[p.workload]
        still_fits = _fits_somewhere(spec, [info], {}, cel, _uses_constraints(spec))
        if not still_fits:
            continue  # node no longer eligible / passing: the replica may move
        if now[2].get(p.alloc_id) != p.node:
            where = now[2].get(p.alloc_id, "nowhere")
            out.append(Violation("lost", p.workload, f"{p.alloc_id} was on {p.node}, now {where}"))
    return out


def summary(violations: Sequence[Violation]) -> str:
    """``kind=count`` pairs, for one line of figures."""
    counts: dict[str, int] = defaultdict(int)
    for v in violations:
        counts[v.kind] += 1
    return ", ".join(f"{k}={n}" for k, n in sorted(counts.items())) or "none"


def dump(violations: Sequence[Violation], limit: int = 20) -> str:
    return json.dumps([str(v) for v in violations[:limit]], indent=1)
