"""bench_scale records each size's column whole (``record(merge=True)``), so a run that
leaves out a side a recorded column holds would blank that side's figures: it is refused
before anything runs (``blanked``), unless ``--replace``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from bench import bench_scale

#: Two recorded sizes: 5,000 / 30,000 with both sides, 5,000 / 100,000 with orca alone.
RECORDED: dict[str, dict[str, Any]] = {
    "5,000 nodes, 30,000 workloads": {
        "orca: backlog_placed_per_s": 392.0,
        "kube-scheduler: backlog_placed_per_s": 151.0,
        "orca / kube-scheduler, backlog rate_x": 2.6,
    },
    "5,000 nodes, 100,000 workloads": {
        "orca: backlog_placed_per_s": 429.0,
        "kube-scheduler: backlog_placed_per_s": None,
        "orca / kube-scheduler, backlog rate_x": None,
    },
}


def run(side: str = "both", workloads: tuple[int, ...] = (), kube: tuple[int, ...] = ()) -> Any:
    return argparse.Namespace(nodes=5000, workloads=list(workloads), kube=list(kube), side=side)


@pytest.mark.parametrize(
    ("args", "lost"),
    [
        # Both sides measured again, or a size whose column holds orca alone: nothing lost.
        (run(workloads=(30000,), kube=(30000,)), []),
        (run(workloads=(100000,)), []),
        (run(workloads=(10000,)), []),  # a size not recorded yet
        # orca alone at a size kube-scheduler was measured beside.
        (
            run(workloads=(30000, 100000)),
            ["kube-scheduler's figures at 5,000 nodes, 30,000 workloads"],
        ),
        (
            run(side="orca", workloads=(30000,), kube=(30000,)),
            ["kube-scheduler's figures at 5,000 nodes, 30,000 workloads"],
        ),
        # kube-scheduler alone: orca's column goes, at both sizes it is run at.
        (
            run(side="kube-scheduler", kube=(30000, 100000)),
            [
                "orca's figures at 5,000 nodes, 30,000 workloads",
                "orca's figures at 5,000 nodes, 100,000 workloads",
            ],
        ),
    ],
)
def test_a_run_that_leaves_out_a_recorded_side_is_named(args: Any, lost: list[str]) -> None:
    assert bench_scale.blanked(args, RECORDED) == lost


def test_the_run_is_refused_before_it_starts_and_replace_lets_it_through(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bench_scale.json").write_text(json.dumps({"figures": RECORDED}))
    monkeypatch.setattr(bench_scale, "RESULTS", tmp_path)
    with pytest.raises(SystemExit) as refused:
        bench_scale.main(["--nodes", "5000", "--workloads", "30000"])
    assert refused.value.code == 2
    assert "would blank kube-scheduler's figures at 5,000 nodes, 30,000 workloads" in (
        capsys.readouterr().err
    )

    # With --replace the same loss goes on to the next check (999,999 objects are more than
    # the Nodes hold: the run stops there, before any control plane is started).
    with pytest.raises(SystemExit) as next_check:
        bench_scale.main(["--nodes", "5000", "--workloads", "30000,999999", "--replace"])
    assert next_check.value.code == 2
    assert "more than the" in capsys.readouterr().err
