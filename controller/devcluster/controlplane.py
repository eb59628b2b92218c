"""A living cluster on loopback: etcd, kube-apiserver, kube-controller-manager and kwok.

The Python equivalent of controller-runtime's envtest, plus what makes a cluster alive: the
controller manager (node lifecycle, service accounts and their tokens, namespaces, garbage
collection) and kwok, which plays the kubelets of the Nodes (Leases in ``kube-node-lease`` as
heartbeats, Ready conditions) without running anything.

Why a real API server: the operator's behaviour depends on admission, CRD schema validation,
pruning, status subresources and RBAC. Fakes get those subtly wrong; the real server costs
~10-30 s of start-up per test session. Why a living one: a real cluster's Nodes are updated
again and again, go ``Unknown`` when their kubelet is silent and get tainted; a frozen one hides
what orca does then.

Two lifetimes are supported, because they have opposite needs:

* Library mode (``detach=False``, used by pytest): the servers must never outlive the
  Python process. They get ``PR_SET_PDEATHSIG`` (the kernel kills them if we die, even by
  SIGKILL), an ``atexit`` hook, and SIGTERM/SIGHUP handlers that stop them before the
  process goes down; fixture finalizers stop them in the normal case.
* Detached mode (``detach=True``, used by ``orca dev-cluster start``): the servers must
  outlive the CLI, so none of the above; their pids are recorded in the directory so
  ``stop``/``status`` can act from any later process.

Both run the servers in their own session so a Ctrl-C in the terminal reaches only us and we
shut them down in order (kwok and the controller manager, then the API server, then etcd),
rather than all dying mid-write.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import http.client
import json
import os
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Protocol

from controller.devcluster import pki
from controller.devcluster.binaries import find_bin_dir
from controller.devcluster.processes import ProcessError, Server, free_port, pdeathsig_preexec

#: Start-up budget. On 2 cores a cold kube-apiserver needs 10-40 s; leave ample margin for
#: loaded CI machines rather than produce flaky "not ready" failures.
DEFAULT_STARTUP_TIMEOUT = 120.0
#: How long to wait after SIGTERM before SIGKILL.
DEFAULT_STOP_TIMEOUT = 15.0
#: How often to retry when a freshly picked port was taken before the server bound it.
PORT_ATTEMPTS = 5

SERVICE_CIDR = "10.0.0.0/24"

#: The servers, in start order (each needs the ones before it); they stop in reverse.
SERVERS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
#: Their keys in ``state.json`` (``apiserver`` predates the others).
_STATE_KEYS = {
    "etcd": "etcd",
    "kube-apiserver": "apiserver",
    "kube-controller-manager": "controller-manager",
    "kwok": "kwok",
}

#: The controller manager's controllers: only those a cluster without Pods needs, to keep its
#: CPU low. Node lifecycle (Ready ``Unknown`` after the grace period, the not-ready and
#: unreachable taints) and the taint-eviction half it split off in 1.29 (Pods on NoExecute
#: Nodes), service accounts (the ``default`` one in every namespace, which ServiceAccount
#: admission asks of Pods) and their tokens, the ``kube-root-ca.crt`` ConfigMap Pods' projected
#: tokens mount, namespace deletion, and garbage collection (ownerReferences, e.g. a deleted
#: Node's Lease). Names from cmd/kube-controller-manager/names/controller_names.go.
KCM_CONTROLLERS = (
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "garbage-collector-controller",
    # Fills the built-in admin/edit/view roles from the ClusterRoles labelled to aggregate
    # into them (orca's tenant roles, manifests/rbac/tenant-roles.yaml).
    "clusterrole-aggregation-controller",
    # Reads a Workload's /scale as for any scalable resource: the tests show an HPA aimed at
    # one gets its scale (there is no metrics API, so it can go no further).
    "horizontal-pod-autoscaler-controller",
)
#: Added with a real Node (``with_kubelet``): Deployments, ReplicaSets, the PodDisruptionBudget
#: status, EndpointSlices for Services (kube-proxy's input), and Pods of deleted Nodes.
KUBELET_MODE_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "disruption-controller",
    "endpointslice-controller",
    "endpoints-controller",
    "pod-garbage-collector-controller",
)
#: The controller manager's user: the API server's bootstrap RBAC binds it.
KCM_USER = "system:kube-controller-manager"
#: kwok's identity: it writes every Node's status and Lease, as all the kubelets together.
KWOK_USER = "kwok"
KWOK_GROUPS = ("system:masters",)
#: kwok's Node Stages, next to the binaries (written by hack/testcp/build.sh).
KWOK_STAGES = "kwok-stages.yaml"

#: A Node with this label is not managed by kwok: no Lease renewals, no status updates, as if
#: its kubelet were gone (:meth:`ControlPlane.silence_node`).
SILENT_LABEL = "kwok.orca.cloudinit.dev/silent"
#: The real Node's label (``controller.devcluster.node``): its kubelet reports for it, kwok not.
KUBELET_LABEL = "node.orca.cloudinit.dev/kubelet"
#: With a real Node (``controller.devcluster.node``, which owns the rest of its address plan):
#: the node's address, which the API server advertises as its own, and the Service range.
NODE_IP = "198.18.0.1"
NODE_SERVICE_CIDR = "198.18.2.0/24"


@dataclass(frozen=True)
class NodeTiming:
    """How fast the cluster notices that a Node went silent.

    The defaults are a real cluster's: a kubelet's Lease lasts 40 s and is renewed every
    quarter of it (kwok does the same, pkg/kwok/controllers/controller.go
    ``initNodeLeaseController``); the node lifecycle controller looks every 5 s and marks a
    Node ``Unknown`` when it has seen no renewal for 50 s, or 60 s for a Node that never
    reported (pkg/controller/nodelifecycle/config/v1alpha1/defaults.go). :meth:`fast` is for
    tests that wait for it.
    """

    #: kwok's ``--node-lease-duration-seconds``; renewed every quarter of it.
    lease_seconds: int = 40
    #: kube-controller-manager's ``--node-monitor-period`` (seconds).
    monitor_period: float = 5.0
    #: ``--node-monitor-grace-period``: silence after which a Node turns ``Unknown``.
    grace_period: float = 50.0
    #: ``--node-startup-grace-period``: the same for a Node that never reported.
    startup_grace_period: float = 60.0

    def __post_init__(self) -> None:
        renew = self.lease_seconds / 4
        if self.lease_seconds < 4:
            raise ValueError(f"lease_seconds must be at least 4, not {self.lease_seconds}")
        if self.monitor_period <= 0:
            raise ValueError(f"monitor_period must be positive, not {self.monitor_period}")
        if min(self.grace_period, self.startup_grace_period) <= 2 * renew:
            raise ValueError(
                f"grace periods ({self.grace_period}, {self.startup_grace_period}) must exceed "
                f"two Lease renewals ({2 * renew:g} s): a Node would flap to Unknown"
            )

    @classmethod
    def fast(cls) -> NodeTiming:
        """Unknown after 15 s of silence, a renewal every 3 s: five missed renewals, the
        same margin as the defaults, so a loaded machine does not make Nodes flap."""
        return cls(
            lease_seconds=12, monitor_period=1.0, grace_period=15.0, startup_grace_period=15.0
        )

    @classmethod
    def scaled(cls, lease_seconds: int) -> NodeTiming:
        """A Lease of ``lease_seconds`` (renewed every quarter of it) and the grace periods
        scaled with it, in the defaults' proportions (50 s and 60 s for a 40 s Lease): the
        same margins at a slower heartbeat. kwok renews N / (lease / 4) Leases a second, a
        write each: 1,500/s for 15,000 Nodes at the default 40 s, more than two cores can
        write; at 600 s, 100/s, what 1,000 Nodes cost at the default."""
        scale = lease_seconds / cls.lease_seconds
        return cls(
            lease_seconds=lease_seconds,
            monitor_period=cls.monitor_period,
            grace_period=cls.grace_period * scale,
            startup_grace_period=cls.startup_grace_period * scale,
        )

    def controller_manager_args(self) -> list[str]:
        return [
            f"--node-monitor-period={self.monitor_period:g}s",
            f"--node-monitor-grace-period={self.grace_period:g}s",
            f"--node-startup-grace-period={self.startup_grace_period:g}s",
        ]


DEFAULT_NODE_TIMING = NodeTiming()

#: kube-controller-manager's leader election here (its defaults: 15 s and 10 s). ``stop()``
#: releases the Lease (the controller manager leaves it held), so a restart on the same data
#: does not wait out the lease.
KCM_LEASE_SECONDS = 90
KCM_RENEW_DEADLINE_SECONDS = 60
KCM_LEASE_PATH = (
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
)

#: kube-controller-manager's client rate for clusters of thousands of Nodes. Its default, 20
#: requests/s, lifts the not-ready taint of registering Nodes at ~10 Nodes/s (a GET and a
#: PATCH each): 5,000 Nodes wait ~8 minutes before anything can be placed, which large
#: clusters avoid by raising it. The benchmarks and the chaos suite's 5,000-Node burst do.
LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS = ("--kube-api-qps=200", "--kube-api-burst=400")

_STATE_FILE = "state.json"
_LOG_TAIL_LINES = 40


class ControlPlaneError(ProcessError):
    """Starting, stopping or talking to the control plane failed; the message says why."""


class KubectlError(subprocess.CalledProcessError):
    """``kubectl`` exited non-zero; unlike the base class, ``str()`` includes its stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr:\n{self.stderr}\nstdout:\n{self.output}"


