"""Models given the same fields share one record of which fields were given (``Compact``):
the operator holds one Workload, one status and one NodeInfo per object, and those records
were a third of their memory. Sharing must not change what any model says it was given."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controller.api import models
from controller.api.models import Toleration, Workload
from controller.scheduler.nodes import node_info_from_node


def workload_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": models.API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"kind": "Job", "resources": {"cpu": "500m", "memory": "1Gi"}, **spec},
    }


def test_models_given_the_same_fields_share_one_record_of_them() -> None:
    a = Workload.model_validate(workload_body("a"))
    b = Workload.model_validate(workload_body("b", constraints=["node.cpu > 1"]))
    assert a.model_fields_set == {"api_version", "kind", "metadata", "spec"}
    assert a.model_fields_set is b.model_fields_set
    assert a.metadata.model_fields_set == {"name", "namespace", "uid"}
    assert a.metadata.model_fields_set is b.metadata.model_fields_set
    # Given different fields, each spec says what it was given.
    assert a.spec.model_fields_set == {"kind", "resources"}
    assert b.spec.model_fields_set == {"kind", "resources", "constraints"}


def test_nodes_share_the_record_too() -> None:
    def node(name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "labels": {"runtime.orca.cloudinit.dev/docker": "true"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}},
        }

    one, two = node_info_from_node(node("n1")), node_info_from_node(node("n2"))
    assert one.hostname != two.hostname
    assert one.model_fields_set is two.model_fields_set


def test_a_copy_with_updates_does_not_change_what_the_others_were_given() -> None:
    a, b = Toleration(key="a"), Toleration(key="b")
    shared = a.model_fields_set
    assert shared is b.model_fields_set and shared == {"key"}
    more = a.model_copy(update={"value": "v"})
    assert more.model_fields_set == {"key", "value"}
    assert a.model_fields_set == b.model_fields_set == {"key"}
    assert Toleration(key="c").model_fields_set == {"key"}


def test_a_frozen_model_still_refuses_assignment_and_its_record_is_untouched() -> None:
    a = Toleration(key="a")
    with pytest.raises(ValidationError, match="frozen"):
        a.value = "v"
    assert Toleration(key="b").model_fields_set == {"key"}


def test_past_the_bound_a_model_keeps_its_own_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_FIELD_SETS", {})
    monkeypatch.setattr(models, "MAX_SHARED_FIELD_SETS", 1)
    first, again = Toleration(key="a"), Toleration(key="b")
    assert first.model_fields_set is again.model_fields_set
    other, twin = Toleration(key="a", value="v"), Toleration(key="b", value="w")  # another
    assert other.model_fields_set == twin.model_fields_set == {"key", "value"}
    assert other.model_fields_set is not twin.model_fields_set
    assert len(models._FIELD_SETS) == 1
