"""Smoke tests of the real control plane: lifecycle, a living cluster, Nodes, RBAC, versions.

They pin down what the operator's integration tests rely on: that the fixture really is a
kube-apiserver with RBAC and its default admission, that the controller manager and kwok keep
Nodes alive (heartbeats, Ready, the not-ready taint lifted) and let one go silent on demand,
that the status of a Node kwok leaves alone can be faked through the status subresource, and
that starting/stopping leaves no processes or ports behind.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from controller.devcluster.binaries import ETCD_VERSION, KUBE_VERSION
from controller.devcluster.controlplane import (
    SERVERS,
    SILENT_LABEL,
    ControlPlane,
    ControlPlaneError,
    KubectlRunner,
    NodeTiming,
)
from tests.integration.conftest import _close, api_client_from

pytestmark = pytest.mark.controlplane

REPO_ROOT = Path(__file__).resolve().parents[2]
#: kubernetes-client 37 defaults PATCH to JSON Patch; our bodies are merge patches.
MERGE_PATCH = "application/merge-patch+json"


def _port(url: str) -> int:
    port = urlparse(url).port
    assert port is not None
    return port


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _running(pid: int) -> bool:
    """Any thread of ``pid`` alive. A killed Go process may show a zombie leader while other
    threads still hold its sockets, and an orphan's zombie lingers until init reaps it."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    states = []
    for task in tasks:
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:
            # The thread exited between the listing and the read: ENOENT, or ESRCH once the
            # file is open (seen in a CI run), both mean "gone".
            continue
    return any(state not in ("Z", "X") for state in states)


