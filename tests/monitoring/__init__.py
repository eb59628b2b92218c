"""What the monitoring tests share: the shipped alert rules and dashboard, their PromQL, the
metric names the operator's code declares, and the promtool/prometheus binaries.

The rules and the dashboard are read from ``manifests/monitoring/`` (what users install), never
from a copy, so the tests check the shipped files.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from controller.operator.telemetry import metrics  # declares the metrics in the registry

REPO_ROOT = Path(__file__).resolve().parents[2]
MONITORING = REPO_ROOT / "manifests" / "monitoring"
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
SERVICE_MONITOR = MONITORING / "servicemonitor.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RUNBOOKS = REPO_ROOT / "docs" / "runbooks"
PROMTOOL_TESTS = Path(__file__).resolve().parent / "alerts_test.yaml"
JOB = "orca-controller"  # the shipped Service's name, so the job label a ServiceMonitor gives

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


def service_monitor_endpoint() -> dict[str, Any]:
    """The ServiceMonitor's one endpoint (port, path, honorLabels, relabelings)."""
    (endpoint,) = yaml.safe_load(SERVICE_MONITOR.read_text())["spec"]["endpoints"]
    result: dict[str, Any] = endpoint
    return result


def fixed_target_labels() -> dict[str, str]:
    """The labels the ServiceMonitor's relabelings set to a fixed value on every target (a
    ``replace`` without source labels), whatever the job, namespace or Service is called."""
    labels = {}
    for rule in service_monitor_endpoint().get("relabelings", []):
        if rule.get("action", "replace") == "replace" and not rule.get("sourceLabels"):
            labels[rule["targetLabel"]] = rule["replacement"]
    return labels


def scrape_config(
    job: str,
    targets: list[str],
    secret_file: Callable[[str, str], Path] | None = None,
    namespace: str = "orca-system",
) -> dict[str, Any]:
    """A plain Prometheus scrape config doing what the ServiceMonitor's endpoint asks of the
    Prometheus Operator: path, honor_labels, relabel_configs (the same fields in snake_case),
    the scheme, and, as the operator writes them into Prometheus' configuration, the bearer
    token of ``authorization.credentials`` and the CA of ``tlsConfig.ca`` (Secret keys, which
    ``secret_file(name, key)`` reads into a file, as the operator mounts them) with the
    ``serverName`` to verify, moved into ``namespace`` as docs/monitoring.md's replacement
    moves it. For a Prometheus without the operator, as the integration test runs one."""
    endpoint = service_monitor_endpoint()
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    relabel = [
        {keys.get(key, key): value for key, value in rule.items()}
        for rule in endpoint.get("relabelings", [])
    ]
    config: dict[str, Any] = {
        "job_name": job,
        "metrics_path": endpoint["path"],
        "scheme": endpoint.get("scheme", "http"),
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "relabel_configs": relabel,
        "static_configs": [{"targets": targets}],
    }
    assert "bearerTokenFile" not in endpoint, "deprecated by the Prometheus Operator"

    def read(selector: dict[str, Any]) -> str:
        assert secret_file is not None, "the endpoint reads Secrets: give secret_file"
        return str(secret_file(selector["name"], selector["key"]))

    tls = endpoint.get("tlsConfig") or {}
    if tls:
        tls_config: dict[str, Any] = {"insecure_skip_verify": bool(tls.get("insecureSkipVerify"))}
        if "ca" in tls:
            tls_config["ca_file"] = read(tls["ca"]["secret"])
        if "serverName" in tls:
            name, _, rest = tls["serverName"].split(".", 2)
            tls_config["server_name"] = f"{name}.{namespace}.{rest}"
        config["tls_config"] = tls_config
    authorization = endpoint.get("authorization")
    if authorization:
        config["authorization"] = {
            "type": authorization.get("type", "Bearer"),
            "credentials_file": read(authorization["credentials"]),
        }
    return config


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
    # The per-Node families are served only once a refresh published Nodes (and never with
    # --no-node-metrics): their collector describes them all the same.
    for family in [*REGISTRY.collect(), *metrics.PER_NODE.describe()]:
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


_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def selectors(expr: str) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """Every ``metric{matchers}`` of a PromQL expression: the metric name and its matchers as
    ``{label: (operator, value)}``."""
    return [
        (name, {label: (op, value) for label, op, value in _MATCHER.findall(body)})
        for name, body in _SELECTOR.findall(expr)
    ]
