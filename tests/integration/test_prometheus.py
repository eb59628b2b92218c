"""The operator's metrics, alert rules and dashboard against a real Prometheus (issue 8).

``orca run`` runs on the real control plane; a real ``prometheus`` (Debian's package: .ci/run
installs it) is started here on a loopback port, scraping the operator every second the way the
shipped ServiceMonitor asks (its relabelings and honorLabels, under a job name the rules do not
know, as a kustomize namePrefix would make it; over TLS verified with the CA the operator
publishes in its Secret, for the Service's DNS name; with the token of the shipped scraper
ServiceAccount, from its token Secret) and loading the shipped alert rules. Workloads
are applied (some cannot be placed) and every figure is read back through Prometheus' HTTP
API, as a dashboard would. Then every PromQL expression in the dashboard and the rules runs
against that Prometheus and must not fail.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from tests.monitoring import (
    MONITORING,
    alert_rules,
    binary,
    dashboard_expressions,
    exported_names,
    fixed_target_labels,
    rule_groups,
    runnable,
    scrape_config,
)
from tests.support.factories import node_object, workload_obj
from tests.support.harness import (
    REPO_ROOT,
    Cluster,
    OperatorProcess,
    free_port,
    observed,
    phase,
    wait_serving,
)

pytestmark = pytest.mark.controlplane

Vector = list[dict[str, Any]]

# Not the shipped Service's name: the rules must find the operator without knowing its job.
JOB = "acme-orca-controller"
# What every scraped series carries (the ServiceMonitor's relabeling), as a PromQL matcher.
ORCA = ", ".join(f'{k}="{v}"' for k, v in fixed_target_labels().items())


class Prometheus:
    """``prometheus`` on 127.0.0.1, scraping ``targets`` every second, with the shipped rules."""

    def __init__(self, workdir: Path, scrape_configs: list[dict[str, Any]]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rule_groups()))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yaml"],
            "scrape_configs": scrape_configs,
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = workdir / "prometheus.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                binary("prometheus"),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_serving(self.process, f"{self.url}/-/ready", "prometheus", self.log, timeout)

    def api(self, path: str, **params: str) -> dict[str, Any]:
        """One HTTP API call; returns the JSON answer even for 4xx (it carries the error)."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                answer: dict[str, Any] = json.load(response)
        except urllib.error.HTTPError as exc:
            answer = json.load(exc)
        return answer

    def query(self, expr: str) -> Vector:
        answer = self.api("query", query=expr)
        assert answer["status"] == "success", f"{expr}: {answer}"
        result: Vector = answer["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single value of an expression, or None while it has no series."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr}: more than one series: {result}"
        return float(result[0]["value"][1]) if result else None

    def by(self, label: str, expr: str) -> dict[str, float]:
        return {s["metric"].get(label, ""): float(s["value"][1]) for s in self.query(expr)}

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.5)
        raise AssertionError(f"Prometheus never saw {what} in {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


#: The operator's certificate, kept in this Secret as the Deployment's flags keep it.
TLS_SECRET = "orca-controller-tls"
#: A job scraping with the right token and CA but another name to verify: it must fail.
WRONG_NAME_JOB = "orca-wrong-server-name"


def scraper_identity(cluster: Cluster, namespace: str) -> None:
    """The shipped scraper (manifests/monitoring/metrics-scraper.yaml, as kustomize renders
    the with-monitoring install): its ServiceAccount and token Secret in ``namespace``, bound
    to the metrics-reader ClusterRole; the token controller fills the Secret in."""
    rendered = cluster.run("kustomize", str(REPO_ROOT / "manifests" / "with-monitoring"))
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    reader = next(d for d in docs if d["metadata"]["name"] == "orca-controller-metrics-reader")
    scraper = [d for d in docs if "metrics-scraper" in d["metadata"]["name"]]
    assert sorted(d["kind"] for d in scraper) == ["ClusterRoleBinding", "Secret", "ServiceAccount"]
    for doc in scraper:
        if doc["kind"] == "ClusterRoleBinding":
            doc["metadata"]["name"] += f"-{namespace}"
            for subject in doc["subjects"]:
                subject["namespace"] = namespace
        else:
            doc["metadata"]["namespace"] = namespace
    cluster.apply(reader, *scraper)


def secret_reader(cluster: Cluster, namespace: str, workdir: Path) -> Callable[[str, str], Path]:
    """``secret_file(name, key)`` for ``scrape_config``: the key of a Secret in ``namespace``,
    in a file (as the Prometheus Operator hands Prometheus a Secret's key), waiting until the
    key is there (the token controller, the operator's first replica write them)."""

    def secret_file(name: str, key: str) -> Path:
        deadline = time.monotonic() + 60
        while True:
            try:
                secret = json.loads(
                    cluster.run("get", "secret", name, "-n", namespace, "-o", "json")
                )
                value = (secret.get("data") or {}).get(key)
            except Exception:
                value = None
            if value:
                break
            assert time.monotonic() < deadline, f"Secret {namespace}/{name} has no {key}"
            time.sleep(0.5)
        path = workdir / f"{name}.{key}"
        path.write_bytes(base64.b64decode(value))
        return path

    return secret_file


def _in_phase(want: str) -> Callable[[dict[str, Any]], bool]:
    return lambda w: observed(w) and phase(w) == want


@pytest.fixture(scope="module")
def cluster(kubectl: KubectlRunner) -> Iterator[Cluster]:
    kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True)
    c = Cluster(kubectl)
    c.delete_all_nodes()
    yield c
    c.delete_all_nodes()


