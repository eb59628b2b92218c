"""The Helm chart (charts/orca-controller) renders the objects the kustomize tree renders.

Both are rendered the way users render them (``helm template``, ``kubectl kustomize``, the
binaries hack/helm/build.sh and hack/testcp/build.sh build) and compared object by object,
whole: the only difference allowed is Helm's own labels (chart, managed-by, instance, version).
Every kustomize install has its values: manifests/default (the defaults), with-monitoring,
cert-manager and kube-prometheus-stack. When manifests/ changes (a new object, a flag, a
port), this fails until the chart follows. The flags every combination of values renders are
read by ``orca run``'s own parser. ``helm install`` on a real Node is in
tests/integration/test_real_node.py.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from controller.cli import build_parser
from controller.cli.run import _webhook_problem
from controller.devcluster.binaries import find_bin_dir
from tests.packaging.dockerfile import REPO_ROOT

CHART = REPO_ROOT / "charts" / "orca-controller"
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)
MONITORING = (
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.dashboard.enabled=true",
)
# What manifests/kube-prometheus-stack adds to with-monitoring: its `release` label, and its
# Prometheus' ServiceAccount bound to the metrics-reader ClusterRole.
KUBE_PROMETHEUS_STACK = (
    *MONITORING,
    "monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
    "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
    "metrics.readers[0].kind=ServiceAccount",
    "metrics.readers[0].name=kube-prometheus-stack-prometheus",
    "metrics.readers[0].namespace=monitoring",
)
DEPLOYMENT = ("Deployment", "orca-system", "orca-controller")
WEBHOOK_OBJECTS = [
    ("Service", "orca-system", "orca-webhook"),
    ("ValidatingWebhookConfiguration", "", "orca-controller"),
]
SERVING_CERT_RBAC = [
    ("Role", "orca-system", "orca-controller-serving-cert"),
    ("RoleBinding", "orca-system", "orca-controller-serving-cert"),
]


def helm() -> str:
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "helm" / "build.sh"), "--print-path"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail("helm is not built: bash hack/helm/build.sh")
    return done.stdout.strip().splitlines()[-1]


def run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(text: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        meta = doc["metadata"]
        for label in HELM_LABELS:
            (meta.get("labels") or {}).pop(label, None)
        key = (doc["kind"], meta.get("namespace", ""), meta["name"])
        assert key not in out, f"{key} rendered twice"
        out[key] = doc
    return out


def kustomize(directory: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    kubectl = find_bin_dir() / "kubectl"
    return objects(run(str(kubectl), "kustomize", str(REPO_ROOT / "manifests" / directory)))


def template(*values: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    sets = [arg for value in values for arg in ("--set", value)]
    command = [helm(), "template", "orca", str(CHART), "--namespace", "orca-system"]
    return objects(run(*command, "--include-crds", "--set", "namespace.create=true", *sets))


@pytest.mark.parametrize(
    ("directory", "values"),
    [
        pytest.param("default", (), id="default"),
        pytest.param("with-monitoring", MONITORING, id="with-monitoring"),
        pytest.param("cert-manager", ("certManager.enabled=true",), id="cert-manager"),
        pytest.param("kube-prometheus-stack", KUBE_PROMETHEUS_STACK, id="kube-prometheus-stack"),
    ],
)
def test_the_chart_renders_exactly_what_kustomize_renders(
    directory: str, values: tuple[str, ...]
) -> None:
    want, got = kustomize(directory), template(*values)
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert got[key] == obj, key


def test_the_chart_carries_the_generated_crd_and_the_monitoring_files() -> None:
    """Helm reads nothing outside the chart: ``make chart`` (run by ``make crd`` and ``make
    dashboard``) copies these in; a hand edit on either side shows here."""
    copies = {
        "crds/workloads.orca.cloudinit.dev.yaml": "crds/workloads.orca.cloudinit.dev.yaml",
        "files/grafana-dashboard.json": "manifests/monitoring/grafana-dashboard.json",
        "files/prometheusrule.yaml": "manifests/monitoring/prometheusrule.yaml",
    }
    for copy, source in copies.items():
        assert (CHART / copy).read_bytes() == (REPO_ROOT / source).read_bytes(), (
            f"{CHART.name}/{copy} differs from {source}: run `make chart`"
        )


def _deployment(*values: str) -> dict[str, Any]:
    return template(*values)[DEPLOYMENT]


def _container(objs: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = objs[DEPLOYMENT]["spec"]["template"]["spec"]["containers"][0]
    return container


def test_values_reach_the_operator() -> None:
    d = _deployment(
        "image.repository=registry.example/orca",
        "image.digest=sha256:" + "a" * 64,
        "image.pullPolicy=IfNotPresent",
        "replicaCount=3",
        "watchNamespaces={shop,ml}",
        "extraArgs={--rebalance-interval=5m}",
        "resources.limits.memory=1Gi",
    )
    container = d["spec"]["template"]["spec"]["containers"][0]
    assert d["spec"]["replicas"] == 3
    assert container["image"] == "registry.example/orca@sha256:" + "a" * 64
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"] == [
        "run", "--log-format=json", "--liveness=none", "--metrics-port=9090",
        "--webhook-port=9443", "--webhook-service=$(POD_NAMESPACE)/orca-webhook",
        "--tls-secret=$(POD_NAMESPACE)/orca-controller-tls",
        "--tls-san=orca-controller.$(POD_NAMESPACE).svc",
        "--namespace=shop", "--namespace=ml", "--rebalance-interval=5m",
    ]  # fmt: skip
    assert container["resources"]["limits"]["memory"] == "1Gi"


def test_the_webhook_switched_off_leaves_no_trace() -> None:
    """No Service, no configuration (the API server would call a Service with nobody
    behind it), no port, no flag, no right on webhook configurations; the serving
    certificate stays (the metrics port is HTTPS)."""
    off = template("webhook.enabled=false")
    for key in WEBHOOK_OBJECTS:
        assert key not in off, key
    container = _container(off)
    assert not [a for a in container["args"] if a.startswith("--webhook")], container["args"]
    assert [p["name"] for p in container["ports"]] == ["metrics"]
    assert "--tls-secret=$(POD_NAMESPACE)/orca-controller-tls" in container["args"]
    role = off[("ClusterRole", "", "orca-controller")]
    assert all("admissionregistration.k8s.io" not in r.get("apiGroups", []) for r in role["rules"])
    assert "annotations" not in role["metadata"]  # checkov's note is about that right
    policy = off[("NetworkPolicy", "orca-system", "orca-controller")]
    ports = [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert ports == ["metrics"]
    for key in SERVING_CERT_RBAC:
        assert key in off, key


def test_cert_manager_with_an_issuer_of_yours() -> None:
    got = template("certManager.enabled=true", "certManager.issuerRef.kind=ClusterIssuer",
                   "certManager.issuerRef.name=corp-ca")  # fmt: skip
    assert ("Issuer", "orca-system", "orca-controller-selfsigned") not in got
    certificate = got[("Certificate", "orca-system", "orca-controller")]
    assert certificate["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "corp-ca"}
    for key in SERVING_CERT_RBAC:  # cert-manager writes the Secret, not the operator
        assert key not in got, key
    webhook = got[("ValidatingWebhookConfiguration", "", "orca-controller")]
    assert webhook["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "orca-system/orca-controller"
    }


@pytest.mark.parametrize("install", ["chart", "kustomize"])
def test_with_cert_manager_the_operator_neither_registers_nor_may(install: str) -> None:
    """cert-manager's CA injector keeps the caBundle: the operator's flags make no
    ``Registrar`` (no ``--webhook-service``), and its ClusterRole has no right on webhook
    configurations at all (nor checkov's note about that right)."""
    from controller.operator.app import registrar_for

    got = template("certManager.enabled=true") if install == "chart" else kustomize("cert-manager")
    args = build_parser().parse_args(_container(got)["args"])
    assert args.webhook_port and args.tls_cert_dir and not args.webhook_service
    assert registrar_for(args, None, None) is None  # type: ignore[arg-type]
    role = got[("ClusterRole", "", "orca-controller")]
    assert all("admissionregistration.k8s.io" not in r.get("apiGroups", []) for r in role["rules"])
    assert "annotations" not in role["metadata"]
    # The policy stays: it refuses whatever right a later edit might grant.
    assert ("ValidatingAdmissionPolicy", "", "orca-controller-webhook-ca-bundle-only") in got


def test_the_release_namespace_reaches_every_name_the_operator_is_called_by() -> None:
    """Installed elsewhere than orca-system: the webhook's Service reference, the
    certificate's names and cert-manager's annotation follow the release's namespace."""
    command = [helm(), "template", "orca", str(CHART), "--namespace", "platform"]
    got = objects(run(*command, "--set", "certManager.enabled=true"))
    webhook = got[("ValidatingWebhookConfiguration", "", "orca-controller")]
    assert webhook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "platform"
    annotation = webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert annotation == "platform/orca-controller"
    policy = got[("ValidatingAdmissionPolicy", "", "orca-controller-webhook-ca-bundle-only")]
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        'request.userInfo.username == "system:serviceaccount:platform:orca-controller"'
    )
    certificate = got[("Certificate", "platform", "orca-controller")]
    assert certificate["spec"]["dnsNames"] == [
        "orca-webhook.platform.svc", "orca-webhook.platform.svc.cluster.local",
        "orca-controller.platform.svc", "orca-controller.platform.svc.cluster.local",
    ]  # fmt: skip


