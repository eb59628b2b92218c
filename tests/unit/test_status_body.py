"""The status orca writes (``status_body``): every field that says something, none that says
nothing. A write replaces the whole status, so what is left out is what the API server does not
decode, compare for managedFields, store and send to every watcher: a None is never sent, an
empty ``unschedulable`` neither, and what is sent reads back as the same status."""

from __future__ import annotations

from typing import Any

import orjson

from controller.api.models import (
    Condition,
    Phase,
    Placement,
    RejectionReason,
    WorkloadStatus,
    status_body,
)


def nulls(value: Any, path: str = "status") -> list[str]:
    """Every path under ``value`` that holds None."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in nulls(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in nulls(item, f"{path}[{index}]")]
    return []


def placed(rejected: list[RejectionReason]) -> WorkloadStatus:
    """A status as a decision leaves it: several fields unset (None), a condition without a
    message, a rejection without a plugin."""
    return WorkloadStatus(
        phase=Phase.PARTIALLY_SCHEDULED if rejected else Phase.SCHEDULED,
        desired=2,
        placed=1 if rejected else 2,
        placements=[Placement(node="n1", alloc_id="default/web-0", score=7)],
        conditions=[
            Condition(
                type="Ready",
                status="True",
                reason="AllPlaced",
                message=None,
                last_transition_time="2026-12-07T01:00:00Z",
            )
        ],
        unschedulable=rejected,
    )


def test_no_field_that_says_nothing_is_sent() -> None:
    status = placed([RejectionReason(reason="Insufficient cpu", count=3, nodes=["n2"])])
    body = status_body(status)
    assert nulls(body) == []
    # The unset fields are there to leave out: the test would pass vacuously without them.
    assert nulls(status.model_dump(by_alias=True, mode="json")) != []
    assert "observedGeneration" not in body and "message" not in body["conditions"][0]
    assert "plugin" not in body["unschedulable"][0]


def test_an_empty_unschedulable_is_left_out_and_a_rejection_is_kept() -> None:
    assert "unschedulable" not in status_body(placed([]))
    rejected = [RejectionReason(reason="Insufficient cpu", count=3, nodes=["n2", "n3"])]
    assert status_body(placed(rejected))["unschedulable"] == [
        {"reason": "Insufficient cpu", "count": 3, "nodes": ["n2", "n3"]}
    ]


def test_what_is_sent_reads_back_as_the_same_status() -> None:
    for rejected in ([], [RejectionReason(reason="x", count=1, plugin="Runtime")]):
        status = placed(rejected)
        sent = orjson.loads(orjson.dumps(status_body(status)))
        assert WorkloadStatus.model_validate(sent) == status
        assert status.phase is not None and sent["phase"] == status.phase.value
        assert sent["placements"][0]["allocId"] == "default/web-0"
