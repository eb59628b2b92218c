"""kube-controller-manager's ClusterRole aggregation controller, run alone against the test
control plane (which runs no controller-manager).

Without it the built-in ``admin``, ``edit`` and ``view`` ClusterRoles have no rules at all: the
API server creates them with only an ``aggregationRule``
(plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, ``ClusterRoles``), and it is
pkg/controller/clusterroleaggregation (``syncClusterRole``) that fills in the rules of every
ClusterRole matching the selectors. ``hack/testcp/kube/clusterrole-aggregation`` is that
package wired as cmd/kube-controller-manager/app/rbac.go wires it, built here from the same
pinned module as the control plane (``-mod=readonly``: hack/testcp/kube/go.mod and go.sum) and
cached beside the control plane's binaries under a name that hashes its inputs, so it is built
once per change (seconds, from the Go build cache the control plane's build left).

It runs as the identity kube-controller-manager gives it,
``system:serviceaccount:kube-system:clusterrole-aggregation-controller``, whose rights the API
server bootstraps (``system:controller:clusterrole-aggregation-controller``): impersonated
from the admin's kubeconfig, since a client certificate's CN cannot hold a name that long.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from controller.devcluster.binaries import default_bin_dir
from controller.devcluster.controlplane import ControlPlane
from tests.integration.harness import REPO_ROOT

MODULE = REPO_ROOT / "hack" / "testcp" / "kube"
SOURCE = "clusterrole-aggregation"  # a package of that module
IDENTITY = "system:serviceaccount:kube-system:clusterrole-aggregation-controller"
GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system")
# hack/testcp/build.sh's settings: the pinned toolchain and modules, nothing fetched silently.
GO_ENV = {
    "GOWORK": "off",
    "GOTOOLCHAIN": "local",
    "CGO_ENABLED": "0",
    "GOFLAGS": "-mod=readonly -buildvcs=false",
}


def built_binary() -> Path:
    """The controller's binary, built on first use (a missing ``go`` FAILS the test: the
    control plane's own build needs it too)."""
    digest = hashlib.sha256()
    for path in (MODULE / "go.mod", MODULE / "go.sum", *sorted((MODULE / SOURCE).glob("*.go"))):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    tools = default_bin_dir().parent / "tools"
    target = tools / f"clusterrole-aggregation-{digest.hexdigest()[:16]}"
    if os.access(target, os.X_OK):
        return target
    go = shutil.which("go")
    if go is None:
        pytest.fail("go not found: it builds the ClusterRole aggregation controller", pytrace=False)
    tools.mkdir(parents=True, exist_ok=True)
    with open(tools / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others find it built
        if os.access(target, os.X_OK):
            return target
        partial = target.with_suffix(f".tmp{os.getpid()}")
        result = subprocess.run(
            [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), f"./{SOURCE}"],
            cwd=MODULE,
            env={**os.environ, **GO_ENV},
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(f"go build ./{SOURCE} failed:\n{result.stderr[-3000:]}", pytrace=False)
        partial.rename(target)
    return target


class AggregationController:
    """The controller as a process, logging to ``log_path``; ``stop`` ends it."""

    def __init__(self, plane: ControlPlane, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in stop)
        impersonate = ["--as", IDENTITY, *(f"--as-group={group}" for group in GROUPS)]
        self.process = subprocess.Popen(
            [str(built_binary()), "--kubeconfig", str(plane.kubeconfig_path), *impersonate],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_synced(self, timeout: float = 60.0) -> None:
        """Until its ClusterRole cache has synced (it then aggregates every role once)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the aggregation controller exited:\n{self.log()}")
            if "Caches are synced" in self.log():
                return
            time.sleep(0.2)
        raise AssertionError(f"the aggregation controller never synced:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