def test_who_may_reach_the_metrics_port_is_a_value() -> None:
    got = template(
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=observability",
        "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus",
    )
    policy = got[("NetworkPolicy", "orca-system", "orca-controller")]
    assert policy["spec"]["ingress"][0]["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"team": "observability"}},
            "podSelector": {"matchLabels": {"app": "prometheus"}},
        }
    ]


COMBINATIONS = [
    pytest.param((), id="defaults"),
    pytest.param(("webhook.enabled=false",), id="no-webhook"),
    pytest.param(("certManager.enabled=true",), id="cert-manager"),
    pytest.param(("certManager.enabled=true", "webhook.enabled=false"), id="cert-manager-only"),
    pytest.param(("leaderElection.enabled=false", "watchNamespaces={a,b}"), id="no-election"),
    pytest.param(("nodeLifecycle=taints",), id="lifecycle-taints"),
]


@pytest.mark.parametrize("values", COMBINATIONS)
def test_orca_run_accepts_the_flags_every_combination_renders(values: tuple[str, ...]) -> None:
    """The Deployment's args through ``orca run``'s own parser and its flag-combination check
    (the kubelet expands ``$(POD_NAMESPACE)``): a combination it would refuse at start (e.g.
    the webhook behind a Service with no shared certificate) fails here, not in a Pod."""
    args = [
        a.replace("$(POD_NAMESPACE)", "orca-system") for a in _container(template(*values))["args"]
    ]
    parsed = build_parser().parse_args(args)
    assert _webhook_problem(parsed) is None, args
    assert not parsed.metrics_insecure


