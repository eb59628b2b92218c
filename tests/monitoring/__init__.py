"""What the monitoring tests share: the shipped alert rules and dashboard, their PromQL, the
metric names the operator's code declares, and the promtool/prometheus binaries.

The rules and the dashboard are read from ``manifests/monitoring/`` (what users install), never
from a copy, so the tests check the shipped files.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import controller.operator.metrics  # noqa: F401  (declares the metrics in the registry)

REPO_ROOT = Path(__file__).resolve().parents[2]
MONITORING = REPO_ROOT / "manifests" / "monitoring"
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
PROMTOOL_TESTS = Path(__file__).resolve().parent / "alerts_test.yaml"
JOB = "orca-controller"  # the Service's name, so Prometheus' job label (service.yaml)

INSTALL_HINT = (
    "install Prometheus: `apt-get install -y prometheus` (Debian; .ci/run does it) or put "
    "`{0}` on PATH"
)


def binary(name: str) -> str:
    """``prometheus`` or ``promtool`` from PATH; a missing one FAILS the test (a skipped
    monitoring test would look like a passing one)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: " + INSTALL_HINT.format(name), pytrace=False)
    return path


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's ``spec``: exactly a Prometheus rules file (``groups: [...]``)."""
    spec: dict[str, Any] = yaml.safe_load(PROMETHEUS_RULE.read_text())["spec"]
    return spec


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups()["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return board


def dashboard_expressions() -> list[str]:
    """Every panel target's PromQL in the dashboard."""
    return [
        target["expr"] for panel in dashboard()["panels"] for target in panel.get("targets", [])
    ]


def runnable(expr: str, job: str = JOB, rate_interval: str = "10s") -> str:
    """A dashboard expression with Grafana's variables filled in, as Grafana would send it."""
    return expr.replace("$__rate_interval", rate_interval).replace("$job", job)


def exported_names() -> set[str]:
    """Every sample name the operator's registry can expose (from the declared metric types,
    so a labelled metric that has not moved yet counts too)."""
    suffixes = {
        "counter": ("_total",),
        "gauge": ("",),
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("", "_sum", "_count"),
        "info": ("_info",),
    }
    names: set[str] = set()
    for family in REGISTRY.collect():
        if family.name.startswith("orca_"):
            names |= {family.name + suffix for suffix in suffixes[family.type]}
    return names


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "le"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (label names, functions, keywords and
    grouping clauses stripped)."""
    bare = _STRINGS.sub('""', expr)
    bare = _MATCHERS.sub(" ", bare)
    bare = _RANGES.sub(" ", bare)
    bare = _GROUPING.sub(" ", bare)
    return {
        name
        for name in _IDENT.findall(bare)
        if name.lower() not in _KEYWORDS and not name.startswith("$")
    }
