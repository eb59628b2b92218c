"""A Workload's name and namespace at the API server's bounds (a DNS-1123 subdomain of at most
253 characters, a DNS-1123 label of at most 63: ``IsDNS1123Subdomain``, ``IsDNS1123Label`` in
k8s.io/apimachinery/pkg/util/validation), and ``status.selector``, which exists only for a name
that can be a label value (63 characters at most, ``IsValidLabelValue``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from controller.api.models import WORKLOAD_LABEL, Workload, workload_selector
from tests.support.factories import workload_obj


@pytest.mark.parametrize(
    "name", ["a" * 253, "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61, "a", "0-0"]
)
def test_a_name_up_to_253_characters_is_a_workloads(name: str) -> None:
    assert Workload.model_validate(workload_obj(name, "shop", kind="Job")).metadata.name == name


@pytest.mark.parametrize("name", ["a" * 254, "", "A", "a_b", "-a", "a-", "a..b"])
def test_anything_else_is_one_line_naming_the_field(name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Workload.model_validate(workload_obj(name, "shop", kind="Job"))
    (error,) = refused.value.errors()
    assert error["loc"] == ("metadata", "name")
    assert "is not a valid name (a DNS-1123 subdomain" in error["msg"]
    assert "at most 253 characters" in error["msg"] and "\n" not in error["msg"]


@pytest.mark.parametrize(("namespace", "ok"), [("a" * 63, True), ("a" * 64, False), ("a.b", False)])
def test_a_namespace_is_a_label_of_at_most_63_characters(namespace: str, ok: bool) -> None:
    obj = workload_obj("w", namespace, kind="Job")
    if ok:
        assert Workload.model_validate(obj).metadata.namespace == namespace
        return
    with pytest.raises(ValidationError) as refused:
        Workload.model_validate(obj)
    (error,) = refused.value.errors()
    assert error["loc"] == ("metadata", "namespace")
    assert "at most 63 characters" in error["msg"]


@pytest.mark.parametrize(
    ("name", "selector"),
    [
        ("web", f"{WORKLOAD_LABEL}=web"),
        ("a" * 63, f"{WORKLOAD_LABEL}={'a' * 63}"),  # the longest label value: still selectable
        ("a" * 64, None),
        ("a" * 253, None),
    ],
)
def test_status_selector_exists_for_a_name_that_can_be_a_label_value(
    name: str, selector: str | None
) -> None:
    assert workload_selector(name) == selector
