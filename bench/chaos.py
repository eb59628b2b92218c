"""The chaos suite at full size (``make chaos``): every scenario of ``tests/chaos/scenarios.py``
against a fresh real control plane, one line of figures each, then the table.

    python bench/chaos.py                       # every scenario (make chaos)
    python bench/chaos.py --only split-brain --split-trials 1 --keep

Exit status 1 when any invariant was violated.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos import scenarios
from tests.chaos.lab import Lab, Row, chaos_control_plane

SCENARIOS = ("operator-kill", "server-kill", "watch-expiry", "split-brain", "token", "burst")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=SCENARIOS, help="repeatable")
    parser.add_argument("--kills", type=int, default=50, help="operator SIGKILLs")
    parser.add_argument("--server-trials", type=int, default=5, help="apiserver + etcd kills")
    parser.add_argument("--watch-trials", type=int, default=5)
    parser.add_argument("--split-trials", type=int, default=3)
    parser.add_argument("--burst-workloads", type=int, default=10_000)
    parser.add_argument("--burst-nodes", type=int, default=5_000)
    parser.add_argument("--no-resizes", action="store_true", help="no resizes in the kill stream")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args(argv)
    chosen = args.only or list(SCENARIOS)
    runs: dict[str, Callable[[Lab], Row]] = {
        "operator-kill": lambda lab: scenarios.operator_kills(
            lab, args.kills, resizes=not args.no_resizes
        ),
        "server-kill": lambda lab: scenarios.server_kills(lab, args.server_trials),
        "watch-expiry": lambda lab: scenarios.watch_expiry(lab, args.watch_trials),
        "split-brain": lambda lab: scenarios.split_brain(lab, args.split_trials),
        "token": scenarios.token_rotation,
        "burst": lambda lab: scenarios.burst(lab, args.burst_workloads, args.burst_nodes),
    }
    workdir = Path(tempfile.mkdtemp(prefix="orca-chaos-"))
    rows: list[Row] = []
    with chaos_control_plane(workdir) as plane:
        lab = Lab(plane, workdir)
        try:
            for name in chosen:
                started = time.monotonic()
                row = runs[name](lab)
                rows.append(row)
                print(f"{row.line()}  [{time.monotonic() - started:.0f}s]", flush=True)
                for violation in row.violations[:10]:
                    print(f"    {violation}", flush=True)
        finally:
            lab.close()
    print("\nscenario         trials faults violations converge (per trial)")
    for row in rows:
        print(row.line())
    print(f"(logs and audit log in {workdir})" if args.keep else "")
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if any(row.violations for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
