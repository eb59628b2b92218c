"""What a Workload's values become once read, where a user can get them wrong: a value too long
to repeat is cut in the one line that refuses it (so a 10 MB value does not come back in the
error), and a time written without a zone is read as UTC, as the API server writes its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import Resources, Workload, key_of, quantity_to_int
from tests.support.factories import workload, workload_obj


def asked(resources: dict[str, Any]) -> Resources:
    """A Job's resources, as read."""
    read = workload(kind="Job", resources=resources).spec.resources
    assert read is not None
    return read


def refusal(**spec: Any) -> str:
    with pytest.raises(ValidationError) as info:
        workload(kind="Job", **spec)
    return validation_message(info.value)


def test_a_quantity_too_long_is_shown_cut_to_its_first_37_characters() -> None:
    # At most 64 characters (kube's quantity never needs more): 65 are refused, and the
    # message repeats 37 of them and "...", 40 in all.
    message = refusal(resources={"cpu": "1" * 65})
    shown = repr("1" * 37 + "...")
    assert f"{shown} is longer than 64 characters" in message
    assert "1" * 38 not in message


@pytest.mark.parametrize(("length", "cut"), [(40, False), (41, True)])
def test_a_bad_resource_name_is_shown_whole_up_to_40_characters(length: int, cut: bool) -> None:
    name = "example.com/" + "a" * (length - 13) + "!"  # a character no resource name has
    assert len(name) == length
    message = refusal(resources={name: "1"})
    shown = repr(name[:37] + "...") if cut else repr(name)
    assert f"resource {shown} " in message, message
    assert (name in message) is not cut


def metadata(created: str | None) -> Workload:
    obj = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": created},
        "spec": {"kind": "Job"},
    }
    return Workload.model_validate(obj)


def test_a_time_without_a_zone_is_utc() -> None:
    created = metadata("2026-01-01T10:00:00").metadata.creation_timestamp
    assert created == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert created is not None and created.utcoffset() == timedelta(0)
    # so it compares with the API server's own times, which carry Z
    assert created < metadata("2026-01-01T10:00:01Z").metadata.creation_timestamp  # type: ignore[operator]


def test_a_time_with_a_zone_keeps_its_instant() -> None:
    created = metadata("2026-01-01T10:00:00+02:00").metadata.creation_timestamp
    assert created == datetime(2026, 1, 1, 8, tzinfo=UTC)
    assert created is not None and created.utcoffset() == timedelta(hours=2)
    assert created.tzinfo == timezone(timedelta(hours=2))


def test_no_time_is_none() -> None:
    assert metadata(None).metadata.creation_timestamp is None


@pytest.mark.parametrize("metadata", [None, "web", ["web"]])
def test_a_watched_object_without_usable_metadata_still_has_a_key(metadata: Any) -> None:
    # The operator keys every listed or watched object, parseable or not, to report it
    # (handlers, state): metadata missing or not a mapping is no name in the default
    # namespace, never a crash of the watch.
    obj = {"kind": "Workload"} if metadata is None else {"kind": "Workload", "metadata": metadata}
    assert key_of(obj) == key_of({"metadata": {}}) == "default/None"
    assert key_of({"metadata": {"name": "web"}}) == "default/web"
    assert key_of({"metadata": {"name": "web", "namespace": "team"}}) == "team/web"


def test_a_quantity_is_read_in_its_own_unit_unless_scaled() -> None:
    # The bare form (memory in bytes, the harness's and the chaos checker's reading of
    # allocatable): value * 1, rounded up; cpu asks for scale 1000 (millicores).
    assert quantity_to_int("2Ki") == 2048
    assert quantity_to_int("1500m") == 2
    assert quantity_to_int("1500m", 1000) == 1500


@pytest.mark.parametrize("value", [0.5, [1], {"m": 500}])
def test_an_amount_neither_a_string_nor_a_whole_number_is_refused_naming_its_type(
    value: Any,
) -> None:
    # As the API server's int-or-string: 0.5 is neither (write "500m"); a list or a mapping
    # is one line too, not a crash of the cache that remembers amounts by value.
    message = refusal(resources={"cpu": value})
    kind = type(value).__name__
    assert f"must be a Kubernetes quantity such as 500m or 256Mi, not {kind}" in message


def test_a_quantity_of_64_characters_is_read() -> None:
    # At most 64 characters: the 64th is still a quantity (65 are refused, above).
    assert asked({"cpu": "0" * 63 + "2"}).cpu_millis == 2000


def test_huge_pages_are_a_whole_number_of_pages() -> None:
    # kube's IsHugePageResourceValueDivisible: 4Mi of 2Mi pages, not 3Mi.
    assert asked({"hugepages-2Mi": "4Mi"}).given("hugepages-2Mi")
    assert "must be a multiple of the page size, 2097152 bytes" in refusal(
        resources={"hugepages-2Mi": "3Mi"}
    )


def test_sixteen_resources_may_be_asked_for_and_seventeen_not() -> None:
    seventeen = {f"example.com/r{i}": "1" for i in range(17)}
    sixteen = dict(list(seventeen.items())[:16])
    assert len(asked(sixteen).scalars) == 16
    assert "asks for 17 resources; at most 16 are allowed" in refusal(resources=seventeen)


def test_a_budget_may_be_as_large_as_an_int32() -> None:
    # PodDisruptionBudget's fields are int32: 2**31 - 1 is a budget, 2**31 is not.
    top = 2**31 - 1
    service = workload(kind="Service", count=2, disruption={"maxUnavailable": top})
    budget = service.spec.disruption
    assert budget is not None and budget.desired_healthy(2) == 0
    with pytest.raises(ValidationError) as info:
        workload(kind="Service", count=2, disruption={"maxUnavailable": top + 1})
    message = validation_message(info.value)
    assert "must be a non-negative integer or a percentage from 0% to 100%" in message


@pytest.mark.parametrize(("field", "value"), [("name", "A" * 300), ("namespace", "B" * 300)])
def test_a_bad_name_or_namespace_is_shown_cut_to_40_characters(field: str, value: str) -> None:
    obj = workload_obj("web")
    obj["metadata"][field] = value
    with pytest.raises(ValidationError) as info:
        Workload.model_validate(obj)
    message = validation_message(info.value)
    assert repr(value[:40]) in message
    assert value[:41] not in message
