"""The Argo CD health check ships twice: as ``health.lua`` in Argo CD's resource_customizations
layout, and inside the ``argocd-cm`` entry users merge. They must be the same script (what the
GitOps health tests run is the file).

Its test inputs (``testdata/``, for Argo CD's ``health_test.yaml``) are Workloads as orca
writes them today: a test rebuilds them from the status builder and fails when they drift.
Rewrite them with ``.venv/bin/python -m tests.unit.test_argocd``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.api.models import WorkloadStatus, status_body
from controller.scheduler.ledger import Booking
from controller.scheduler.preemption import Victim, preempted_status
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import status_from_decision
from tests.support.factories import NOW, ledger_for, node, workload

ARGOCD = Path(__file__).resolve().parents[2] / "manifests" / "argocd"
CHECK = ARGOCD / "resource_customizations" / "orca.cloudinit.dev" / "Workload"
SCRIPT = CHECK / "health.lua"
# Argo CD's key for a custom health check: resource.customizations.health.<group>_<kind>.
KEY = "resource.customizations.health.orca.cloudinit.dev_Workload"
T = "2026-01-01T00:00:00Z"


def test_the_argocd_cm_entry_is_the_shipped_script() -> None:
    config = yaml.safe_load((ARGOCD / "argocd-cm.yaml").read_text())
    assert (config["kind"], config["metadata"]["name"]) == ("ConfigMap", "argocd-cm")
    assert config["data"][KEY] == SCRIPT.read_text(), (
        "manifests/argocd/argocd-cm.yaml drifted from health.lua: copy the script into it"
    )


def _object(
    name: str, spec: dict[str, Any], status: WorkloadStatus | dict[str, Any], generation: int = 1
) -> dict[str, Any]:
    if isinstance(status, WorkloadStatus):
        status = status_body(status)
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "shop", "generation": generation},
        "spec": spec,
        "status": status,
    }


def _decided(name: str, spec: dict[str, Any]) -> WorkloadStatus:
    ledger = ledger_for(node("node-a", cpu="2"), node("node-b", cpu="2"))
    decision = Scheduler().schedule(workload(name=name, **spec), ledger, now=NOW)
    return status_from_decision(decision, 1, None, T)


def inputs() -> dict[str, dict[str, Any]]:
    """``testdata/<name>.yaml``: one Workload per situation, as orca writes its status."""
    web = {"kind": "Service", "count": 2, "resources": {"cpu": "1"}}
    short = {"kind": "Service", "count": 3, "resources": {"cpu": "2"}}
    runtime = {"kind": "Job", "runtime": {"oneOf": ["wasm"]}}
    invalid = {"kind": "Job", "constraints": ["node.tags.("]}
    placed = _decided("web", web)
    victim = Victim("shop/web", Booking("node-a", "shop/web-0", 1000, 0), 0)
    return {
        "healthy": _object("web", web, placed),
        "progressing_capacity": _object("web", short, _decided("web", short)),
        "progressing_preempted": _object(
            "web", web, preempted_status(placed, [victim], "shop/batch", 1000, T)
        ),
        "progressing_spec_changed": _object("web", {**web, "count": 3}, placed, generation=2),
        "progressing_never_decided": _object("web", web, {"observedGeneration": 0}),
        "degraded_unresolvable": _object("thumbnailer", runtime, _decided("thumbnailer", runtime)),
        "degraded_invalid": _object("bad", invalid, _decided("bad", invalid)),
    }


def test_the_test_inputs_are_what_orca_writes() -> None:
    tests = yaml.safe_load((CHECK / "health_test.yaml").read_text())["tests"]
    wanted = inputs()
    assert sorted(t["inputPath"] for t in tests) == sorted(f"testdata/{n}.yaml" for n in wanted)
    for name, obj in wanted.items():
        stored = yaml.safe_load((CHECK / "testdata" / f"{name}.yaml").read_text())
        assert stored == obj, f"testdata/{name}.yaml drifted: python -m tests.unit.test_argocd"


if __name__ == "__main__":
    for name, obj in inputs().items():
        (CHECK / "testdata" / f"{name}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
