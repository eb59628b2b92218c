"""Whose clock moves replicas off a Node that is not Ready (``orca run --node-lifecycle``).

Kubernetes moves nothing merely because a Node is not Ready. Its node lifecycle controller (in
kube-controller-manager) taints the Node ``node.kubernetes.io/unreachable:NoExecute`` (or
``not-ready``), and the taint-eviction controller evicts the Pods whose toleration of that taint
has run out. The controller adds those taints through a rate limiter per zone, slows down in a
large zone that is partly disrupted and stops, lifting them, once every zone is fully
disrupted (pkg/controller/nodelifecycle/node_lifecycle_controller.go: ``setLimiterInZone``,
``handleDisruption``). So an API server under strain or a network split evicts from a few Nodes
at a time, or from none.

- ``taints``: orca follows those taints alone, as kube-scheduler and the taint-eviction
  controller do. Where the controller holds a taint back, orca holds the move back.
- ``ready``: a NotReady Node without a lifecycle taint counts as carrying one since its Ready
  condition changed (the reference design's rule, DESIGN.md 5). This is for a cluster without
  the controller (kwok alone, Node files): nothing would ever taint its Nodes, and their
  replicas would never move.
- ``auto`` (the default) asks the cluster. kube-controller-manager runs with leader election
  unless told otherwise, and then holds the Lease ``kube-system/kube-controller-manager``,
  renewed every 2 s. A Lease with a holder renewed within ``FRESH_SECONDS`` of this clock means
  the controller runs: ``taints``. No such Lease: ``ready``. A Lease that cannot be read (no
  RBAC for it) also means ``ready``, with a warning naming the flag.

The answer is taken once, before the first Node is read: a controller manager started later is
seen at orca's next start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.operator.kube.client import ApiError, KubeApi, TransportError
from controller.scheduler.nodes import rfc3339_to_epoch

logger = logging.getLogger("orca.lifecycle")

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kube-controller-manager"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
#: A Lease renewed longer ago than this (on this machine's clock) is a controller manager that
#: stopped. Its holder renews every 2 s; the margin absorbs clock skew between the machines.
FRESH_SECONDS = 300.0
#: The longest pause between two attempts while the API server does not answer.
MAX_RETRY_SECONDS = 10.0


class NodeLifecycle(StrEnum):
    AUTO = "auto"
    TAINTS = "taints"
    READY = "ready"


@dataclass(frozen=True)
class Verdict:
    """Whether a NotReady Node without a lifecycle taint counts as carrying one, and why (a
    line for the log; ``warn``: one the operator should act on)."""

    imply: bool
    why: str
    warn: bool = False


READY_RULE = "a NotReady Node without a lifecycle taint counts as tainted from its Ready change"
TAINTS_RULE = "only the node lifecycle controller's NoExecute taints move replicas"


def verdict_of_lease(lease: Mapping[str, Any] | None, now: float) -> Verdict:
    """The verdict ``auto`` reaches from kube-controller-manager's Lease (None: there is
    none), at ``now`` (seconds since the epoch)."""
    where = f"Lease {LEASE_NAMESPACE}/{LEASE_NAME}"
    if lease is None:
        return Verdict(True, f"no {where}, so no node lifecycle controller: {READY_RULE}")
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if not holder:
        return Verdict(True, f"{where} has no holder: {READY_RULE}")
    try:
        renewed = rfc3339_to_epoch(str(spec.get("renewTime") or ""))
    except ValueError:
        return Verdict(True, f"{where} has no readable renewTime: {READY_RULE}")
    age = now - renewed
    if age > FRESH_SECONDS:
        return Verdict(True, f"{where} was last renewed {age:.0f} s ago: {READY_RULE}")
    return Verdict(False, f"kube-controller-manager holds {where} ({holder}): {TAINTS_RULE}")


async def read_verdict(api: KubeApi, clock: Callable[[], float] = time.time) -> Verdict:
    """One look at the Lease. A refusal (401, 403) is a verdict too: ``ready``, with the
    reason and the flag that decides instead. Other errors (5xx, 429) and no answer raise
    ``ApiError`` and ``TransportError``: the caller tries again or gives up."""
    try:
        lease: Mapping[str, Any] | None = await api.request("GET", LEASE_PATH)
    except ApiError as exc:
        if exc.status in (401, 403):
            return Verdict(
                True,
                f"cannot read Lease {LEASE_NAMESPACE}/{LEASE_NAME} ({exc.status} {exc.reason}; "
                f"grant get on it, or pass --node-lifecycle=taints): {READY_RULE}",
                warn=True,
            )
        if not exc.not_found:
            raise
        lease = None
    return verdict_of_lease(lease, clock())


async def resolve(
    api: KubeApi, mode: NodeLifecycle, clock: Callable[[], float] = time.time
) -> bool:
    """Whether to imply lifecycle taints, for ``mode``; ``auto`` asks until the API server
    answers (nothing can be read before it does anyway). Logs the verdict once."""
    if mode is NodeLifecycle.TAINTS:
        verdict = Verdict(False, f"--node-lifecycle=taints: {TAINTS_RULE}")
    elif mode is NodeLifecycle.READY:
        verdict = Verdict(True, f"--node-lifecycle=ready: {READY_RULE}")
    else:
        delay = 0.5
        while True:
            try:
                verdict = await read_verdict(api, clock)
                break
            except (ApiError, TransportError) as exc:
                logger.warning("node lifecycle: cannot read the Lease yet (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
    logger.log(logging.WARNING if verdict.warn else logging.INFO, "node lifecycle: %s", verdict.why)
    return verdict.imply