@pytest.fixture(scope="module")
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.run("create", "namespace", name)
    yield name
    cluster.run("delete", "workloads", "--all", "-n", name, "--wait=false")


@pytest.fixture(scope="module")
def scraped(
    cluster: Cluster,
    namespace: str,
    control_plane: ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Prometheus]:
    """Two Nodes (4 cpu each), the operator (its /metrics over HTTPS, as shipped), Prometheus
    scraping it as the ServiceMonitor says (HTTPS, a ServiceAccount's bearer token, bound to
    the metrics-reader ClusterRole), and four Workloads:
    ``web`` (Service 2 x 1 cpu) Scheduled, ``wide`` (Service 3 x 2 cpu) PartiallyScheduled 2/3,
    ``big`` (Job, 16 cpu) and ``wasm`` (Job, a runtime no Node offers) Unschedulable. Applied
    one after the other, so the placements do not depend on the order of decisions."""
    workdir = tmp_path_factory.mktemp("prometheus")
    cluster.apply(*(node_object(n, cpu="4", memory="8Gi") for n in ("a", "b")))
    scraper_identity(cluster, namespace)
    # Without the failure domains' what-if: both Nodes lack a zone label, so the loss of
    # that one domain would strand every replica, and whether OrcaZoneLossWouldStrandReplicas
    # is pending yet would depend on the interval (test_failure_domains.py tests it).
    operator = OperatorProcess(
        control_plane.kubeconfig_path,
        workdir / "operator.log",
        namespaces=[namespace],
        lease_namespace=namespace,
        metrics_insecure=False,
        # the Deployment's: the certificate in the Secret, naming the metrics Service
        extra=[
            f"--tls-secret={namespace}/{TLS_SECRET}",
            f"--tls-san=orca-controller.{namespace}.svc",
            "--resilience-interval=0",
        ],
    )
    prometheus = None
    try:
        operator.wait_live()
        targets = [f"127.0.0.1:{operator.metrics_port}"]
        secret_file = secret_reader(cluster, namespace, workdir)
        shipped = scrape_config(JOB, targets, secret_file, namespace)
        wrong = {
            **shipped,
            "job_name": WRONG_NAME_JOB,
            "relabel_configs": [],  # not an orca target for the rules
            "tls_config": {**shipped["tls_config"], "server_name": "elsewhere.example"},
        }
        prometheus = Prometheus(workdir, [shipped, wrong])
        prometheus.wait_ready()
        workloads: list[tuple[str, dict[str, Any], str]] = [  # applied in this order
            ("web", {"kind": "Service", "count": 2, "resources": {"cpu": "1"}}, "Scheduled"),
            (
                "wide",
                {"kind": "Service", "count": 3, "resources": {"cpu": "2"}},
                "PartiallyScheduled",
            ),
            ("big", {"kind": "Job", "resources": {"cpu": "16"}}, "Unschedulable"),
            ("wasm", {"kind": "Job", "runtime": {"oneOf": ["wasm"]}}, "Unschedulable"),
        ]
        for name, spec, expected in workloads:
            cluster.apply(workload_obj(name, namespace, **spec))
            cluster.wait_for(namespace, name, _in_phase(expected), what=expected)
        yield prometheus
    finally:
        if prometheus is not None:
            prometheus.stop()
        operator.stop()


