"""Runtime: a node offers one of the runtimes the Workload accepts.

Matching is the original scheduler's: case-insensitive; ``wasm`` and ``wasmtime`` are one
runtime; ``pve-vm``, ``pve-ct`` and ``proxmox`` mean "a node of kind proxmox" (it *is* the
runtime), whatever runtime labels other nodes carry. Another ``pve-*`` name is an unknown
alias: the Workload is Invalid rather than silently unschedulable.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from typing import Final

import numpy as np

from controller.scheduler.framework import Code, CycleState, Rejection, Verdict
from controller.scheduler.nodes import NodeInfo

PROXMOX_RUNTIMES: Final = frozenset({"pve-vm", "pve-ct", "proxmox"})
PROXMOX_KIND: Final = "proxmox"
_RUNTIME_ALIASES: Final = {"wasmtime": "wasm"}


def normalize_runtime(name: str) -> str:
    """Case-insensitive; ``wasm`` and ``wasmtime`` are one runtime."""
    lowered = name.lower()
    return _RUNTIME_ALIASES.get(lowered, lowered)


@functools.lru_cache(maxsize=1024)
def wanted_runtimes(names: tuple[str, ...]) -> tuple[str, ...]:
    """The spec's runtimes, normalised and de-duplicated in order (memoised: once per cycle
    per plugin step otherwise, on the hot path)."""
    return tuple(dict.fromkeys(normalize_runtime(r) for r in names))


def offers_runtime(node: NodeInfo, wants: frozenset[str]) -> bool:
    """Whether ``node`` offers one of ``wants`` (normalised names)."""
    if node.kind == PROXMOX_KIND and wants & PROXMOX_RUNTIMES:
        return True
    return any(normalize_runtime(r) in wants for r in node.runtimes if r not in PROXMOX_RUNTIMES)


def reason_runtime(runtimes: Sequence[str]) -> str:
    return f"runtime {'|'.join(runtimes)} not offered"


class Runtime:
    """PreFilter (unknown ``pve-*`` aliases) and Filter over ``spec.runtime.oneOf``."""

    name = "Runtime"
    code = Code.UNRESOLVABLE
    evicts = True
    selects = False  # a Mandatory DaemonSet's matching node without the runtime is missing
    per_replica = False
    shape_only = True  # reads runtimes / CEL fields only (NodeTable.SHAPE_FIELDS)

    def pre_filter(self, cycle: CycleState) -> list[str]:
        return [
            f"spec.runtime.oneOf[{i}] {runtime!r}: unknown runtime alias "
            f"(proxmox runtimes are {', '.join(sorted(PROXMOX_RUNTIMES))})"
            for i, runtime in enumerate(wanted_runtimes(cycle.spec.runtimes))
            if runtime.startswith("pve-") and runtime not in PROXMOX_RUNTIMES
        ]

    def signature(self, cycle: CycleState) -> Hashable:
        return wanted_runtimes(cycle.spec.runtimes)

    def filter(self, cycle: CycleState) -> Verdict:
        runtimes = wanted_runtimes(cycle.spec.runtimes)
        if not runtimes:
            return Verdict(())
        table = cycle.table
        wants = frozenset(runtimes)
        mask = np.fromiter(
            (offers_runtime(n, wants) for n in table.nodes), dtype=np.bool_, count=len(table)
        )
        return Verdict((Rejection(reason_runtime(runtimes), mask),))
