"""Failure domains on the living cluster (issue 48): ``orca run`` keeps the zones' what-if
current, a real Prometheus scrapes it (as in test_prometheus.py: the ServiceMonitor's
relabelings, an unknown job name, the shipped rules), and ``orca plan --from-cluster
--resilience`` and ``--consolidate`` answer the same cluster.

By hand: a1 (zone a), b1 and b2 (zone b), 4 cores each. first (3 cores) is placed first, on
a1 (every node empty: the lowest hostname); second (3 cores) then on b1 (4 free, a1 1). Losing
zone a displaces first, which b2 takes (4 free): nothing stranded. Losing zone b displaces
second; a1 has 1 core: second is stranded. Then filler (4 cores) fills b2, the only node with
room: now losing zone a strands first too. (Names of one letter are avoided: kubectl's YAML
reads ``y`` as a boolean.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from controller.scheduler.plugins.resources import REASON_INSUFFICIENT_CPU
from tests.integration.test_prometheus import (
    JOB,
    ORCA,
    TLS_SECRET,
    Prometheus,
    scraper_identity,
    secret_reader,
)
from tests.monitoring import alert_rules, scrape_config
from tests.support.factories import node_object, workload_obj
from tests.support.harness import REPO_ROOT, Cluster, OperatorProcess, placed

pytestmark = pytest.mark.controlplane

ZONE = "topology.kubernetes.io/zone"
ALERT = "OrcaZoneLossWouldStrandReplicas"
STRANDED = "orca_failure_domain_unplaceable_replicas"
DISPLACED = "orca_failure_domain_displaced_replicas"


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
    """The three nodes, first and second placed, the operator answering every 10 s, and
    Prometheus."""
    workdir = tmp_path_factory.mktemp("failure-domains")
    cluster.apply(
        node_object("a1", cpu="4", labels={ZONE: "a"}),
        node_object("b1", cpu="4", labels={ZONE: "b"}),
        node_object("b2", cpu="4", labels={ZONE: "b"}),
    )
    scraper_identity(cluster, namespace)  # Prometheus scrapes as the ServiceMonitor does
    operator = OperatorProcess(
        control_plane.kubeconfig_path,
        workdir / "operator.log",
        namespaces=[namespace],
        lease_namespace=namespace,
        metrics_insecure=False,
        extra=[
            f"--tls-secret={namespace}/{TLS_SECRET}",
            f"--tls-san=orca-controller.{namespace}.svc",
            "--resilience-interval=10s",
        ],
    )
    prometheus = None
    try:
        operator.wait_live()
        secret_file = secret_reader(cluster, namespace, workdir)
        targets = [f"127.0.0.1:{operator.metrics_port}"]
        prometheus = Prometheus(workdir, [scrape_config(JOB, targets, secret_file, namespace)])
        prometheus.wait_ready()
        for name in ("first", "second"):  # one after the other: first's place decides second's
            cluster.apply(workload_obj(name, namespace, kind="Job", resources={"cpu": "3"}))
            placed(cluster, namespace, name, 1)
        yield prometheus
    finally:
        if prometheus is not None:
            prometheus.stop()
        operator.stop()


def where(cluster: Cluster, namespace: str, name: str) -> str:
    node: str = placed(cluster, namespace, name, 1)["status"]["placements"][0]["node"]
    return node


def domains(prom: Prometheus, metric: str) -> dict[str, float]:
    return prom.by("domain", f'max by (domain) ({metric}{{{ORCA}, topology_key="{ZONE}"}})')


def versions(cluster: Cluster, namespace: str) -> dict[str, str]:
    return {
        w["metadata"]["name"]: w["metadata"]["resourceVersion"]
        for w in cluster.workloads(namespace)
    }


def orca(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env={**os.environ, "KUBECONFIG": str(plane.kubeconfig_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_zones_answer_follows_a_zone_filling_up_and_the_alert_holds(
    scraped: Prometheus, cluster: Cluster, namespace: str, control_plane: ControlPlane
) -> None:
    prom = scraped
    assert (where(cluster, namespace, "first"), where(cluster, namespace, "second")) == ("a1", "b1")
    prom.wait_for("the zones' answer", lambda: domains(prom, STRANDED) == {"a": 0.0, "b": 1.0}, 60)
    assert domains(prom, DISPLACED) == {"a": 1.0, "b": 1.0}
    # The alert's own expression, run by Prometheus: true for zone b only (it needs 15
    # minutes to fire: pending meanwhile).
    (rule,) = [r for r in alert_rules() if r["alert"] == ALERT]
    assert {s["metric"]["domain"] for s in prom.query(rule["expr"])} == {"b"}
    prom.wait_for(
        "the alert pending for zone b",
        lambda: (
            {
                (s["metric"]["domain"], s["metric"]["job"], s["metric"]["alertstate"])
                for s in prom.query(f'ALERTS{{alertname="{ALERT}"}}')
            }
            == {("b", JOB, "pending")}
        ),
    )
    # The CLI answers the same cluster the same way.
    out = orca(control_plane, "plan", "--from-cluster", "--resilience", ZONE, "-o", "json")
    assert out.returncode == 1, out.stderr
    answer = json.loads(out.stdout)
    mine = {
        e["domain"]: [u for u in e["unplaced"] if u["workload"].startswith(f"{namespace}/")]
        for e in answer["resilience"]
    }
    assert [(u["allocId"], u["from"]) for u in mine["b"]] == [(f"{namespace}/second-0", "b1")]
    assert mine["b"][0]["reason"] == f"0/1 nodes are available: 1 {REASON_INSUFFICIENT_CPU}."
    assert mine["a"] == []
    # b2 holds nothing: it can go; a1 and b1 cannot (first, then second, would find 1 core).
    # A dry run: nothing is written.
    before = versions(cluster, namespace)
    out = orca(control_plane, "plan", "--from-cluster", "--consolidate", "-o", "json")
    assert out.returncode == 0, out.stderr
    c: dict[str, Any] = json.loads(out.stdout)["consolidation"]
    assert c["removable"] == ["b2"] and c["moves"] == []
    full = f"0/1 nodes are available: 1 {REASON_INSUFFICIENT_CPU}."
    assert c["blocked"] == [
        {"node": "a1", "replica": f"{namespace}/first-0", "reason": full},
        {"node": "b1", "replica": f"{namespace}/second-0", "reason": full},
    ]
    assert versions(cluster, namespace) == before

    # filler (4 cores) fills b2, the only node with room: losing zone a now strands first.
    cluster.apply(workload_obj("filler", namespace, kind="Job", resources={"cpu": "4"}))
    assert where(cluster, namespace, "filler") == "b2"
    prom.wait_for(
        "zone a's loss stranding first", lambda: domains(prom, STRANDED) == {"a": 1.0, "b": 2.0}, 60
    )
    assert domains(prom, DISPLACED) == {"a": 1.0, "b": 2.0}
    assert {s["metric"]["domain"] for s in prom.query(rule["expr"])} == {"a", "b"}
    answers = prom.value("sum(orca_failure_domain_computation_cpu_seconds_count)")
    assert answers is not None and answers >= 2
