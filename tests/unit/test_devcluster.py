"""The dev cluster's node timing: a real cluster's by default, validated, the same in the CLI."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli.dev_cluster import NODE_TIMING_DEFAULTS
from controller.devcluster.controlplane import NodeTiming


def test_the_cli_defaults_are_node_timings_defaults() -> None:
    """The CLI keeps a copy (so `orca --help` imports nothing heavy): it must not drift."""
    assert dataclasses.asdict(NodeTiming()) == NODE_TIMING_DEFAULTS


def test_the_defaults_are_a_real_clusters() -> None:
    """kubelet: 40 s Lease; kube-controller-manager v1.36: 5 s period, 50 s grace, 60 s at
    start-up (pkg/controller/nodelifecycle/config/v1alpha1/defaults.go)."""
    assert NodeTiming().controller_manager_args() == [
        "--node-monitor-period=5s",
        "--node-monitor-grace-period=50s",
        "--node-startup-grace-period=60s",
    ]
    assert NodeTiming().lease_seconds == 40


def test_fast_keeps_five_renewals_of_margin() -> None:
    fast = NodeTiming.fast()
    assert fast.grace_period == 5 * fast.lease_seconds / 4
    assert fast.grace_period < NodeTiming().grace_period


def test_scaled_keeps_the_defaults_proportions() -> None:
    """A slower heartbeat for a large cluster (the scaling benches' 15,000 Nodes): the grace
    periods grow with the Lease, so a Node has as many missed renewals of margin as at the
    defaults (a renewal every quarter of the Lease; Unknown after 5 of them, 6 at start-up)."""
    slow = NodeTiming.scaled(600)
    assert slow.controller_manager_args() == [
        "--node-monitor-period=5s",
        "--node-monitor-grace-period=750s",
        "--node-startup-grace-period=900s",
    ]
    assert slow.lease_seconds == 600
    assert NodeTiming.scaled(40) == NodeTiming()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lease_seconds": 2}, "lease_seconds must be at least 4"),
        ({"monitor_period": 0}, "monitor_period must be positive"),
        ({"grace_period": 20}, "must exceed two Lease renewals (20 s)"),
        ({"lease_seconds": 12, "startup_grace_period": 6}, "must exceed two Lease renewals (6 s)"),
    ],
)
def test_timings_that_would_make_nodes_flap_are_refused(
    kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        NodeTiming(**kwargs)  # type: ignore[arg-type]


def test_dev_cluster_start_refuses_a_bad_timing_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "dev-cluster",
            "start",
            "--dir",
            str(tmp_path),
            "--node-lease-seconds",
            "40",
            "--node-monitor-grace-period",
            "15",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "orca dev-cluster: grace periods (15.0, 60.0) must exceed two Lease renewals (20 s): "
        "a Node would flap to Unknown"
    ]
    assert not (tmp_path / "state.json").exists()


def test_extra_controller_manager_flags_reach_its_command_line(tmp_path: Path) -> None:
    """The benchmarks' and chaos suite's faster controller manager is a flag on the real
    binary's command line, after the timing flags (a later flag wins in Go's pflag)."""
    from controller.devcluster.controlplane import (
        LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
        ControlPlane,
    )

    plane = ControlPlane(tmp_path, controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS)
    command = plane._controller_manager_args(tmp_path, 10257)
    assert command[-2:] == ["--kube-api-qps=200", "--kube-api-burst=400"]
    assert "--kube-api-qps=200" not in ControlPlane(tmp_path)._controller_manager_args(
        tmp_path, 10257
    )
