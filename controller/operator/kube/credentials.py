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

The deployed operator reads its Pod's credentials on its own (``InClusterConfiguration``,
client-go's ``rest.InClusterConfig``: three files and two variables) and does not import the
kubernetes client at all: ``kubernetes/__init__`` imports every generated API model whichever
part of it is asked for: 9 MB resident, and 8 MB of the operator's peak RSS in a 5,000-Node
backlog (158 MB before). Kubeconfigs keep the client's own loader (exec plugins, auth
providers, client certificates, merged files), imported only when one is read.

The default namespace of ``orca explain`` and ``orca rebalance --from-cluster`` follows
kubectl: the context's ``namespace``, else, in a Pod, the Pod's own (the ServiceAccount's
``namespace`` file: client-go's ``inClusterClientConfig.Namespace``), else ``default``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

#: Where a Pod's ServiceAccount is mounted (the kubelet's projected volume).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_NAMESPACE = "default"
#: How long a token read from the Pod's file is used before the file is read again: client-go
#: caches it for a minute less a 10 s leeway (``transport.NewCachedFileTokenSource``), half
#: of the time the kubelet leaves between refreshing a projected token and its expiry.
TOKEN_REREAD_SECONDS = 50.0

logger = logging.getLogger("orca.kube")


class CredentialsError(Exception):
    """No usable credentials, or a kubeconfig that cannot be read: one line for the user."""


class ClientConfiguration(Protocol):
    """What the operator's client reads of its credentials: the kubernetes client's
    ``Configuration`` (from a kubeconfig) and ``InClusterConfiguration`` both have it.
    ``get_api_key_with_prefix`` is the ``Authorization`` header's value (or None), read at
    each request so a rotated token is picked up; it raises ``CredentialsError`` when the
    credentials cannot be read."""

    host: str
    ssl_ca_cert: str | None
    verify_ssl: bool
    cert_file: str | None
    key_file: str | None

    def get_api_key_with_prefix(self, identifier: str, alias: str | None = None) -> str | None:
        """The header value for ``identifier`` (the kubernetes client's signature)."""


class InClusterConfiguration:
    """A Pod's credentials as client-go's ``rest.InClusterConfig`` reads them: the API server
    at ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` checked against the
    ServiceAccount's ``ca.crt``, and its ``token`` sent as a bearer token, read again once
    ``TOKEN_REREAD_SECONDS`` have passed (the kubelet rotates projected tokens). A re-read that
    fails keeps the token read last, as client-go's ``cachingTokenSource`` does (the file may
    be mid-replacement); only the first read's failure is an error."""

    verify_ssl = True
    cert_file: str | None = None
    key_file: str | None = None

    def __init__(
        self,
        environ: Mapping[str, str],
        service_account: Path,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        host, port = environ["KUBERNETES_SERVICE_HOST"], environ["KUBERNETES_SERVICE_PORT"]
        self.host = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        ca = service_account / "ca.crt"
        if not ca.is_file():
            raise CredentialsError(f"in-cluster: no CA certificate at {ca}")
        self.ssl_ca_cert: str | None = str(ca)
        self._token_file = service_account / "token"
        self._clock = clock
        self._token = self._read_token()
        self._read_at = clock()

    def _read_token(self) -> str:
        try:
            token = self._token_file.read_text().strip()
        except OSError as exc:
            raise CredentialsError(f"in-cluster: {_one_line(str(exc))}") from None
        if not token:
            raise CredentialsError(f"in-cluster: the token file {self._token_file} is empty")
        return token

    def get_api_key_with_prefix(self, identifier: str, alias: str | None = None) -> str | None:
        """``Bearer <token>``, the file read again when the last read is old enough."""
        if self._clock() - self._read_at >= TOKEN_REREAD_SECONDS:
            try:
                self._token = self._read_token()
            except CredentialsError as exc:
                logger.warning("could not read the rotated token, using the last one: %s", exc)
            self._read_at = self._clock()
        return f"Bearer {self._token}"


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
) -> ClientConfiguration:
    """The credentials of the first source that applies (``choose_source``): a Pod's read
    here (``InClusterConfiguration``), a kubeconfig by the kubernetes client's own loader
    (exec plugins, client certificates, tokens), whose failures later, when a token is
    refreshed, are ``CredentialsError`` too."""
    service_account = service_account or SERVICE_ACCOUNT_DIR
    source = choose_source(kubeconfig, context, environ=environ, service_account=service_account)
    if source.kind == "in-cluster":
        return InClusterConfiguration(environ, service_account)
    # Imported here, not at the top: kubeconfigs only (the module docstring says why).
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=source.path, context=source.context, client_configuration=configuration
        )
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, ValueError) as exc:
        raise CredentialsError(f"{source.path}: {_one_line(str(exc))}") from None
    refresh = configuration.refresh_api_key_hook
    if refresh is not None:  # an exec plugin or auth provider's token, refreshed per request

        def refresh_or_fail(config: Any) -> None:
            try:
                refresh(config)
            except (k8s_config.ConfigException, OSError, ValueError) as exc:
                raise CredentialsError(f"{source.path}: {_one_line(str(exc))}") from None

        configuration.refresh_api_key_hook = refresh_or_fail
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
    from kubernetes import config as k8s_config  # kubeconfigs only, as in load_configuration

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
