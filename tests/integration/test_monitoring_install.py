"""The monitoring manifests as kustomize renders them (``kubectl kustomize``, the kustomize
built into the control plane's kubectl), for a default kube-prometheus-stack and for installs
that rename things.

kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules labelled
``release: <Helm release name>``: its values.yaml has empty
``prometheus.prometheusSpec.serviceMonitorSelector``/``ruleSelector`` with
``serviceMonitorSelectorNilUsesHelmValues``/``ruleSelectorNilUsesHelmValues: true``, and
``templates/prometheus/prometheus.yaml`` then writes ``matchLabels: {release: <release>}``
(prometheus-community/helm-charts, charts/kube-prometheus-stack). ``manifests/kube-prometheus-
stack`` sets that label (and the runbook base) with two kustomize replacements: the render
carries it on exactly those two objects and is otherwise the ``with-monitoring`` install; the
overlay in docs/monitoring.md changes both values.

A ``namePrefix`` renames the Service, so the ``job`` label the Prometheus Operator gives its
targets (the Service's name: ``generateServiceMonitorConfig`` in prometheus-operator's
pkg/prometheus/promcfg.go relabels ``__meta_kubernetes_service_name`` to ``job``, and the
namespace, service, pod and container likewise, before the endpoint's own relabelings). The
rules must still select those targets: checked matcher by matcher, and by promtool on the
rendered rules with series carrying exactly those target labels.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import KubectlRunner
from tests.monitoring import RUNBOOKS, binary, selectors
from tests.support.harness import REPO_ROOT

pytestmark = pytest.mark.controlplane

MANIFESTS = REPO_ROOT / "manifests"
KPS = MANIFESTS / "kube-prometheus-stack"
MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")
RUNBOOK_PATH = "/docs/runbooks/"


def render(kubectl: KubectlRunner, path: Path) -> list[dict[str, Any]]:
    out = kubectl("kustomize", str(path), check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def overlay(tmp_path: Path, kustomization: dict[str, Any] | str) -> Path:
    directory = tmp_path / "overlay"
    directory.mkdir(exist_ok=True)
    text = kustomization if isinstance(kustomization, str) else yaml.safe_dump(kustomization)
    (directory / "kustomization.yaml").write_text(text)
    return directory


def relative(directory: Path, target: Path) -> str:
    return os.path.relpath(target, directory / "overlay")


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def metrics_service(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The Service with the port named ``metrics`` (the webhook has a Service of its own)."""
    (found,) = [
        o
        for o in objects
        if o["kind"] == "Service" and any(p["name"] == "metrics" for p in o["spec"]["ports"])
    ]
    return found


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def without_release(obj: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(obj)
    stripped["metadata"].get("labels", {}).pop("release", None)
    return stripped


def runbook_urls(rule: dict[str, Any]) -> dict[str, str]:
    return {
        r["alert"]: r["annotations"]["runbook_url"]
        for group in rule["spec"]["groups"]
        for r in group["rules"]
    }


def test_default_and_with_monitoring_carry_no_release_label(kubectl: KubectlRunner) -> None:
    """The plain installs stay neutral: only the kube-prometheus-stack overlay adds it."""
    for path in (MANIFESTS / "default", MANIFESTS / "with-monitoring"):
        for obj in render(kubectl, path):
            assert "release" not in obj["metadata"].get("labels", {}), (path.name, key(obj))


def test_the_kube_prometheus_stack_overlay_labels_exactly_its_servicemonitor_and_rules(
    kubectl: KubectlRunner,
) -> None:
    plain = {key(o): o for o in render(kubectl, MANIFESTS / "with-monitoring")}
    labelled = {key(o): o for o in render(kubectl, KPS)}
    # One object more: the chart's Prometheus may read /metrics (the metrics-reader role
    # bound to its ServiceAccount, kube-prometheus-stack-prometheus in monitoring).
    binding = labelled.pop(("ClusterRoleBinding", "orca-controller-metrics-reader"))
    assert binding["roleRef"]["name"] == "orca-controller-metrics-reader"
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "kube-prometheus-stack-prometheus",
            "namespace": "monitoring",
        }
    ]
    assert set(labelled) == set(plain)
    for k, obj in labelled.items():
        labels = obj["metadata"].get("labels", {})
        if obj["kind"] in MONITORING_KINDS:
            assert labels["release"] == "kube-prometheus-stack", k
        else:
            assert "release" not in labels, k
        # Otherwise the same objects, runbook URLs included (the shipped base is the default).
        assert without_release(obj) == plain[k], k


