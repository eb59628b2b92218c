"""The Helm chart (charts/orca-controller) renders the objects the kustomize tree renders.

Both are rendered the way users render them (``helm template``, ``kubectl kustomize``, the
binaries hack/helm/build.sh and hack/testcp/build.sh build) and compared object by object,
whole: the only difference allowed is Helm's own metadata (the labels chart, managed-by,
instance and version; the CRD's ``helm.sh/resource-policy: keep``, which only Helm reads).
Every kustomize install has its values: manifests/default (the defaults), with-monitoring,
cert-manager and kube-prometheus-stack. When manifests/ changes (a new object, a flag, a
port), this fails until the chart follows. The flags every combination of values renders are
read by ``orca run``'s own parser. ``helm install`` on a real Node is in
tests/integration/test_real_node.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
import yaml

from controller.cli import build_parser
from controller.cli.run import _webhook_problem, resilience_flags
from controller.devcluster.binaries import find_bin_dir
from tests.packaging.dockerfile import REPO_ROOT

CHART = REPO_ROOT / "charts" / "orca-controller"
CHART_VALUES = REPO_ROOT / "hack" / "chart_values.py"
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)
HELM_KEEP = "helm.sh/resource-policy"
CRD = ("CustomResourceDefinition", "", "workloads.orca.cloudinit.dev")
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
        annotations = meta.get("annotations") or {}
        if annotations.pop(HELM_KEEP, None) is not None and not annotations:
            del meta["annotations"]
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
    return objects(run(*command, "--set", "namespace.create=true", *sets))


@pytest.mark.parametrize(
    ("directory", "values"),
    [
        pytest.param("default", (), id="default"),
        pytest.param("with-monitoring", MONITORING, id="with-monitoring"),
        pytest.param("cert-manager", ("certManager.enabled=true",), id="cert-manager"),
        pytest.param("dev-node", ("image.pullPolicy=IfNotPresent",), id="dev-node"),
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
        "files/workloads.orca.cloudinit.dev.yaml": "crds/workloads.orca.cloudinit.dev.yaml",
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
    """The operator's container (of the one Deployment, whatever its name)."""
    (deployment,) = [obj for (kind, _, _), obj in objs.items() if kind == "Deployment"]
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
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
    pytest.param(("fullnameOverride=orca-b", "nameOverride=orca-b"), id="renamed"),
    pytest.param(("metrics.perNode=false", "rbac.create=false"), id="lean"),
    pytest.param(MONITORING, id="monitoring"),
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
    refused = refusal("nodeLifecycle=sometimes")
    assert "at '/nodeLifecycle': value must be one of 'auto', 'taints', 'ready'" in refused


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


def generator() -> ModuleType:
    """hack/chart_values.py, which ``make chart`` runs (a script, not a package's module)."""
    spec = importlib.util.spec_from_file_location("chart_values", CHART_VALUES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def refusal(*values: str) -> str:
    """What ``helm template`` says when it refuses ``values`` (it must refuse them)."""
    sets = [arg for value in values for arg in ("--set", value)]
    command = [helm(), "template", "orca", str(CHART), "--namespace", "orca-system", *sets]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode != 0, f"{values} rendered"
    return done.stderr


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("replicas=3", "at '': additional properties 'replicas' not allowed"),
        ("replicaCount=three", "at '/replicaCount': got string, want integer"),
        ("image.tagg=1", "at '/image': additional properties 'tagg' not allowed"),
        ("webhook.failurePolicy=Sometimes", "at '/webhook/failurePolicy': value must be one of"),
        ("webhook.timeoutSeconds=60", "at '/webhook/timeoutSeconds': maximum: got 60, want 30"),
        ("monitoring.serviceMonitor.intervall=1m", "additional properties 'intervall' not allowed"),
        ("image.digest=latest", "at '/image/digest': 'latest' does not match pattern"),
        ("resilience.interval=1x", "at '/resilience/interval': '1x' does not match pattern"),
        ("resilience.interval=60", "at '/resilience/interval': maximum: got 60, want 0"),
        ("resilience.keyy=zone", "at '/resilience': additional properties 'keyy' not allowed"),
    ],
)
def test_the_schema_refuses_a_typo_or_a_wrong_type_naming_the_key(value: str, said: str) -> None:
    assert said in refusal(value)


def _blocks(node: dict[str, Any], path: str = "") -> list[str]:
    """Every object of the schema that lists its keys (the top level and each block)."""
    found = [path] if "properties" in node else []
    for key, child in node.get("properties", {}).items():
        found += _blocks(child, f"{path}.{key}" if path else key)
    return found


