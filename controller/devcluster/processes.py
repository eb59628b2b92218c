"""The dev cluster's server processes, shared by the control plane (``controlplane``) and the
real Node (``node``): one ``Server`` per process (our child, or found again by its pid after a
detached start), a free loopback port to give one, and the ``preexec_fn`` that makes the kernel
kill a child when the process that started it dies. Neither of those modules owns these: both
start servers the same way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class ProcessError(RuntimeError):
    """A server process could not be stopped (the message names it); ``ControlPlaneError`` is
    one kind of it."""


def proc_exe(pid: int) -> str | None:
    """The executable of ``pid``; None when gone, a zombie, or unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def threads_running(pid: int) -> bool:
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


def pid_alive(pid: int, exe: str | None) -> bool:
    """True when ``pid`` runs and (if known) is still ``exe``, not a recycled pid."""
    if pid <= 0:
        return False
    if sys.platform.startswith("linux"):
        if not threads_running(pid):
            return False
        actual = proc_exe(pid)  # unreadable while the leader is a zombie: still ours
        return exe is None or actual is None or actual == exe
    try:  # pragma: no cover - non-Linux fallback
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Server:
    """One server process: either our child (``popen`` set) or found via its pid file."""

    name: str
    pid: int
    exe: str
    url: str
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid, self.exe)

    def signal(self, sig: int) -> None:
        # The server leads its own session and process group (start_new_session), so signal
        # the group: nothing it might have spawned is left behind.
        try:
            if os.getpgid(self.pid) == self.pid:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> bool:
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
        self.signal(signal.SIGTERM)
        if self.wait(timeout):
            return
        self.signal(signal.SIGKILL)
        if not self.wait(10.0):
            raise ProcessError(f"{self.name} (pid {self.pid}) survived SIGKILL")


def free_port() -> int:
    """A port that was free a moment ago. Racy by nature; callers retry on bind failure."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def pdeathsig_preexec() -> Callable[[], None] | None:
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
