"""The collector's pace around the operator's initial LIST.

The operator's heap is mostly its view of the cluster (Nodes, Workloads, the ledger), built
once by the initial LIST and long-lived after. At the collector's default pace that build is
what it spends most on: the heap grows so fast that full collections, each over the whole heap
built so far, run again and again (5,000 Nodes and 10,000 Workloads: 8 full collections, 1.15 s
of CPU, 6% of the operator's CPU for the whole backlog). Little of what it builds is cyclic
garbage. So: a collection and ``gc.freeze`` before the view is built (the imports' objects,
mostly), no collections while it is built, then one full collection and ``gc.freeze`` again:
what survives is the view, and later collections skip it. Frozen objects that become garbage
later are still freed by reference counting; only cyclic garbage among them is never
collected. The view holds no cycles (``tests/unit/test_heap.py`` drops one and finds nothing
left for the collector), and nothing that was garbage already is frozen, so what can stay is
what was alive at start-up and dropped in a cycle later (its own tasks, at most).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000
"""Allocations between young collections once the view is built (Python's default: 700)."""


@contextmanager
def building_the_view() -> Iterator[None]:
    """No collections inside; on the way out, one full collection and ``gc.freeze``. On the
    way in, one collection and ``gc.freeze`` too (of the imports, mostly), so the one on the
    way out looks at the view alone."""
    enabled = gc.isenabled()
    gc.collect()  # what is garbage now is collected, not frozen with the rest
    gc.freeze()  # the imports' objects: long-lived, no collection needs to look at them again
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
        if enabled:
            gc.enable()
