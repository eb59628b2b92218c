"""``orca dev-cluster start|stop|status|kubeconfig``: a local control plane for development.

``start`` leaves etcd and kube-apiserver running detached (own session, no parent-death
signal) and exits; ``stop``/``status`` find them again through the pid files in ``--dir``.
Heavy imports (cryptography, the control-plane module) happen inside the handlers so that
``orca --help`` stays fast, and so that an install without the ``dev`` extra (the operator
image) still runs every other command: there ``orca dev-cluster`` says in one line what is
missing instead of a traceback.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.devcluster.controlplane import ControlPlane

#: Modules only the development control plane needs; they come with ``orca-controller[dev]``.
DEV_ONLY_MODULES = frozenset({"cryptography"})

Handler = Callable[[argparse.Namespace], int]


def _print_err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _start(args: argparse.Namespace) -> int:
    from controller.devcluster.binaries import BinariesNotFound
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError

    plane = ControlPlane(args.dir, args.bin_dir, detach=True, startup_timeout=args.timeout)
    try:
        bin_dir = plane.bin_dir
    except BinariesNotFound as e:
        _print_err(f"orca dev-cluster: {e}")
        return 1
    print(f"starting etcd + kube-apiserver from {bin_dir} in {plane.directory} ...", flush=True)
    try:
        plane.start()
    except ControlPlaneError as e:
        _print_err(f"orca dev-cluster: start failed: {e}")
        return 1
    print(f"ready in {plane.startup_seconds:.1f}s")
    _describe(plane)
    print(f"use it with: export KUBECONFIG={plane.kubeconfig_path}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError

    try:
        plane = ControlPlane.attach(args.dir)
    except ControlPlaneError as e:
        print(f"nothing to stop: {e}")
        return 0
    pids = plane.pids
    try:
        plane.stop()
    except ControlPlaneError as e:
        _print_err(f"orca dev-cluster: stop failed: {e}")
        return 1
    print("stopped " + ", ".join(f"{n} (pid {p})" for n, p in pids.items()))
    return 0


def _status(args: argparse.Namespace) -> int:
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError

    try:
        plane = ControlPlane.attach(args.dir)
    except ControlPlaneError as e:
        print(f"not running: {e}")
        return 1
    if not plane.is_running():
        dead = [name for name, alive in plane.servers_alive().items() if not alive]
        print(
            f"not running: {', '.join(dead)} gone (clean up with: orca dev-cluster stop "
            f"--dir {plane.directory})"
        )
        return 1
    ready = plane.ready()
    print("running" + ("" if ready else " (but /readyz is not ok yet)"))
    _describe(plane)
    return 0 if ready else 1


def _kubeconfig(args: argparse.Namespace) -> int:
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError

    try:
        plane = ControlPlane.attach(args.dir)
        path = plane.mint_kubeconfig(args.user, args.group, args.output)
    except ControlPlaneError as e:
        _print_err(f"orca dev-cluster: {e}")
        return 1
    print(path)
    return 0


def _needs_dev_extra(handler: Handler) -> Handler:
    """Turn a missing development-only module into one line and exit code 1."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in DEV_ONLY_MODULES:
                raise
            _print_err(
                f"orca dev-cluster: needs the development extra (Python module '{e.name}' is "
                "not installed): pip install 'orca-controller[dev]'"
            )
            return 1

    return run


def _describe(plane: ControlPlane) -> None:
    print(f"  endpoint:   {plane.server_url}")
    print(f"  kubeconfig: {plane.kubeconfig_path}")
    print(f"  etcd:       {plane.etcd_url}")
    print("  pids:       " + ", ".join(f"{n}={p}" for n, p in plane.pids.items()))
    print(f"  logs:       {plane.etcd_log}, {plane.apiserver_log}")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dev-cluster`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "dev-cluster",
        help="run a local kube-apiserver + etcd",
        description="A real kube-apiserver + etcd on loopback (no kubelet, no scheduler), "
        "built by hack/testcp/build.sh.",
    )
    sub = p.add_subparsers(dest="dev_cluster_command", required=True, metavar="ACTION")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--dir",
            type=Path,
            required=True,
            help="state directory (kubeconfig, pki/, etcd-data/, logs, pid files)",
        )

    start = sub.add_parser("start", help="start etcd + kube-apiserver and wait until ready")
    common(start)
    start.add_argument(
        "--bin-dir",
        type=Path,
        default=None,
        help="directory with etcd, kube-apiserver, kubectl (default: $ORCA_TESTCP_BIN, "
        "else the cache used by hack/testcp/build.sh)",
    )
    start.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for /readyz (default 120)"
    )
    start.set_defaults(func=_needs_dev_extra(_start))

    stop = sub.add_parser("stop", help="stop the servers recorded in --dir")
    common(stop)
    stop.set_defaults(func=_needs_dev_extra(_stop))

    status = sub.add_parser("status", help="exit 0 if running and ready, 1 otherwise")
    common(status)
    status.set_defaults(func=_needs_dev_extra(_status))

    kc = sub.add_parser("kubeconfig", help="mint a kubeconfig for another user/groups")
    common(kc)
    kc.add_argument("--user", required=True, help="user name (certificate CN)")
    kc.add_argument(
        "--group", action="append", default=[], help="group (certificate O); repeatable"
    )
    kc.add_argument("--output", "-o", type=Path, default=None, help="where to write it")
    kc.set_defaults(func=_needs_dev_extra(_kubeconfig))