def test_every_block_refuses_a_key_it_does_not_know() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    blocks = _blocks(schema)
    assert len(blocks) > 10 and "" in blocks and "monitoring.serviceMonitor" in blocks
    for block in blocks:
        key = f"{block}.notAValue" if block else "notAValue"
        assert "additional properties 'notAValue' not allowed" in refusal(f"{key}=1"), block


def test_the_schema_and_readme_are_what_values_yaml_says() -> None:
    """values.schema.json and README.md are written from values.yaml's comments by ``make
    chart`` (hack/chart_values.py): a value added, renamed or described anew without it
    fails here, as docs/reference does."""
    chart_values = generator()
    text = (CHART / "values.yaml").read_text()
    assert json.loads((CHART / "values.schema.json").read_text()) == chart_values.schema(text), (
        "run `make chart`"
    )
    assert (CHART / "README.md").read_text() == chart_values.readme(text), "run `make chart`"
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load(text)

    def leaves(node: dict[str, Any], path: str = "") -> list[str]:
        """Every value that is not a block (a block's keys are all described)."""
        out: list[str] = []
        for key, child in node.get("properties", {}).items():
            here = f"{path}.{key}" if path else key
            inner = child.get("properties", {}).values()
            block = bool(inner) and all("description" in c for c in inner)
            out += leaves(child, here) if block else [here]
        return out

    schema = chart_values.schema(text)
    for name in leaves(schema):
        value: Any = values
        for part in name.split("."):
            value = value[part]
        assert f"| `{name}` |" in readme and f"`{json.dumps(value)}`" in readme, name


def test_an_undescribed_value_is_refused_by_the_generator() -> None:
    chart_values = generator()
    text = (CHART / "values.yaml").read_text()
    with pytest.raises(chart_values.ValuesError, match=r"^newThing: not described"):
        chart_values.schema(text + "\nnewThing: 1\n")
    nested = text.replace("  pullPolicy: Always\n", "  pullPolicy: Always\n  extra: 1\n")
    with pytest.raises(chart_values.ValuesError, match=r"^image.extra: not described"):
        chart_values.schema(nested)


def test_the_crd_is_a_template_kept_on_uninstall_and_both_are_values() -> None:
    """Rendered from templates/ (``helm upgrade`` updates it), the generated file as it is
    plus the keep policy under its metadata; ``crds.keep=false`` drops the policy,
    ``crds.enabled=false`` the CRD."""
    command = [helm(), "template", "orca", str(CHART), "--namespace", "orca-system"]
    raw = [d for d in yaml.safe_load_all(run(*command)) if d and d["kind"] == CRD[0]]
    generated = yaml.safe_load(
        (REPO_ROOT / "crds" / "workloads.orca.cloudinit.dev.yaml").read_text()
    )
    assert len(raw) == 1
    assert raw[0]["metadata"].pop("annotations") == {HELM_KEEP: "keep"}
    assert raw[0] == generated
    unkept = [d for d in yaml.safe_load_all(run(*command, "--set", "crds.keep=false")) if d]
    (crd,) = [d for d in unkept if d["kind"] == CRD[0]]
    assert crd == generated
    assert CRD not in template("crds.enabled=false")
    assert not (CHART / "crds").exists()  # Helm would install that once and never upgrade it


def test_pod_values_reach_the_pod() -> None:
    got = template(
        "imagePullSecrets[0].name=regcred",
        "priorityClassName=system-cluster-critical",
        "podLabels.team=platform",
        "podAnnotations.example\\.com/owner=platform",
        "nodeSelector.kubernetes\\.io/os=linux",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
    )
    pod = got[DEPLOYMENT]["spec"]["template"]
    assert pod["metadata"]["labels"] == {
        "app.kubernetes.io/name": "orca-controller",
        "app.kubernetes.io/part-of": "orca-controller",
        "team": "platform",
    }
    assert pod["metadata"]["annotations"] == {"example.com/owner": "platform"}
    spec = pod["spec"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    # the selector is unchanged: podLabels never move the Deployment off its Pods
    assert got[DEPLOYMENT]["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "orca-controller"}
    }


def test_affinity_replaced_replaces_and_the_spread_defaults_to_zones() -> None:
    default = template()[DEPLOYMENT]["spec"]["template"]["spec"]
    anti = default["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert default["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "orca-controller"}},
        }
    ]
    mine = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node-role", "operator": "In", "values": ["infra"]}]}]}}}  # fmt: skip
    command = [helm(), "template", "orca", str(CHART), "--namespace", "orca-system"]
    rendered = objects(
        run(
            *command,
            "--set-json",
            f"affinity={json.dumps(mine)}",
            "--set-json",
            "topologySpreadConstraints=[]",
        )
    )
    spec = rendered[DEPLOYMENT]["spec"]["template"]["spec"]
    assert spec["affinity"] == mine  # no anti-affinity merged in
    assert "topologySpreadConstraints" not in spec


