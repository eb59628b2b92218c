"""``orca dev-cluster start|stop|status|kubeconfig|silence|revive``: a local living cluster.

``start`` leaves etcd, kube-apiserver, kube-controller-manager and kwok running detached (own
session, no parent-death signal) and exits; the others find them again through the pid files
in ``--dir``. ``silence``/``revive`` stop and resume one Node's heartbeats.
Heavy imports (cryptography, the control-plane module) happen inside the handlers so that
``orca --help`` stays fast. The operator image holds everything these commands import but not
the control plane's binaries: there ``orca dev-cluster start`` says in one line where it looked
for them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from controller.version import version

if TYPE_CHECKING:
    from controller.devcluster.controlplane import ControlPlane

#: A real cluster's node timing (``controlplane.NodeTiming``'s defaults, kept here so that
#: ``orca --help`` does not import the control plane module; a unit test checks they agree).
NODE_TIMING_DEFAULTS: dict[str, float] = {
    "lease_seconds": 40,
    "monitor_period": 5.0,
    "grace_period": 50.0,
    "startup_grace_period": 60.0,
}


def _print_err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _start(args: argparse.Namespace) -> int:
    from controller.devcluster.binaries import BinariesNotFound
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError, NodeTiming

    try:
        timing = NodeTiming(
            lease_seconds=args.node_lease_seconds,
            monitor_period=args.node_monitor_period,
            grace_period=args.node_monitor_grace_period,
            startup_grace_period=args.node_startup_grace_period,
        )
    except ValueError as e:
        _print_err(f"orca dev-cluster: {e}")
        return 2
    plane = ControlPlane(
        args.dir,
        args.bin_dir,
        detach=True,
        startup_timeout=args.timeout,
        node_timing=timing,
        with_kubelet=args.with_kubelet,
    )
    try:
        bin_dir = plane.bin_dir
    except BinariesNotFound as e:
        _print_err(f"orca dev-cluster: {e}")
        return 1
    print(
        f"starting etcd, kube-apiserver, kube-controller-manager and kwok from {bin_dir} "
        f"in {plane.directory} ...",
        flush=True,
    )
    try:
        plane.start()
    except ControlPlaneError as e:
        _print_err(f"orca dev-cluster: start failed: {e}")
        return 1
    print(f"ready in {plane.startup_seconds:.1f}s")
    if args.with_kubelet:
        from controller.devcluster.node import NODE_IP, NODE_NAME, RealNode

        print("starting kube-scheduler, containerd, a kubelet and kube-proxy ...", flush=True)
        try:
            RealNode(plane).start()
        except ControlPlaneError as e:
            _print_err(f"orca dev-cluster: the real Node failed: {e}")
            with contextlib.suppress(ControlPlaneError):
                plane.stop()
            return 1
        print(f"Node {NODE_NAME} ({NODE_IP}) Ready; put an image on it with: orca dev-cluster "
              f"load-image --dir {plane.directory} ARCHIVE")  # fmt: skip
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
        if plane.with_kubelet:
            from controller.devcluster.node import RealNode

            RealNode(plane).stop()
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


def _silence(args: argparse.Namespace) -> int:
    return _heartbeats(args, silent=True)


def _revive(args: argparse.Namespace) -> int:
    return _heartbeats(args, silent=False)


def _heartbeats(args: argparse.Namespace, *, silent: bool) -> int:
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError

    try:
        plane = ControlPlane.attach(args.dir)
        for node in args.node:
            (plane.silence_node if silent else plane.revive_node)(node)
    except ControlPlaneError as e:
        _print_err(f"orca dev-cluster: {e}")
        return 1
    timing = plane.node_timing
    for node in args.node:
        if silent:
            print(
                f"{node}: silent; Unknown and tainted node.kubernetes.io/unreachable after "
                f"{timing.grace_period:g}s without heartbeats"
            )
        else:
            print(f"{node}: heartbeats resume; Ready again within {timing.lease_seconds / 4:g}s")
    return 0


def _load_image(args: argparse.Namespace) -> int:
    from controller.devcluster.controlplane import ControlPlane, ControlPlaneError
    from controller.devcluster.node import RealNode
    from controller.imagebuild.oci import references

    try:
        plane = ControlPlane.attach(args.dir)
        node = RealNode.attach(plane)
        print(node.load_image(args.archive))
        names = [name for name, _ in references(args.archive) if name]
    except (ControlPlaneError, OSError) as e:
        _print_err(f"orca dev-cluster: {e}")
        return 1
    sys.stdout.write(how_to_run(names, plane.kubeconfig_path))
    return 0


#: The image the kustomize base (and so manifests/dev-node) runs.
BASE_IMAGE = "orca-controller"


def short_name(name: str) -> str:
    """``docker.io/library/orca-controller:0.1.0`` as it is written: ``orca-controller:0.1.0``."""
    return name.removeprefix("docker.io/library/").removeprefix("docker.io/")


def how_to_run(names: Sequence[str], kubeconfig: Path) -> str:
    """What ``load-image`` prints after the import: the image's name, and the two ways to run
    it from the node's containerd, with no registry to ask (``IfNotPresent``; the base's
    ``Always`` would pull, and fail: ImagePullBackOff). A kustomize overlay
    (``manifests/dev-node``) runs ``orca-controller:<this version>``, the name ``make image``
    gives; another name is set in the overlay first."""
    if not names:
        return "the archive names no image: tag it when you build it (make image does)\n"
    image = short_name(names[0])
    repository, _, tag = (
        image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    )
    expected = f"{BASE_IMAGE}:{version()}"
    kustomize = "  kubectl apply -k manifests/dev-node\n"
    if image != expected:
        kustomize = (
            f"  (cd manifests/dev-node && kustomize edit set image {BASE_IMAGE}={image})\n"
            + kustomize
        )
    helm_tag = f" --set image.tag={tag}" if tag else ""
    return (
        f"\nloaded {image} onto the Node; it runs from there, never pulled (no registry):\n"
        f"  export KUBECONFIG={kubeconfig}\n"
        "kustomize (the base with imagePullPolicy IfNotPresent):\n"
        f"{kustomize}"
        "or Helm:\n"
        "  kubectl create namespace orca-system\n"
        "  kubectl label namespace orca-system pod-security.kubernetes.io/enforce=restricted\n"
        f"  helm install orca charts/orca-controller -n orca-system "
        f"--set image.repository={repository}{helm_tag} --set image.pullPolicy=IfNotPresent\n"
    )


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


def _describe(plane: ControlPlane) -> None:
    print(f"  endpoint:   {plane.server_url}")
    print(f"  kubeconfig: {plane.kubeconfig_path}")
    print(f"  etcd:       {plane.etcd_url}")
    print("  pids:       " + ", ".join(f"{n}={p}" for n, p in plane.pids.items()))
    print(f"  logs:       {plane.directory}/{{{','.join(plane.pids)}}}.log")
    t = plane.node_timing
    print(
        f"  nodes:      kwok heartbeats every {t.lease_seconds / 4:g}s (Lease {t.lease_seconds}s); "
        f"Unknown after {t.grace_period:g}s of silence"
    )


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dev-cluster`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "dev-cluster",
        help="run a local living cluster (API server, controller manager, kwok nodes)",
        description="A real etcd, kube-apiserver and kube-controller-manager on loopback, and "
        "kwok playing the kubelets of the Nodes (Lease heartbeats, Ready conditions; no "
        "containers, no scheduler), built by hack/testcp/build.sh. kwok manages every Node "
        "that has a label and not kwok.orca.cloudinit.dev/silent.",
    )
    sub = p.add_subparsers(dest="dev_cluster_command", required=True, metavar="ACTION")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--dir",
            type=Path,
            required=True,
            help="state directory (kubeconfig, pki/, etcd-data/, logs, pid files)",
        )

    start = sub.add_parser(
        "start", help="start etcd, kube-apiserver, kube-controller-manager and kwok"
    )
    common(start)
    start.add_argument(
        "--bin-dir",
        type=Path,
        default=None,
        help="directory with etcd, kube-apiserver, kubectl, kube-controller-manager, kwok "
        "(default: $ORCA_TESTCP_BIN, else the cache used by hack/testcp/build.sh)",
    )
    start.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to wait until every server is healthy (default 120)",
    )
    real = NODE_TIMING_DEFAULTS
    start.add_argument(
        "--node-lease-seconds",
        type=int,
        default=int(real["lease_seconds"]),
        metavar="S",
        help="duration of the Nodes' Leases, renewed every quarter "
        f"(default {real['lease_seconds']:g})",
    )
    start.add_argument(
        "--node-monitor-period",
        type=float,
        default=real["monitor_period"],
        metavar="S",
        help=f"how often the node lifecycle controller looks (default {real['monitor_period']:g})",
    )
    start.add_argument(
        "--node-monitor-grace-period",
        type=float,
        default=real["grace_period"],
        metavar="S",
        help="seconds without a heartbeat before a Node turns Unknown and gets the "
        f"unreachable taints (default {real['grace_period']:g})",
    )
    start.add_argument(
        "--node-startup-grace-period",
        type=float,
        default=real["startup_grace_period"],
        metavar="S",
        help=f"the same for a Node that never reported (default {real['startup_grace_period']:g})",
    )
    start.add_argument(
        "--with-kubelet",
        action="store_true",
        help="also run a real Node: kubelet, containerd and runc (built by "
        "hack/kubelet/build.sh), kube-scheduler and kube-proxy; needs root",
    )
    start.set_defaults(func=_start)

    load = sub.add_parser(
        "load-image", help="import an image archive (OCI or docker) into the real Node"
    )
    common(load)
    load.add_argument("archive", type=Path, help="e.g. dist/orca-controller-0.1.0.oci.tar")
    load.set_defaults(func=_load_image)

    stop = sub.add_parser("stop", help="stop the servers recorded in --dir")
    common(stop)
    stop.set_defaults(func=_stop)

    status = sub.add_parser("status", help="exit 0 if running and ready, 1 otherwise")
    common(status)
    status.set_defaults(func=_status)

    for name, func, text in (
        ("silence", _silence, "stop the heartbeats of Nodes (as if their kubelet died)"),
        ("revive", _revive, "resume the heartbeats of silenced Nodes"),
    ):
        sp = sub.add_parser(name, help=text)
        common(sp)
        sp.add_argument("node", nargs="+", help="Node name")
        sp.set_defaults(func=func)

    kc = sub.add_parser("kubeconfig", help="mint a kubeconfig for another user/groups")
    common(kc)
    kc.add_argument("--user", required=True, help="user name (certificate CN)")
    kc.add_argument(
        "--group", action="append", default=[], help="group (certificate O); repeatable"
    )
    kc.add_argument("--output", "-o", type=Path, default=None, help="where to write it")
    kc.set_defaults(func=_kubeconfig)
