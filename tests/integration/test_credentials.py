"""Credentials in the ecosystem's order, against the real API server (issue 30): inside a Pod
(the service variables and a ServiceAccount token), an explicit ``--kubeconfig`` still wins;
``--context`` picks the live cluster over a dead current-context; ``orca explain`` without
``-n`` acts in the context's namespace; and with nothing but the Pod, the real ServiceAccount
token from the TokenRequest API is what reaches the server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane
from tests.support.factories import node_object, workload_obj
from tests.support.harness import IN_CLUSTER, Cluster, as_a_pod

pytestmark = pytest.mark.controlplane

DEAD = "https://127.0.0.1:1"  # nothing listens on port 1


def pod(tmp_path: Path, plane: ControlPlane, token: str, host: str, port: str) -> dict[str, str]:
    """A Pod's view of credentials (``as_a_pod``): the ServiceAccount directory (passed to
    ``orca`` by ``IN_CLUSTER``) and the service variables, here naming ``host`` and ``port``;
    no ``$KUBECONFIG``, no home kubeconfig."""
    _, env = as_a_pod(plane, tmp_path / "serviceaccount", token)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
    return env


def orca(secrets: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", IN_CLUSTER, str(secrets), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def two_contexts(plane: ControlPlane, path: Path, namespace: str) -> Path:
    """The admin kubeconfig with a second context, ``dead`` (current), whose server is down;
    ``live`` is the real one, with ``namespace`` as its namespace."""
    config = yaml.safe_load(plane.kubeconfig_path.read_text())
    live = config["contexts"][0]
    live["name"] = "live"
    live["context"]["namespace"] = namespace
    dead_cluster = {**config["clusters"][0], "name": "dead"}
    dead_cluster["cluster"] = {**dead_cluster["cluster"], "server": DEAD}
    config["clusters"].append(dead_cluster)
    config["contexts"].append({"name": "dead", "context": {**live["context"], "cluster": "dead"}})
    config["current-context"] = "dead"
    path.write_text(yaml.safe_dump(config))
    return path


def test_explicit_kubeconfig_and_context_win_inside_a_pod_and_name_the_namespace(
    cluster: Cluster, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    cluster.apply(node_object("cred-a", cpu="2"))
    cluster.apply(workload_obj("web", namespace, kind="Job", resources={"cpu": "1"}))
    env = pod(tmp_path, control_plane, "not-a-token", "127.0.0.1", "1")
    secrets = tmp_path / "serviceaccount"
    config = two_contexts(control_plane, tmp_path / "two.yaml", namespace)

    # The current context is dead: the command says so, in one line.
    out = orca(secrets, env, "explain", "web", "--kubeconfig", str(config))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "cannot reach the API server" in out.stderr and DEAD in out.stderr
    # --context live: the real server, and no -n: the context's namespace holds "web".
    live = ("--kubeconfig", str(config), "--context", "live", "-o", "json")
    out = orca(secrets, env, "explain", "web", *live)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["workload"] == f"{namespace}/web"
    # $KUBECONFIG wins over the Pod too.
    out = orca(secrets, {**env, "KUBECONFIG": str(config)}, "explain", "web", "--context", "live")
    assert out.returncode == 0, out.stderr
    # The same, with the Pod's credentials only (a bad token at a dead address): they are used.
    out = orca(secrets, env, "explain", "web", "-n", namespace)
    assert out.returncode == 2 and "https://127.0.0.1:1" in out.stderr, out.stderr


def test_in_a_pod_the_service_account_token_reaches_the_server(
    cluster: Cluster, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    cluster.apply(node_object("cred-b", cpu="2"))
    token = control_plane.kubectl(
        "create", "token", "orca-controller", "-n", "orca-system", "--duration=10m", check=True
    ).stdout.strip()
    host, port = control_plane.server_url.removeprefix("https://").rsplit(":", 1)
    env = pod(tmp_path, control_plane, token, host, port)
    secrets = tmp_path / "serviceaccount"
    workloads = tmp_path / "w.yaml"
    workloads.write_text(
        yaml.safe_dump(workload_obj("job", namespace, kind="Job", resources={"cpu": "1"}))
    )
    out = orca(secrets, env, "plan", "--from-cluster", "--workloads", str(workloads))
    assert out.returncode == 0, out.stderr
    assert "cred-b" in out.stdout
    # Without -n, explain acts in the Pod's namespace (orca-system): no "job" there.
    out = orca(secrets, env, "explain", "job")
    assert out.returncode == 1 and "orca-system/job not found" in out.stderr, out.stderr