def test_a_user_overlay_sets_the_release_and_the_runbook_base(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    """The overlay docs/monitoring.md shows, rendered as written (the path to orca adapted):
    both values land, nothing else changes, and each runbook URL still ends in the page's path
    in this repository."""
    snippet = readme_overlay()
    release = re.search(r"sourceValue: (\S+)\s+# your kube-prometheus-stack release", snippet)
    base = re.search(r"sourceValue: (https://\S+)", snippet)
    assert release and base, snippet
    text = snippet.replace("../orca-controller/", relative(tmp_path, REPO_ROOT) + "/")
    mine = {key(o): o for o in render(kubectl, overlay(tmp_path, text))}
    shipped = {key(o): o for o in render(kubectl, KPS)}
    assert set(mine) == set(shipped)
    for k in (("ServiceMonitor", "orca-controller"), ("PrometheusRule", "orca-controller")):
        assert mine[k]["metadata"]["labels"]["release"] == release[1] != "kube-prometheus-stack"
    rule = mine["PrometheusRule", "orca-controller"]
    urls = runbook_urls(rule)
    assert urls == {alert: f"{base[1]}{RUNBOOK_PATH}{alert}.md" for alert in urls}
    assert all((RUNBOOKS / f"{alert}.md").is_file() for alert in urls)
    for k, obj in mine.items():
        expected = copy.deepcopy(shipped[k])
        if obj["kind"] in MONITORING_KINDS:
            expected["metadata"]["labels"]["release"] = release[1]
        if obj["kind"] == "PrometheusRule":
            for group in expected["spec"]["groups"]:
                for r in group["rules"]:
                    r["annotations"]["runbook_url"] = urls[r["alert"]]
        assert obj == expected, k


def readme_overlay() -> str:
    """The example overlay for kube-prometheus-stack in docs/monitoring.md (the fenced YAML
    block with the replacements)."""
    text = (REPO_ROOT / "docs" / "monitoring.md").read_text()
    blocks: list[str] = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    found = [b for b in blocks if "replacements:" in b and "kind: Kustomization" in b]
    assert len(found) == 1, f"{len(found)} overlay examples with replacements in docs/monitoring.md"
    return found[0]


def target_labels(objects: list[dict[str, Any]]) -> dict[str, str]:
    """The labels a Prometheus Operator gives every target the rendered ServiceMonitor finds:
    namespace, service, job (the Service's name: no jobLabel here), endpoint (the port name),
    pod and container, then the endpoint's relabelings (fixed values only, as shipped)."""
    monitor, service = one(objects, "ServiceMonitor"), metrics_service(objects)
    deployment = one(objects, "Deployment")
    assert not monitor["spec"].get("jobLabel"), "job would come from a Service label"
    (endpoint,) = monitor["spec"]["endpoints"]
    labels = {
        "namespace": service["metadata"]["namespace"],
        "service": service["metadata"]["name"],
        "job": service["metadata"]["name"],
        "endpoint": endpoint["port"],
        "pod": f"{deployment['metadata']['name']}-5d8f7c9b4-x2x7q",
        "container": deployment["spec"]["template"]["spec"]["containers"][0]["name"],
        "instance": "10.0.0.7:9090",
    }
    for relabel in endpoint.get("relabelings", []):
        assert relabel.get("action", "replace") == "replace" and not relabel.get("sourceLabels")
        labels[relabel["targetLabel"]] = relabel["replacement"]
    return labels


#: docs/monitoring.md's replacement for an overlay that moves the install to another namespace:
#: the ServiceMonitor's serverName follows (the operator's certificate names
#: orca-controller.<its namespace>.svc).
SERVER_NAME_FOLLOWS_THE_NAMESPACE = {
    "source": {"kind": "Service", "name": "orca-controller", "fieldPath": "metadata.namespace"},
    "targets": [
        {
            "select": {"kind": "ServiceMonitor"},
            "fieldPaths": ["spec.endpoints.0.tlsConfig.serverName"],
            "options": {"delimiter": ".", "index": 1},
        }
    ],
}


def renamed(kubectl: KubectlRunner, tmp_path: Path) -> list[dict[str, Any]]:
    """The kube-prometheus-stack install with a namePrefix and its own namespace."""
    return render(
        kubectl,
        overlay(
            tmp_path,
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namePrefix": "acme-",
                "namespace": "acme-system",
                "resources": [relative(tmp_path, KPS)],
                "replacements": [SERVER_NAME_FOLLOWS_THE_NAMESPACE],
            },
        ),
    )


