"""The lab's reading of the living cluster's Nodes: when a Node a scenario created can take
replicas, and when the cluster took one away (which no scenario may do by accident). States
are written by hand as the API shows them: admission's ``not-ready`` taint on a new Node,
kwok's Ready, the node lifecycle controller's ``unreachable`` on one gone ``Unknown``. And the
lab's writes under a server kill: one whose answer was lost may have landed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.chaos.lab import NodeLoss, node, registering, retry_write, schedulable

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREACHABLE_TAINTS = [
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
]


def seen(
    name: str, ready: str | None, taints: list[dict[str, str]] | None = None, uid: str = ""
) -> dict[str, Any]:
    """Node ``name`` as a LIST returns it: Ready ``ready`` (None: no condition yet)."""
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {
        "metadata": {"name": name, "uid": uid or f"uid-{name}"},
        "spec": {"taints": taints or []},
        "status": {"conditions": conditions},
    }


def test_a_node_registers_without_a_ready_condition() -> None:
    obj = node("n", cpu="2", tags=("ssd",))
    assert "conditions" not in obj["status"]
    size = {"cpu": "2", "memory": "8Gi"}
    assert obj["status"]["capacity"] == obj["status"]["allocatable"] == size
    claims: dict[str, Any] = {
        "metadata": {"name": "m"},
        "status": {"conditions": [{"type": "Ready"}]},
    }
    assert registering(claims)["status"] == {"capacity": {}}
    assert claims["status"]["conditions"] == [{"type": "Ready"}]  # the original is left alone


def test_schedulable_needs_ready_and_the_not_ready_taint_lifted() -> None:
    assert not schedulable(seen("n", None, [NOT_READY_TAINT]))  # just created
    assert not schedulable(seen("n", "True", [NOT_READY_TAINT]))  # kwok reported, not lifted
    assert not schedulable(seen("n", None))  # lifted, but kwok has not reported yet
    assert schedulable(seen("n", "True"))
    cordoned = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    assert schedulable(seen("n", "True", [cordoned]))  # a cordon is the scenario's own doing
    assert not schedulable(seen("n", "Unknown", UNREACHABLE_TAINTS))


def test_node_loss_counts_only_a_node_that_was_up() -> None:
    loss = NodeLoss()
    assert loss.observe([seen("a", None, [NOT_READY_TAINT]), seen("b", "True")]) == []
    assert loss.observe([seen("a", "True", [NOT_READY_TAINT]), seen("b", "True")]) == []
    assert loss.observe([seen("a", "True"), seen("b", "Unknown")]) == ["b"]
    assert loss.observe([seen("a", "True", UNREACHABLE_TAINTS), seen("b", "Unknown")]) == ["a"]
    assert loss.lost == {
        "a": "Ready True, taints ['node.kubernetes.io/unreachable:NoSchedule', "
        "'node.kubernetes.io/unreachable:NoExecute']",
        "b": "Ready Unknown, taints []",
    }


def test_a_deleted_node_is_not_lost_and_its_successor_starts_over() -> None:
    loss = NodeLoss()
    loss.observe([seen("a", "True")])
    assert loss.observe([]) == []  # deleted
    # Created again under the same name, still registering: not a loss.
    assert loss.observe([seen("a", None, [NOT_READY_TAINT], uid="second")]) == []
    assert loss.lost == {}


def _answers(*outcomes: BaseException | None) -> Callable[[], None]:
    """An API call that raises each of ``outcomes`` in turn (None: succeeds)."""
    left = list(outcomes)

    def call() -> None:
        outcome = left.pop(0)
        if outcome is not None:
            raise outcome

    return call


def test_a_create_whose_answer_was_lost_is_done_when_the_retry_finds_it() -> None:
    exists = ApiException(status=409, reason="Conflict")
    retry_write(_answers(ConnectionResetError(), exists), 409)  # it landed, the answer lost
    retry_write(_answers(ApiException(status=500), exists), 409)  # etcd timed out, it landed
    with pytest.raises(ApiException):  # no earlier attempt: someone else's object
        retry_write(_answers(exists), 409)
    with pytest.raises(ApiException):  # refused: nothing can have landed
        retry_write(_answers(ApiException(status=422), exists), 409)
