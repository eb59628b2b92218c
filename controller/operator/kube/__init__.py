"""The operator's side of the Kubernetes API: one HTTP client (``client``: requests, watches,
credentials, the write fence and the one error per failure kind, re-exported here), the
credentials' order and default namespace (``credentials``), the
informers that keep the operator's view in step (``informer``), and leader election on a
Lease (``leader``)."""

from controller.operator.kube.client import (
    ApiError,
    Fenced,
    KubeApi,
    TransportError,
    api_resource,
    authorization,
)
from controller.operator.kube.credentials import (
    CredentialsError,
    default_namespace,
    load_configuration,
)

__all__ = [
    "ApiError",
    "CredentialsError",
    "Fenced",
    "KubeApi",
    "TransportError",
    "api_resource",
    "authorization",
    "default_namespace",
    "load_configuration",
]
