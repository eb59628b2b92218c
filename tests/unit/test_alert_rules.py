"""The shipped alert rules: valid for promtool, each alert unit-tested (fires when it should,
silent when it should not, with the labels and annotations it should carry), each with a
runbook in the repository, selecting what the ServiceMonitor labels rather than a job name,
and built only on metrics the operator exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.monitoring import (
    MONITORING,
    PROMTOOL_TESTS,
    RUNBOOKS,
    alert_rules,
    binary,
    exported_names,
    fixed_target_labels,
    metric_names,
    rule_groups,
    selectors,
)


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_promtool_checks_the_rule_groups(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups()))
    result = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_promtool_unit_tests_every_alert(tmp_path: Path) -> None:
    """tests/monitoring/alerts_test.yaml, against the shipped rule groups as they are (promtool
    compares every label and annotation of a firing alert exactly)."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups()))
    shutil.copy(PROMTOOL_TESTS, tmp_path / "alerts_test.yaml")
    result = _promtool("test", "rules", "alerts_test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tested
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")
    }
    silent = {
        case["alertname"]
        for test in tested
        for case in test["alert_rule_test"]
        if not case.get("exp_alerts")
    }
    names = {rule["alert"] for rule in alert_rules()}
    assert fired == names, "every alert needs a case where it fires"
    assert silent == names, "every alert needs a case where it stays silent"


RUNBOOK_URL = re.compile(r"^(https://[^\s]+)/docs/runbooks/([A-Za-z]+)\.md$")


def test_every_alert_links_its_runbook_in_this_repository() -> None:
    """``runbook_url`` (what Alertmanager templates read) is one base URL plus the runbook's
    path in this repository, so it resolves wherever the repository is served from; the page
    exists and says what the alert means, what to run first and how to fix it."""
    bases = set()
    for rule in alert_rules():
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        match = RUNBOOK_URL.match(annotations["runbook_url"])
        assert match and match[2] == rule["alert"], annotations["runbook_url"]
        bases.add(match[1])
        page = (RUNBOOKS / f"{rule['alert']}.md").read_text()
        assert page.startswith(f"# {rule['alert']}\n"), rule["alert"]
        sections = re.findall(r"^## (.+)$", page, re.MULTILINE)
        assert sections == ["Meaning", "First commands", "Fixes"], (rule["alert"], sections)
        assert "```sh\n" in page or "```promql\n" in page, f"{rule['alert']}: no command"
    assert len(bases) == 1, f"runbook_url with different bases: {bases}"
    listed = set(re.findall(r"\]\((\w+)\.md\)", (RUNBOOKS / "README.md").read_text()))
    pages = {p.stem for p in RUNBOOKS.glob("*.md")} - {"README"}
    assert listed == pages == {rule["alert"] for rule in alert_rules()}


# What names orca's resource unambiguously (Kubernetes has its own scheduling.k8s.io Workload).
BARE_RESOURCE = re.compile(
    r"kubectl (?:[a-z-]+ )*?(?:get|describe|delete|edit|patch) (?:wl|workloads?)(?![\w.])"
)


@pytest.mark.parametrize(
    "path",
    [*sorted(RUNBOOKS.glob("*.md")), MONITORING / "prometheusrule.yaml"],
    ids=lambda p: p.name,
)
def test_runbooks_and_alerts_name_orcas_workloads_unambiguously(path: Path) -> None:
    text = path.read_text()
    assert not BARE_RESOURCE.findall(text), BARE_RESOURCE.findall(text)


def test_the_not_placed_runbook_names_the_workloads_by_namespace_and_phase() -> None:
    """The alert is per namespace and phase (never per Workload: unbounded); the runbook's
    first command turns that into the names."""
    page = (RUNBOOKS / "OrcaWorkloadsNotPlaced.md").read_text()
    for phase in ("Unschedulable", "PartiallyScheduled"):
        assert f"kubectl get orcawl -n NAMESPACE --field-selector status.phase={phase}" in page
    (rule,) = [r for r in alert_rules() if r["alert"] == "OrcaWorkloadsNotPlaced"]
    assert "by (namespace, job, phase)" in " ".join(rule["expr"].split())


def test_every_selector_picks_the_servicemonitors_label_not_a_job_name() -> None:
    """The job is the Service's name (a kustomize namePrefix changes it); the rules select the
    label the ServiceMonitor sets to a fixed value on every target instead."""
    fixed = fixed_target_labels()
    assert fixed, "the ServiceMonitor sets no fixed label to select on"
    for rule in alert_rules():
        for name in metric_names(rule["expr"]):
            bare = re.findall(rf"\b{name}\b(?!\s*{{)", rule["expr"])
            assert not bare, f"{rule['alert']}: {name} without matchers"
        for name, matchers in selectors(rule["expr"]):
            assert "job" not in matchers, f"{rule['alert']}: {name} selects a job"
            for label, value in fixed.items():
                assert matchers.get(label) == ("=", value), f"{rule['alert']}: {name}"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_alerts_use_only_metrics_the_operator_exports(rule: dict[str, object]) -> None:
    used = metric_names(str(rule["expr"]))
    assert used, "no metric found in the expression"
    assert used <= exported_names() | {"up"}, used - exported_names()


def test_the_component_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Component"
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    listed = set(kustomization["resources"])
    listed |= {f for g in kustomization["configMapGenerator"] for f in g["files"]}
    listed |= set(kustomization["configurations"])
    on_disk = {p.name for p in MONITORING.iterdir()} - {"kustomization.yaml"}
    assert listed == on_disk
    kinds = {
        doc["kind"]
        for r in kustomization["resources"]
        for doc in yaml.safe_load_all((MONITORING / r).read_text())
    }
    # the metrics Service is the base's; the scraper's ServiceAccount, token and binding
    assert kinds == {
        "ServiceMonitor",
        "PrometheusRule",
        "ServiceAccount",
        "Secret",
        "ClusterRoleBinding",
    }


def test_metric_names_are_found_in_promql() -> None:
    expr = (
        'sum by (job, instance) (increase(orca_a_total{job="x", result="error"}[10m])) > 0 '
        "unless on (job) histogram_quantile(0.9, rate(orca_b_bucket[$__rate_interval])) "
        'and absent(up{job="x"} == 1)'
    )
    assert metric_names(expr) == {"orca_a_total", "orca_b_bucket", "up"}
