"""Phase times for ``orca plan --timings``: where a run's seconds went, on one stderr line.

An operator planning against a large cluster wants to know whether the time goes to reading
the files, to the scheduler or to printing, and how long before the first decision (the
start-up a user waits through). Times are wall-clock seconds since the process started (read
from ``/proc`` on Linux, so the interpreter's start and the imports count; elsewhere since this
module was imported), printed as ``name N.NN s`` items that ``bench/bench_plan.py`` parses.
"""

from __future__ import annotations

import os
import time
from typing import TextIO

_IMPORTED = time.perf_counter()


def _process_age() -> float | None:
    """Seconds since this process started, or None where ``/proc`` cannot tell."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        # The command name (field 2) may hold spaces: count fields after its closing ')'.
        start_ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        ticks = os.sysconf("SC_CLK_TCK")
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / ticks
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class PhaseTimer:
    """Consecutive phases (``phase``: the time since the previous mark) and points in time
    (``point``: the time since the process started), in the order they were recorded."""

    def __init__(self) -> None:
        age = _process_age()
        now = time.perf_counter()
        # perf_counter's value at process start (or at this module's import, without /proc)
        self.origin = now - age if age is not None else _IMPORTED
        self.last = self.origin
        self.items: list[tuple[str, float]] = []

    def phase(self, name: str) -> None:
        now = time.perf_counter()
        self.items.append((name, now - self.last))
        self.last = now

    def point(self, name: str) -> None:
        self.items.append((name, time.perf_counter() - self.origin))

    def line(self) -> str:
        total = time.perf_counter() - self.origin
        shown = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.items)
        return f"orca plan: timings: {shown}, total {total:.2f} s"

    def report(self, out: TextIO) -> None:
        out.write(self.line() + "\n")
