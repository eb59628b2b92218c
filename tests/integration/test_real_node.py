"""orca as its users run it: the image ``make image`` builds, installed with ``kubectl apply -k
manifests/dev-node`` (the base, pulling IfNotPresent), running as two Pods on a real kubelet
(issue 30).

A dev cluster of its own, started ``--with-kubelet`` (``controller.devcluster.node``): kubelet
v1.36.3, containerd v2, runc, kube-scheduler and kube-proxy beside kwok's Nodes, which carry
kwok's ``fake`` NoSchedule taint so that Pods land only on the real Node (the Workloads here
tolerate it: orca reads taints as kube-scheduler does). The image is loaded onto the node as
``orca dev-cluster load-image`` does and run by the one command it prints, ``kubectl apply -k
manifests/dev-node`` (``imagePullPolicy: IfNotPresent``: there is no registry to ask).

What is proven for real, not impersonated: the Pods pass Pod Security ``restricted``, run as
UID 10001 on a read-only root filesystem, talk to the API server with their own ServiceAccount
token through the ``kubernetes`` Service (in-cluster configuration), and turn Ready by the
kubelet's HTTPS probes (``/readyz``: the informers have listed); the two replicas hand the
Lease over when the leader Pod is deleted in the middle of a burst (the chaos suite's
invariants checked at every poll), and through ``kubectl rollout restart``; the metrics
Service answers a scrape from a Pod in the ``monitoring`` namespace over HTTPS, verified with
the CA of the Secret the operator keeps, only for a token holding the metrics-reader role
(issue 29); the API server calls the admission webhook at the Pods' own addresses (the
dev control plane routes webhooks to endpoints) and a bad Workload is refused at apply.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, NodeTiming
from controller.devcluster.node import FAKE_NODE_TAINT, NODE_IP, NODE_NAME, RealNode
from controller.imagebuild.build import Built
from controller.version import version
from tests.chaos.invariants import Observer, Violation, check, dump
from tests.packaging.dockerfile import REPO_ROOT
from tests.support.factories import node_object

pytestmark = [pytest.mark.controlplane, pytest.mark.timeout(1500)]

NS = "orca-system"
DENIED = 'admission webhook "validate-workloads.orca.cloudinit.dev" denied the request: '
WEBHOOK_PORT = 9443  # the Pods' `webhook` port (manifests/manager/deployment.yaml)
TOLERATE_FAKE = [{"key": FAKE_NODE_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]


@dataclass
class Cluster:
    plane: ControlPlane
    node: RealNode
    image: Built
    work: Path
    log: list[str] = field(default_factory=list)

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.plane.kubectl(*args, input=input, check=True, timeout=300).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = 180.0) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if ready():
                return time.monotonic() - start
            time.sleep(0.5)
        pods = self.plane.kubectl("get", "pods", "-A", "-o", "wide").stdout
        raise AssertionError(f"timed out: {what}\n{pods}\n{self.node.tail('kubelet')}")

    def operator_pods(self) -> list[dict[str, Any]]:
        pods = self.json("get", "pods", "-n", NS, "-l", "app.kubernetes.io/name=orca-controller")
        return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.operator_pods()
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p.get("status", {}).get("conditions", [])
            )
        ]

    def leader(self) -> str | None:
        done = self.plane.kubectl("get", "lease", "orca-controller", "-n", NS, "-o", "json")
        if done.returncode != 0:
            return None
        spec = json.loads(done.stdout).get("spec", {})
        holder = spec.get("holderIdentity") or ""
        return holder.split("_", 1)[0] or None


def _fake_node(name: str, cpu: str = "8") -> dict[str, Any]:
    obj = node_object(name, cpu=cpu)
    obj.setdefault("spec", {})["taints"] = [dict(FAKE_NODE_TAINT)]
    return obj


def _workload(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"tolerations": TOLERATE_FAKE, **spec},
    }


@pytest.fixture(scope="module")
def cluster(built_image: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("real-node")
    plane = ControlPlane(work / "cluster", with_kubelet=True, node_timing=NodeTiming.fast())
    plane.start()
    node = RealNode(plane)
    try:
        node.start()
        node.load_image(built_image.archive.path)
        c = Cluster(plane, node, built_image, work)
        # As a new user runs it (load-image prints it): the base with IfNotPresent, the image
        # by the name make image gives it, from the node's containerd, no registry.
        assert built_image.reference == f"orca-controller:{version()}"
        c.kubectl("apply", "-k", str(REPO_ROOT / "manifests" / "dev-node"))
        c.wait("two operator Pods Ready", lambda: len(c.ready_pods()) == 2, timeout=300)
        c.wait("a leader", lambda: c.leader() is not None, timeout=60)
        yield c
    finally:
        try:
            node.stop()
        finally:
            plane.stop()


def test_the_operator_runs_as_two_restricted_pods_on_the_real_node(cluster: Cluster) -> None:
    namespace = cluster.json("get", "namespace", NS)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = cluster.operator_pods()
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] == NODE_NAME
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0, status
        assert status["imageID"].endswith(cluster.image.archive.digest), status["imageID"]
        container = pod["spec"]["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["serviceAccountName"] == "orca-controller"
    # The kubelet ran the probes: Ready came from them (readiness on /readyz, over HTTPS).
    leader = cluster.leader()
    assert leader in {p["metadata"]["name"] for p in pods}
    # In-cluster credentials: the only way to the API server is the kubernetes Service (its
    # endpoint the node's address), and the Lease is writable only with the Role's token.
    endpoints = cluster.json("get", "endpoints", "kubernetes", "-n", "default")
    assert endpoints["subsets"][0]["addresses"][0]["ip"] == NODE_IP
    logs = cluster.kubectl("logs", "-n", NS, leader or "", "--tail=200")
    assert logs.strip(), "kubectl logs reached the kubelet and returned nothing"
    assert [p["spec"]["securityContext"]["runAsUser"] for p in pods] == [10001, 10001]


class Burst:
    """Creates Workloads in the background and checks the safety invariants at every poll."""

    def __init__(self, cluster: Cluster, namespace: str, count: int, every: float) -> None:
        self.cluster, self.namespace, self.count, self.every = cluster, namespace, count, every
        self.observer = Observer()
        self.violations: list[Violation] = []
        self.polls = 0
        self._stop = threading.Event()
        self.created = 0
        self._threads = [
            threading.Thread(target=self._create, daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]

    def __enter__(self) -> Burst:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)

    def _create(self) -> None:
        for i in range(self.count):
            if self._stop.is_set():
                return
            kind = ("Job", "Service")[i % 2]
            spec: dict[str, Any] = {"kind": kind, "resources": {"cpu": "100m"}}
            if kind == "Service":
                spec["count"] = 2
            body = yaml.safe_dump(_workload(f"w-{i:03d}", self.namespace, **spec))
            self.cluster.plane.kubectl("apply", "-f", "-", input=body, check=True)
            self.created += 1
            time.sleep(self.every)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.poll()
            time.sleep(0.5)

    def poll(self) -> list[dict[str, Any]]:
        at = time.monotonic()
        workloads = self.cluster.json("get", "workloads.orca.cloudinit.dev", "-n", self.namespace)
        nodes = self.cluster.json("get", "nodes")
        self.violations += self.observer.observe(workloads["items"], nodes["items"], at)
        self.polls += 1
        return list(workloads["items"])

    def settled(self) -> bool:
        items = self.poll()
        done = [
            w for w in items
            if (w.get("status") or {}).get("observedGeneration") == w["metadata"]["generation"]
            and (w.get("status") or {}).get("phase") == "Scheduled"
        ]  # fmt: skip
        return self.created == self.count and len(done) == self.count

    def final_check(self) -> list[Violation]:
        workloads = self.cluster.json("get", "workloads.orca.cloudinit.dev", "-n", self.namespace)
        nodes = self.cluster.json("get", "nodes")
        return check(nodes["items"], workloads["items"])


def _namespace(cluster: Cluster, name: str) -> str:
    cluster.kubectl("create", "namespace", name)
    return name


def _fake_nodes(cluster: Cluster, prefix: str, count: int) -> None:
    body = yaml.safe_dump_all([_fake_node(f"{prefix}-{i}") for i in range(count)])
    cluster.kubectl("apply", "-f", "-", input=body)


def test_workloads_are_placed_by_the_in_cluster_operator(cluster: Cluster) -> None:
    ns = _namespace(cluster, "placed")
    _fake_nodes(cluster, "place", 3)
    body = yaml.safe_dump(_workload("web", ns, kind="Service", count=3, resources={"cpu": "1"}))
    cluster.kubectl("apply", "-f", "-", input=body)

    def placed() -> bool:
        w = cluster.json("get", "workloads.orca.cloudinit.dev", "web", "-n", ns)
        return (w.get("status") or {}).get("placed") == 3

    cluster.wait("web placed by the in-cluster operator", placed, timeout=120)
    w = cluster.json("get", "workloads.orca.cloudinit.dev", "web", "-n", ns)
    nodes = {p["node"] for p in w["status"]["placements"]}
    assert len(nodes) == 3, nodes  # one replica per node (the fewest replicas first)
    leader = cluster.leader()
    events = cluster.json("get", "events", "-n", ns)
    assert any(e.get("reason") == "Scheduled" for e in events["items"]), leader


def test_the_standby_takes_over_when_the_leader_pod_is_deleted_mid_burst(
    cluster: Cluster, record_property: Callable[[str, object], None]
) -> None:
    ns = _namespace(cluster, "failover")
    _fake_nodes(cluster, "fail", 4)
    before = cluster.leader()
    assert before is not None
    with Burst(cluster, ns, count=40, every=0.25) as burst:
        cluster.wait("a third of the burst created", lambda: burst.created >= 13, timeout=60)
        deleted_at = time.monotonic()
        cluster.kubectl("delete", "pod", "-n", NS, before, "--wait=false")
        took = cluster.wait(
            "the standby holds the Lease",
            lambda: cluster.leader() not in (None, before),
            timeout=120,
        )
        cluster.wait("every Workload of the burst decided", burst.settled, timeout=240)
        settled = time.monotonic() - deleted_at
    record_property("failover_lease_seconds", round(took, 1))
    record_property("failover_burst_settled_seconds", round(settled, 1))
    print(f"\nleader Pod deleted: Lease taken over in {took:.1f} s; burst settled {settled:.1f} s "
          f"after the delete; {burst.polls} polls")  # fmt: skip
    assert burst.violations == [], dump(burst.violations)
    assert burst.final_check() == []
    cluster.wait("a replacement Pod Ready", lambda: len(cluster.ready_pods()) == 2, timeout=180)


def test_rollout_restart_mid_burst_loses_and_doubles_nothing(cluster: Cluster) -> None:
    ns = _namespace(cluster, "rollout")
    _fake_nodes(cluster, "roll", 4)
    with Burst(cluster, ns, count=40, every=0.25) as burst:
        cluster.wait("a quarter of the burst created", lambda: burst.created >= 10, timeout=60)
        cluster.kubectl("rollout", "restart", "deployment/orca-controller", "-n", NS)
        cluster.kubectl(
            "rollout", "status", "deployment/orca-controller", "-n", NS, "--timeout=300s"
        )
        cluster.wait("every Workload of the burst decided", burst.settled, timeout=240)
    assert burst.violations == [], dump(burst.violations)
    assert burst.final_check() == []
    assert len(cluster.ready_pods()) == 2


#: The scrape, run by the image's own Python in a Pod: HTTPS to the metrics Service's
#: ClusterIP, the certificate verified against the operator's CA for the Service's name (as
#: Prometheus does with a ``tlsConfig`` naming the CA and ``serverName``), once with no token,
#: once with a token without the metrics-reader role, once with the Pod's own, which has it.
SCRAPE = """
import http.client, json, os, socket, ssl, sys
ip, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
context = ssl.create_default_context(cafile="/ca/ca.crt")
def get(token):
    conn = http.client.HTTPSConnection(name, port, context=context, timeout=10)
    conn.sock = context.wrap_socket(socket.create_connection((ip, port), 10), server_hostname=name)
    conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + token} if token else {})
    answer = conn.getresponse()
    return answer.status, answer.read().decode()
own = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
for who, token in (("no token", None), ("no role", os.environ["NO_ROLE_TOKEN"]), ("reader", own)):
    status, body = get(token)
    got = [l for l in body.splitlines() if l.startswith("orca_leader")] if status == 200 else body
    print(json.dumps({"who": who, "status": status, "got": got}))
"""


def _scrape_pod(
    cluster: Cluster, ns: str, ip: str, port: int, no_role_token: str
) -> dict[str, Any]:
    image = f"{cluster.image.reference.rpartition(':')[0]}@{cluster.image.archive.digest}"
    name = f"orca-controller.{NS}.svc"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "scrape", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "prometheus",
            "containers": [
                {
                    "name": "scrape",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/opt/orca/bin/python", "-c", SCRAPE, ip, str(port), name],
                    "env": [{"name": "NO_ROLE_TOKEN", "value": no_role_token}],
                    "volumeMounts": [{"name": "ca", "mountPath": "/ca", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "ca", "configMap": {"name": "orca-ca"}}],
        },
    }


def test_the_metrics_service_answers_only_a_reader_over_https(cluster: Cluster) -> None:
    """From the namespace the NetworkPolicy admits (``monitoring``), as a Prometheus there
    would: its ServiceAccount bound to orca-controller-metrics-reader, the operator's CA
    given to it (copied from the Secret the operator keeps, as a user would)."""
    ns = _namespace(cluster, "monitoring")
    cluster.kubectl("create", "serviceaccount", "prometheus", "-n", ns)
    cluster.kubectl("create", "serviceaccount", "nobody", "-n", ns)
    cluster.kubectl(
        "create", "clusterrolebinding", "scrape-metrics-reader",
        "--clusterrole=orca-controller-metrics-reader", f"--serviceaccount={ns}:prometheus",
    )  # fmt: skip
    secret = cluster.json("get", "secret", "orca-controller-tls", "-n", NS)
    ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orca-ca"}}
    cluster.kubectl(
        "apply", "-n", ns, "-f", "-", input=yaml.safe_dump({**configmap, "data": {"ca.crt": ca}})
    )
    no_role = cluster.kubectl("create", "token", "nobody", "-n", ns).strip()
    service = cluster.json("get", "service", "orca-controller", "-n", NS)
    ip, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
    pod = _scrape_pod(cluster, ns, ip, port, no_role)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))

    def finished() -> bool:
        phase = cluster.json("get", "pod", "scrape", "-n", ns)["status"].get("phase")
        return phase in ("Succeeded", "Failed")

    cluster.wait("the scrape Pod finished", finished, timeout=120)
    result = cluster.json("get", "pod", "scrape", "-n", ns)
    logs = cluster.kubectl("logs", "scrape", "-n", ns)
    assert result["status"]["phase"] == "Succeeded", logs
    answers = {a["who"]: a for a in map(json.loads, logs.splitlines())}
    print("\n" + "\n".join(f"{w}: {a['status']} {a['got']}" for w, a in answers.items()))
    assert answers["no token"]["status"] == 401, answers
    assert answers["no role"]["status"] == 403, answers
    assert f'user "system:serviceaccount:{ns}:nobody" cannot get path' in answers["no role"]["got"]
    reader = answers["reader"]
    assert reader["status"] == 200, answers
    # Both replicas are behind the Service; whichever answered says whether it leads.
    assert reader["got"] and reader["got"][0].startswith("orca_leader"), reader


def _apiserver_peers(cluster: Cluster) -> set[tuple[str, int]]:
    """The addresses the API server process has TCP connections open to (``ss``, as root):
    the sockets' own peers, before any NAT, so a connection made to a Service's ClusterIP
    shows that ClusterIP, one made to an endpoint shows the Pod's address."""
    pid = cluster.plane.pids["kube-apiserver"]
    done = subprocess.run(
        ["ss", "-Htnp", "state", "established"], capture_output=True, text=True, check=True
    )
    peers = set()
    for line in done.stdout.splitlines():
        if f"pid={pid}," in line:
            peer = line.split()[3]
            address, _, port = peer.rpartition(":")
            peers.add((address.strip("[]"), int(port)))
    return peers


