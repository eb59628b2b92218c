"""A real Node in the dev cluster: kubelet, containerd and runc running Pods on this machine
(``orca dev-cluster start --with-kubelet``), beside kwok's simulated Nodes.

What runs, and why each piece is set as it is (the machines here are containers themselves:
cgroup v1 mounted read-write, no CAP_SYS_RESOURCE, no kernel modules to load):

- **kube-scheduler**: Pods need one; the kwok-only cluster has none (orca places Workloads,
  nothing schedules Pods). kwok's Nodes carry kwok's own taint ``kwok.x-k8s.io/node=fake:
  NoSchedule`` when tests create them (``FAKE_NODE_TAINT``), so Pods land only on the real one.
- **containerd v2** with the CRI plugin, ``restrict_oom_score_adj`` (the sandbox's negative
  ``oom_score_adj`` needs CAP_SYS_RESOURCE, which these machines lack: runc failed with
  "can't get final child's PID from pipe: EOF" without it), cgroupfs, Debian's runc (built with
  seccomp, which the RuntimeDefault profile needs), the pause image built from Kubernetes'
  ``build/pause/linux/pause.c`` and imported locally.
- **kubelet v1.36.3**: ``failCgroupV1: false`` (cgroup v1 here), ``cgroupsPerQOS: false`` and
  ``enforceNodeAllocatable: []`` (it may not create the QoS hierarchy), ``failSwapOn: false``,
  its own ports on loopback; it authenticates to the API server as ``system:node:<name>``
  (the Node authorizer and NodeRestriction are on in this mode).
- **The node's address.** The kubelet refuses a loopback node IP, and without an address the
  API server cannot reach the kubelet (``kubectl logs``, ``exec``). The cluster makes its own:
  a veth pair whose host end carries ``NODE_IP`` and whose other end lives in a network
  namespace of the cluster's. The address is local to this machine: traffic to it never
  leaves (the kernel delivers it through its local table). The addresses come from
  198.18.0.0/15 (RFC 2544, benchmarking; never routed on the Internet).
- **Pod network**: the CNI ``bridge`` plugin (Debian's containernetworking-plugins) gives each
  Pod a namespace and an address in ``POD_CIDR`` on a bridge of the cluster's; a forward rule
  drops anything from Pods that would leave by another interface, so no Pod reaches past this
  machine (there is no cluster DNS: Pods get a resolv.conf naming nothing).
- **kube-proxy** (iptables mode) routes Service ClusterIPs, in ``SERVICE_CIDR``: the operator
  Pods reach the API server as every Pod does, through the ``kubernetes`` Service
  (``KUBERNETES_SERVICE_HOST``), whose endpoint is the API server's advertised address, the
  node IP (it listens on all addresses in this mode); ``masqueradeAll`` because the bridge
  does not pass Pod-to-Pod traffic through iptables (no ``br_netfilter`` here), so a reply
  must come back through the host. A blackhole route for ``SERVICE_CIDR`` makes sure a packet
  kube-proxy did not rewrite goes nowhere.

One such Node per machine at a time (the interface names and addresses are fixed); starting a
second says so in one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.devcluster.controlplane import (
    KUBELET_LABEL,
    NODE_SERVICE_CIDR,
    ControlPlane,
    ControlPlaneError,
)
from controller.devcluster.controlplane import (
    NODE_IP as NODE_IP,
)
from controller.devcluster.processes import ProcessError, Server, free_port, pdeathsig_preexec
from controller.imagebuild import oci

#: The node's address (host end of the veth: ``NODE_IP``, which the control plane advertises)
#: and its peer's, in a /30 of their own.
PEER_IP = "198.18.0.2"
POD_CIDR = "198.18.1.0/24"
POD_GATEWAY = "198.18.1.1"
SERVICE_CIDR = NODE_SERVICE_CIDR
#: The ``kubernetes`` Service's ClusterIP: the first address of ``SERVICE_CIDR``.
KUBERNETES_SERVICE_IP = "198.18.2.1"
NETNS = "orca-node"
VETH = "orca-node0"
VETH_PEER = "orca-node1"
BRIDGE = "orca-cni0"
FORWARD_CHAIN = "ORCA-NODE-FORWARD"
NODE_NAME = "orca-node"
#: kwok's own convention for its simulated Nodes: Pods do not go there.
FAKE_NODE_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
PAUSE_REF = "registry.k8s.io/pause:orca"
NODE_CACHE_ENV = "ORCA_NODE_BIN"
NODE_BUILD_HINT = "build them with: hack/kubelet/build.sh  (or set ORCA_NODE_BIN)"
PROCESSES = ("kube-scheduler", "containerd", "kubelet", "kube-proxy")
RUNC = "/usr/sbin/runc"
CNI_BIN = "/usr/lib/cni"


class NodeError(ControlPlaneError):
    """The real Node cannot start or act: one line, with what to do."""


def find_node_bin_dir() -> Path:
    """The kubelet's, containerd's and the pause binary's directory (hack/kubelet/build.sh)."""
    explicit = os.environ.get(NODE_CACHE_ENV)
    if explicit:
        candidate = Path(explicit)
    else:
        done = subprocess.run(
            ["bash", str(_repo() / "hack" / "kubelet" / "build.sh"), "--print-bin-dir"],
            capture_output=True,
            text=True,
            check=False,
        )
        candidate = Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else Path()
    needed = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "pause")
    missing = [b for b in needed if not os.access(candidate / b, os.X_OK)]
    if missing:
        raise NodeError(f"node binaries missing in {candidate}: {', '.join(missing)}; "
                        f"{NODE_BUILD_HINT}")  # fmt: skip
    for tool, why in ((RUNC, "apt-get install runc"), (f"{CNI_BIN}/bridge", "apt-get install "
                      "containernetworking-plugins"), ("/usr/sbin/iptables", "apt-get install "
                      "iptables")):  # fmt: skip
        if not os.access(tool, os.X_OK):
            raise NodeError(f"{tool} is missing: {why} (hack/install-node-tools.sh does it)")
    return candidate.resolve()


