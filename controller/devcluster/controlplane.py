"""etcd + kube-apiserver on loopback: the Python equivalent of controller-runtime's envtest.

Why a real API server: the operator's behaviour depends on admission, CRD schema validation,
pruning, status subresources and RBAC. Fakes get those subtly wrong; the real server costs
~10-30 s of start-up per test session.

Two lifetimes are supported, because they have opposite needs:

* Library mode (``detach=False``, used by pytest): the servers must never outlive the
  Python process. They get ``PR_SET_PDEATHSIG`` (the kernel kills them if we die, even by
  SIGKILL), an ``atexit`` hook, and SIGTERM/SIGHUP handlers that stop them before the
  process goes down; fixture finalizers stop them in the normal case.
* Detached mode (``detach=True``, used by ``orca dev-cluster start``): the servers must
  outlive the CLI, so none of the above; their pids are recorded in the directory so
  ``stop``/``status`` can act from any later process.

Both run the servers in their own session so a Ctrl-C in the terminal reaches only us and we
shut them down in order (API server first, then etcd), rather than both dying mid-write.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Protocol

from controller.devcluster import pki
from controller.devcluster.binaries import find_bin_dir

#: Start-up budget. On 2 cores a cold kube-apiserver needs 10-40 s; leave ample margin for
#: loaded CI machines rather than produce flaky "not ready" failures.
DEFAULT_STARTUP_TIMEOUT = 120.0
#: How long to wait after SIGTERM before SIGKILL.
DEFAULT_STOP_TIMEOUT = 15.0
#: How often to retry when a freshly picked port was taken before the server bound it.
PORT_ATTEMPTS = 5

SERVICE_CIDR = "10.0.0.0/24"

_STATE_FILE = "state.json"
_LOG_TAIL_LINES = 40


class ControlPlaneError(RuntimeError):
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


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


def _proc_exe(pid: int) -> str | None:
    """The executable of ``pid``; None when gone, a zombie, or unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def _threads_running(pid: int) -> bool:
    """Any thread of ``pid`` not yet dead (Linux).

    A killed multi-threaded (Go) process can show its leader as a zombie while other
    threads are still tearing down and holding its sockets; it is only gone, ports and all,
    when every thread is.
    """
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X", "x"):
            return True
    return False


