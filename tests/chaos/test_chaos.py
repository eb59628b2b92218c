"""Every chaos scenario at a size that exercises it (``make chaos`` runs them at full size),
against a control plane of their own: these kill and restart its servers.

Each asserts what the scenario's figures claim: the number of faults asked for here, each
proven to have happened as intended by the operator's log or metrics, the audit log or the
cluster's state (a trial whose fault cannot be shown is retried, up to a bound, and then the
row falls short); zero invariant violations at every observation the monitor made; and
convergence after every fault (a convergence that times out is a violation).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.devcluster.binaries import BinariesNotFound
from controller.devcluster.controlplane import ControlPlaneError
from tests.chaos import scenarios
from tests.chaos.lab import Lab, Row, chaos_control_plane

pytestmark = [pytest.mark.controlplane, pytest.mark.chaos]

#: Sizes for `make test`: every scenario at least twice, at least 10 operator kills with
#: decisions in flight (issue 19). Timeouts are generous: the CI machine is small.
KILLS = 10
TRIALS = 2


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    workdir: Path = tmp_path_factory.mktemp("chaos")
    plane = chaos_control_plane(workdir)
    problem = None
    try:
        plane.start()
    except (BinariesNotFound, ControlPlaneError) as e:
        problem = str(e)
    if problem is not None:
        pytest.fail(f"cannot start the chaos control plane: {problem}", pytrace=False)
    lab = Lab(plane, workdir)
    try:
        yield lab
    finally:
        lab.close()
        plane.stop()


def held(row: Row, wanted: int) -> None:
    """The row's claims: ``wanted`` faults proven, nothing violated, every poll checked."""
    print(row.line())
    assert row.violations == [], "\n".join(row.problems())
    assert row.proven >= wanted, "\n".join(row.problems())
    assert row.polls >= row.trials, f"only {row.polls} observations for {row.trials} trials"
    assert len(row.converge) >= wanted, "\n".join(row.problems())


@pytest.mark.timeout(900)
def test_operator_sigkill_with_decisions_in_flight(lab: Lab) -> None:
    held(scenarios.operator_kills(lab, KILLS, nodes=8, ops=6), KILLS)


@pytest.mark.timeout(600)
def test_apiserver_and_etcd_sigkill(lab: Lab) -> None:
    held(scenarios.server_kills(lab, TRIALS), 2 * TRIALS)


@pytest.mark.timeout(600)
def test_apiserver_outage_longer_than_the_renew_deadline(lab: Lab) -> None:
    held(scenarios.apiserver_outage(lab, TRIALS), TRIALS)


@pytest.mark.timeout(600)
def test_expired_watch_relists(lab: Lab) -> None:
    held(scenarios.watch_expiry(lab, TRIALS), TRIALS)


@pytest.mark.timeout(900)
def test_split_brain_old_leader_writes_nothing(lab: Lab) -> None:
    held(scenarios.split_brain(lab, TRIALS), TRIALS)


@pytest.mark.timeout(600)
def test_service_account_token_rotation(lab: Lab) -> None:
    held(scenarios.token_rotation(lab, TRIALS), TRIALS)


@pytest.mark.timeout(600)
def test_flaky_network(lab: Lab) -> None:
    row = scenarios.flaky_network(lab, TRIALS)
    held(row, TRIALS)
    assert row.figures.get("operator restarts") == 0, row.line()


@pytest.mark.timeout(600)
def test_burst(lab: Lab) -> None:
    held(scenarios.burst(lab, workloads=150, nodes=100, bursts=TRIALS), TRIALS)