def test_the_service_account_and_rbac_can_be_the_platforms() -> None:
    named = template("serviceAccount.name=orca", "serviceAccount.annotations.iam=role-a")
    account = named[("ServiceAccount", "orca-system", "orca")]
    assert account["metadata"]["annotations"] == {"iam": "role-a"}
    assert named[DEPLOYMENT]["spec"]["template"]["spec"]["serviceAccountName"] == "orca"
    binding = named[("ClusterRoleBinding", "", "orca-controller")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "orca", "namespace": "orca-system"}
    ]
    theirs = template("serviceAccount.create=false", "serviceAccount.name=platform-sa",
                      "rbac.create=false")  # fmt: skip
    kinds = {kind for kind, _, _ in theirs}
    assert "ServiceAccount" not in kinds
    assert not kinds & {"Role", "RoleBinding", "ClusterRoleBinding"}
    roles = {name for kind, _, name in theirs if kind == "ClusterRole"}
    assert roles == {"orca-controller-workloads-edit", "orca-controller-workloads-view"}  # tenants
    spec = theirs[DEPLOYMENT]["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "platform-sa"


def test_a_full_name_renames_every_object_and_the_flags_that_name_them() -> None:
    got = template("fullnameOverride=orca-b", "nameOverride=orca-b", "certManager.enabled=false")
    names = {name for _, _, name in got if name not in (CRD[2], "orca-system")}
    assert all(name.startswith("orca-b") for name in names), sorted(names)
    container = _container(got)
    assert "--webhook-service=$(POD_NAMESPACE)/orca-b-webhook" in container["args"]
    assert "--webhook-configuration=orca-b" in container["args"]
    assert "--tls-secret=$(POD_NAMESPACE)/orca-b-tls" in container["args"]
    assert "--tls-san=orca-b.$(POD_NAMESPACE).svc" in container["args"]
    role = got[("ClusterRole", "", "orca-b")]
    assert role["rules"][-1]["resourceNames"] == ["orca-b"]
    webhook = got[("ValidatingWebhookConfiguration", "", "orca-b")]
    assert webhook["webhooks"][0]["clientConfig"]["service"]["name"] == "orca-b-webhook"
    deployment = got[("Deployment", "orca-system", "orca-b")]
    assert deployment["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "orca-b"}
    args = [a.replace("$(POD_NAMESPACE)", "orca-system") for a in container["args"]]
    assert _webhook_problem(build_parser().parse_args(args)) is None


def test_the_webhooks_failure_policy_and_timeout_are_values() -> None:
    default = template()[WEBHOOK_OBJECTS[1]]["webhooks"][0]
    assert (default["failurePolicy"], default["timeoutSeconds"]) == ("Ignore", 5)
    strict = template("webhook.failurePolicy=Fail", "webhook.timeoutSeconds=10")
    hook = strict[WEBHOOK_OBJECTS[1]]["webhooks"][0]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 10)


def test_per_node_metrics_off_is_the_operators_flag() -> None:
    args = _container(template("metrics.perNode=false"))["args"]
    assert "--no-node-metrics" in args
    parsed = build_parser().parse_args([a.replace("$(POD_NAMESPACE)", "x") for a in args])
    assert parsed.node_metrics is False
    assert not [a for a in _container(template())["args"] if "node-metrics" in a]


def test_the_failure_domains_are_values_and_the_defaults_render_no_flag() -> None:
    """``resilience.key`` and ``.interval`` are ``orca run --resilience-key`` and
    ``--resilience-interval``; the defaults (the zone label, 60s) are the operator's own, so
    the default install passes neither (as the kustomize one)."""
    assert not [a for a in _container(template())["args"] if "resilience" in a]
    args = _container(template("resilience.key=kubernetes.io/hostname", "resilience.interval=0"))[
        "args"
    ]
    assert "--resilience-key=kubernetes.io/hostname" in args
    assert "--resilience-interval=0" in args
    parsed = build_parser().parse_args([a.replace("$(POD_NAMESPACE)", "x") for a in args])
    resilience_flags(parsed)  # what orca run checks before it starts
    assert parsed.resilience_key == "kubernetes.io/hostname"
    assert parsed.resilience_every is None  # off
    five = _container(template("resilience.interval=5m"))["args"]
    parsed = build_parser().parse_args([a.replace("$(POD_NAMESPACE)", "x") for a in five])
    resilience_flags(parsed)
    assert parsed.resilience_every == 300


def test_the_service_monitor_verifies_the_certificate_and_brings_its_token() -> None:
    got = template(*MONITORING)
    (endpoint,) = got[("ServiceMonitor", "orca-system", "orca-controller")]["spec"]["endpoints"]
    assert "bearerTokenFile" not in endpoint
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "orca-controller-metrics-scraper-token", "key": "token"},
    }
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "orca-controller-tls", "key": "ca.crt"}},
        "serverName": "orca-controller.orca-system.svc",
    }
    token = got[("Secret", "orca-system", "orca-controller-metrics-scraper-token")]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": "orca-controller-metrics-scraper"
    }
    binding = got[("ClusterRoleBinding", "", "orca-controller-metrics-scraper")]
    assert binding["roleRef"]["name"] == "orca-controller-metrics-reader"
    # the serverName is a name the operator's certificate carries
    san = endpoint["tlsConfig"]["serverName"].replace("orca-system", "$(POD_NAMESPACE)")
    assert f"--tls-san={san}" in _container(got)["args"]
    with_cm = template(*MONITORING, "certManager.enabled=true")
    (endpoint,) = with_cm[("ServiceMonitor", "orca-system", "orca-controller")]["spec"]["endpoints"]
    assert endpoint["tlsConfig"]["ca"]["secret"]["name"] == "orca-controller-cert-manager-tls"
    tuned = template(
        *MONITORING,
        "monitoring.serviceMonitor.interval=1m",
        "monitoring.serviceMonitor.scrapeTimeout=20s",
        "monitoring.serviceMonitor.relabelings[0].targetLabel=cluster",
        "monitoring.serviceMonitor.relabelings[0].replacement=eu-1",
        "monitoring.serviceMonitor.metricRelabelings[0].action=drop",
        "monitoring.serviceMonitor.metricRelabelings[0].regex=orca_node_.*",
        "monitoring.serviceMonitor.metricRelabelings[0].sourceLabels[0]=__name__",
        "monitoring.serviceMonitor.insecureSkipVerify=true",
    )
    (endpoint,) = tuned[("ServiceMonitor", "orca-system", "orca-controller")]["spec"]["endpoints"]
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("1m", "20s")
    assert endpoint["relabelings"][1:] == [{"targetLabel": "cluster", "replacement": "eu-1"}]
    assert endpoint["relabelings"][0]["targetLabel"] == "app_kubernetes_io_name"  # the rules'
    assert endpoint["metricRelabelings"] == [
        {"action": "drop", "regex": "orca_node_.*", "sourceLabels": ["__name__"]}
    ]
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