def test_a_name_prefix_keeps_the_servicemonitor_on_the_service_and_every_selector_matching(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    objects = renamed(kubectl, tmp_path)
    monitor, service = one(objects, "ServiceMonitor"), metrics_service(objects)
    rule = one(objects, "PrometheusRule")
    assert service["metadata"]["name"] == "acme-orca-controller"  # so the job is renamed
    # The ServiceMonitor finds the Service: same namespace (it looks only in its own unless
    # told otherwise), labels matched, port named.
    assert "namespaceSelector" not in monitor["spec"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == "acme-system"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    labels = target_labels(objects)
    assert labels["job"] == "acme-orca-controller"
    # What it scrapes with follows the rename: its token Secret (renamed, for the renamed
    # ServiceAccount), and the name it verifies the certificate for.
    endpoint = monitor["spec"]["endpoints"][0]
    secret = endpoint["authorization"]["credentials"]["name"]
    token = next(o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == secret)
    account = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    assert account == "acme-orca-controller-metrics-scraper"
    assert any(o["kind"] == "ServiceAccount" and o["metadata"]["name"] == account for o in objects)
    binding = next(
        o for o in objects
        if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == account
    )  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "acme-system"}
    ]
    assert binding["roleRef"]["name"] == "acme-orca-controller-metrics-reader"
    deployment = one(objects, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    server_name = endpoint["tlsConfig"]["serverName"]
    assert server_name == "orca-controller.acme-system.svc"
    assert f"--tls-san={server_name.replace('acme-system', '$(POD_NAMESPACE)')}" in args
    checked = 0
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            for name, matchers in selectors(r["expr"]):
                for label, (op, value) in matchers.items():
                    if label in labels:  # a target label: it must match the renamed target
                        assert matches(op, value, labels[label]), (r["alert"], name, label)
                        checked += 1
    assert checked >= len([r for g in rule["spec"]["groups"] for r in g["rules"]])


def matches(op: str, value: str, actual: str) -> bool:
    if op == "=":
        return actual == value
    if op == "!=":
        return actual != value
    full = re.fullmatch(value, actual) is not None
    return full if op == "=~" else not full


def test_promtool_on_the_renamed_rules_finds_the_renamed_targets(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    """The rendered (prefixed) rules against series labelled as the Prometheus Operator would
    label the renamed targets: a healthy operator raises nothing (OrcaOperatorDown would fire
    if the rules looked for the old job), and short Workloads still raise
    OrcaWorkloadsNotPlaced, named by their namespace."""
    objects = renamed(kubectl, tmp_path)
    labels = target_labels(objects)

    def series(metric: str, **extra: str) -> str:
        body = ", ".join(f'{k}="{v}"' for k, v in {**labels, **extra}.items())
        return f"{metric}{{{body}}}"

    groups = one(objects, "PrometheusRule")["spec"]
    for group in groups["groups"]:
        for r in group["rules"]:
            del r["annotations"]  # their texts are tests/monitoring/alerts_test.yaml's business
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups))
    # honorLabels: orca_workloads' own namespace label (the Workload's) wins over the target's.
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": series("up"), "values": "1x30"},
                    {"series": series("orca_leader"), "values": "1x30"},
                    {"series": series("orca_queue_depth"), "values": "0x30"},
                    {
                        "series": series("orca_workloads", namespace="shop", phase="Scheduled"),
                        "values": "4x30",
                    },
                    {
                        "series": series("orca_workloads", namespace="shop", phase="Unschedulable"),
                        "values": "2x30",
                    },
                ],
                "alert_rule_test": [
                    *(
                        {"eval_time": "20m", "alertname": alert, "exp_alerts": []}
                        for alert in ("OrcaOperatorDown", "OrcaTargetDown", "OrcaNoLeader")
                    ),
                    {
                        "eval_time": "20m",
                        "alertname": "OrcaWorkloadsNotPlaced",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "namespace": "shop",
                                    "job": "acme-orca-controller",
                                    "phase": "Unschedulable",
                                },
                            }
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    result = subprocess.run(
        [binary("promtool"), "test", "rules", "test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