def test_prometheus_scrapes_over_verified_tls_with_the_scrapers_token(
    scraped: Prometheus, namespace: str
) -> None:
    """The shipped ServiceMonitor's way in: HTTPS, the certificate verified against the CA in
    the operator's Secret for orca-controller.<namespace>.svc (no insecureSkipVerify), the
    scraper ServiceAccount's token. The same with another server name fails on the
    certificate, so the verification is real."""
    prom = scraped
    prom.wait_for(
        "both targets scraped",
        lambda: (
            len(prom.api("targets")["data"]["activeTargets"]) == 2
            and all(t["health"] != "unknown" for t in prom.api("targets")["data"]["activeTargets"])
        ),
    )
    targets = {t["scrapePool"]: t for t in prom.api("targets")["data"]["activeTargets"]}
    ours = targets[JOB]
    assert ours["health"] == "up", ours["lastError"]
    assert ours["scrapeUrl"].startswith("https://")
    config = yaml.safe_load(prom.api("status/config")["data"]["yaml"])
    (shipped,) = [c for c in config["scrape_configs"] if c["job_name"] == JOB]
    assert shipped["tls_config"]["insecure_skip_verify"] is False
    assert shipped["tls_config"]["server_name"] == f"orca-controller.{namespace}.svc"
    assert shipped["tls_config"]["ca_file"].endswith(f"{TLS_SECRET}.ca.crt")
    assert shipped["authorization"]["credentials_file"].endswith("metrics-scraper-token.token")
    wrong = targets[WRONG_NAME_JOB]
    assert wrong["health"] == "down"
    assert "x509: certificate is valid for" in wrong["lastError"], wrong["lastError"]
    assert "elsewhere.example" in wrong["lastError"]


def test_prometheus_sees_what_the_operator_did(scraped: Prometheus, namespace: str) -> None:
    prom = scraped
    prom.wait_for(
        "the final phases",
        lambda: prom.by("phase", f"orca_workloads{{{ORCA}}}").get("Unschedulable") == 2.0,
    )
    assert prom.value(f'up{{{ORCA}, job="{JOB}"}}') == 1.0
    phases = prom.by("phase", f'orca_workloads{{{ORCA}, namespace="{namespace}"}}')
    assert phases == {
        "Pending": 0.0,
        "Scheduled": 1.0,
        "PartiallyScheduled": 1.0,
        "Unschedulable": 2.0,
        "Invalid": 0.0,
    }
    # Attempts by result. A Workload may be decided again with nothing new to say (e.g. when
    # the echo of its own status write races the write's answer): those count as attempts and
    # as unchanged. What changed a status is exactly one decision per Workload.
    attempts = prom.by("result", "sum by (result) (orca_schedule_attempts_total)")
    unchanged = prom.by("result", "sum by (result) (orca_schedule_unchanged_total)")
    changed = {r: attempts[r] - unchanged.get(r, 0.0) for r in attempts}
    assert changed == {
        "scheduled": 1.0,
        "partial": 1.0,
        "unschedulable": 2.0,
        "invalid": 0.0,
        "error": 0.0,
    }
    by_kind = prom.by(
        "kind",
        "sum by (kind) (orca_schedule_attempts_total)"
        " - sum by (kind) (orca_schedule_unchanged_total)",
    )
    assert (by_kind["Service"], by_kind["Job"], by_kind["DaemonSet"]) == (2.0, 2.0, 0.0)
    # Pending, as kube-scheduler's pending_pods: three parked, none waiting for the loop.
    pending = prom.by("queue", "orca_pending_workloads")
    assert pending == {"active": 0.0, "backoff": 0.0, "unschedulable": 3.0}
    # Per node: web 1 cpu + wide 2 cpu on each of a and b.
    assert prom.by("node", "orca_node_free_cpu_cores") == {"a": 1.0, "b": 1.0}
    assert prom.by("node", "orca_node_allocatable_cpu_cores") == {"a": 4.0, "b": 4.0}
    assert prom.by("node", "orca_node_placements") == {"a": 2.0, "b": 2.0}
    assert prom.by("plugin", "orca_unschedulable_workloads") == {
        "ResourcesFit": 2.0,  # wide and big: Insufficient cpu
        "Runtime": 1.0,  # wasm
    }
    assert prom.value('orca_status_writes_total{outcome="written"}') == 4.0
    assert prom.value("orca_e2e_scheduling_duration_seconds_count") == 4.0
    decisions = prom.value("sum(orca_schedule_attempts_total)")
    assert prom.value("orca_scheduling_algorithm_duration_seconds_count") == decisions
    # The status writes are PUTs, as the Lease renewals are.
    puts = 'sum by (resource) (orca_api_requests_total{verb="PUT",resource!="leases"})'
    assert prom.by("resource", puts) == {"workloads/status": 4.0}
    assert prom.value("orca_leader") == 1.0
    # Each informer's start-up LIST (resync: 300 s); a fresh CRD may first answer 429,
    # counted as failed.
    listed = prom.by("resource", 'orca_relists_total{outcome="listed"}')
    assert listed == {"nodes": 1.0, "priorityclasses": 1.0, "workloads": 1.0}
    relists = prom.by("outcome", "sum by (outcome) (orca_relists_total)")
    assert set(relists) == {"listed", "failed"}
    assert prom.query("orca_build_info")[0]["metric"]["version"]


