"""What GitOps tools make of Workloads, asked of the real clients (issue 22).

- kstatus: ``sigs.k8s.io/cli-utils`` ``pkg/kstatus/status.Compute``, what Flux's ``wait`` and
  ``healthChecks`` and cli-utils' appliers compute, in a Go program (``hack/gitops/kstatus``);
- Argo CD: the shipped ``health.lua`` run as Argo CD runs it, in gopher-lua, the interpreter
  Argo CD embeds (``hack/gitops/argohealth``).

Both read the same objects, real Workloads from the API server that the real operator decided
(or, frozen, did not decide yet), as ``kubectl get -o json`` prints them. Neither program
imports orca: they are the oracle. ``hack/gitops/build.sh`` builds them once into a cache;
a build that fails makes these tests FAIL with its one-line reason.

Run with ``-s`` to see the table of results per state.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.api.models import Condition, WorkloadStatus
from controller.devcluster.controlplane import KubectlRunner
from controller.scheduler.ledger import Booking
from controller.scheduler.preemption import Victim, preempted_status
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import status_from_decision
from tests.support.factories import NOW, ledger_for, node, node_object, workload, workload_obj
from tests.support.harness import REPO_ROOT, Cluster, OperatorProcess, observed, phase

pytestmark = pytest.mark.controlplane

BUILD = REPO_ROOT / "hack" / "gitops" / "build.sh"
HEALTH_LUA = (
    REPO_ROOT
    / "manifests"
    / "argocd"
    / "resource_customizations"
    / "orca.cloudinit.dev"
    / "Workload"
    / "health.lua"
)


@dataclass(frozen=True)
class Clients:
    """The two programs; each takes objects as JSON and answers one line per object."""

    bin_dir: Path

    def _run(self, args: list[str], objects: list[dict[str, Any]]) -> list[dict[str, str]]:
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        out = subprocess.run(args, input=body, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"{args[0]}: {out.stderr.strip()}"
        return [json.loads(line) for line in out.stdout.splitlines()]

    def kstatus(self, *objects: dict[str, Any]) -> list[dict[str, str]]:
        return self._run([str(self.bin_dir / "kstatus")], list(objects))

    def argocd(self, *objects: dict[str, Any]) -> list[dict[str, str]]:
        args = [str(self.bin_dir / "argohealth"), "-script", str(HEALTH_LUA)]
        return self._run(args, list(objects))

    def both(self, obj: dict[str, Any]) -> tuple[str, str, str, str]:
        """(kstatus, its message, Argo CD health, its message) of one object."""
        (k,), (a,) = self.kstatus(obj), self.argocd(obj)
        return k["status"], k["message"], a["status"], a["message"]


@pytest.fixture(scope="module")
def clients() -> Clients:
    out = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        reason = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "no output"
        pytest.fail(f"cannot build the GitOps clients (hack/gitops/build.sh): {reason}")
    return Clients(Path(out.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def table() -> Iterator[list[tuple[str, str, str, str, str]]]:
    """Rows of (state, kstatus, message, Argo CD, message), printed at the end of the module."""
    rows: list[tuple[str, str, str, str, str]] = []
    yield rows
    if rows:
        width = max(len(r[0]) for r in rows)
        print(
            "\n\nWorkload state".ljust(width + 2), "| kstatus    | Argo CD     | message (kstatus)"
        )
        for state, k, km, a, _ in rows:
            print(f"{state.ljust(width)} | {k.ljust(10)} | {a.ljust(11)} | {km[:90]}")


# -- real Workloads, decided by the real operator ----------------------------------------------


def decided(cluster: Cluster, namespace: str, name: str, what: str) -> dict[str, Any]:
    """The Workload once the operator wrote a decision for its current generation."""
    return cluster.wait_for(
        namespace, name, lambda w: observed(w) and phase(w) is not None, 60, what=what
    )


def test_each_state_as_kstatus_and_argo_cd_see_it(
    cluster: Cluster,
    namespace: str,
    operator: OperatorProcess,
    clients: Clients,
    table: list[tuple[str, str, str, str, str]],
    kubectl: KubectlRunner,
) -> None:
    cluster.apply(node_object("a", cpu="2"), node_object("b", cpu="2"))
    # placed first: "capacity" asks for what a node has (2 cpu) but, once "placed" holds 1 cpu
    # of each, not what is free; decided in the other order it would take a node whole.
    cluster.apply(
        workload_obj("placed", namespace, kind="Service", count=2, resources={"cpu": "1"})
    )
    decided(cluster, namespace, "placed", "Scheduled")
    cluster.apply(
        workload_obj("capacity", namespace, kind="Job", resources={"cpu": "2"}),
        workload_obj("beyond", namespace, kind="Job", resources={"cpu": "3"}),
        workload_obj("runtime", namespace, kind="Job", runtime={"oneOf": ["wasm"]}),
        workload_obj("invalid", namespace, kind="Job", constraints=["node.tags.("]),
    )
    expected = {
        "placed": ("Scheduled", "Current", "Healthy"),
        "capacity": ("Unschedulable", "InProgress", "Progressing"),
        # above every node's allocatable: kube's Unresolvable, no preemption or freed room helps
        "beyond": ("Unschedulable", "Failed", "Degraded"),
        "runtime": ("Unschedulable", "Failed", "Degraded"),
        "invalid": ("Invalid", "Failed", "Degraded"),
    }
    states = {
        "placed": "placed (2/2 replicas)",
        "capacity": "waiting for capacity (Insufficient cpu)",
        "beyond": "larger than any node (3 cpu, nodes of 2)",
        "runtime": "unresolvable (runtime wasm not offered)",
        "invalid": "invalid spec (CEL does not compile)",
    }
    for name, (want_phase, want_k, want_a) in expected.items():
        obj = decided(cluster, namespace, name, want_phase)
        assert phase(obj) == want_phase
        k, km, a, am = clients.both(obj)
        table.append((states[name], k, km, a, am))
        assert (k, a) == (want_k, want_a), (name, km, am)
        if name != "placed":  # the tools show the diagnosis, in the status's words
            assert km == am == obj["status"]["message"]

    # kubectl wait --for=condition=Ready is "fully placed": it returns for the placed one and
    # times out for one that waits.
    ready = kubectl("wait", "--for=condition=Ready", "orcawl/placed", "-n", namespace,
                    "--timeout=60s")  # fmt: skip
    assert ready.returncode == 0, ready.stderr
    waiting = kubectl("wait", "--for=condition=Ready", "orcawl/capacity", "-n", namespace,
                      "--timeout=1s")  # fmt: skip
    assert waiting.returncode != 0 and "timed out" in waiting.stderr, waiting.stderr

    # Not decided yet: the operator frozen (SIGSTOP, its sockets open), a new Workload and a
    # spec change wait for a decision.
    operator.freeze()
    try:
        cluster.apply(workload_obj("fresh", namespace, kind="Job"))
        kubectl("patch", "orcawl", "placed", "-n", namespace, "--type=merge",
                "-p", '{"spec":{"count":3}}', check=True)  # fmt: skip
        fresh = cluster.workload(namespace, "fresh")
        changed = cluster.workload(namespace, "placed")
        # The fault happened: nobody decided them (the default status; generation moved on).
        assert fresh["status"] == {"observedGeneration": 0}
        assert (changed["metadata"]["generation"], changed["status"]["observedGeneration"]) == (
            2,
            1,
        )
        for state, obj in (("never decided (operator frozen)", fresh),
                           ("spec changed, not decided yet (frozen)", changed)):  # fmt: skip
            k, km, a, am = clients.both(obj)
            table.append((state, k, km, a, am))
            assert (k, a) == ("InProgress", "Progressing"), (state, km, am)
    finally:
        operator.thaw()

    # Thawed, it decides both (3 replicas of 1 cpu fit on two nodes of 2 cpus).
    again = cluster.wait_for(
        namespace, "placed", lambda w: observed(w) and phase(w) == "Scheduled", 60, what="3/3"
    )
    fresh = decided(cluster, namespace, "fresh", "decided")
    for state, obj in (("spec change decided (3/3)", again), ("fresh, decided", fresh)):
        k, km, a, am = clients.both(obj)
        table.append((state, k, km, a, am))
        assert (k, a) == ("Current", "Healthy"), (state, km, am)


# -- every situation the status builder produces, without the operator --------------------------


def _object(status: WorkloadStatus | None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "shop", "generation": generation},
        "spec": {"kind": "Service", "count": 2},
    }
    if status is not None:
        obj["status"] = status.model_dump(by_alias=True, mode="json", exclude_none=True)
    return obj


def _status(nodes: list[dict[str, Any]], **spec: Any) -> WorkloadStatus:
    ledger = ledger_for(*(node(**n) for n in nodes))
    decision = Scheduler().schedule(workload(**spec), ledger, now=NOW)
    return status_from_decision(decision, 1, None, "2026-01-01T00:00:00Z")


def _preempted() -> WorkloadStatus:
    placed = _status([{"name": "a"}, {"name": "b"}], kind="Service", count=2)
    victim = Victim("shop/w", Booking("a", "shop/w-0", 0, 0), 0)
    return preempted_status(placed, [victim], "shop/boss", 1000, "2026-01-01T00:01:00Z")


def _placed_again() -> WorkloadStatus:
    ledger = ledger_for(node("a"), node("b"))
    decision = Scheduler().schedule(workload(kind="Service", count=2), ledger, now=NOW)
    return status_from_decision(decision, 1, _preempted(), "2026-01-01T00:02:00Z")


def _older_orca() -> WorkloadStatus:
    """A status written before these conditions existed: Scheduled only."""
    condition = Condition(
        type="Scheduled",
        status="True",
        reason="AllPlaced",
        last_transition_time="2026-01-01T00:00:00Z",
    )
    return WorkloadStatus(observed_generation=1, phase="Scheduled", conditions=[condition])


TWO = [{"name": "a", "cpu": "1"}, {"name": "b", "cpu": "1"}]
SITUATIONS: list[tuple[str, Any, str, str]] = [
    ("no status at all", lambda: None, "Current", "Progressing"),
    ("the CRD's default status", lambda: WorkloadStatus(observed_generation=0), "InProgress",
     "Progressing"),
    ("placed", lambda: _status(TWO, kind="Service", count=2), "Current", "Healthy"),
    ("partially placed, capacity short", lambda: _status(
        TWO, kind="Service", count=3, resources={"cpu": "1"}), "InProgress", "Progressing"),
    ("DaemonSet Mandatory, a node lacks the runtime", lambda: _status(
        [{"name": "a"}, {"name": "b", "runtimes": ("process",)}], kind="DaemonSet",
        schedule={"mode": "Mandatory"}, runtime={"oneOf": ["docker"]}), "Failed", "Degraded"),
    ("no nodes at all", lambda: _status([], kind="Job"), "Failed", "Degraded"),
    ("preempted, to be placed again", _preempted, "InProgress", "Progressing"),
    ("placed again after a preemption", _placed_again, "Current", "Healthy"),
    ("written by an older orca (Scheduled only)", _older_orca, "Current", "Progressing"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "kstatus", "argocd"),
    [(m, k, a) for _, m, k, a in SITUATIONS],
    ids=[s for s, _, _, _ in SITUATIONS],
)
def test_every_status_the_builder_makes(
    clients: Clients, make: Any, kstatus: str, argocd: str
) -> None:
    """The first and the last rows are why the rest exists: a Workload without status (what a
    CRD without the status default gives) is Current for kstatus, and so is one written by
    an older orca; both tools agree on everything orca writes now."""
    k, km, a, am = clients.both(_object(make()))
    assert (k, a) == (kstatus, argocd), (km, am)


def test_a_script_error_fails_the_argo_cd_client(clients: Clients, tmp_path: Path) -> None:
    """The Lua client is not an echo: a script that fails is an error, as in Argo CD."""
    broken = tmp_path / "health.lua"
    broken.write_text("return obj.status.nothing.here\n")
    args = [str(clients.bin_dir / "argohealth"), "-script", str(broken)]
    out = subprocess.run(args, input=json.dumps(_object(None)), capture_output=True, text=True)
    assert out.returncode == 1 and "argohealth: shop/w:" in out.stderr


def test_argo_cd_test_file_of_the_health_check(clients: Clients, tmp_path: Path) -> None:
    """``health_test.yaml`` beside the script (Argo CD's layout for its built-in checks, so the
    check can be proposed upstream as it is) passes; a wrong expectation in it fails."""
    tests = HEALTH_LUA.parent / "health_test.yaml"
    args = [str(clients.bin_dir / "argohealth"), "-tests"]
    out = subprocess.run([*args, str(tests)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(out.stdout.splitlines()) == 7 and "FAIL" not in out.stdout
    shutil.copytree(HEALTH_LUA.parent, tmp_path / "Workload")
    wrong = tmp_path / "Workload" / "health_test.yaml"
    wrong.write_text(wrong.read_text().replace("status: Degraded", "status: Healthy", 1))
    out = subprocess.run([*args, str(wrong)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "FAIL testdata/degraded_unresolvable.yaml" in out.stdout
