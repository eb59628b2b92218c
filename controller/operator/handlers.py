"""kopf wiring: watch events update ``ClusterState`` and queue work. Nothing else.

Event handlers return nothing and store nothing, so kopf never patches a Workload or a Node.
They are ``async``: kopf runs sync handlers in threads, and the state has no locks.

The initial view is *not* built from these events: kopf's index gate (which holds every
handler until all indexes are filled) wakes every waiting object worker on each object it
indexes, O(objects^2) in a burst, and it dominated the operator's CPU with 1,000 Nodes.
Instead the reconciler LISTs Nodes and Workloads itself before deciding anything
(``Reconciler.relist``); events that arrive meanwhile are merged by resourceVersion.

A watch that expires (410 Gone: the API server's watch cache no longer holds our
resourceVersion, e.g. after it restarted) makes kopf LIST again and replay what exists as
``type=None`` events; what was deleted in the gap is never reported. So a replay after a
kind's initial listing asks the reconciler for its own LIST, which merges deletions too
(once kopf's replay has gone quiet: ``app._resync``).
"""

from __future__ import annotations

import time
from typing import Any, cast

import kopf

from controller.api.models import GROUP, PLURAL, VERSION
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

    def node_changed(name: str) -> None:
        """Who could care: replicas on it, DaemonSets, and whatever a node could cure."""
        if reconciler.ready.is_set():
            queue.add_all(
                state.keys_on_node(name) | state.daemon_keys() | state.keys_waiting_for_nodes()
            )

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

    @kopf.on.event("nodes", registry=registry)
    async def node_event(type: str | None, event: kopf.RawEvent, name: str, **_: Any) -> None:
        listed_again("nodes", type)
        changed = state.delete_node(name) if type == "DELETED" else state.upsert_node(raw(event))
        if changed:
            node_changed(name)

    @kopf.on.event("scheduling.k8s.io", "v1", "priorityclasses", registry=registry)
    async def priority_class_event(type: str | None, body: kopf.Body, name: str, **_: Any) -> None:
        """A class created, changed or deleted: decide again the Workloads that name it (and
        those that name none, when the globalDefault changed)."""
        listed_again("priorityclasses", type)
        priorities = reconciler.priorities
        touched = priorities.delete(name) if type == "DELETED" else priorities.upsert(body)
        if touched and reconciler.ready.is_set():
            queue.add_all(priorities.keys_naming(state, touched))

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def workload_event(
        type: str | None, event: kopf.RawEvent, namespace: str | None, name: str, **_: Any
    ) -> None:
        listed_again("workloads", type)
        if type == "DELETED":
            if state.delete_workload(f"{namespace}/{name}") and reconciler.ready.is_set():
                queue.add_all(state.keys_waiting_for_capacity())
            return
        record = state.upsert_workload(raw(event))
        if record is not None and reconciler.ready.is_set():
            queue.add(record.key)


def raw(event: kopf.RawEvent) -> dict[str, Any]:
    """The object of a watch event as the plain dict kopf parsed: reading it (and validating
    it with pydantic) is several times cheaper than through kopf's ``Body`` view."""
    return cast(dict[str, Any], event["object"])


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
