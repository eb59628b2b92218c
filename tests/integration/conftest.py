"""Fixtures for integration tests against a living cluster: etcd, kube-apiserver with its
default admission, kube-controller-manager and kwok (heartbeating Nodes).

The control plane is started once per test session from the binaries that
``hack/testcp/build.sh`` caches (``$ORCA_TESTCP_BIN`` overrides the location). When it cannot
be started, every test using it FAILS with the reason: a silently skipped integration suite
looks exactly like a passing one.

``ORCA_TEST_DEVCLUSTER_DIR=DIR`` reuses a cluster started with
``orca dev-cluster start --dir DIR`` instead (faster edit-run loops); it is left running.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import config
from kubernetes.client import ApiClient

from controller.devcluster.binaries import BinariesNotFound
from controller.devcluster.controlplane import ControlPlane, ControlPlaneError, KubectlRunner
from tests.support.harness import INSTALL, Cluster, OperatorProcess

#: Reuse a running ``orca dev-cluster`` directory instead of starting a private one.
REUSE_ENV = "ORCA_TEST_DEVCLUSTER_DIR"
_HERE = Path(__file__).resolve().parent


def _close(client: ApiClient) -> None:
    """Release the client's connection pool (``close`` is not annotated upstream)."""
    cast("Callable[[], None]", client.close)()


def api_client_from(kubeconfig: Path) -> ApiClient:
    """An ApiClient for one kubeconfig file, without touching the global default config."""
    # new_client_from_config is not annotated upstream; pin down what it returns.
    new_client = cast("Callable[..., ApiClient]", config.new_client_from_config)
    return new_client(config_file=str(kubeconfig))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse integration tests without the ``controlplane`` marker, so ``-m`` selects right."""
    unmarked = [
        item.nodeid
        for item in items
        if _HERE in Path(str(item.fspath)).resolve().parents
        and item.get_closest_marker("controlplane") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests in tests/integration need `pytestmark = pytest.mark.controlplane`: "
            + ", ".join(unmarked)
        )


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane for the whole session (admin kubeconfig at .kubeconfig_path),
    with a real cluster's node timing: a Node goes Unknown after 50 s of silence."""
    reuse = os.environ.get(REUSE_ENV)
    if reuse:
        try:
            plane = ControlPlane.attach(reuse)
        except ControlPlaneError as e:
            pytest.fail(f"{REUSE_ENV}={reuse}: {e}", pytrace=False)
        if not plane.ready():
            pytest.fail(f"{REUSE_ENV}={reuse}: API server is not ready", pytrace=False)
        yield plane
        return

    plane = ControlPlane(tmp_path_factory.mktemp("controlplane"), stop_timeout=10.0)
    problem = None
    try:
        plane.start()
    except (BinariesNotFound, ControlPlaneError) as e:
        problem = str(e)
    if problem is not None:  # outside `except`: the report shows the reason once, unchained
        pytest.fail(f"cannot start the test control plane: {problem}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[ApiClient]:
    """``kubernetes.client.ApiClient`` authenticated as admin (``system:masters``)."""
    client = api_client_from(control_plane.kubeconfig_path)
    try:
        yield client
    finally:
        _close(client)


@pytest.fixture(scope="session")
def make_api_client(
    control_plane: ControlPlane,
) -> Iterator[Callable[[str, Sequence[str]], ApiClient]]:
    """Factory: ``make_api_client(user, groups)`` -> ApiClient for that identity (RBAC tests)."""
    clients: list[ApiClient] = []

    def make(user: str, groups: Sequence[str] = ()) -> ApiClient:
        client = api_client_from(control_plane.mint_kubeconfig(user, groups))
        clients.append(client)
        return client

    yield make
    for client in clients:
        _close(client)


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane) -> KubectlRunner:
    """Run the built kubectl: ``kubectl("get", "nodes", kubeconfig=..., check=True)``.

    Admin kubeconfig unless ``kubeconfig`` is given; returns CompletedProcess[str] (text
    stdout/stderr); ``check=True`` raises KubectlError carrying stderr.
    """
    return control_plane.kubectl


# -- the operator tests' fixtures: a cluster, a fresh namespace, `orca run` ------------------


@pytest.fixture(scope="module")
def installed(kubectl: KubectlRunner) -> None:
    kubectl("apply", "-k", str(INSTALL), check=True)  # CRD, RBAC, Deployment...
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True)


@pytest.fixture
def cluster(kubectl: KubectlRunner, installed: None) -> Iterator[Cluster]:
    c = Cluster(kubectl)
    c.delete_all_nodes()
    yield c
    c.delete_all_nodes()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace; its Workloads are deleted afterwards, so no test sees another's
    placements (the namespace stays: deleting it would wait for the Workloads' finalizers,
    which no operator removes once the test's is gone)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.run("create", "namespace", name)
    yield name
    cluster.run("delete", "workloads.orca.cloudinit.dev", "--all", "-n", name, "--wait=false")


@pytest.fixture
def start_operator(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Any]:
    started: list[OperatorProcess] = []

    def start(kubeconfig: Path | None = None, **kwargs: Any) -> OperatorProcess:
        op = OperatorProcess(
            kubeconfig or control_plane.kubeconfig_path,
            tmp_path / f"operator-{len(started)}.log",
            namespaces=[namespace],
            lease_namespace=kwargs.pop("lease_namespace", namespace),
            **kwargs,
        )
        started.append(op)
        op.wait_live()
        return op

    yield start
    for op in started:
        op.stop()


@pytest.fixture
def operator(start_operator: Any) -> OperatorProcess:
    op: OperatorProcess = start_operator()
    return op
