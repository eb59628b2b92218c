"""What a Workload's values become once read, where a user can get them wrong: a value too long
to repeat is cut in the one line that refuses it (so a 10 MB value does not come back in the
error), and a time written without a zone is read as UTC, as the API server writes its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import Workload, key_of
from tests.support.factories import workload


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