def _repo() -> Path:
    return Path(__file__).resolve().parents[2]


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeError(f"{' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


class RealNode:
    """The processes and network of the real Node, in ``DIR/node`` of a dev cluster."""

    def __init__(self, plane: ControlPlane, bin_dir: Path | None = None) -> None:
        self.plane = plane
        self.dir = plane.directory / "node"
        self._bin_dir = bin_dir
        self._servers: dict[str, Server] = {}
        #: Short: unix socket paths are limited to 108 bytes.
        digest = hashlib.sha256(str(self.dir).encode()).hexdigest()[:10]
        self.run_dir = Path("/run") / f"orca-node-{digest}"

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = find_node_bin_dir()
        return self._bin_dir

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 180.0) -> RealNode:
        """Network, containerd (with the pause image), kube-scheduler, kubelet, kube-proxy;
        returns once the Node is Ready."""
        if os.geteuid() != 0:
            raise NodeError("a real Node needs root (network namespaces, containerd, runc)")
        self.bin_dir  # noqa: B018 - fails early, before anything is created
        if _run("ip", "link", "show", VETH, check=False).returncode == 0:
            # Before anything is made: the clean-up on failure must not take another's down.
            raise NodeError(
                f"interface {VETH} exists: another dev cluster with a kubelet runs on this "
                "machine (one at a time), or one was not stopped: orca dev-cluster stop --dir ..."
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        try:
            self._network()
            self._write_configs()
            self._spawn("containerd", [
                str(self.bin_dir / "containerd"), f"--config={self.dir / 'containerd.toml'}",
            ])  # fmt: skip
            self._wait(lambda: self.socket.exists(), deadline, "containerd's socket")
            self._import_pause()
            self._spawn("kube-scheduler", self._scheduler_args())
            self._spawn("kubelet", [
                str(self.bin_dir / "kubelet"), f"--config={self.dir / 'kubelet.yaml'}",
                f"--kubeconfig={self.dir / 'kubelet.kubeconfig'}",
                f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
                f"--node-labels={KUBELET_LABEL}=true",
                f"--root-dir={self.dir / 'kubelet'}", "--v=1",
            ])  # fmt: skip
            self._spawn("kube-proxy", [
                str(self.bin_dir / "kube-proxy"), f"--config={self.dir / 'kube-proxy.yaml'}",
                f"--hostname-override={NODE_NAME}", "--v=1",
            ])  # fmt: skip
            self._write_state()
            self._wait(self._node_ready, deadline, f"Node {NODE_NAME} Ready")
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the processes (kube-proxy, the kubelet and the scheduler, then containerd once
        every Pod's containers and network namespaces are gone) and take the network down.
        Idempotent."""
        if not self._servers:
            self._load_state()
        # The kubelet first, so that nothing starts Pods again while they are removed.
        for name in ("kube-proxy", "kubelet", "kube-scheduler"):
            self._terminate(name)
        if self._servers.get("containerd") and self._servers["containerd"].alive():
            self._remove_pods()
        self._terminate("containerd")
        self._kill_shims()
        self._unmount()
        self._network_down()
        with contextlib.suppress(FileNotFoundError):
            (self.dir / "state.json").unlink()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def _terminate(self, name: str) -> None:
        server = self._servers.pop(name, None)
        if server is not None:
            with contextlib.suppress(ProcessError, OSError):
                server.terminate(15.0)

    def load_image(self, archive: Path) -> str:
        """Import an OCI or docker archive into the node's containerd (namespace ``k8s.io``,
        where the CRI looks), as ``kind load image-archive`` does; returns ctr's output."""
        if not archive.is_file():
            raise NodeError(f"{archive}: no such file")
        done = _run(
            str(self.bin_dir / "ctr"), f"--address={self.socket}", "--namespace=k8s.io",
            "images", "import", "--platform=linux/amd64", "--no-unpack=false", str(archive),
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise NodeError(f"ctr images import {archive}: {done.stderr.strip()}")
        # The digest reference too (``name@sha256:...``), as a pull by the CRI records it: a
        # Pod naming the image by digest then finds it here instead of asking a registry.
        for name, digest in oci.references(archive):
            if name and "@" not in name:
                repo = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
                _run(*self._ctr(), "images", "tag", "--force", name, f"{repo}@{digest}",
                     check=False)  # fmt: skip
        return done.stdout.strip()

    def _ctr(self) -> list[str]:
        return [str(self.bin_dir / "ctr"), f"--address={self.socket}", "--namespace=k8s.io"]

    @classmethod
    def attach(cls, plane: ControlPlane) -> RealNode:
        node = cls(plane)
        node._load_state()
        if not node._servers:
            raise NodeError(f"no real Node recorded in {node.dir} (start --with-kubelet)")
        return node

    def alive(self) -> dict[str, bool]:
        return {n: n in self._servers and self._servers[n].alive() for n in PROCESSES}

    # -- network -----------------------------------------------------------------------------

    def _network(self) -> None:
        _run("ip", "netns", "add", NETNS, check=False)
        _run("ip", "link", "add", VETH, "type", "veth", "peer", "name", VETH_PEER)
        _run("ip", "link", "set", VETH_PEER, "netns", NETNS)
        _run("ip", "addr", "add", f"{NODE_IP}/30", "dev", VETH)
        _run("ip", "link", "set", VETH, "up")
        _run("ip", "netns", "exec", NETNS, "ip", "addr", "add", f"{PEER_IP}/30", "dev", VETH_PEER)
        _run("ip", "netns", "exec", NETNS, "ip", "link", "set", VETH_PEER, "up")
        _run("ip", "netns", "exec", NETNS, "ip", "link", "set", "lo", "up")
        _run("ip", "route", "replace", "blackhole", SERVICE_CIDR)
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        # Nothing from a Pod leaves except back into the Pod network (or to this machine).
        _run("iptables", "-N", FORWARD_CHAIN, check=False)
        _run("iptables", "-F", FORWARD_CHAIN)
        _run("iptables", "-A", FORWARD_CHAIN, "-s", POD_CIDR, "-o", BRIDGE, "-j", "RETURN")
        _run("iptables", "-A", FORWARD_CHAIN, "-s", POD_CIDR, "-j", "DROP")
        if _run("iptables", "-C", "FORWARD", "-j", FORWARD_CHAIN, check=False).returncode:
            _run("iptables", "-I", "FORWARD", "1", "-j", FORWARD_CHAIN)

    def _network_down(self) -> None:
        # The Pods' veths (their other ends may outlive the namespaces' names), then ours.
        ports = _run("ip", "-o", "link", "show", "master", BRIDGE, check=False).stdout
        for line in ports.splitlines():
            name = line.split(": ", 2)[1].split("@", 1)[0] if ": " in line else ""
            if name:
                _run("ip", "link", "del", name, check=False)
        _run("ip", "link", "del", VETH, check=False)
        _run("ip", "link", "del", BRIDGE, check=False)
        _run("ip", "netns", "del", NETNS, check=False)
        _run("ip", "route", "del", "blackhole", SERVICE_CIDR, check=False)
        _run("iptables", "-D", "FORWARD", "-j", FORWARD_CHAIN, check=False)
        _run("iptables", "-F", FORWARD_CHAIN, check=False)
        _run("iptables", "-X", FORWARD_CHAIN, check=False)
        # kube-proxy's own chains: it removes them itself with --cleanup, all but the
        # KUBE-FIREWALL chain (its martian-packet guard), which goes here.
        if (self.bin_dir / "kube-proxy").exists():
            _run(str(self.bin_dir / "kube-proxy"), "--cleanup", check=False)
        for tables in ("iptables", "ip6tables"):
            for chain in ("INPUT", "OUTPUT"):
                _run(tables, "-D", chain, "-j", "KUBE-FIREWALL", check=False)
            _run(tables, "-F", "KUBE-FIREWALL", check=False)
            _run(tables, "-X", "KUBE-FIREWALL", check=False)

    # -- configuration -----------------------------------------------------------------------

    def _write_configs(self) -> None:
        plane, d = self.plane, self.dir
        (d / "cni").mkdir(exist_ok=True)
        (d / "cni" / "10-orca.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0",
            "name": "orca",
            "plugins": [
                {
                    "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]],
                             "routes": [{"dst": "0.0.0.0/0"}],
                             "dataDir": str(self.run_dir / "ipam")},
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }, indent=2))  # fmt: skip
        (d / "containerd.toml").write_text(_containerd_config(d, self.run_dir))
        (d / "certs.d" / "_default").mkdir(parents=True, exist_ok=True)
        (d / "certs.d" / "_default" / "hosts.toml").write_text(
            'server = "http://127.0.0.1:1"\n\n[host."http://127.0.0.1:1"]\n'
            '  capabilities = ["pull", "resolve"]\n'
        )
        (d / "resolv.conf").write_text("# no cluster DNS in the dev cluster\n")
        kubelet_port, healthz = free_port(), free_port()
        (d / "kubelet.yaml").write_text(json.dumps({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failCgroupV1": False,
            "failSwapOn": False,
            "resolvConf": str(d / "resolv.conf"),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(plane.pki.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {"memory.available": "100Mi"},
            "registerWithTaints": [],
            "podCIDR": POD_CIDR,
            "localStorageCapacityIsolation": False,
            "protectKernelDefaults": False,
            "makeIPTablesUtilChains": False,
        }, indent=2))  # fmt: skip
        plane.mint_kubeconfig(f"system:node:{NODE_NAME}", ["system:nodes"],
                              d / "kubelet.kubeconfig")  # fmt: skip
        plane.mint_kubeconfig("system:kube-proxy", [], d / "kube-proxy.kubeconfig")
        plane.mint_kubeconfig("system:kube-scheduler", [], d / "kube-scheduler.kubeconfig")
        (d / "kube-proxy.yaml").write_text(json.dumps({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clientConnection": {"kubeconfig": str(d / "kube-proxy.kubeconfig")},
            "clusterCIDR": POD_CIDR,
            "iptables": {"masqueradeAll": True, "localhostNodePorts": False},
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{NODE_IP}/32"],
        }, indent=2))  # fmt: skip

    def _scheduler_args(self) -> list[str]:
        return [
            str(self.plane.bin_dir / "kube-scheduler"),
            f"--kubeconfig={self.dir / 'kube-scheduler.kubeconfig'}",
            f"--authentication-kubeconfig={self.dir / 'kube-scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={self.dir / 'kube-scheduler.kubeconfig'}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
        ]

    def _import_pause(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "root"
            root.mkdir()
            shutil.copy2(self.bin_dir / "pause", root / "pause")
            archive = oci.write_archive(
                Path(tmp) / "pause.tar",
                [oci.layer_from_directory(root, 0)],
                {"Entrypoint": ["/pause"], "User": "65535:65535"},
                PAUSE_REF,
                0,
            )
            self.load_image(archive.path)

    # -- processes ---------------------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        log = (self.dir / f"{name}.log").open("ab")
        preexec = None if self.plane.detach else pdeathsig_preexec()
        popen = subprocess.Popen(
            list(args), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=self.dir, start_new_session=True, preexec_fn=preexec, close_fds=True,
        )  # fmt: skip
        log.close()
        self._servers[name] = Server(name, popen.pid, os.path.realpath(args[0]), "", popen)
        self._write_state()

    def _wait(self, ready: Any, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            dead = [n for n, s in self._servers.items() if not s.alive()]
            if dead:
                raise NodeError(f"{dead[0]} exited while waiting for {what}:\n{self.tail(dead[0])}")
            if ready():
                return
            time.sleep(0.5)
        raise NodeError(f"timed out waiting for {what}:\n{self.tail('kubelet')}")

    def tail(self, name: str, lines: int = 25) -> str:
        path = self.dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _node_ready(self) -> bool:
        done = self.plane.kubectl("get", "node", NODE_NAME, "-o", "json")
        if done.returncode != 0:
            return False
        conditions = json.loads(done.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _remove_pods(self) -> None:
        """Stop and remove every container of the node's Pods, then the network namespaces
        the CNI plugin made for them (their veths go with them), so nothing outlives the node."""
        ctr = self._ctr()
        netns: set[str] = set()
        containers = _run(*ctr, "containers", "list", "-q", check=False).stdout.split()
        for container in containers:
            info = _run(*ctr, "containers", "info", container, check=False).stdout
            with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                for ns in json.loads(info)["Spec"]["linux"]["namespaces"]:
                    if ns.get("type") == "network" and ns.get("path", "").startswith("/"):
                        netns.add(ns["path"])
        tasks = _run(*ctr, "tasks", "list", "-q", check=False).stdout.split()
        for task in tasks:
            _run(*ctr, "tasks", "kill", "-s", "SIGKILL", task, check=False)
        time.sleep(0.5 if tasks else 0)
        for task in tasks:
            _run(*ctr, "tasks", "delete", "-f", task, check=False)
        for container in _run(*ctr, "containers", "list", "-q", check=False).stdout.split():
            _run(*ctr, "containers", "delete", container, check=False)
        for path in sorted(netns):
            if path.startswith("/var/run/netns/") or path.startswith("/run/netns/"):
                _run("ip", "netns", "del", Path(path).name, check=False)
        _reap_cgroups(containers)

    def _kill_shims(self) -> None:
        """containerd's shims outlive containerd by design; this node's go with it."""
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                cmdline
                and cmdline[0].endswith(b"containerd-shim-runc-v2")
                and any(str(self.socket).encode() in part for part in cmdline)
            ):
                with contextlib.suppress(OSError):
                    os.kill(int(proc.name), 9)

    def _unmount(self) -> None:
        """Mounts the kubelet and containerd left under the node's directories."""
        roots = (str(self.dir), str(self.run_dir))
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        points = sorted((m.split()[1] for m in mounts if m.split()[1].startswith(roots)),
                        key=len, reverse=True)  # fmt: skip
        for point in points:
            _run("umount", "-l", point, check=False)

    # -- state -------------------------------------------------------------------------------

    def _write_state(self) -> None:
        state = {
            "bin_dir": str(self.bin_dir),
            "run_dir": str(self.run_dir),
            **{n: {"pid": s.pid, "exe": s.exe} for n, s in self._servers.items()},
        }
        (self.dir / "state.json").write_text(json.dumps(state, indent=2) + "\n")

    def _load_state(self) -> None:
        try:
            state = json.loads((self.dir / "state.json").read_text())
        except (OSError, ValueError):
            return
        self._bin_dir = Path(state["bin_dir"])
        self.run_dir = Path(state["run_dir"])
        for name in PROCESSES:
            if name in state:
                self._servers[name] = Server(name, state[name]["pid"], state[name]["exe"], "")


def _reap_cgroups(containers: Sequence[str]) -> None:
    """What is left in the containers' cgroups (cgroupfs: ``/k8s.io/<id>`` under every
    controller), such as a ``runc init`` cut off mid-start: killed, and the cgroups removed."""
    for controller in Path("/sys/fs/cgroup").iterdir():
        for container in containers:
            group = controller / "k8s.io" / container
            if not group.is_dir():
                continue
            with contextlib.suppress(OSError, ValueError):
                for pid in (group / "cgroup.procs").read_text().split():
                    os.kill(int(pid), 9)
            for _ in range(20):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _containerd_config(d: Path, run: Path) -> str:
    """containerd 2's configuration (version 3): the CRI with runc, cgroupfs, the pause image
    imported by the node, CNI from Debian's plugins, everything under the node's directories."""
    return f"""version = 3
root = "{d / "containerd-root"}"
state = "{run / "state"}"

[grpc]
  address = "{run / "containerd.sock"}"

[ttrpc]
  address = "{run / "containerd.sock.ttrpc"}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.runtime"]
  # This machine has no CAP_SYS_RESOURCE: the sandbox's negative oom_score_adj is refused.
  restrict_oom_score_adj = true
  enable_selinux = false

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = "{RUNC}"
  SystemdCgroup = false

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["{CNI_BIN}"]
  conf_dir = "{d / "cni"}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{PAUSE_REF}"

[plugins."io.containerd.cri.v1.images".registry]
  # Every registry is this loopback port where nothing listens: an image that was not loaded
  # fails at once, and no pull ever leaves the machine.
  config_path = "{d / "certs.d"}"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""