def test_leader_election_values_change_the_flag_and_the_role_together() -> None:
    off = template("leaderElection.enabled=false")
    assert ("Role", "orca-system", "orca-controller-leader-election") not in off
    args = off[("Deployment", "orca-system", "orca-controller")]["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert "--no-leader-elect" in args
    renamed = template("leaderElection.leaseName=orca-b")
    role = renamed[("Role", "orca-system", "orca-controller-leader-election")]
    assert role["rules"][1]["resourceNames"] == ["orca-b"]
    deployment = renamed[("Deployment", "orca-system", "orca-controller")]
    assert "--lease-name=orca-b" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_node_lifecycle_value_changes_the_flag_and_the_kube_system_role_together() -> None:
    auto = template()
    role = auto[("Role", "kube-system", "orca-controller-node-lifecycle")]
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["kube-controller-manager"],
            "verbs": ["get"],
        }
    ]
    binding = auto[("RoleBinding", "kube-system", "orca-controller-node-lifecycle")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "orca-controller", "namespace": "orca-system"}
    ]
    assert not [a for a in _container(auto)["args"] if a.startswith("--node-lifecycle")]
    for mode in ("taints", "ready"):
        fixed = template(f"nodeLifecycle={mode}")
        assert ("Role", "kube-system", "orca-controller-node-lifecycle") not in fixed
        assert f"--node-lifecycle={mode}" in _container(fixed)["args"]
    command = [helm(), "template", "orca", str(CHART), "--set", "nodeLifecycle=sometimes"]
    refused = subprocess.run(command, capture_output=True, text=True, check=False)
    assert refused.returncode != 0
    assert "nodeLifecycle: sometimes is not one of auto, taints, ready" in refused.stderr


def test_monitoring_labels_for_kube_prometheus_stack() -> None:
    got = template(*MONITORING, "monitoring.serviceMonitor.labels.release=kps")
    monitor = got[("ServiceMonitor", "orca-system", "orca-controller")]
    assert monitor["metadata"]["labels"]["release"] == "kps"


@pytest.mark.parametrize("values", COMBINATIONS)
def test_helm_lint_is_clean(values: tuple[str, ...]) -> None:
    sets = [arg for value in values for arg in ("--set", value)]
    done = subprocess.run(
        [helm(), "lint", "--strict", str(CHART), *sets], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout
