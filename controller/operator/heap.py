"""The collector's pace around the operator's initial LIST, and the memory given back to the
system after the operator's bursts of short-lived objects.

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

Memory freed is not given back by itself: Python passes every block over 512 bytes to the C
library's ``malloc``, and glibc keeps what such blocks freed inside its heap, below the blocks
still in use, for later allocations. The LIST's pages (decoded a page at a time) and the
failure domains' answer (``resilience``: a plan of every Workload a domain's loss moves) are
such bursts, and each left the resident set grown: at 5,000 Nodes and 30,000 Workloads the
answer left 12 MB behind that ``malloc_trim`` gives back (``bench_restart_memory``).
``give_back`` asks glibc to return its free pages to the system, after the view is built and
after each answer; elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000
"""Allocations between young collections once the view is built (Python's default: 700)."""


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # no C library by that name, or not glibc
        return None
    return trim


_TRIM = _malloc_trim()


def give_back() -> None:
    """Return the C library's free pages to the system (``malloc_trim(0)``: every free page,
    at the heap's top and between the blocks in use), where glibc is the C library."""
    if _TRIM is not None:
        _TRIM(0)


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
        give_back()
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
        if enabled:
            gc.enable()
