"""Read what ``orca plan --from-cluster`` needs from a live cluster: Nodes and Workloads.

A dry run, the ``nomad job plan`` of this world: it lists Nodes and every Workload (their
``status.placements`` are the ledger), and writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from pydantic import ValidationError

from controller.api.models import GROUP, PLURAL, VERSION, NodeInfo, Workload
from controller.core.nodes import NodeError, node_info_from_node


class ClusterError(RuntimeError):
    """The cluster cannot be read: one line saying why."""


def _api(kubeconfig: str | None) -> k8s_client.ApiClient:
    try:
        api: k8s_client.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except (k8s_config.ConfigException, OSError) as exc:
        raise ClusterError(f"kubeconfig: {exc}") from None
    return api


def read_cluster(kubeconfig: str | None) -> tuple[list[NodeInfo], list[Workload]]:
    """Every Node as NodeInfo, and every Workload that parses (with its status)."""
    api = _api(kubeconfig)
    try:
        core = k8s_client.CoreV1Api(api)
        custom = k8s_client.CustomObjectsApi(api)
        # Raw JSON, not the client's models: node_info_from_node reads the API's own shape.
        raw_nodes = _items(core.list_node(_preload_content=False))
        raw_workloads = _items(
            custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)
        )
    except k8s_client.ApiException as exc:
        raise ClusterError(f"{exc.status} {exc.reason}: {_message(exc)}") from None
    except OSError as exc:
        raise ClusterError(f"cannot reach the API server: {exc}") from None
    finally:
        api.close()  # type: ignore[no-untyped-call]
    nodes = []
    for obj in raw_nodes:
        try:
            nodes.append(node_info_from_node(obj))
        except NodeError:
            continue  # the operator skips such a node too
    workloads = []
    for obj in raw_workloads:
        try:
            workloads.append(Workload.model_validate(obj))
        except ValidationError:
            continue
    return nodes, workloads


def _items(response: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def _message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message"))
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)