def test_alert_rules_load_and_evaluate_on_real_data(scraped: Prometheus, namespace: str) -> None:
    """Under a job name they do not know, the rules see the operator: OrcaWorkloadsNotPlaced is
    pending for the test's namespace (its own label, kept by honor_labels) and nothing else
    is raised (OrcaOperatorDown would be, were they looking for job="orca-controller")."""
    rules = scraped.api("rules")["data"]["groups"]
    loaded = {r["name"]: r for g in rules for r in g["rules"]}
    assert set(loaded) == {rule["alert"] for rule in alert_rules()}
    assert all(r["health"] == "ok" for r in loaded.values()), loaded
    # Two phases are short of replicas: the alert is pending (it needs 15 minutes to fire).
    scraped.wait_for(
        "OrcaWorkloadsNotPlaced pending",
        lambda: len(scraped.query('ALERTS{alertname="OrcaWorkloadsNotPlaced"}')) == 2,
    )
    states = {
        (s["metric"]["namespace"], s["metric"]["job"], s["metric"]["phase"]): s["metric"][
            "alertstate"
        ]
        for s in scraped.query('ALERTS{alertname="OrcaWorkloadsNotPlaced"}')
    }
    assert states == {
        (namespace, JOB, "Unschedulable"): "pending",
        (namespace, JOB, "PartiallyScheduled"): "pending",
    }
    others = scraped.query('ALERTS{alertname!="OrcaWorkloadsNotPlaced"}')
    assert others == [], "a healthy operator raises no other alert"


@pytest.mark.parametrize(
    "expr",
    [runnable(e, job=JOB) for e in dashboard_expressions()] + [r["expr"] for r in alert_rules()],
)
def test_every_shipped_expression_runs_on_real_prometheus(scraped: Prometheus, expr: str) -> None:
    answer = scraped.api("query", query=expr)
    assert answer["status"] == "success", answer


def test_every_orca_metric_name_is_exported_and_scraped(scraped: Prometheus) -> None:
    """The names the tests check expressions against are the ones the running operator
    exposes (labelled series that have not moved yet exist only once they do)."""
    scraped_names = set(scraped.api("label/__name__/values")["data"])
    orca = {n for n in scraped_names if n.startswith("orca_")}
    assert orca <= exported_names(), orca - exported_names()
    moved_by_now = {
        "orca_schedule_attempts_total",
        "orca_schedule_unchanged_total",
        "orca_pending_workloads",
        "orca_node_free_cpu_cores",
        "orca_node_free_memory_bytes",
        "orca_node_allocatable_memory_bytes",
        "orca_unschedulable_workloads",
        "orca_cel_cost_limit_hits_total",
        "orca_e2e_scheduling_duration_seconds_bucket",
        "orca_api_requests_total",
        "orca_build_info",
    }
    assert moved_by_now <= orca


def test_the_monitoring_component_renders_with_kustomize(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    """``kubectl kustomize`` on an overlay that uses the component: its objects come out (the
    metrics Service is the base's; the scraper's ServiceAccount, token Secret and binding are
    its own), the dashboard ConfigMap carries the JSON and Grafana's sidecar label."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    relative = os.path.relpath(MONITORING, overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "components": [relative],
            }
        )
    )
    out = kubectl("kustomize", str(overlay), check=True).stdout
    objects = {o["kind"]: o for o in yaml.safe_load_all(out)}
    assert set(objects) == {
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
        "ServiceAccount",
        "Secret",
        "ClusterRoleBinding",
    }
    config_map = objects["ConfigMap"]
    assert config_map["metadata"]["labels"] == {"grafana_dashboard": "1"}
    dashboard = (MONITORING / "grafana-dashboard.json").read_text()
    assert json.loads(config_map["data"]["grafana-dashboard.json"]) == json.loads(dashboard)