def _processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line contains ``text`` (our directory): orphan detector."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and _running(int(entry.name)):
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def _wait_until(pred: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def _assert_gone(directory: Path, pids: dict[str, int], ports: Sequence[int]) -> None:
    assert _wait_until(lambda: not any(_running(p) for p in pids.values())), pids
    assert _wait_until(lambda: not any(_listening(p) for p in ports)), f"listening: {ports}"
    assert _processes_mentioning(str(directory)) == []
    assert not list(directory.glob("*.pid"))
    assert not (directory / "state.json").exists()


def _child_with_a_control_plane(directory: Path) -> subprocess.Popen[str]:
    """A Python process that starts a ControlPlane in ``directory``, prints its pids and
    URLs as one JSON line, then sleeps: for tests that kill or signal the starter."""
    script = textwrap.dedent(
        f"""
        import json, time
        from controller.devcluster.controlplane import ControlPlane
        cp = ControlPlane({str(directory)!r}).start()
        print(json.dumps({{"pids": cp.pids, "urls": list(cp.urls.values())}}), flush=True)
        time.sleep(600)
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _started(child: subprocess.Popen[str]) -> dict[str, Any]:
    """The child's JSON line; its stderr as the failure message when it printed none."""
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, child.stderr.read() if child.stderr else "no output"
    info: dict[str, Any] = json.loads(line)
    return info


# -- lifecycle ---------------------------------------------------------------------------------


def test_start_and_stop_leave_no_processes_or_ports(tmp_path: Path) -> None:
    directory = tmp_path / "cp"
    plane = ControlPlane(directory)
    with plane:
        pids = plane.pids
        ports = [_port(url) for url in plane.urls.values()]
        assert list(pids) == list(SERVERS)
        assert len(set(ports)) == len(SERVERS)
        assert all(_running(p) for p in pids.values())
        assert all(_listening(p) for p in ports)
        assert plane.ready()
        assert (directory / "etcd.pid").read_text().strip() == str(pids["etcd"])
        print(f"control plane ready in {plane.startup_seconds:.1f}s")
    _assert_gone(directory, pids, ports)
    plane.stop()  # idempotent


def _controller_lease(plane: ControlPlane) -> dict[str, Any]:
    api = api_client_from(plane.kubeconfig_path)
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            "kube-controller-manager", "kube-system"
        )
        return _plain(api, lease)
    finally:
        _close(api)


def test_the_controller_manager_holds_its_lease_and_a_restart_takes_a_new_one(
    tmp_path: Path,
) -> None:
    """start() returns once kube-controller-manager leads (its Lease held, renewed since it
    started: what the operator's --node-lifecycle=auto reads); stop() releases the Lease,
    which kube-controller-manager itself leaves held, so the next start on the same data
    finds none and its new controller manager creates it afresh instead of waiting out the
    old holder's lease (the Lease's transitions stay 0: nobody took it over)."""
    directory = tmp_path / "cp"
    holders = []
    for _ in range(2):
        started = dt.datetime.now(dt.UTC)
        with ControlPlane(directory) as plane:
            lease = _controller_lease(plane)
        spec = lease["spec"]
        renewed = dt.datetime.fromisoformat(spec["renewTime"])
        created = dt.datetime.fromisoformat(lease["metadata"]["creationTimestamp"])
        assert renewed >= started - dt.timedelta(seconds=1), (renewed, started)
        assert created >= started - dt.timedelta(seconds=1), (created, started)
        assert spec.get("leaseTransitions", 0) == 0, spec
        holders.append(spec["holderIdentity"])
    assert holders[0] != holders[1] and all(holders), holders


def test_failed_start_reports_the_log_and_cleans_up(tmp_path: Path) -> None:
    """A server that cannot start: the error carries its log; nothing is left running."""
    directory = tmp_path / "cp"
    plane = ControlPlane(directory, apiserver_args=["--no-such-flag"])
    with pytest.raises(ControlPlaneError) as failed:
        plane.start()
    message = str(failed.value)
    assert "kube-apiserver failed to start" in message
    assert "unknown flag: --no-such-flag" in message
    assert str(directory / "kube-apiserver.log") in message
    assert _wait_until(lambda: _processes_mentioning(str(directory)) == [])
    assert not list(directory.glob("*.pid"))


def test_a_taken_port_is_retried_with_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The free-port pick is racy; a server that loses the race is restarted elsewhere."""
    from controller.devcluster import controlplane, processes

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        real_free_port = processes.free_port
        handed_out: list[int] = []

        def racy_free_port() -> int:
            # Picks: etcd client, etcd peer, [retry: etcd client, etcd peer], API server, ...
            # Hand the squatted port to etcd's first client pick and the API server's first.
            port = taken if len(handed_out) in (0, 4) else real_free_port()
            handed_out.append(port)
            return port

        monkeypatch.setattr(controlplane, "free_port", racy_free_port)
        with ControlPlane(tmp_path / "cp") as plane:
            assert plane.ready()
            assert _port(plane.etcd_url) != taken
            assert _port(plane.server_url) != taken
        assert handed_out.count(taken) == 2
        assert "address already in use" in plane.etcd_log.read_text()
        assert "address already in use" in plane.apiserver_log.read_text()


def test_servers_die_with_the_python_process_that_started_them(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: even a SIGKILLed pytest leaves no etcd/kube-apiserver behind."""
    directory = tmp_path / "cp"
    child = _child_with_a_control_plane(directory)
    try:
        info = _started(child)
        assert all(_running(p) for p in info["pids"].values())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # Nobody ran stop(), so pid files stay behind; the processes and ports must not.
    pids: dict[str, int] = info["pids"]
    ports = [_port(u) for u in info["urls"]]
    assert _wait_until(lambda: not any(_running(p) for p in pids.values())), pids
    assert _wait_until(lambda: not any(_listening(p) for p in ports)), f"listening: {ports}"
    assert _processes_mentioning(str(directory)) == []


def test_sigterm_to_the_python_process_stops_the_servers_cleanly(tmp_path: Path) -> None:
    """The SIGTERM handler stops the servers in order and removes the pid files."""
    directory = tmp_path / "cp"
    child = _child_with_a_control_plane(directory)
    try:
        info = _started(child)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    _assert_gone(directory, info["pids"], [_port(u) for u in info["urls"]])


def test_cli_start_status_stop(tmp_path: Path) -> None:
    """``orca dev-cluster``: servers outlive ``start``; ``status``/``stop`` find them by pid."""
    directory = tmp_path / "dev"

    def orca(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", "dev-cluster", *args, "--dir", str(directory)],
            capture_output=True,
            text=True,
            timeout=300,
        )

    started = orca("start")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert started.stdout.rstrip().splitlines()[-1].startswith("use it with: export KUBECONFIG")
        state = json.loads((directory / "state.json").read_text())
        keys = ("etcd", "apiserver", "controller-manager", "kwok")
        pids = {k: state[k]["pid"] for k in keys}
        ports = [_port(state[k]["url"]) for k in keys]
        assert state["node_timing"]["grace_period"] == 50  # a real cluster's by default
        assert all(_running(p) for p in pids.values())  # the CLI process has exited

        status = orca("status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.startswith("running")
        assert str(directory / "kubeconfig") in status.stdout

        again = orca("start")
        assert again.returncode == 1
        assert "already running" in again.stderr
    finally:
        stopped = orca("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    _assert_gone(directory, pids, ports)
    after = orca("status")
    assert after.returncode == 1
    assert after.stdout.startswith("not running")


# -- versions ----------------------------------------------------------------------------------


def _gomod_version(path: Path, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", path.read_text(), re.M)
    assert match, f"{module} not in {path}"
    return match.group(1)


def test_pinned_versions_match_build_modules() -> None:
    """binaries.py must look in the cache directory build.sh writes to."""
    testcp = REPO_ROOT / "hack" / "testcp"
    assert _gomod_version(testcp / "kube" / "go.mod", "k8s.io/kubernetes") == KUBE_VERSION
    assert _gomod_version(testcp / "kcm" / "go.mod", "k8s.io/kubernetes") == KUBE_VERSION
    assert _gomod_version(testcp / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3") == ETCD_VERSION


def test_server_and_client_report_the_pinned_version(kubectl: KubectlRunner) -> None:
    out = kubectl("version", "-o", "json", check=True)
    versions = json.loads(out.stdout)
    assert versions["serverVersion"]["gitVersion"] == KUBE_VERSION
    assert versions["clientVersion"]["gitVersion"] == KUBE_VERSION


def test_controller_manager_and_kwok_report_the_pinned_versions(
    control_plane: ControlPlane,
) -> None:
    def version(binary: str) -> str:
        run = subprocess.run(
            [str(control_plane.bin_dir / binary), "--version"], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    assert version("kube-controller-manager") == f"Kubernetes {KUBE_VERSION}"
    kwok = _gomod_version(REPO_ROOT / "hack" / "testcp" / "kwok" / "go.mod", "sigs.k8s.io/kwok")
    assert version("kwok").startswith(f"kwok version {kwok} ")


# -- nodes ------------------------------------------------------------------------------------


@pytest.fixture
def node_name(api_client: ApiClient) -> Iterator[str]:
    name = f"test-node-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        client.CoreV1Api(api_client).delete_node(name)
    except ApiException as e:
        if e.status != 404:
            raise


def test_node_status_is_patched_through_the_status_subresource(
    api_client: ApiClient, node_name: str, kubectl: KubectlRunner
) -> None:
    """The status of a Node no kubelet reports (silent: kwok leaves it alone) is whatever the
    status subresource was last told."""
    core = client.CoreV1Api(api_client)
    core.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(
                name=node_name, labels={"orca.test/role": "smoke", SILENT_LABEL: "true"}
            )
        )
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    status_patch = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "faked by the test",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
    }
    core.patch_node_status(node_name, status_patch, _content_type=MERGE_PATCH)

    node = core.read_node(node_name)
    assert node.status is not None and node.spec is not None
    assert node.status.allocatable == resources
    assert node.status.allocatable["cpu"] == "4"
    assert node.status.allocatable["memory"] == "8Gi"
    ready = [c.status for c in node.status.conditions or [] if c.type == "Ready"]
    assert ready == ["True"]
    assert not node.spec.unschedulable

    # Writing status through the main resource is ignored, as for any status subresource.
    core.patch_node(
        node_name, {"status": {"allocatable": {"cpu": "64"}}}, _content_type=MERGE_PATCH
    )
    again = core.read_node(node_name)
    assert again.status is not None and again.status.allocatable is not None
    assert again.status.allocatable["cpu"] == "4"

    core.patch_node(node_name, {"spec": {"unschedulable": True}}, _content_type=MERGE_PATCH)
    cordoned = core.read_node(node_name).spec
    assert cordoned is not None and cordoned.unschedulable is True

    # kubectl works on the same objects, as a user would use it.
    kubectl("uncordon", node_name, check=True)
    uncordoned = core.read_node(node_name).spec
    assert uncordoned is not None and not uncordoned.unschedulable
    listed = kubectl("get", "nodes", "-l", "orca.test/role=smoke", "-o", "name", check=True)
    assert f"node/{node_name}" in listed.stdout.split()


# -- RBAC ------------------------------------------------------------------------------------


def test_rbac_refuses_unbound_users_and_admits_bound_ones(
    api_client: ApiClient,
    make_api_client: Callable[[str, Sequence[str]], ApiClient],
    kubectl: KubectlRunner,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    nobody = client.CoreV1Api(make_api_client("nobody", []))
    with pytest.raises(ApiException) as refused:
        nobody.list_node()
    assert refused.value.status == 403
    message = json.loads(str(refused.value.body))["message"]
    assert 'User "nobody" cannot list resource "nodes"' in message

    rbac = client.RbacAuthorizationV1Api(api_client)
    role = f"orca-test-node-reader-{suffix}"
    user, group = f"reader-{suffix}", f"orca-readers-{suffix}"
    rbac_group = "rbac.authorization.k8s.io"
    rbac.create_cluster_role(
        client.V1ClusterRole(
            metadata=client.V1ObjectMeta(name=role),
            rules=[
                client.V1PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get", "list"])
            ],
        )
    )
    rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=role),
            role_ref=client.V1RoleRef(api_group=rbac_group, kind="ClusterRole", name=role),
            subjects=[
                client.RbacV1Subject(api_group=rbac_group, kind="User", name=user),
                client.RbacV1Subject(api_group=rbac_group, kind="Group", name=group),
            ],
        )
    )
    try:
        as_user = client.CoreV1Api(make_api_client(user, []))
        as_member = client.CoreV1Api(make_api_client(f"member-{suffix}", [group]))

        def allowed(api: client.CoreV1Api) -> bool:
            try:
                api.list_node()
            except ApiException as e:
                if e.status == 403:
                    return False  # the authorizer's cache may lag the binding briefly
                raise
            return True

        assert _wait_until(lambda: allowed(as_user), timeout=10)
        assert _wait_until(lambda: allowed(as_member), timeout=10)
        # Read-only: the role grants no writes.
        with pytest.raises(ApiException) as write:
            as_user.create_node(
                client.V1Node(metadata=client.V1ObjectMeta(name=f"denied-{suffix}"))
            )
        assert write.value.status == 403
        # And the unbound user is still refused.
        assert not allowed(nobody)
    finally:
        rbac.delete_cluster_role_binding(role)
        rbac.delete_cluster_role(role)


def test_kubectl_with_a_minted_kubeconfig_is_refused(
    control_plane: ControlPlane, kubectl: KubectlRunner
) -> None:
    path = control_plane.mint_kubeconfig("nobody", [])
    result = kubectl("get", "nodes", kubeconfig=path)
    assert result.returncode != 0
    assert "Forbidden" in result.stderr
    assert 'User "nobody" cannot list resource "nodes"' in result.stderr
    whoami = kubectl("auth", "whoami", "-o", "json", kubeconfig=path, check=True)
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == "nobody"


# -- a living cluster --------------------------------------------------------------------------

NOT_READY = ("node.kubernetes.io/not-ready", "NoSchedule")
UNREACHABLE = "node.kubernetes.io/unreachable"


def _plain(api: ApiClient, obj: Any) -> dict[str, Any]:
    """A typed client object as the API's JSON (camelCase keys, no None fields)."""
    sanitize = cast("Callable[[Any], dict[str, Any]]", api.sanitize_for_serialization)
    return sanitize(obj)


def _node(api: ApiClient, name: str) -> tuple[str | None, list[tuple[str, str]]]:
    """(status of the Ready condition or None, [(taint key, effect)])."""
    node = _plain(api, client.CoreV1Api(api).read_node(name))
    conditions = node.get("status", {}).get("conditions", [])
    ready = next((c["status"] for c in conditions if c["type"] == "Ready"), None)
    return ready, [(t["key"], t["effect"]) for t in node["spec"].get("taints", [])]


def _lease(api: ApiClient, name: str) -> dict[str, Any] | None:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(name, "kube-node-lease")
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return _plain(api, lease)


def _renew_time(api: ApiClient, name: str) -> dt.datetime | None:
    lease = _lease(api, name)
    return None if lease is None else dt.datetime.fromisoformat(lease["spec"]["renewTime"])


def _wait_for(what: str, pred: Callable[[], bool], timeout: float = 180.0) -> float:
    """Poll ``pred`` until it holds; return the seconds it took (printed, never asserted)."""
    start = time.monotonic()
    assert _wait_until(pred, timeout), f"{what}: not within {timeout:.0f}s"
    took = time.monotonic() - start
    print(f"{what}: after {took:.1f}s")
    return took


def test_a_new_node_turns_ready_by_its_heartbeats_and_loses_the_not_ready_taint(
    api_client: ApiClient, node_name: str
) -> None:
    """As a kubelet registers: the Node says nothing of its readiness. TaintNodesByCondition
    admission taints it not-ready at creation; kwok reports it Ready and renews its Lease; the
    node lifecycle controller lifts the taint; deleting the Node garbage-collects its Lease."""
    core = client.CoreV1Api(api_client)
    meta = client.V1ObjectMeta(name=node_name, labels={"orca.test/x": "y"})
    created = _plain(api_client, core.create_node(client.V1Node(metadata=meta)))
    taints = [(t["key"], t["effect"]) for t in created["spec"]["taints"]]
    assert taints == [NOT_READY]  # admission, in the create's answer
    _wait_for("Ready", lambda: _node(api_client, node_name) == ("True", []))
    lease = _lease(api_client, node_name)
    assert lease is not None
    assert lease["spec"]["leaseDurationSeconds"] == NodeTiming().lease_seconds
    assert [o["name"] for o in lease["metadata"]["ownerReferences"]] == [node_name]
    first = _renew_time(api_client, node_name)
    _wait_for("a Lease renewal", lambda: _renew_time(api_client, node_name) != first)

    core.delete_node(node_name)
    _wait_for("Lease collected", lambda: _lease(api_client, node_name) is None)


def test_service_accounts_and_namespace_deletion_work(api_client: ApiClient) -> None:
    """The controller manager creates every namespace's `default` ServiceAccount (which
    ServiceAccount admission, on, gives each Pod) and finishes namespace deletion."""
    core = client.CoreV1Api(api_client)
    name = f"t-sa-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def has_default() -> bool:
        accounts = _plain(api_client, core.list_namespaced_service_account(name))["items"]
        return "default" in [sa["metadata"]["name"] for sa in accounts]

    _wait_for("default ServiceAccount", has_default)
    container = client.V1Container(name="c", image="none")
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"), spec=client.V1PodSpec(containers=[container])
    )
    created = _plain(api_client, core.create_namespaced_pod(name, pod))
    assert created["spec"]["serviceAccountName"] == "default"  # ServiceAccount admission
    assert any("projected" in v for v in created["spec"]["volumes"])  # ... its token mounted

    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    _wait_for("namespace deleted", gone)


def test_a_silenced_node_goes_unknown_and_tainted_then_comes_back(tmp_path: Path) -> None:
    """silence_node: no heartbeat, so the node lifecycle controller (not the test) marks the
    Node Unknown and taints it unreachable; revive_node: Ready again, taints lifted. A second
    Node stays Ready throughout (a zone whose every Node is silent is not tainted)."""
    timing = NodeTiming.fast()
    with ControlPlane(tmp_path / "cp", node_timing=timing) as plane:
        api = api_client_from(plane.kubeconfig_path)
        core = client.CoreV1Api(api)
        for name in ("quiet", "steady"):
            meta = client.V1ObjectMeta(name=name, labels={"zone": "z"})
            core.create_node(client.V1Node(metadata=meta))
        both = ("quiet", "steady")
        _wait_for("both Ready", lambda: all(_node(api, n) == ("True", []) for n in both))

        silenced_at = dt.datetime.now(dt.UTC)
        plane.silence_node("quiet")
        unreachable = [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")]
        _wait_for("quiet Unknown, tainted", lambda: _node(api, "quiet") == ("Unknown", unreachable))
        node = _plain(api, core.read_node("quiet"))
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["reason"] == "NodeStatusUnknown"  # the node lifecycle controller's
        no_execute = next(t for t in node["spec"]["taints"] if t["effect"] == "NoExecute")
        assert "timeAdded" in no_execute
        # Silent means silent: no renewal after the silence (but one already in flight).
        stopped = _renew_time(api, "quiet")
        assert stopped is not None
        assert stopped <= silenced_at + dt.timedelta(seconds=timing.lease_seconds / 4)
        assert _node(api, "steady") == ("True", [])

        plane.revive_node("quiet")
        _wait_for("quiet Ready, taints lifted", lambda: _node(api, "quiet") == ("True", []))
        renewed = _renew_time(api, "quiet")
        assert renewed is not None and renewed > stopped
        assert SILENT_LABEL not in _plain(api, core.read_node("quiet"))["metadata"]["labels"]
        _close(api)
