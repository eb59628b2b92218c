"""The collector around the initial LIST (``controller.operator.heap``): paused while the view
is built, running again after, whatever happened inside, and the view left out of later
collections."""

from __future__ import annotations

import gc
import platform
import weakref
from collections.abc import Iterator

import pytest

from controller.operator import heap
from controller.operator.heap import YOUNG_THRESHOLD, building_the_view
from controller.operator.state import ClusterState
from tests.support.factories import node_object, stored_workload


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """Put the collector back as it was (these tests change process-wide settings)."""
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()
    if enabled:
        gc.enable()


def test_no_collection_runs_while_the_view_is_built() -> None:
    collections = []

    def seen(phase: str, _: dict[str, int]) -> None:
        if phase == "start":
            collections.append(phase)

    gc.callbacks.append(seen)
    try:
        with building_the_view():
            at_entry = len(collections)
            view = [[i] for i in range(5 * gc.get_threshold()[0])]  # would trigger some
            inside = len(collections) - at_entry
    finally:
        gc.callbacks.remove(seen)
    assert inside == 0
    assert len(collections) == 2  # one on the way in (before freezing), one on the way out
    assert len(view) > 0


def test_the_view_is_frozen_and_the_collector_runs_again_after() -> None:
    before = gc.get_freeze_count()
    with building_the_view():
        view = [{"i": i} for i in range(10_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(view)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD


def test_the_collector_runs_again_when_the_listing_failed() -> None:
    with pytest.raises(ConnectionError), building_the_view():
        raise ConnectionError("the API server went away")
    assert gc.isenabled()


def test_a_dropped_view_leaves_nothing_for_the_collector() -> None:
    """What ``building_the_view`` freezes is the operator's view; a record replaced later is
    freed by reference counting only if the view holds no reference cycles (a frozen cycle
    would never be collected)."""
    status = {
        "phase": "Scheduled",
        "placements": [{"node": "a", "allocId": "ns/w0-0", "score": 50}],
        "resources": {"cpu": "100m", "memory": "64Mi"},
    }
    spec = {
        "kind": "Job",
        "resources": {"cpu": "100m", "memory": "64Mi"},
        "constraints": ['node.labels["zone"] == "a"'],
    }
    # The first constraint compiled in a process builds CEL's parser, which holds cycles of
    # its own for the process's life: built before the count, not counted as the view's.
    ClusterState().upsert_workload(stored_workload("first", "1", spec, status))
    gc.collect()
    gc.disable()
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="4", memory="8Gi"))
    for i in range(50):
        state.upsert_workload(stored_workload(f"w{i}", "1", spec, status))
    state.upsert_workload(stored_workload("w0", "2", spec, None))  # one record replaced
    assert len(state.records) == 50
    del state
    assert gc.collect() == 0


class _Cyclic:
    def __init__(self) -> None:
        self.me = self


def test_garbage_from_before_the_view_is_collected_not_frozen() -> None:
    garbage = _Cyclic()
    ref = weakref.ref(garbage)
    gc.disable()
    del garbage  # a cycle: only the collector frees it
    assert ref() is not None
    with building_the_view():
        pass
    assert ref() is None


def test_the_c_librarys_free_pages_are_given_back_once_the_view_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []

    def trim(pad: int) -> int:
        trims.append(pad)
        return 1

    monkeypatch.setattr(heap, "_TRIM", trim)
    with building_the_view():
        assert trims == []
    assert trims == [0]  # every free page, none kept as padding


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibcs_malloc_trim_is_found_where_glibc_is_the_c_library() -> None:
    assert heap._TRIM is not None
    heap.give_back()
