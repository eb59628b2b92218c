"""The chaos suite at full size (``make chaos``): every scenario of ``tests/chaos/scenarios.py``
against a fresh real control plane, one line of figures each, then the table.

    python bench/chaos.py                       # every scenario (make chaos)
    python bench/chaos.py --only split-brain --split-trials 1 --keep

Exit status 1 when any invariant was violated, when a fault asked for was not proven to have
happened as intended (the row says why), or when a scenario failed outright.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos import scenarios
from tests.chaos.lab import Lab, Row, chaos_control_plane

SCENARIOS = (
    "operator-kill",
    "server-kill",
    "apiserver-outage",
    "watch-expiry",
    "split-brain",
    "token",
    "flaky-network",
    "burst",
)


def failed(rows: list[Row]) -> list[str]:
    """The scenarios that fail the run: a violation, or fewer faults proven than asked for."""
    return [row.scenario for row in rows if not row.ok]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", action="append", choices=SCENARIOS, help="repeatable")
    parser.add_argument("--kills", type=int, default=50, help="operator SIGKILLs, proven")
    parser.add_argument("--server-trials", type=int, default=5, help="apiserver + etcd kills")
    parser.add_argument("--outage-trials", type=int, default=3, help="15-20 s apiserver outages")
    parser.add_argument("--watch-trials", type=int, default=5)
    parser.add_argument("--split-trials", type=int, default=5)
    parser.add_argument("--token-trials", type=int, default=3)
    parser.add_argument("--flaky-trials", type=int, default=5, help="flaky-network periods")
    parser.add_argument("--flaky-seconds", type=float, default=20.0, help="each period's length")
    parser.add_argument("--burst-workloads", type=int, default=10_000)
    parser.add_argument("--burst-nodes", type=int, default=5_000)
    parser.add_argument("--bursts", type=int, default=1)
    parser.add_argument("--no-resizes", action="store_true", help="no resizes in the kill stream")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args(argv)
    chosen = args.only or list(SCENARIOS)
    runs: dict[str, Callable[[Lab], Row]] = {
        "operator-kill": lambda lab: scenarios.operator_kills(
            lab, args.kills, resizes=not args.no_resizes
        ),
        "server-kill": lambda lab: scenarios.server_kills(lab, args.server_trials),
        "apiserver-outage": lambda lab: scenarios.apiserver_outage(lab, args.outage_trials),
        "watch-expiry": lambda lab: scenarios.watch_expiry(lab, args.watch_trials),
        "split-brain": lambda lab: scenarios.split_brain(lab, args.split_trials),
        "token": lambda lab: scenarios.token_rotation(lab, args.token_trials),
        "flaky-network": lambda lab: scenarios.flaky_network(
            lab, args.flaky_trials, seconds=args.flaky_seconds
        ),
        "burst": lambda lab: scenarios.burst(
            lab, args.burst_workloads, args.burst_nodes, bursts=args.bursts
        ),
    }
    workdir = Path(tempfile.mkdtemp(prefix="orca-chaos-"))
    rows: list[Row] = []
    with chaos_control_plane(workdir) as plane:
        lab = Lab(plane, workdir)
        try:
            for name in chosen:
                started = time.monotonic()
                try:
                    row = runs[name](lab)
                except Exception:  # one scenario's crash must not hide the others' figures
                    row = Row(name)
                    row.violation("scenario-failed", name, traceback.format_exc(limit=3))
                rows.append(row)
                print(f"{row.line()}  [{time.monotonic() - started:.0f}s]", flush=True)
                for problem in row.problems()[:10]:
                    print(f"    {problem}", flush=True)
        finally:
            lab.close()
    print("\nscenario         trials proven/wanted polls violations converge (per fault) figures")
    for row in rows:
        print(row.line())
    failures = failed(rows)
    if failures:
        print(f"FAILED: {', '.join(failures)}")
    print(f"(logs and audit log in {workdir})" if args.keep else "")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