def _denial(cluster: Cluster, obj: dict[str, Any], *extra: str) -> str | None:
    """The webhook's refusal of an apply of ``obj``, or None when it went through (Ignore: no
    replica answered, or the caBundle is not set yet)."""
    done = cluster.plane.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(obj))
    if DENIED not in done.stderr:
        assert done.returncode == 0, done.stderr  # refused by something else: say what
        return None
    assert done.returncode != 0, done.stdout
    return done.stderr.split(DENIED, 1)[1].strip()


def test_the_in_cluster_webhook_refuses_a_bad_workload_called_at_its_endpoints(
    cluster: Cluster,
) -> None:
    """The shipped configuration calls the Service ``orca-webhook``; the dev control plane
    routes webhook calls to the Service's endpoints (``--enable-aggregator-routing``), here the
    operator Pods on the real Node's bridge. The caBundle is the CA of the Secret the operator
    keeps, set by the operator."""
    secret = cluster.json("get", "secret", "orca-controller-tls", "-n", NS)
    configuration = cluster.json("get", "validatingwebhookconfiguration", "orca-controller")
    (hook,) = configuration["webhooks"]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    ns = _namespace(cluster, "admission")
    bad = _workload("bad", ns, kind="Service", count=2, constraints=['"ssd" in node.tag'])
    probe = _workload("probe", ns, kind="Job", constraints=["node.cpu"])
    cluster.wait(
        "the webhook answers", lambda: _denial(cluster, probe, "--dry-run=server") is not None, 60
    )
    for extra in (("--dry-run=server",), ()):
        message = _denial(cluster, bad, *extra)
        assert message is not None, "a bad Workload was accepted"
        assert message.startswith("spec.constraints[0]"), message
        assert "node has no field 'tag'" in message, message
    stored = cluster.plane.kubectl("get", "workloads.orca.cloudinit.dev", "bad", "-n", ns)
    assert stored.returncode != 0 and "NotFound" in stored.stderr, "refused, yet stored"
    good = _workload("good", ns, kind="Job", constraints=['"ssd" in node.tags'])
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(good))
    # The call went to a Pod's address and webhook port, never to the Service's ClusterIP:
    # the API server keeps the connection of its last call open.
    pods = {p["status"]["podIP"] for p in cluster.operator_pods()}
    cluster_ip = cluster.json("get", "service", "orca-webhook", "-n", NS)["spec"]["clusterIP"]
    peers: set[tuple[str, int]] = set()

    def called_at_an_endpoint() -> bool:
        nonlocal peers
        if _denial(cluster, bad, "--dry-run=server") is None:
            return False
        peers = _apiserver_peers(cluster)
        return any((ip, WEBHOOK_PORT) in peers for ip in pods)

    cluster.wait(f"the API server connected to an operator Pod {pods}", called_at_an_endpoint, 30)
    assert not [p for p in peers if p[0] == cluster_ip], peers


