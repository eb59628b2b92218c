"""The live cluster as ``orca plan --from-cluster``, ``orca rebalance --from-cluster`` and
``orca explain`` read it: through the operator's own client (``KubeApi``: one HTTP stack), with
credentials in the ecosystem's order (``--kubeconfig``, ``$KUBECONFIG``, in-cluster,
``~/.kube/config``; ``controller.operator.kube.credentials``),
LISTs in pages as its informers make them; every problem one line (``ClusterError``).

Reads only: Nodes, every Workload and the PriorityClasses, handed to
``controller.inputs.fromcluster.view_of``, and kube-controller-manager's Lease, to read
NotReady Nodes as the operator's ``--node-lifecycle=auto`` reads them
(``controller.operator.lifecycle``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
from typing import Any

from controller.api.models import GROUP, PLURAL, workload_path
from controller.inputs.fromcluster import ClusterError, ClusterView, view_of
from controller.operator.kube import (
    ApiError,
    CredentialsError,
    KubeApi,
    TransportError,
    default_namespace,
    load_configuration,
)
from controller.operator.lifecycle import read_verdict
from controller.scheduler.nodes import NODES_PATH
from controller.scheduler.priority import LIST_PATH as PRIORITY_CLASSES_PATH


def read_cluster(kubeconfig: str | None, context: str | None = None) -> ClusterView:
    """Every Node, Workload and PriorityClass, as ``view_of`` reads them."""
    try:
        configuration = load_configuration(kubeconfig, context)
    except CredentialsError as exc:
        raise ClusterError(str(exc)) from None
    return asyncio.run(_read(KubeApi(configuration)))


def namespace_of(args: argparse.Namespace) -> str:
    """``-n``, else the context's namespace, else the Pod's, else ``default`` (as kubectl)."""
    if args.namespace:
        return str(args.namespace)
    try:
        return default_namespace(args.kubeconfig, args.context)
    except CredentialsError as exc:
        raise ClusterError(str(exc)) from None


async def _read(api: KubeApi) -> ClusterView:
    async with api:
        try:
            nodes = await _list(api, NODES_PATH)
            workloads = await _list(api, workload_path())
            warnings: list[str] = []
            try:
                classes = await _list(api, PRIORITY_CLASSES_PATH)
            except ApiError as exc:  # e.g. 403: plan on, and say what it means
                classes = []
                warnings.append(
                    f"PriorityClasses cannot be listed ({exc.status} {exc.reason}): Workloads "
                    "naming one are Invalid in this plan"
                )
        except ApiError as exc:
            hint = ""
            if exc.not_found:
                crd = f"{PLURAL}.{GROUP}"
                hint = f" (is the Workload CRD, {crd}, installed? kubectl apply -k crds/)"
            raise ClusterError(f"{exc.status} {exc.reason}: {exc.message}{hint}") from None
        except TransportError as exc:
            where = api.configuration.host
            raise ClusterError(f"cannot reach the API server: {_why(exc)} ({where})") from None
        try:
            verdict = await read_verdict(api)
            imply = verdict.imply
            if verdict.warn:
                warnings.append(f"node lifecycle: {verdict.why}")
        except (ApiError, TransportError) as exc:
            imply = True
            warnings.append(f"node lifecycle: cannot read the controller manager's Lease: {exc}")
    return view_of(nodes, workloads, classes, warnings, imply_lifecycle=imply)


async def _list(api: KubeApi, path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    await api.list_objects(path, items.append)
    return items


def _why(exc: TransportError) -> str:
    """What went wrong, in the words a user knows: the socket's own (``Connection refused``)
    where there is one, else the error's (a TLS failure, a timeout). A TLS error's ``errno``
    is OpenSSL's error code, not the socket's (a certificate that does not verify has 1,
    which ``strerror`` reads as "Operation not permitted"): its own text says it."""
    cause = getattr(exc.cause, "os_error", exc.cause)
    errno = getattr(cause, "errno", None)
    if isinstance(errno, int) and errno > 0 and not isinstance(cause, ssl.SSLError):
        return os.strerror(errno)
    return str(exc.cause).strip() or type(exc.cause).__name__
