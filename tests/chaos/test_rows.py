"""A row of figures fails the run unless every fault asked for was proven and nothing was
violated (``bench/chaos.py`` exits 1 then): a fault that may not have happened never passes."""

from __future__ import annotations

from bench.chaos import failed
from tests.chaos.lab import Row


def test_a_fault_not_proven_fails_the_run() -> None:
    short = Row("split-brain", wanted=3, trials=9, proven=2)
    short.unproven.append("trial 9: no write pending at the freeze")
    assert failed([short]) == ["split-brain"]
    assert "only 2/3 faults proven" in short.problems()[0]


def test_a_violation_fails_the_run_even_with_every_fault_proven() -> None:
    row = Row("flaky-network", wanted=2, trials=2, proven=2)
    row.violation("operator-exited", "pid 1", "leader election failed: ServerDisconnectedError")
    assert failed([row]) == ["flaky-network"]


def test_every_fault_proven_and_nothing_violated_passes() -> None:
    assert failed([Row("burst", wanted=1, trials=1, proven=1)]) == []
