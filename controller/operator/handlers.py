"""kopf wiring: login, and PriorityClass watch events into the reconciler's index. Nothing
else: Nodes and Workloads, the hot path, are watched by orca itself (``informer``).

Event handlers return nothing and store nothing, so kopf never patches an object. They are
``async``: kopf runs sync handlers in threads, and the state has no locks.

The initial view is *not* built from these events: the reconciler LISTs PriorityClasses
itself before deciding anything (``Reconciler.relist``). A watch that expires (410 Gone: the
API server's watch cache no longer holds our resourceVersion, e.g. after it restarted) makes
kopf LIST again and replay what exists as ``type=None`` events; what was deleted in the gap is
never reported. So a replay after the initial listing asks the reconciler for its own LIST,
which merges deletions too (once kopf's replay has gone quiet: ``app._resync``).
"""

from __future__ import annotations

import time
from typing import Any

import kopf

from controller.operator.kube import authorization, load_configuration
from controller.operator.reconciler import Reconciler

#: Seconds without a ``None`` event that separate two listings of one kind by kopf.
RELIST_GAP = 1.0


def register(
    registry: kopf.OperatorRegistry, reconciler: Reconciler, kubeconfig: str | None = None
) -> None:
    """Register the handlers on ``registry`` (not kopf's global one, so tests can run many)."""
    state, queue = reconciler.state, reconciler.queue

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        """kopf's watches use the same credentials as our writes (kubeconfig or in-cluster),
        re-read on every login so rotated tokens and certificates are picked up."""
        return connection_info(load_configuration(kubeconfig))

    last_listed: dict[str, float] = {}  # kind -> when kopf last replayed one of its objects

    def listed_again(kind: str, type: str | None) -> None:
        """kopf replays a listing as a run of ``None`` events. The first run of a kind is its
        initial listing (our own LIST covers it); a run that starts later (a pause of more
        than ``RELIST_GAP`` since the last ``None`` event) is a relist: a watch expired."""
        if type is not None:
            return
        now = time.monotonic()
        previous = last_listed.get(kind)
        last_listed[kind] = now
        if previous is not None and now - previous > RELIST_GAP and reconciler.ready.is_set():
            reconciler.request_relist()

    @kopf.on.event("scheduling.k8s.io", "v1", "priorityclasses", registry=registry)
    async def priority_class_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        """A class created, changed or deleted: decide again the Workloads that name it (and
        those that name none, when the globalDefault changed)."""
        listed_again("priorityclasses", type)
        priorities = reconciler.priorities
        touched = priorities.delete(name) if type == "DELETED" else priorities.upsert(body)
        if touched and reconciler.ready.is_set():
            queue.add_all(priorities.keys_naming(state, touched))


def connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """A kubernetes-client Configuration as kopf's ConnectionInfo."""
    scheme, token = None, None
    header = authorization(configuration)
    if header:
        scheme, _, token = header.partition(" ")
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )
