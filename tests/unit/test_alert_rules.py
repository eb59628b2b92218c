"""The shipped alert rules: valid for promtool, each alert unit-tested (fires when it should,
silent when it should not), documented, and built only on metrics the operator exports."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.monitoring import (
    JOB,
    MONITORING,
    PROMTOOL_TESTS,
    alert_rules,
    binary,
    exported_names,
    metric_names,
    rule_groups,
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
    """tests/monitoring/alerts_test.yaml, against the rules with only their ``summary``
    annotation (promtool compares annotations exactly; the rest is checked below)."""
    groups = rule_groups()
    for group in groups["groups"]:
        for rule in group["rules"]:
            rule["annotations"] = {"summary": rule["annotations"]["summary"]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups))
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


def test_every_alert_says_what_to_check() -> None:
    for rule in alert_rules():
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook"}, rule["alert"]
        assert len(annotations["runbook"]) > 80, rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert f'job="{JOB}"' in rule["expr"], rule["alert"]


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
    on_disk = {p.name for p in MONITORING.iterdir()} - {"kustomization.yaml"}
    assert listed == on_disk
    kinds = {
        yaml.safe_load((MONITORING / r).read_text())["kind"] for r in kustomization["resources"]
    }
    assert kinds == {"ServiceMonitor", "PrometheusRule"}  # the metrics Service is the base's


def test_metric_names_are_found_in_promql() -> None:
    expr = (
        'sum by (job, instance) (increase(orca_a_total{job="x", result="error"}[10m])) > 0 '
        "unless on (job) histogram_quantile(0.9, rate(orca_b_bucket[$__rate_interval])) "
        'and absent(up{job="x"} == 1)'
    )
    assert metric_names(expr) == {"orca_a_total", "orca_b_bucket", "up"}
