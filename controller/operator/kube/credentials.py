"""Which cluster a command talks to, and as whom: the credentials in the order the Go
ecosystem reads them, and the namespace a command defaults to.

controller-runtime's ``pkg/client/config/config.go`` (``loadConfig``) is the order every
operator built on it follows, and the one users expect of ours:

1. ``--kubeconfig FILE``, when given;
2. ``$KUBECONFIG`` (one file or several joined by ``:``, merged as kubectl merges them);
3. in-cluster: the Pod's ServiceAccount token, its CA and ``KUBERNETES_SERVICE_HOST``/``_PORT``;
4. ``~/.kube/config``.

An explicit file wins over the Pod it runs in: ``orca plan --from-cluster --kubeconfig
other.yaml`` in a CI job's Pod talks to ``other.yaml``'s cluster, not the one around it (the
order before this module put in-cluster first). ``--context`` picks a context of the kubeconfig
(as ``kubectl --context``); in-cluster has no contexts, so, as in controller-runtime, it is
ignored there.

The default namespace of ``orca explain`` and ``orca rebalance --from-cluster`` follows
kubectl: the context's ``namespace``, else, in a Pod, the Pod's own (the ServiceAccount's
``namespace`` file: client-go's ``inClusterClientConfig.Namespace``), else ``default``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.incluster_config import InClusterConfigLoader

#: Where a Pod's ServiceAccount is mounted (the kubelet's projected volume).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_NAMESPACE = "default"


class CredentialsError(Exception):
    """No usable credentials, or a kubeconfig that cannot be read: one line for the user."""


@dataclass(frozen=True)
class Source:
    """Where credentials are read from: ``kind`` is ``kubeconfig`` or ``in-cluster``; for a
    kubeconfig, ``path`` is the file (or ``a:b`` list) and ``context`` the one asked for."""

    kind: str
    path: str | None = None
    context: str | None = None


def choose_source(
    kubeconfig: str | None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account: Path | None = None,
) -> Source:
    """The first of the four places (module docstring) that applies; ``CredentialsError`` when
    none does. In-cluster applies when the Pod's environment and token are there, as
    ``rest.InClusterConfig`` requires them (``service_account``: the mount, read at call time
    from ``SERVICE_ACCOUNT_DIR`` when not given)."""
    service_account = service_account or SERVICE_ACCOUNT_DIR
    if kubeconfig:
        return Source("kubeconfig", kubeconfig, context)
    if environ.get("KUBECONFIG"):
        return Source("kubeconfig", environ["KUBECONFIG"], context)
    in_pod = environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT")
    if in_pod and (service_account / "token").is_file():
        return Source("in-cluster")
    home = Path(environ.get("HOME") or Path.home()) / ".kube" / "config"
    if home.is_file():
        return Source("kubeconfig", str(home), context)
    raise CredentialsError(
        f"no credentials: give --kubeconfig FILE, set $KUBECONFIG, run in a Pod, or write {home}"
    )


def load_configuration(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account: Path | None = None,
) -> k8s_client.Configuration:
    """A client Configuration from the first source that applies (``choose_source``); the
    kubernetes client's own loaders read it (exec plugins, client certificates, tokens; the
    in-cluster token re-read from its file every minute, so a rotated one keeps working)."""
    service_account = service_account or SERVICE_ACCOUNT_DIR
    source = choose_source(kubeconfig, context, environ=environ, service_account=service_account)
    configuration = k8s_client.Configuration()
    try:
        if source.kind == "in-cluster":
            new_loader: Any = InClusterConfigLoader  # not annotated upstream
            loader = new_loader(
                str(service_account / "token"), str(service_account / "ca.crt"), environ=environ
            )
            loader.load_and_set(configuration)
        else:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=source.path, context=source.context, client_configuration=configuration
            )
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, ValueError) as exc:
        where = source.path or "in-cluster"
        raise CredentialsError(f"{where}: {_one_line(str(exc))}") from None
    return configuration


def default_namespace(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account: Path | None = None,
) -> str:
    """The namespace a command acts in when ``-n`` is not given (module docstring)."""
    service_account = service_account or SERVICE_ACCOUNT_DIR
    source = choose_source(kubeconfig, context, environ=environ, service_account=service_account)
    if source.kind == "in-cluster":
        try:
            return (service_account / "namespace").read_text().strip() or DEFAULT_NAMESPACE
        except OSError:
            return DEFAULT_NAMESPACE
    assert source.path is not None
    try:
        listed, current = k8s_config.list_kube_config_contexts(source.path)  # type: ignore[no-untyped-call]
        contexts = {c["name"]: c.get("context") or {} for c in listed}
        name = source.context or current["name"]
    except (k8s_config.ConfigException, yaml.YAMLError, KeyError, TypeError, OSError) as exc:
        raise CredentialsError(f"{source.path}: {_one_line(str(exc))}") from None
    if name not in contexts:
        raise CredentialsError(f"{source.path}: no context named {name!r}")
    return str(contexts[name].get("namespace") or DEFAULT_NAMESPACE)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 300 else flat[:297] + "..."