def test_helm_install_runs_the_operator_on_the_real_node(cluster: Cluster) -> None:
    """Last: the kustomize install is removed, then the chart installed as docs/install.md says."""
    from tests.packaging.test_chart import CHART, helm

    dev_node = REPO_ROOT / "manifests" / "dev-node"
    cluster.kubectl("delete", "-k", str(dev_node), "--wait=true", "--timeout=300s")
    cluster.wait("the kustomize install gone", lambda: not cluster.operator_pods(), timeout=180)
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    name = cluster.image.reference.rpartition(":")[0]
    done = subprocess.run(
        [
            helm(), "install", "orca", str(CHART), "--namespace", NS,
            "--kubeconfig", str(cluster.plane.kubeconfig_path),
            "--set", f"image.repository={name}",
            "--set", f"image.digest={cluster.image.archive.digest}",
            "--set", "image.pullPolicy=IfNotPresent",
            "--wait", "--timeout=5m",
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    cluster.wait("two operator Pods Ready", lambda: len(cluster.ready_pods()) == 2, timeout=300)
    ns = _namespace(cluster, "helm")
    _fake_nodes(cluster, "helm", 2)
    body = yaml.safe_dump(_workload("job", ns, kind="Job", resources={"cpu": "1"}))
    cluster.kubectl("apply", "-f", "-", input=body)

    def placed() -> bool:
        w = cluster.json("get", "workloads.orca.cloudinit.dev", "job", "-n", ns)
        return (w.get("status") or {}).get("placed") == 1

    cluster.wait("a Workload placed by the operator Helm installed", placed, timeout=120)
    # The chart's webhook: its Service, its configuration, the caBundle the operator keeps.
    bad = _workload("bad", ns, kind="Job", constraints=["node.cpu"])
    cluster.wait(
        "the chart's webhook refuses a bad Workload",
        lambda: "must evaluate to a bool" in (_denial(cluster, bad, "--dry-run=server") or ""),
        timeout=60,
    )
