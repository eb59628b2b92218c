"""A short run of every chaos scenario (``make chaos`` runs them at full size), against a
control plane of their own: these kill and restart its servers.

Each asserts what the scenario's figures claim: zero invariant violations, convergence, and
that the fault was really injected (decisions in flight, an expired watch, a refused token).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.devcluster.binaries import BinariesNotFound
from controller.devcluster.controlplane import ControlPlaneError
from tests.chaos import scenarios
from tests.chaos.invariants import dump
from tests.chaos.lab import Lab, Row, chaos_control_plane

pytestmark = [pytest.mark.controlplane, pytest.mark.chaos]


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


def held(row: Row) -> None:
    print(row.line())
    assert row.violations == [], dump(row.violations)
    assert row.faults >= row.trials >= 1
    assert len(row.converge) == row.faults, row.notes  # converged after every fault


def test_operator_sigkill_under_changes(lab: Lab) -> None:
    row = scenarios.operator_kills(lab, trials=4, nodes=8, ops=6)
    held(row)
    assert not row.notes[0].startswith("kills with decisions still pending: 0/"), row.notes


def test_apiserver_and_etcd_sigkill(lab: Lab) -> None:
    row = scenarios.server_kills(lab, trials=1)
    held(row)
    assert row.faults == 2


def test_expired_watch_relists(lab: Lab) -> None:
    row = scenarios.watch_expiry(lab, trials=1)
    held(row)
    assert row.notes[-1].endswith(": 1/1"), row.notes


def test_split_brain_old_leader_writes_nothing(lab: Lab) -> None:
    held(scenarios.split_brain(lab, trials=1))


def test_service_account_token_rotation(lab: Lab) -> None:
    row = scenarios.token_rotation(lab)
    held(row)
    assert not [n for n in row.notes if "not injected" in n], row.notes


def test_burst(lab: Lab) -> None:
    held(scenarios.burst(lab, workloads=200, nodes=100))
