"""kopf wiring: index handlers feed ``ClusterState``; event handlers queue work. Nothing else.

kopf runs every index handler over the initial listing of *both* Nodes and Workloads before
it calls any event handler, so the first event handler call means the in-memory view (nodes,
and the ledger rebuilt from every Workload's ``status.placements``) is complete; only then does
the scheduling loop start deciding. Index handlers are kopf's own, and write nothing to the
objects; event handlers return nothing, so kopf never patches a Workload or a Node. All
handlers are ``async``: kopf runs sync handlers in threads, and the state has no locks.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from controller.api.models import GROUP, PLURAL, VERSION
from controller.operator.kube import load_configuration
from controller.operator.reconciler import Reconciler

logger = logging.getLogger("orca.handlers")


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

    def became_ready() -> None:
        if not reconciler.ready.is_set():
            reconciler.ready.set()
            queue.add_all(state.records)

    def node_changed(name: str) -> None:
        """Who could care: replicas on it, DaemonSets, anything not fully placed."""
        if reconciler.ready.is_set():
            queue.add_all(state.keys_on_node(name) | state.daemon_keys() | state.keys_not_placed())

    @kopf.index("nodes", registry=registry)
    async def orca_nodes(body: kopf.Body, **_: Any) -> None:
        name = state.upsert_node(body)
        if name is not None:
            node_changed(name)

    @kopf.index(GROUP, VERSION, PLURAL, registry=registry)
    async def orca_workloads(body: kopf.Body, **_: Any) -> None:
        record = state.upsert_workload(body)
        if record is not None and reconciler.ready.is_set():
            queue.add(record.key)

    @kopf.on.event("nodes", registry=registry)
    async def node_event(type: str, name: str, **_: Any) -> None:
        became_ready()
        if type == "DELETED" and state.delete_node(name):
            node_changed(name)

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def workload_event(type: str, namespace: str | None, name: str, **_: Any) -> None:
        became_ready()
        if type == "DELETED":
            key = f"{namespace}/{name}"
            if state.delete_workload(key):
                queue.add_all(state.keys_not_placed())


def connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """A kubernetes-client Configuration as kopf's ConnectionInfo."""
    scheme, token = None, None
    header = configuration.get_api_key_with_prefix("authorization")
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