class KubectlRunner(Protocol):
    """Signature of ``ControlPlane.kubectl``, for code that receives it as a callable."""

    def __call__(
        self,
        *args: str,
        kubeconfig: Path | str | None = ...,
        input: str | None = ...,
        check: bool = ...,
        timeout: float = ...,
    ) -> subprocess.CompletedProcess[str]: ...


# Library-mode control planes still running in this process, stopped at exit or on signals.
_live: set[ControlPlane] = set()
_live_lock = threading.Lock()
_hooks_installed = False


def _stop_all() -> None:
    with _live_lock:
        planes = list(_live)
    for plane in planes:
        with contextlib.suppress(Exception):
            plane.stop()


def _on_fatal_signal(signum: int, frame: FrameType | None) -> None:
    """Stop our servers, then die of the same signal as we would have without the handler."""
    _stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_hooks() -> None:
    """Install the process-exit safety net once (atexit + SIGTERM/SIGHUP).

    SIGINT is left alone: Python turns it into KeyboardInterrupt, pytest then runs fixture
    finalizers, and atexit covers anything else. Existing non-default handlers are kept.
    """
    global _hooks_installed
    with _live_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_fatal_signal)


# --------------------------------------------------------------------------------------------
# Control plane
# --------------------------------------------------------------------------------------------


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kwok rooted in one directory: a living
    cluster whose Nodes heartbeat, go ``Unknown`` when silent and get tainted, as in any cluster.

    Layout of ``directory``: ``kubeconfig`` (admin, ``system:masters``), ``pki/`` (CA and keys;
    reused across restarts so minted kubeconfigs stay valid), ``etcd-data/`` (reused across
    restarts), one ``NAME.log`` and ``NAME.pid`` per server (``etcd``, ``kube-apiserver``,
    ``kube-controller-manager``, ``kwok``), the controller manager's and kwok's kubeconfigs,
    and ``state.json`` (pids, URLs and node timing, for ``attach``).

    kwok manages every Node that has at least one label and not :data:`SILENT_LABEL` (see
    :meth:`silence_node`); ``node_timing`` says how fast a silent Node is noticed.

    Use as a context manager, or call ``start()``/``stop()``.
    """

    def __init__(
        self,
        directory: Path | str,
        bin_dir: Path | str | None = None,
        *,
        detach: bool = False,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        apiserver_args: Sequence[str] = (),
        durable_etcd: bool = False,
        node_timing: NodeTiming = DEFAULT_NODE_TIMING,
        controller_manager_args: Sequence[str] = (),
        with_kubelet: bool = False,
    ) -> None:
        self.directory = Path(directory).absolute()
        self._bin_dir_arg = bin_dir
        self._bin_dir: Path | None = None
        self.detach = detach
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.apiserver_args = list(apiserver_args)
        #: fsync etcd's writes (off by default: throwaway data, shared disks). The chaos suite
        #: turns it on where it SIGKILLs etcd, so a restart finds what was acknowledged.
        self.durable_etcd = durable_etcd
        self.node_timing = node_timing
        #: Extra kube-controller-manager flags (``LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS``).
        self.controller_manager_args = list(controller_manager_args)
        #: A real Node will join (``controller.devcluster.node``): the API server listens on
        #: every address, advertises the node's and authorizes kubelets as Nodes.
        self.with_kubelet = with_kubelet
        self._etcd_peer_url: str | None = None
        self.pki = pki.PkiPaths(self.directory / "pki")
        #: The running servers by name, in start order.
        self._servers: dict[str, Server] = {}
        #: Seconds from ``start()`` until every server answered its health check (None before).
        self.startup_seconds: float | None = None

    # -- paths and properties ----------------------------------------------------------------

    @property
    def kubeconfig_path(self) -> Path:
        """Admin kubeconfig (user ``admin`` in ``system:masters``)."""
        return self.directory / "kubeconfig"

    def log_path(self, name: str) -> Path:
        """The log file of server ``name`` (one of :data:`SERVERS`)."""
        return self.directory / f"{name}.log"

    @property
    def etcd_log(self) -> Path:
        return self.log_path("etcd")

    @property
    def apiserver_log(self) -> Path:
        return self.log_path("kube-apiserver")

    @property
    def bin_dir(self) -> Path:
        """Directory of the binaries; resolved lazily so a missing build fails at start()."""
        if self._bin_dir is None:
            self._bin_dir = find_bin_dir(self._bin_dir_arg)
        return self._bin_dir

    @property
    def server_url(self) -> str:
        """``https://127.0.0.1:PORT`` of the API server."""
        return self._running_server("kube-apiserver").url

    @property
    def etcd_url(self) -> str:
        return self._running_server("etcd").url

    @property
    def pids(self) -> dict[str, int]:
        """Pid of each server, by name, in start order."""
        return {name: s.pid for name, s in self._servers.items()}

    @property
    def urls(self) -> dict[str, str]:
        """URL each server listens on (for the controller manager and kwok: their health
        endpoints), by name, in start order."""
        return {name: s.url for name, s in self._servers.items()}

    def __repr__(self) -> str:
        api = self._servers.get("kube-apiserver")
        return f"ControlPlane({str(self.directory)!r}, {api.url if api else 'not started'})"

    # -- attach to a running one -------------------------------------------------------------

    @classmethod
    def attach(cls, directory: Path | str) -> ControlPlane:
        """A handle on a control plane started (possibly by another process) in ``directory``.

        Raises ControlPlaneError when the directory has no recorded control plane. The
        returned object may describe dead processes; check ``is_running()``.
        """
        plane = cls(directory)
        state_path = plane.directory / _STATE_FILE
        try:
            state = json.loads(state_path.read_text())
        except FileNotFoundError:
            raise ControlPlaneError(f"no control plane recorded in {plane.directory}") from None
        except (OSError, ValueError) as e:
            raise ControlPlaneError(f"unreadable {state_path}: {e}") from e
        try:
            plane._bin_dir = Path(state["bin_dir"])
            plane.detach = bool(state.get("detached", True))
            plane.with_kubelet = bool(state.get("with_kubelet", False))
            if "node_timing" in state:
                plane.node_timing = NodeTiming(**state["node_timing"])
            for name in SERVERS:
                entry = state.get(_STATE_KEYS[name])
                if entry:
                    plane._servers[name] = Server(
                        entry["name"], int(entry["pid"]), entry["exe"], entry["url"]
                    )
        except (KeyError, TypeError, ValueError) as e:
            raise ControlPlaneError(f"malformed {state_path}: {e!r}") from e
        return plane

    # -- lifecycle ---------------------------------------------------------------------------

    def is_running(self) -> bool:
        """Every server's process alive (does not check readiness; see ``ready()``)."""
        return all(self.servers_alive().values())

    def servers_alive(self) -> dict[str, bool]:
        """Per server (``etcd``, ``kube-apiserver``, ``kube-controller-manager``, ``kwok``): is
        its process alive?"""
        return {name: name in self._servers and self._servers[name].alive() for name in SERVERS}

    def ready(self, timeout: float = 5.0) -> bool:
        """True when the API server answers ``/readyz`` with ok to the admin identity."""
        api = self._servers.get("kube-apiserver")
        return api is not None and self._readyz(api.url, timeout)

    def _readyz(self, url: str, timeout: float) -> bool:
        try:
            with urllib.request.urlopen(
                f"{url}/readyz", context=self._ssl_context(), timeout=timeout
            ) as resp:
                return bool(resp.status == 200 and resp.read().strip() == b"ok")
        except (OSError, http.client.HTTPException):  # URLError, SSLError are OSErrors
            return False

    def start(self) -> ControlPlane:
        """Start etcd, kube-apiserver, kube-controller-manager and kwok, each healthy before
        the next; write the admin kubeconfig.

        On failure everything started is stopped again and the ControlPlaneError carries the
        tail of the server logs.
        """
        if self._servers:
            raise ControlPlaneError(f"control plane in {self.directory} already started")
        self._refuse_if_running_elsewhere()
        bin_dir = self.bin_dir  # raises BinariesNotFound before anything is created
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.pki.complete():
            pki.generate(self.pki)
        if not self.detach:
            _install_hooks()
            with _live_lock:
                _live.add(self)
        t0 = time.monotonic()
        deadline = t0 + self.startup_timeout
        try:
            self._start_with_retries("etcd", bin_dir, deadline)
            api = self._start_with_retries("kube-apiserver", bin_dir, deadline)
            pki.write_kubeconfig(
                self.kubeconfig_path,
                server_url=api.url,
                ca_pem=self.pki.ca_cert.read_bytes(),
                cert_pem=self.pki.admin_cert.read_bytes(),
                key_pem=self.pki.admin_key.read_bytes(),
                user=pki.ADMIN_USER,
            )
            # Their own identities: the controller manager's is bound by the API server's
            # bootstrap RBAC (ClusterRole system:kube-controller-manager); kwok plays every
            # kubelet at once, so it gets the admin group rather than one Node's identity.
            self.mint_kubeconfig(KCM_USER, (), self._kubeconfig_of("kube-controller-manager"))
            self.mint_kubeconfig(KWOK_USER, KWOK_GROUPS, self._kubeconfig_of("kwok"))
            started = time.time()
            self._start_with_retries("kube-controller-manager", bin_dir, deadline)
            self._wait_for_controller_lease(started, deadline)
            self._start_with_retries("kwok", bin_dir, deadline)
            self._write_state()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _wait_for_controller_lease(self, started: float, deadline: float) -> None:
        """Wait until the controller manager started at ``started`` (this machine's clock,
        which is also the API server's) holds its leader Lease: its /healthz answers before
        it has won the election and started its controllers, and a client started next (the
        operator, ``--node-lifecycle=auto``) must find the Lease held and fresh. After a
        restart on old data whose Lease ``stop()`` could not release (a crash), the previous
        holder's Lease must expire first (``KCM_LEASE_SECONDS``)."""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    self.server_url + KCM_LEASE_PATH, context=self._ssl_context(), timeout=5
                ) as r:
                    spec = json.loads(r.read()).get("spec") or {}
                renewed = datetime.fromisoformat(spec["renewTime"].replace("Z", "+00:00"))
                if spec.get("holderIdentity") and renewed.timestamp() >= started - 1:
                    return
            except (OSError, http.client.HTTPException, ValueError, KeyError, AttributeError):
                pass  # 404 (not created yet) is an HTTPError, an OSError
            time.sleep(0.25)
        raise ControlPlaneError(
            f"kube-controller-manager did not take its leader Lease\n{self._log_tails()}"
        )

    def stop(self) -> None:
        """Stop the servers in reverse start order (SIGTERM, then SIGKILL): kwok and the
        controller manager, then the API server, then etcd; remove pid/state files.

        Idempotent. Logs, ``pki/`` and ``etcd-data/`` stay for post-mortems and restarts.
        """
        errors: list[str] = []
        for name in reversed(SERVERS):  # clients first: each server needs the ones before it
            server = self._servers.get(name)
            if server is None:
                continue
            if name == "kube-apiserver":
                self._release_controller_lease()
            try:
                server.terminate(self.stop_timeout)
            except (ProcessError, OSError) as e:
                errors.append(str(e))
        if errors:
            raise ControlPlaneError("; ".join(errors))
        self._servers.clear()
        for name in (_STATE_FILE, *(f"{s}.pid" for s in SERVERS)):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
        with _live_lock:
            _live.discard(self)

    def _release_controller_lease(self) -> None:
        """Delete kube-controller-manager's Lease once it has stopped, as its alpha
        ``ControllerManagerReleaseLeaderElectionLockOnExit`` would release it: the next start
        on this data takes it at once. Best effort: nothing to release is fine too."""
        request = urllib.request.Request(self.server_url + KCM_LEASE_PATH, method="DELETE")
        with contextlib.suppress(OSError, http.client.HTTPException, ControlPlaneError):
            urllib.request.urlopen(request, context=self._ssl_context(), timeout=5).close()

    def kill_server(self, name: str) -> None:
        """SIGKILL one server (one of :data:`SERVERS`) and wait until it is gone: a crash,
        for fault-injection tests. ``restart_server`` brings it back on the same port.

        Killing ``kwok`` silences every Node at once (a partition of all kubelets); a restarted
        kwok is a new holder and takes the Nodes' Leases over only once they expire."""
        server = self._running_server(name)
        server.signal(signal.SIGKILL)
        if not server.wait(10.0):
            raise ControlPlaneError(f"{name} (pid {server.pid}) survived SIGKILL")

    def restart_server(self, name: str) -> None:
        """Start a stopped or killed server again on its old URL, so clients (the operator,
        kube-apiserver for etcd) reconnect without new configuration; waits for health."""
        server = self._running_server(name)
        if server.alive():
            raise ControlPlaneError(f"{name} (pid {server.pid}) is still running")
        port = _url_port(server.url)
        deadline = time.monotonic() + self.startup_timeout
        excerpt = ""
        for _ in range(PORT_ATTEMPTS * 4):  # the old socket may linger a moment after a kill
            started, clash, excerpt = self._start_once(name, self.bin_dir, deadline, port)
            if started is not None:
                return
            if not clash or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        raise ControlPlaneError(f"{name} failed to restart:\n{excerpt}\n{self._log_tails()}")

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision, returned (etcd's JSON gateway).

        A watch that resumes from an older resourceVersion then gets 410 Gone, whether the
        API server serves it from its watch cache or from etcd: the fault-injection tests'
        way to expire a watch on demand."""
        base = self.etcd_url
        header = json.loads(_post_json(f"{base}/v3/kv/range", {"key": "AA=="}))["header"]
        revision = int(header["revision"])
        _post_json(f"{base}/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _running_server(self, name: str) -> Server:
        if name not in SERVERS:
            raise ControlPlaneError(f"no server named {name!r} (one of {', '.join(SERVERS)})")
        server = self._servers.get(name)
        if server is None:
            raise ControlPlaneError(f"no {name} in the control plane in {self.directory}")
        return server

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- node heartbeats -----------------------------------------------------------------------

    def silence_node(self, name: str) -> None:
        """Make Node ``name`` go silent, as when its kubelet dies or is cut off: kwok stops
        renewing its Lease and playing its Stages. After ``node_timing.grace_period`` the
        controller manager marks it ``Unknown`` and taints it
        ``node.kubernetes.io/unreachable:NoExecute`` (the test does not write either).

        How: the Node gets :data:`SILENT_LABEL`. kwok watches Nodes with the label selector
        ``!SILENT_LABEL``, which the API server applies, so the Node leaving the selection
        reaches kwok as a watch DELETED event: kwok releases its hold on the Lease and cancels
        the Node's pending Stage jobs (kwok v0.8.0, pkg/kwok/controllers/node_controller.go
        ``watchResources``). A renewal already in flight may still land just after this returns.

        As in any cluster, the node lifecycle controller only taints when its zone is not
        fully disrupted: if every Node of every zone is silent it removes the taints instead,
        and a zone with more than 2 silent Nodes and at least 55 % of its Nodes silent is
        tainted only in clusters over 50 Nodes (pkg/controller/nodelifecycle/
        node_lifecycle_controller.go, ``ComputeZoneState`` and ``handleDisruption``). Keep a
        healthy Node beside the silent one.
        """
        self._patch_node_labels(name, {SILENT_LABEL: "true"})

    def revive_node(self, name: str) -> None:
        """Bring a silenced Node back: kwok takes it over again, renews its Lease and reports
        it Ready; the controller manager then lifts the unreachable/not-ready taints."""
        self._patch_node_labels(name, {SILENT_LABEL: None})

    def _patch_node_labels(self, name: str, labels: dict[str, str | None]) -> None:
        body = json.dumps({"metadata": {"labels": labels}}).encode()
        request = urllib.request.Request(
            f"{self.server_url}/api/v1/nodes/{urllib.parse.quote(name, safe='')}",
            data=body,
            method="PATCH",
            headers={"Content-Type": "application/merge-patch+json"},
        )
        try:
            with urllib.request.urlopen(request, context=self._ssl_context(), timeout=30):
                pass
        except urllib.error.HTTPError as e:
            reason = e.read().decode(errors="replace")
            raise ControlPlaneError(f"cannot label Node {name!r}: HTTP {e.code}: {reason}") from e
        except (OSError, http.client.HTTPException) as e:
            raise ControlPlaneError(f"cannot label Node {name!r}: {e}") from e

    # -- identities and clients --------------------------------------------------------------

    def mint_kubeconfig(
        self, user: str, groups: Sequence[str] = (), path: Path | str | None = None
    ) -> Path:
        """Write a kubeconfig for ``user`` in ``groups`` (client cert from this cluster's CA).

        Default path: ``DIR/kubeconfig-<user>`` (``:`` and ``/`` replaced), handy for RBAC
        tests, e.g. ``mint_kubeconfig("nobody")`` for a user with no bindings.
        """
        if path is None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
            path = self.directory / f"kubeconfig-{safe}"
        return pki.mint_kubeconfig(self.pki, self.server_url, user, list(groups), Path(path))

    def kubectl(
        self,
        *args: str,
        kubeconfig: Path | str | None = None,
        input: str | None = None,
        check: bool = False,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster (admin unless ``kubeconfig`` is given).

        With ``check=True`` a non-zero exit raises KubectlError, whose message includes
        stderr (the API server's reason).
        """
        cmd = [
            str(self.bin_dir / "kubectl"),
            f"--kubeconfig={kubeconfig or self.kubeconfig_path}",
            # Keep discovery caches out of ~/.kube: ports differ per run anyway.
            f"--cache-dir={self.directory / '.kube-cache'}",
            *args,
        ]
        result = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, cmd, result.stdout, result.stderr)
        return result

    # -- internals ---------------------------------------------------------------------------

    def _kubeconfig_of(self, name: str) -> Path:
        return self.directory / f"kubeconfig-{name}"

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def _refuse_if_running_elsewhere(self) -> None:
        """Never start a second set on the same data dir; clear stale records instead."""
        try:
            other = ControlPlane.attach(self.directory)
        except ControlPlaneError:
            return
        alive = [s for s in other._servers.values() if s.alive()]
        if alive:
            desc = ", ".join(f"{s.name} pid {s.pid}" for s in alive)
            raise ControlPlaneError(
                f"a control plane is already running in {self.directory} ({desc}); "
                "stop it first (orca dev-cluster stop --dir ...)"
            )
        other.stop()  # only removes the stale pid/state files

    def _start_with_retries(self, name: str, bin_dir: Path, deadline: float) -> Server:
        last = ""
        for _ in range(PORT_ATTEMPTS):
            server, port_clash, log_excerpt = self._start_once(name, bin_dir, deadline)
            if server is not None:
                return server
            last = log_excerpt
            if not port_clash:
                break
        raise ControlPlaneError(f"{name} failed to start:\n{last}\n{self._log_tails()}")

    def _start_once(
        self, name: str, bin_dir: Path, deadline: float, port: int | None = None
    ) -> tuple[Server | None, bool, str]:
        """Spawn one server and wait for health; return (server|None, port clash?, excerpt).
        ``port``: the one to listen on (a restart); default a free one."""
        log_path = self.log_path(name)
        fresh = port is None
        port = port or free_port()
        url, args = self._command(name, bin_dir, port)
        with open(log_path, "ab") as log:
            offset = log.tell()
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            popen = self._spawn(args, log)
        server = Server(name, popen.pid, os.path.realpath(args[0]), url, popen)
        # Record the pid immediately: if we are killed while waiting, `stop` still finds it.
        (self.directory / f"{name}.pid").write_text(f"{popen.pid}\n")
        self._servers[name] = server
        self._write_state()

        if self._wait_healthy(server, deadline):
            return server, False, ""
        server.terminate(self.stop_timeout)
        del self._servers[name]
        text = _read_from(log_path, offset)
        clash = "address already in use" in text
        if name == "etcd" and fresh:
            self._etcd_peer_url = None  # the clash may be the peer port: pick another
        if not clash and time.monotonic() >= deadline:
            text += f"\n(not healthy within {self.startup_timeout:.0f}s)"
        return None, clash, _tail(text)

    def _command(self, name: str, bin_dir: Path, port: int) -> tuple[str, list[str]]:
        """(URL of its health endpoint's server, command line) of server ``name``."""
        if name == "etcd":
            url = f"http://127.0.0.1:{port}"
            return url, self._etcd_args(bin_dir, url)
        if name == "kube-apiserver":
            return f"https://127.0.0.1:{port}", self._apiserver_args(bin_dir, port)
        if name == "kube-controller-manager":
            return f"https://127.0.0.1:{port}", self._controller_manager_args(bin_dir, port)
        return f"http://127.0.0.1:{port}", self._kwok_args(bin_dir, port)

    def _spawn(self, args: list[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
        preexec = None if self.detach else pdeathsig_preexec()
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
            start_new_session=True,
            preexec_fn=preexec,  # only prctl + getppid: safe enough after fork
            close_fds=True,
        )

    def _wait_healthy(self, server: Server, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if not server.alive():
                return False
            if self._probe(server):
                return True
            time.sleep(0.25)
        return False

    def _probe(self, server: Server) -> bool:
        """One health check of ``server``: etcd's ``/health``, the API server's ``/readyz``,
        the controller manager's ``/healthz`` (its controllers' checks included) and kwok's
        ``/healthz`` (served once its controllers have started)."""
        if server.name == "kube-apiserver":
            return self._readyz(server.url, timeout=2)
        context = None
        if server.name == "kube-controller-manager":
            # Its serving certificate is self-signed (--cert-dir); /healthz needs no identity.
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        path = "/health" if server.name == "etcd" else "/healthz"
        try:
            with urllib.request.urlopen(f"{server.url}{path}", timeout=2, context=context) as r:
                body: bytes = r.read()
        except (OSError, http.client.HTTPException):
            return False
        if server.name == "etcd":
            try:
                health: dict[str, Any] = json.loads(body)
            except ValueError:
                return False
            return str(health.get("health")) == "true"
        return body.strip() == b"ok"

    def _etcd_args(self, bin_dir: Path, client_url: str) -> list[str]:
        if self._etcd_peer_url is None:  # kept for restarts: the member record names it
            self._etcd_peer_url = f"http://127.0.0.1:{free_port()}"
        peer_url = self._etcd_peer_url
        return [
            str(bin_dir / "etcd"),
            "--name=orca-dev",
            f"--data-dir={self.directory / 'etcd-data'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=orca-dev={peer_url}",
            # Throwaway data: durability is not worth the fsync latency on shared disks.
            *([] if self.durable_etcd else ["--unsafe-no-fsync=true"]),
        ]

    def _apiserver_args(self, bin_dir: Path, port: int) -> list[str]:
        etcd = self._running_server("etcd")
        p = self.pki
        return [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={etcd.url}",
            *(
                self._kubelet_mode_args()
                if self.with_kubelet
                else [
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    # The `kubernetes` Service cannot have loopback endpoints (validation rejects
                    # them every 10 s); nothing in-cluster needs it without kubelets anyway.
                    "--endpoint-reconciler-type=none",
                    "--authorization-mode=RBAC",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                ]
            ),
            f"--secure-port={port}",
            f"--cert-dir={p.root}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            f"--client-ca-file={p.ca_cert}",
            # Webhooks (orca's, installed with manifests/default) are called at their
            # Service's endpoints, not its ClusterIP: without a real Node there is no Service
            # network, so a ClusterIP connection would leave the machine by its default route;
            # with no Pod behind the Service the call fails at once, locally (failurePolicy
            # Ignore). With a real Node the endpoints are Pods on its bridge, on this machine.
            "--enable-aggregator-routing=true",
            # Service account tokens: the API server signs (TokenRequest) and verifies them;
            # the controller manager's token controller signs with the same key.
            f"--service-account-issuer=https://127.0.0.1:{port}",
            f"--service-account-key-file={p.sa_pub}",
            f"--service-account-signing-key-file={p.sa_key}",
            # The default admission plugins, all of them: the controller manager lifts what
            # they put in place (TaintNodesByCondition's not-ready taint on new Nodes), and
            # creates the `default` ServiceAccount that ServiceAccount admission asks of Pods.
            "--allow-privileged=true",
            *self.apiserver_args,
        ]

    def _controllers(self) -> tuple[str, ...]:
        """The controller manager's controllers; with a real Node, also those that turn a
        Deployment into Pods and a Service into endpoints (kube-proxy routes by them)."""
        return KCM_CONTROLLERS + (KUBELET_MODE_CONTROLLERS if self.with_kubelet else ())

    def _kubelet_mode_args(self) -> list[str]:
        """With a real Node: Pods reach the API server through the ``kubernetes`` Service,
        whose endpoint is the advertised address (the node's, on this machine); the kubelet is
        authorized as its Node (Node authorizer, NodeRestriction); the API server calls the
        kubelet (logs, exec) with the admin's client certificate."""
        return [
            "--bind-address=0.0.0.0",
            f"--advertise-address={NODE_IP}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={NODE_SERVICE_CIDR}",
            # The node's address, never its name (no DNS here: a lookup would leave the machine).
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={self.pki.admin_cert}",
            f"--kubelet-client-key={self.pki.admin_key}",
        ]

    def _controller_manager_args(self, bin_dir: Path, port: int) -> list[str]:
        p = self.pki
        timing = self.node_timing
        return [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={self._kubeconfig_of('kube-controller-manager')}",
            # Each controller talks to the API server as its own ServiceAccount (tokens by
            # TokenRequest), with the RBAC the API server bootstraps for it, as in kubeadm.
            "--use-service-account-credentials=true",
            f"--controllers={','.join(self._controllers())}",
            # Leader election on, as kube-controller-manager runs by default: its Lease
            # kube-system/kube-controller-manager (renewed every 2 s) is how the operator's
            # --node-lifecycle=auto sees that the node lifecycle controller runs. A controller
            # manager that cannot renew within its deadline exits (OnStoppedLeading,
            # cmd/kube-controller-manager/app/controllermanager.go) for its kubelet to
            # restart; nothing restarts it here, and the fault tests stop the API server for
            # up to 20 s (plus its restart), so the deadline is 60 s rather than 10.
            "--leader-elect=true",
            f"--leader-elect-lease-duration={KCM_LEASE_SECONDS}s",
            f"--leader-elect-renew-deadline={KCM_RENEW_DEADLINE_SECONDS}s",
            # /healthz for the start-up check, on loopback, with a self-signed certificate.
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.directory / 'kube-controller-manager-certs'}",
            f"--service-account-private-key-file={p.sa_key}",
            f"--root-ca-file={p.ca_cert}",
            *timing.controller_manager_args(),
            *self.controller_manager_args,
        ]

    def _kwok_args(self, bin_dir: Path, port: int) -> list[str]:
        return [
            str(bin_dir / "kwok"),
            f"--kubeconfig={self._kubeconfig_of('kwok')}",
            # Node Stages from kwok's own module (hack/testcp/build.sh): Ready on registration,
            # a status refresh now and then; the Lease is the heartbeat.
            f"--config={bin_dir / KWOK_STAGES}",
            # Selected on the API server, so a Node that leaves the selection reaches kwok as
            # DELETED and it stops heartbeating it (silence_node). kwok's own filter then drops
            # Nodes without any label (pkg/utils/informer/event.go, Option.filter).
            f"--manage-nodes-with-label-selector=!{SILENT_LABEL},!{KUBELET_LABEL}",
            f"--node-lease-duration-seconds={self.node_timing.lease_seconds}",
            # /healthz for the start-up check; kwok serves it once its controllers run.
            f"--server-address=127.0.0.1:{port}",
            # INFO logs a line per Lease renewal: 100 lines a second at 1,000 Nodes.
            "--v=WARN",
        ]

    def _write_state(self) -> None:
        state: dict[str, Any] = {
            "version": 2,
            "bin_dir": str(self.bin_dir),
            "detached": self.detach,
            "kubeconfig": str(self.kubeconfig_path),
            "node_timing": dataclasses.asdict(self.node_timing),
            "with_kubelet": self.with_kubelet,
        }
        for name, server in self._servers.items():
            state[_STATE_KEYS[name]] = {
                "name": server.name,
                "pid": server.pid,
                "exe": server.exe,
                "url": server.url,
            }
        tmp = self.directory / f".{_STATE_FILE}.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.directory / _STATE_FILE)

    def _log_tails(self) -> str:
        parts = []
        for name in SERVERS:
            path = self.log_path(name)
            if path.exists():
                parts.append(f"--- last lines of {path} ---\n{_tail(_read_from(path, 0))}")
        return "\n".join(parts)


def _url_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _post_json(url: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            data: bytes = response.read()
            return data
    except (OSError, http.client.HTTPException) as e:
        raise ControlPlaneError(f"etcd {url}: {e}") from e


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


@contextlib.contextmanager
def running_control_plane(
    directory: Path | str, bin_dir: Path | str | None = None, **kwargs: Any
) -> Iterator[ControlPlane]:
    """``with running_control_plane(tmp) as cp:`` — start, yield, always stop."""
    plane = ControlPlane(directory, bin_dir, **kwargs)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()