def _pid_alive(pid: int, exe: str | None) -> bool:
    """True when ``pid`` runs and (if known) is still ``exe``, not a recycled pid."""
    if pid <= 0:
        return False
    if sys.platform.startswith("linux"):
        if not _threads_running(pid):
            return False
        actual = _proc_exe(pid)  # unreadable while the leader is a zombie: still ours
        return exe is None or actual is None or actual == exe
    try:  # pragma: no cover - non-Linux fallback
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class _Server:
    """One server process: either our child (``popen`` set) or found via its pid file."""

    name: str
    pid: int
    exe: str
    url: str
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_alive(self.pid, self.exe)

    def _signal(self, sig: int) -> None:
        # The server leads its own session and process group (start_new_session), so signal
        # the group: nothing it might have spawned is left behind.
        try:
            if os.getpgid(self.pid) == self.pid:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if self.popen is not None:
            try:
                self.popen.wait(timeout=max(0.0, timeout))
                return True
            except subprocess.TimeoutExpired:
                return False
        while time.monotonic() < deadline:
            if not self.alive():
                return True
            time.sleep(0.05)
        return not self.alive()

    def terminate(self, timeout: float) -> None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL and wait again (reaping children)."""
        if not self.alive():
            if self.popen is not None:
                self.popen.wait()
            return
        self._signal(signal.SIGTERM)
        if self._wait(timeout):
            return
        self._signal(signal.SIGKILL)
        if not self._wait(10.0):
            raise ControlPlaneError(f"{self.name} (pid {self.pid}) survived SIGKILL")


def _free_port() -> int:
    """A port that was free a moment ago. Racy by nature; callers retry on bind failure."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent dies.

    This is what guarantees no orphaned etcd/kube-apiserver even if pytest is SIGKILLed.
    Caveat (Linux semantics): the signal fires when the *thread* that forked exits, so
    library-mode control planes should be started from a long-lived thread (pytest fixtures
    run on the main thread).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # resolved before fork, not in the child
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # parent died between fork and prctl
            os._exit(1)

    return preexec


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
    """etcd + kube-apiserver rooted in one directory.

    Layout of ``directory``: ``kubeconfig`` (admin, ``system:masters``), ``pki/`` (CA and keys;
    reused across restarts so minted kubeconfigs stay valid), ``etcd-data/`` (reused across
    restarts), ``etcd.log``, ``kube-apiserver.log``, ``etcd.pid``, ``kube-apiserver.pid`` and
    ``state.json`` (pids and URLs, for ``attach``).

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
        self._etcd_peer_url: str | None = None
        self.pki = pki.PkiPaths(self.directory / "pki")
        self._etcd: _Server | None = None
        self._apiserver: _Server | None = None
        #: Seconds from ``start()`` until ``/readyz`` answered ok (None before start).
        self.startup_seconds: float | None = None

    # -- paths and properties ----------------------------------------------------------------

    @property
    def kubeconfig_path(self) -> Path:
        """Admin kubeconfig (user ``admin`` in ``system:masters``)."""
        return self.directory / "kubeconfig"

    @property
    def etcd_log(self) -> Path:
        return self.directory / "etcd.log"

    @property
    def apiserver_log(self) -> Path:
        return self.directory / "kube-apiserver.log"

    @property
    def bin_dir(self) -> Path:
        """Directory of the binaries; resolved lazily so a missing build fails at start()."""
        if self._bin_dir is None:
            self._bin_dir = find_bin_dir(self._bin_dir_arg)
        return self._bin_dir

    @property
    def server_url(self) -> str:
        """``https://127.0.0.1:PORT`` of the API server."""
        if self._apiserver is None:
            raise ControlPlaneError(f"control plane in {self.directory} is not started")
        return self._apiserver.url

    @property
    def etcd_url(self) -> str:
        if self._etcd is None:
            raise ControlPlaneError(f"control plane in {self.directory} is not started")
        return self._etcd.url

    @property
    def pids(self) -> dict[str, int]:
        return {s.name: s.pid for s in (self._etcd, self._apiserver) if s is not None}

    def __repr__(self) -> str:
        url = self._apiserver.url if self._apiserver else "not started"
        return f"ControlPlane({str(self.directory)!r}, {url})"

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
            for key in ("etcd", "apiserver"):
                entry = state.get(key)
                if entry:
                    server = _Server(entry["name"], int(entry["pid"]), entry["exe"], entry["url"])
                    setattr(plane, f"_{key}", server)
        except (KeyError, TypeError, ValueError) as e:
            raise ControlPlaneError(f"malformed {state_path}: {e!r}") from e
        return plane

    # -- lifecycle ---------------------------------------------------------------------------

    def is_running(self) -> bool:
        """Both processes alive (does not check readiness; see ``ready()``)."""
        servers = (self._etcd, self._apiserver)
        return all(s is not None and s.alive() for s in servers)

    def servers_alive(self) -> dict[str, bool]:
        """Per server (``etcd``, ``kube-apiserver``): is its process alive?"""
        return {
            "etcd": self._etcd is not None and self._etcd.alive(),
            "kube-apiserver": self._apiserver is not None and self._apiserver.alive(),
        }

    def ready(self, timeout: float = 5.0) -> bool:
        """True when the API server answers ``/readyz`` with ok to the admin identity."""
        if self._apiserver is None:
            return False
        try:
            with urllib.request.urlopen(
                f"{self._apiserver.url}/readyz", context=self._ssl_context(), timeout=timeout
            ) as resp:
                return bool(resp.status == 200 and resp.read().strip() == b"ok")
        except (OSError, http.client.HTTPException):  # URLError, SSLError are OSErrors
            return False

    def start(self) -> ControlPlane:
        """Start etcd and kube-apiserver, wait for ``/readyz``, write the admin kubeconfig.

        On failure everything started is stopped again and the ControlPlaneError carries the
        tail of both server logs.
        """
        if self._etcd is not None or self._apiserver is not None:
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
            self._etcd = self._start_with_retries("etcd", bin_dir, deadline)
            self._apiserver = self._start_with_retries("kube-apiserver", bin_dir, deadline)
            self._write_state()
            pki.write_kubeconfig(
                self.kubeconfig_path,
                server_url=self._apiserver.url,
                ca_pem=self.pki.ca_cert.read_bytes(),
                cert_pem=self.pki.admin_cert.read_bytes(),
                key_pem=self.pki.admin_key.read_bytes(),
                user=pki.ADMIN_USER,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop the API server, then etcd (SIGTERM, then SIGKILL); remove pid/state files.

        Idempotent. Logs, ``pki/`` and ``etcd-data/`` stay for post-mortems and restarts.
        """
        errors: list[str] = []
        for server in (self._apiserver, self._etcd):  # API server first: it needs etcd
            if server is None:
                continue
            try:
                server.terminate(self.stop_timeout)
            except (ControlPlaneError, OSError) as e:
                errors.append(str(e))
        if errors:
            raise ControlPlaneError("; ".join(errors))
        self._apiserver = self._etcd = None
        for name in (_STATE_FILE, "etcd.pid", "kube-apiserver.pid"):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
        with _live_lock:
            _live.discard(self)

    def kill_server(self, name: str) -> None:
        """SIGKILL one server (``etcd`` or ``kube-apiserver``) and wait until it is gone: a
        crash, for fault-injection tests. ``restart_server`` brings it back on the same port."""
        server = self._server(name)
        server._signal(signal.SIGKILL)
        if not server._wait(10.0):
            raise ControlPlaneError(f"{name} (pid {server.pid}) survived SIGKILL")

    def restart_server(self, name: str) -> None:
        """Start a stopped or killed server again on its old URL, so clients (the operator,
        kube-apiserver for etcd) reconnect without new configuration; waits for health."""
        server = self._server(name)
        if server.alive():
            raise ControlPlaneError(f"{name} (pid {server.pid}) is still running")
        port = int(server.url.rsplit(":", 1)[1])
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

    def _server(self, name: str) -> _Server:
        server = {"etcd": self._etcd, "kube-apiserver": self._apiserver}.get(name)
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

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def _refuse_if_running_elsewhere(self) -> None:
        """Never start a second pair on the same data dir; clear stale records instead."""
        try:
            other = ControlPlane.attach(self.directory)
        except ControlPlaneError:
            return
        alive = [s for s in (other._etcd, other._apiserver) if s is not None and s.alive()]
        if alive:
            desc = ", ".join(f"{s.name} pid {s.pid}" for s in alive)
            raise ControlPlaneError(
                f"a control plane is already running in {self.directory} ({desc}); "
                "stop it first (orca dev-cluster stop --dir ...)"
            )
        other.stop()  # only removes the stale pid/state files

    def _start_with_retries(self, name: str, bin_dir: Path, deadline: float) -> _Server:
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
    ) -> tuple[_Server | None, bool, str]:
        """Spawn one server and wait for health; return (server|None, port clash?, excerpt).
        ``port``: the one to listen on (a restart); default a free one."""
        log_path = self.directory / f"{name}.log"
        fresh = port is None
        with open(log_path, "ab") as log:
            offset = log.tell()
            if name == "etcd":
                port = port or _free_port()
                url = f"http://127.0.0.1:{port}"
                args = self._etcd_args(bin_dir, url)
            else:
                port = port or _free_port()
                url = f"https://127.0.0.1:{port}"
                args = self._apiserver_args(bin_dir, port)
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(args)}\n".encode())
            log.flush()
            popen = self._spawn(args, log)
        server = _Server(name, popen.pid, os.path.realpath(args[0]), url, popen)
        # Record the pid immediately: if we are killed while waiting, `stop` still finds it.
        (self.directory / f"{name}.pid").write_text(f"{popen.pid}\n")
        if name == "etcd":
            self._etcd = server
        else:
            self._apiserver = server
        self._write_state()

        healthy = self._wait_healthy(server, deadline)
        if healthy:
            return server, False, ""
        server.terminate(self.stop_timeout)
        if name == "etcd":
            self._etcd = None
        else:
            self._apiserver = None
        text = _read_from(log_path, offset)
        clash = "address already in use" in text
        if name == "etcd" and fresh:
            self._etcd_peer_url = None  # the clash may be the peer port: pick another
        if not clash and time.monotonic() >= deadline:
            text += f"\n(not healthy within {self.startup_timeout:.0f}s)"
        return None, clash, _tail(text)

    def _spawn(self, args: list[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
        preexec = None if self.detach else _pdeathsig_preexec()
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

    def _wait_healthy(self, server: _Server, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if not server.alive():
                return False
            if self._probe(server):
                return True
            time.sleep(0.25)
        return False

    def _probe(self, server: _Server) -> bool:
        if server.name == "etcd":
            try:
                with urllib.request.urlopen(f"{server.url}/health", timeout=2) as resp:
                    body: dict[str, Any] = json.loads(resp.read())
                    return str(body.get("health")) == "true"
            except (OSError, http.client.HTTPException, ValueError):
                return False
        previous = self._apiserver
        self._apiserver = server
        try:
            return self.ready(timeout=2)
        finally:
            self._apiserver = previous

    def _etcd_args(self, bin_dir: Path, client_url: str) -> list[str]:
        if self._etcd_peer_url is None:  # kept for restarts: the member record names it
            self._etcd_peer_url = f"http://127.0.0.1:{_free_port()}"
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
        assert self._etcd is not None
        p = self.pki
        return [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={self._etcd.url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The `kubernetes` Service cannot have loopback endpoints (validation rejects
            # them every 10 s); nothing in-cluster needs it without kubelets anyway.
            "--endpoint-reconciler-type=none",
            f"--secure-port={port}",
            f"--cert-dir={p.root}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            f"--client-ca-file={p.ca_cert}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer=https://127.0.0.1:{port}",
            f"--service-account-key-file={p.sa_pub}",
            f"--service-account-signing-key-file={p.sa_key}",
            # No controller-manager runs here: nothing creates the `default` ServiceAccount
            # (ServiceAccount admission would reject every Pod), and no node lifecycle
            # controller lifts the `node.kubernetes.io/not-ready` taint that TaintNodesByCondition
            # puts on every new Node (it would stay forever, and no scheduler would place
            # anything). Tests that want that taint set it themselves.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            *self.apiserver_args,
        ]

    def _write_state(self) -> None:
        state: dict[str, Any] = {
            "version": 1,
            "bin_dir": str(self.bin_dir),
            "detached": self.detach,
            "kubeconfig": str(self.kubeconfig_path),
        }
        for key, server in (("etcd", self._etcd), ("apiserver", self._apiserver)):
            if server is not None:
                state[key] = {
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
        for path in (self.etcd_log, self.apiserver_log):
            if path.exists():
                parts.append(f"--- last lines of {path} ---\n{_tail(_read_from(path, 0))}")
        return "\n".join(parts)


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
