"""Read what ``orca plan --from-cluster`` needs from a live cluster: Nodes and Workloads.

A dry run, the ``nomad job plan`` of this world: it lists Nodes and every Workload (their
``status.placements`` are the ledger), and writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from pydantic import ValidationError
from urllib3.exceptions import HTTPError as Urllib3Error

from controller.api.messages import validation_message
from controller.api.models import GROUP, PLURAL, VERSION, Workload
from controller.scheduler.ledger import Ledger, ledger_from_objects
from controller.scheduler.nodes import (
    NodeError,
    NodeInfo,
    node_info_from_node,
    node_name,
    unreadable_node_info,
)
from controller.scheduler.priority import (
    NO_CLASSES,
    PriorityClass,
    PriorityClassError,
    PriorityClasses,
    priority_class_from_object,
)


class ClusterError(RuntimeError):
    """The cluster cannot be read: one line saying why."""


@dataclass(frozen=True)
class ClusterView:
    """What a dry run needs: the nodes, every Workload object as listed (their statuses are
    the ledger, parseable or not), and one line per object orca could not fully read."""

    nodes: list[NodeInfo]
    workloads: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    parsed: dict[str, Workload] = field(default_factory=dict)  # by key: those that parse
    classes: PriorityClasses = NO_CLASSES  # the cluster's PriorityClasses

    def ledger(self) -> Ledger:
        """Every Workload's recorded placements booked, as the operator books them."""
        return ledger_from_objects(self.nodes, self.workloads)


def _api(kubeconfig: str | None) -> k8s_client.ApiClient:
    try:
        api: k8s_client.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except (k8s_config.ConfigException, OSError) as exc:
        raise ClusterError(f"kubeconfig: {exc}") from None
    return api


def read_cluster(kubeconfig: str | None) -> ClusterView:
    """Every Node as NodeInfo and every Workload object, read the way the operator reads them:
    a Node orca cannot read is there but not ready (so nothing lands on it and its replicas
    move), and a Workload the models refuse still holds the capacity its status records."""
    api = _api(kubeconfig)
    try:
        core = k8s_client.CoreV1Api(api)
        custom = k8s_client.CustomObjectsApi(api)
        # Raw JSON, not the client's models: node_info_from_node reads the API's own shape.
        raw_nodes = _items(core.list_node(_preload_content=False))
        raw_workloads = _items(
            custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)
        )
        class_warnings: list[str] = []
        try:
            raw_classes = _items(
                k8s_client.SchedulingV1Api(api).list_priority_class(_preload_content=False)
            )
        except k8s_client.ApiException as exc:  # e.g. 403: plan on, and say what it means
            raw_classes = []
            class_warnings.append(
                f"PriorityClasses cannot be listed ({exc.status} {exc.reason}): Workloads "
                "naming one are Invalid in this plan"
            )
    except k8s_client.ApiException as exc:
        hint = ""
        if exc.status == 404:
            hint = f" (is the Workload CRD, {PLURAL}.{GROUP}, installed? kubectl apply -k crds/)"
        raise ClusterError(f"{exc.status} {exc.reason}: {_message(exc)}{hint}") from None
    except (OSError, Urllib3Error) as exc:  # urllib3's MaxRetryError: refused, TLS, timed out
        reason = getattr(exc, "reason", None) or exc
        raise ClusterError(f"cannot reach the API server: {reason}") from None
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return view_of(raw_nodes, raw_workloads, raw_classes, class_warnings)


def view_of(
    raw_nodes: list[dict[str, Any]],
    raw_workloads: list[dict[str, Any]],
    raw_classes: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> ClusterView:
    """The ``ClusterView`` of listed objects (pure: the part of ``read_cluster`` after I/O)."""
    nodes: list[NodeInfo] = []
    warnings = list(warnings or [])
    classes: list[PriorityClass] = []
    for obj in raw_classes or []:
        try:
            classes.append(priority_class_from_object(obj))
        except PriorityClassError as exc:
            warnings.append(f"{exc}; ignored")
    for obj in raw_nodes:
        try:
            nodes.append(node_info_from_node(obj))
        except NodeError as exc:
            name = node_name(obj)
            if name is None:
                warnings.append(f"a Node without a valid name is ignored: {exc}")
                continue
            warnings.append(f"Node {name}: {exc}; treated as not ready")
            nodes.append(unreadable_node_info(name))
    parsed: dict[str, Workload] = {}
    for obj in raw_workloads:
        try:
            workload = Workload.model_validate(obj)
            parsed[workload.key] = workload
        except ValidationError as exc:
            metadata = obj.get("metadata") or {}
            key = f"{metadata.get('namespace')}/{metadata.get('name')}"
            warnings.append(
                f"Workload {key}: {validation_message(exc)}; its placements stay booked"
            )
    return ClusterView(nodes, raw_workloads, warnings, parsed, PriorityClasses.of(classes))


def _items(response: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def _message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message"))
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)