def test_load_image_says_how_to_run_what_it_loaded() -> None:
    """``orca dev-cluster load-image`` prints two ways to run the image it loaded without a
    registry: both, as printed, run exactly that image with ``IfNotPresent``."""
    import shlex

    from controller.cli.dev_cluster import how_to_run
    from controller.version import version

    image = f"orca-controller:{version()}"
    text = how_to_run([f"docker.io/library/{image}"], REPO_ROOT / "kubeconfig")
    lines = [line.strip() for line in text.splitlines()]
    assert f"loaded {image} onto the Node" in text
    (apply,) = [line for line in lines if line.startswith("kubectl apply -k")]
    directory = apply.split()[-1].removeprefix("manifests/")
    container = _container(kustomize(directory))
    assert (container["image"], container["imagePullPolicy"]) == (image, "IfNotPresent")
    (install,) = [line for line in lines if line.startswith("helm install")]
    words = shlex.split(install)
    sets = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
    container = _container(template(*sets))
    assert (container["image"], container["imagePullPolicy"]) == (image, "IfNotPresent")
    other = how_to_run(["registry.example/orca:9"], REPO_ROOT / "kubeconfig")
    assert "kustomize edit set image orca-controller=registry.example/orca:9" in other
    assert "--set image.repository=registry.example/orca --set image.tag=9" in other
