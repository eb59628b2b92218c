"""The operator's side of the Kubernetes API: one HTTP client (``client``: requests, watches,
credentials, the write fence and the one error per failure kind, re-exported here), the
informers that keep the operator's view in step (``informer``), and leader election on a
Lease (``leader``)."""

from controller.operator.kube.client import (
    ApiError,
    Fenced,
    KubeApi,
    TransportError,
    api_resource,
    authorization,
    load_configuration,
)

__all__ = [
    "ApiError",
    "Fenced",
    "KubeApi",
    "TransportError",
    "api_resource",
    "authorization",
    "load_configuration",
]
