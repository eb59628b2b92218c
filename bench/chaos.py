"""The chaos suite at full size (``make chaos``): every scenario of ``tests/chaos/scenarios.py``
against a fresh real control plane, one line of figures each, then the table; the figures go to
``bench/results/chaos.json`` (docs/faults.md shows the latest).

What the operator survives, and how:

- **Killed at any moment** (``kill -9``): a restart rebuilds the ledger from every Workload's
  status before deciding anything; a write that was in flight either landed or is decided
  again.
- **kube-apiserver or etcd down** (restarted, or a network cut): requests and watches are
  retried without a restart of the operator (the informers back off up to 30 s between
  attempts, for ever; kopf's few requests at start-up for ~5 minutes, ``configure_kopf``);
  while the Lease cannot be renewed the leader stops writing (next points) and takes it up
  again. Once the server answers again (the Lease's renews probe it every 2 s) the informers
  stop waiting out their back-off and watch again, and a watch the restarted server answers
  with 410 lists again at once, where client-go's reflector waits out its grown back-off in
  both places (``tools/cache/reflector.go``; ``controller/operator/kube/informer.py``).
- **A dropped connection** (a load balancer or proxy closing it, an API server restart or
  GOAWAY mid-request, an answer cut short, TLS errors, timeouts): the operator's client turns
  every request or watch that got no answer into one error (``kube.TransportError``), and every
  part of the operator retries it: the leader goes on renewing (it stops writing only past its
  renew deadline), the watches resume from the last version they saw, a status write is
  decided again after a back-off of 0.05 s doubling to 10 s (kube-scheduler's
  ``PodMaxBackoffSeconds``). A write that got no answer may have landed, so what it booked and
  what it gave up both stay booked until the Workload is read back. An Event is dropped with a
  log line. The operator does not stop because the network hiccuped (``test_leader.py``,
  ``test_informer.py``, ``test_kube_client.py`` close connections mid-request against an
  in-process API server).
- **Two replicas, one frozen** (a GC pause, a stalled VM, ``SIGSTOP``): write fencing. A
  replica counts as leader only until the start of its last successful Lease renew +
  ``renew_deadline`` (10 s), on the monotonic clock, as client-go does; the check runs before
  every decision and again right before a status write's or Event's bytes leave the process
  (aiohttp writes them from a task of its own, a loop iteration after the write started, so a
  freeze can fall in between). A replica that wakes up past its deadline steps down and sends
  nothing it had queued; one that reads the Lease held by another replica steps down at once.
  The standby takes over after ``lease_duration`` (15 s) of silence, measured on its own clock.
  No client can close the window between the last check and the bytes leaving; the status
  write's resourceVersion precondition is what makes such a straggler harmless (split-brain
  below).
- **An expired watch** (410 Gone: the API server restarted, or its watch cache or etcd no
  longer holds the operator's resourceVersion): that kind's informer LISTs again (that kind
  only), merges deletions against its own store and watches on from the new LIST (after a
  Workload relist every Workload is looked at again), so a deleted Node, Workload or
  PriorityClass does not linger in the operator's view. A watch that expires at once (the
  list's own version already too old) backs off like any failure instead of listing in a
  tight loop.
- **Rotated ServiceAccount tokens**: the in-cluster token file is read again every 50 s, as
  client-go reads it (a read that fails keeps the last token), and a 401 makes the operator
  load its credentials again and retry once, watches included.

Running it:

    python bench/chaos.py                       # every scenario at full size (make chaos)
    python bench/chaos.py --only split-brain --split-trials 1 --keep
    make chaos CHAOS_ARGS="--only flaky-network --flaky-trials 2"

It starts its own control plane (durable etcd, an audit log of status writes, Events and Lease
updates; kwok's Node Leases left out). ``make test`` runs every scenario at a size that
exercises it (``tests/chaos/test_chaos.py``: at least 10 operator kills with decisions in
flight, every other scenario twice; about 5 minutes on a 2-core machine). Exit status 1 when
any invariant was violated, when a fault asked for was not proven to have happened as intended
(the row says why), or when a scenario failed outright.

The chaos cluster is a living one, like every test's: kwok heartbeats its Nodes and
kube-controller-manager watches them. Its Nodes register as kubelets do (no Ready condition;
admission taints them ``not-ready``), and a scenario waits until kwok has reported each Ready
and the controller has lifted the taint before it relies on it (after an API server restart
that can take 30 s, the controller's watches backing off). A Node the kill stream or the flaky
network adds under churn joins without a wait: the invariants expect nothing of it before
then. Its node timing is not a real cluster's (``CHAOS_NODE_TIMING`` in ``tests/chaos/lab.py``
explains it): kwok's Leases last 600 s and are renewed every 150 s, and the controller marks a
Node ``Unknown`` only after 900 s without a renewal, so an outage cannot turn into node loss
(which ``tests/integration/test_node_lifecycle.py`` covers). A scenario in which a Node the
cluster had made schedulable turns not Ready or gets a lifecycle taint fails (``node-lost``),
whatever else it proved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, record
from tests.chaos import scenarios
from tests.chaos.lab import Lab, Row, chaos_control_plane

#: Each scenario's name (``--only``) and the function that runs it (its docstring says what it
#: does and proves: docs/faults.md is made from them).
SCENARIOS: dict[str, Callable[..., Row]] = {
    "operator-kill": scenarios.operator_kills,
    "server-kill": scenarios.server_kills,
    "apiserver-outage": scenarios.apiserver_outage,
    "watch-expiry": scenarios.watch_expiry,
    "split-brain": scenarios.split_brain,
    "token": scenarios.token_rotation,
    "flaky-network": scenarios.flaky_network,
    "burst": scenarios.burst,
}


def failed(rows: list[Row]) -> list[str]:
    """The scenarios that fail the run: a violation, or fewer faults proven than asked for."""
    return [row.scenario for row in rows if not row.ok]


def figures(row: Row) -> dict[str, Any]:
    """A row's figures as ``bench/results/chaos.json`` keeps them."""
    times = sorted(row.converge)
    return {
        "passed": row.ok,
        "trials": row.trials,
        "faults proven": row.proven,
        "faults wanted": row.wanted,
        "observations checked": row.polls,
        "violations": len(row.violations),
        "converge, median_s": statistics.median(times) if times else None,
        "converge, max_s": times[-1] if times else None,
        **row.figures,
        **({"notes": "; ".join(row.notes)} if row.notes else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", action="append", choices=list(SCENARIOS), help="repeatable")
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
    recorded = {name: figures(row) for name, row in zip(chosen, rows, strict=True)}
    record("chaos", recorded, command_line(argv))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
