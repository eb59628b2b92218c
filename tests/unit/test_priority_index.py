"""The operator's PriorityClass index (``controller.operator.priorities``): which Workloads a
class change re-decides, and what the queue reads as a key's priority."""

from __future__ import annotations

from typing import Any

from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState
from tests.support.factories import stored_workload


def pc(name: str, value: int, version: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}, "value": value, **extra}


def state_with(*names: str | None) -> ClusterState:
    state = ClusterState()
    for i, name in enumerate(names):
        spec: dict[str, Any] = {"kind": "Job"}
        if name is not None:
            spec["priorityClassName"] = name
        state.upsert_workload(stored_workload(f"w{i}", "1", spec))
    return state


def test_a_class_change_touches_the_workloads_naming_it_and_default_ones() -> None:
    state = state_with("high", None, "low")
    index = PriorityIndex()
    assert index.upsert(pc("high", 1000, "1")) == {"high"}
    assert index.upsert(pc("low", 1, "2")) == {"low"}
    assert index.resolve(state, "ns/w0").value == 1000
    assert index.upsert(pc("high", 1000, "1")) is None  # already known
    touched = index.upsert(pc("high", 900, "3"))
    assert touched == {"high"}
    assert index.keys_naming(state, touched) == {"ns/w0"}
    touched = index.upsert(pc("fallback", 5, "4", globalDefault=True))
    assert touched == {"fallback", None}
    assert index.keys_naming(state, touched) == {"ns/w1"}
    assert index.resolve(state, "ns/w1").value == 5
    assert index.delete("low") == {"low"}
    assert index.resolve(state, "ns/w2").error is not None
    assert index.delete("nothing") is None


def test_stale_and_unreadable_classes() -> None:
    index = PriorityIndex()
    index.upsert(pc("high", 1000, "5"))
    assert index.upsert(pc("high", 1, "4")) is None  # older than what is known
    assert index.upsert(pc("high", 1000, "6", preemptionPolicy="Sometimes")) == {"high"}
    assert "high" not in index.classes.by_name  # treated as absent, logged once
    assert index.delete("high") is None  # gone: nothing resolvable changed
