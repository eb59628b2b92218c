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


def test_only_a_late_status_write_that_landed_is_a_split_brain_violation() -> None:
    """From the audit log: an old leader's status write past its deadline is a violation when
    the API server accepted it; refused by its precondition (409) or an Event, it changes no
    placement and is only counted."""
    from tests.chaos.scenarios import _Audit, late_write_landed

    assert late_write_landed(_Audit("patch", "workloads/status", "j27", 200, 0.0))
    assert not late_write_landed(_Audit("patch", "workloads/status", "j27", 409, 0.0))
    assert not late_write_landed(_Audit("create", "events", "", 201, 0.0))


def test_the_row_names_what_its_slowest_convergence_waited_for() -> None:
    """A long maximum comes with the liveness violations its convergence waited on last, so
    a slow trial can be read without rerunning it."""
    from tests.chaos.invariants import Violation
    from tests.chaos.scenarios import _converged

    row = Row("apiserver/etcd-kill", wanted=2)
    waited = [Violation("undecided", "srv/w00012", "generation 2, status describes 1")]
    _converged(row, 3.7, [], set())
    _converged(row, 46.2, waited, set())
    _converged(row, 3.6, [Violation("undecided", "srv/w00013", "x")], set())
    assert row.converge == [3.7, 46.2, 3.6]
    assert row.slowest == (46.2, waited)
    assert "the slowest (46.2s) waited last for: undecided: srv/w00012" in row.line()
