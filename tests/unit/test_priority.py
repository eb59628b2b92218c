"""PriorityClass resolution, as Pod admission does it: the named class, else the
globalDefault one (the lowest if several), else 0; a missing class makes the Workload Invalid."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api.models import Phase
from controller.scheduler.ledger import Ledger, ledger_from_statuses
from controller.scheduler.nodes import NodeTable
from controller.scheduler.priority import (
    NO_CLASSES,
    PreemptionPolicy,
    Priority,
    PriorityClass,
    PriorityClassError,
    PriorityClasses,
    priority_class_from_object,
)
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import status_from_decision
from tests.support.factories import NOW, node, workload

HIGH = PriorityClass("high", 1000)
LOW = PriorityClass("low", -5)
POLITE = PriorityClass("polite", 500, preemption_policy=PreemptionPolicy.NEVER)
DEFAULT = PriorityClass("default", 100, global_default=True)
DEFAULT_LOWER = PriorityClass("default-lower", 50, global_default=True)
DEFAULT_TWIN = PriorityClass("another-default", 100, global_default=True)


@pytest.mark.parametrize(
    ("classes", "name", "expected"),
    [
        pytest.param((), None, Priority(), id="nothing-is-0"),
        pytest.param((HIGH, LOW), None, Priority(), id="no-default-is-0"),
        pytest.param((HIGH,), "high", Priority(1000, True, "high"), id="named"),
        pytest.param((LOW,), "low", Priority(-5, True, "low"), id="negative"),
        pytest.param((HIGH, DEFAULT), None, Priority(100, True, "default"), id="global-default"),
        pytest.param((HIGH, DEFAULT), "high", Priority(1000, True, "high"), id="name-wins"),
        pytest.param(
            (DEFAULT, DEFAULT_LOWER), None, Priority(50, True, "default-lower"), id="two-defaults"
        ),
        pytest.param(
            (DEFAULT, DEFAULT_TWIN),
            None,
            Priority(100, True, "another-default"),
            id="two-defaults-same-value",  # the name decides, not the order they were listed
        ),
        pytest.param((POLITE,), "polite", Priority(500, False, "polite"), id="never"),
        pytest.param(
            (HIGH, DEFAULT),
            "gold",
            Priority(
                0,
                True,
                "gold",
                "spec.priorityClassName: no PriorityClass with name gold was found",
            ),
            id="missing",
        ),
    ],
)
def test_resolve(classes: tuple[PriorityClass, ...], name: str | None, expected: Priority) -> None:
    assert PriorityClasses.of(classes).resolve(name) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            {"metadata": {"name": "high"}, "value": 1000},
            PriorityClass("high", 1000),
            id="minimal",
        ),
        pytest.param(
            {
                "metadata": {"name": "d"},
                "value": 7,
                "globalDefault": True,
                "preemptionPolicy": "Never",
            },
            PriorityClass("d", 7, True, PreemptionPolicy.NEVER),
            id="full",
        ),
        pytest.param(
            {"metadata": {"name": "system-node-critical"}, "value": 2000001000},
            PriorityClass("system-node-critical", 2000001000),
            id="system",
        ),
    ],
)
def test_from_object(obj: dict[str, Any], expected: PriorityClass) -> None:
    assert priority_class_from_object(obj) == expected


LONG = "x" * 300


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param({"value": 1}, "PriorityClass metadata.name 'None' is not valid", id="no-name"),
        pytest.param(
            {"metadata": {"name": "Bad_Name"}, "value": 1},
            "PriorityClass metadata.name 'Bad_Name' is not valid",
            id="name",
        ),
        pytest.param(
            {"metadata": {"name": "a" * 254}, "value": 1},
            f"PriorityClass metadata.name {'a' * 60!r} is not valid",  # cut at 60 characters
            id="name-254",
        ),
        pytest.param(
            {"metadata": "high", "value": 1},
            "PriorityClass metadata.name 'None' is not valid",
            id="metadata-not-a-map",
        ),
        pytest.param(
            {"metadata": {"name": "a"}}, "PriorityClass a: value must be an integer", id="no-value"
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": "1"},
            "PriorityClass a: value must be an integer",
            id="string",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": True},
            "PriorityClass a: value must be an integer",
            id="bool",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": 2_000_001_001},
            "PriorityClass a: value 2000001001 is out of range (at most 2000001000)",
            id="above-the-highest-system-class",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": -(2**31) - 1},
            "PriorityClass a: value -2147483649 is out of range (at most 2000001000)",
            id="below-int32",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": 1, "globalDefault": "yes"},
            "PriorityClass a: globalDefault must be true or false",
            id="default",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": 1, "preemptionPolicy": "Always"},
            "PriorityClass a: preemptionPolicy 'Always' is not one of PreemptLowerPriority, Never",
            id="policy",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": 1, "preemptionPolicy": LONG},
            f"PriorityClass a: preemptionPolicy {'x' * 40!r} is not one of "
            "PreemptLowerPriority, Never",  # cut at 40 characters
            id="policy-long",
        ),
    ],
)
def test_from_object_refuses(obj: dict[str, Any], message: str) -> None:
    """One line naming the field, user-supplied text cut short (the API server's bounds:
    a DNS-1123 subdomain of at most 253 characters, an int32 value at most 2000001000)."""
    with pytest.raises(PriorityClassError) as caught:
        priority_class_from_object(obj)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"metadata": {"name": "a" * 253}, "value": 1}, id="name-253"),
        pytest.param({"metadata": {"name": "a"}, "value": -(2**31)}, id="lowest-int32"),
        pytest.param({"metadata": {"name": "a"}, "value": 1, "preemptionPolicy": ""}, id="empty"),
    ],
)
def test_from_object_accepts_the_bounds(obj: dict[str, Any]) -> None:
    """The largest name and the lowest value the API server stores; an empty preemptionPolicy
    is its default, PreemptLowerPriority."""
    found = priority_class_from_object(obj)
    assert (found.name, found.value, found.global_default, found.preemption_policy) == (
        obj["metadata"]["name"],
        obj["value"],
        False,
        PreemptionPolicy.PREEMPT_LOWER_PRIORITY,
    )


def _ledger() -> Ledger:
    return Ledger(NodeTable([node("a")]))


def test_schedule_writes_the_resolved_priority_to_status() -> None:
    w = workload(kind="Job", priorityClassName="high")
    decision = Scheduler().schedule(w, _ledger(), PriorityClasses.of([HIGH]), now=NOW)
    status = status_from_decision(decision, 1, None, "2026-01-01T00:00:00Z")
    assert (status.phase, status.priority) == (Phase.SCHEDULED, 1000)


def test_schedule_without_classes_is_priority_0() -> None:
    decision = Scheduler().schedule(workload(kind="Job"), _ledger(), NO_CLASSES, now=NOW)
    assert (decision.phase, decision.priority) == (Phase.SCHEDULED, 0)


def test_missing_class_is_invalid_and_keeps_placements() -> None:
    placed = {"placements": [{"node": "a", "allocId": "shop/web-0", "score": 1}]}
    w = workload(kind="Job", priorityClassName="high", status=placed)
    ledger = ledger_from_statuses([node("a")], [w])
    decision = Scheduler().schedule(w, ledger, NO_CLASSES, now=NOW)
    assert decision.phase is Phase.INVALID
    assert [(p.node, p.alloc_id) for p in decision.placements] == [("a", "shop/web-0")]
    assert decision.message == "spec.priorityClassName: no PriorityClass with name high was found"
    assert decision.priority is None


def test_lowest_bounds_every_workloads_priority() -> None:
    assert NO_CLASSES.lowest == 0  # no classes: everyone is 0, nothing to preempt
    assert PriorityClasses.of([HIGH, DEFAULT]).lowest == 0  # a missing class resolves to 0
    assert PriorityClasses.of([HIGH, LOW]).lowest == -5
