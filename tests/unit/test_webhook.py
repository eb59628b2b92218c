"""The admission webhook's check and registration, without an API server: one rule set (the
webhook's refusal is the message the operator writes for the same spec), what is never
refused, and the shipped configuration saying what the code registers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api.models import Workload
from controller.operator.webhook import WEBHOOK, Admission, webhook_entry
from controller.scheduler.admission import refusal
from controller.scheduler.ledger import Ledger
from controller.scheduler.priority import NO_CLASSES, PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import workload_obj

SHIPPED = Path(__file__).resolve().parents[2] / "manifests" / "webhook"


def workload(name: str = "w", namespace: str = "shop", **spec: Any) -> dict[str, Any]:
    """A Service of 2 unless ``spec`` says otherwise, as a user writes it."""
    return workload_obj(name, namespace, **{"kind": "Service", "count": 2, **spec})


BAD = [
    {"constraints": ['"ssd" in node.tag']},
    {"constraints": ["node.cpu"]},
    {"affinity": [{"target": "node.kind == 1", "weight": 5}]},
    {"runtime": {"oneOf": ["pve-zone"]}},
    {"priorityClassName": "missing"},
    {"constraints": ["node.kind = 'x'"], "runtime": {"oneOf": ["pve-lxc"]}},
]


@pytest.mark.parametrize("spec", BAD)
def test_the_refusal_is_the_invalid_status_message(spec: dict[str, Any]) -> None:
    obj = workload(**spec)
    refused = Admission(lambda: NO_CLASSES).review("CREATE", obj, None, [])
    decision = Scheduler().schedule(Workload.model_validate(obj), Ledger(), NO_CLASSES, now=0.0)
    assert decision.phase.value == "Invalid"
    assert refused == decision.message
    assert refused is not None and "\n" not in refused


def test_what_is_never_refused() -> None:
    admission = Admission(lambda: NO_CLASSES, namespaces=["shop"])
    bad = workload(constraints=["node.cpu"])
    assert (
        admission.review("CREATE", workload(namespace="other", constraints=["x"]), None, []) is None
    )
    assert (
        admission.review(
            "UPDATE", {**bad, "metadata": {**bad["metadata"], "labels": {"a": "b"}}}, bad, []
        )
        is None
    )
    deleting = {**bad, "metadata": {**bad["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert admission.review("UPDATE", {**deleting, "spec": {"kind": "Job"}}, bad, []) is None
    # A change of spec is checked.
    assert admission.review("UPDATE", bad, workload(), []) is not None


def test_priority_classes_not_listed_yet_are_left_to_the_operator_with_a_warning() -> None:
    warnings: list[str] = []
    admission = Admission(lambda: None)
    assert admission.review("CREATE", workload(priorityClassName="high"), None, warnings) is None
    assert warnings and "spec.priorityClassName" in warnings[0]
    known = Admission(lambda: PriorityClasses.of([PriorityClass("high", 1000)]))
    assert known.review("CREATE", workload(priorityClassName="high"), None, []) is None


def test_the_shipped_configuration_is_what_the_code_registers() -> None:
    shipped = yaml.safe_load((SHIPPED / "validatingwebhookconfiguration.yaml").read_text())
    (hook,) = shipped["webhooks"]
    service = hook["clientConfig"]["service"]
    assert service["path"] == "/validate-workloads"
    assert hook == webhook_entry({"service": service})
    assert (WEBHOOK["failurePolicy"], WEBHOOK["timeoutSeconds"]) == ("Ignore", 5)
    service_yaml = yaml.safe_load((SHIPPED / "service.yaml").read_text())
    assert service_yaml["metadata"]["name"] == service["name"]
    assert service_yaml["spec"]["ports"][0]["port"] == service["port"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "Nonsense"}, "spec.kind: Input should be 'Job', 'Service' or 'DaemonSet'"),
        ({"kind": "Job", "count": 2}, "spec: count is only allowed when kind is Service"),
    ],
    ids=["kind", "count-on-a-job"],
)
def test_a_spec_the_model_refuses_is_refused_with_the_models_one_line(
    spec: dict[str, Any], message: str
) -> None:
    """What the model refuses (``ClusterState`` would store it as Invalid with the same words),
    the webhook refuses first."""
    assert refusal(workload_obj("w", "shop", **spec), Scheduler(), NO_CLASSES) == message
    assert refusal(workload_obj("w", "shop", kind="Job"), Scheduler(), NO_CLASSES) is None
