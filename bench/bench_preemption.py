"""Benchmark one preemption decision on a full cluster (issue 12's Performance section).

Builds ``bench_scheduler``'s synthetic cluster, fills every node with 2-core replicas of
lower-priority Workloads (priorities 0-9, a few replicas each, as a busy cluster has), then
times what the operator does for a high-priority Workload that finds no room: the decision
(UNSCHEDULABLE), the victim selection (``select_victims``) and the decision again with the
victims' replicas removed. Prints milliseconds per step (median of the repeats) and the victims.
Each Workload has a creationTimestamp (one second apart; preemption's start-time stand-in) unless
``--no-start-times``, which leaves them all unknown (the tie-break on start times then costs
nothing to bound).

Nearly all of the time is the victim selection (walking the replicas of the lower
priorities); the two decisions are cheap. Nodes are searched in the order of a lower bound on
their rank (their lowest victim priority, that times the fewest victims that could cover the
shortfall for the sum, those fewest, the latest start on the node), so only a few nodes are
examined exactly: a first version that examined every node was about ten times slower.

    python bench/bench_preemption.py                  # 5,000 nodes
    python bench/bench_preemption.py --nodes 20000 --repeat 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_scheduler import make_nodes, workload
from bench.common import command_line, record
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeTable
from controller.scheduler.preemption import select_victims
from controller.scheduler.scheduler import Scheduler

REPLICA_CPU = 2000
REPLICAS_PER_WORKLOAD = 4


def full_ledger(nodes_count: int, seed: int) -> tuple[Ledger, dict[str, int]]:
    """Every node full of 2-core replicas; Workload ``wN`` has priority N % 10."""
    nodes = make_nodes(nodes_count, random.Random(seed))
    ledger = Ledger(NodeTable(nodes))
    owned: dict[str, list[Booking]] = {}
    serial = 0
    for info in nodes:
        for _ in range(info.cpu // REPLICA_CPU):
            key = f"bench/w{serial // REPLICAS_PER_WORKLOAD}"
            owned.setdefault(key, []).append(
                Booking(info.hostname, f"{key}-{serial % REPLICAS_PER_WORKLOAD}", REPLICA_CPU, 0)
            )
            serial += 1
    for key, bookings in owned.items():
        ledger.load(key, bookings)
    priorities = {key: int(key.rsplit("w", 1)[1]) % 10 for key in owned}
    return ledger, priorities


def run(
    nodes_count: int, count: int, constrained: bool, repeat: int, seed: int, start_times: bool
) -> dict[str, Any]:
    ledger, priorities = full_ledger(nodes_count, seed)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    started = (
        {key: base + timedelta(seconds=int(key.rsplit("w", 1)[1])) for key in priorities}
        if start_times
        else {}
    )
    spec: dict[str, Any] = {"kind": "Service", "count": count, "resources": {"cpu": "3"}}
    if constrained:
        spec["constraints"] = ['"ssd" in node.tags']
    boss = workload("boss", spec)
    scheduler = Scheduler()
    scheduler.schedule(
        boss, ledger, now=time.time()
    )  # warm the filter memo, as a running operator has it
    decide, select, again = [], [], []
    victims = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        decision = scheduler.schedule(boss, ledger, now=time.time())
        t1 = time.perf_counter()
        plan = select_victims(
            scheduler, boss, ledger, decision, 100, priorities, started, now=time.time()
        )
        t2 = time.perf_counter()
        assert plan is not None
        before = {key: ledger.bookings(key) for key in plan.victim_keys()}
        for key, kept in plan.remaining(ledger).items():
            ledger.load(key, kept)
        after = scheduler.schedule(boss, ledger, now=time.time())
        t3 = time.perf_counter()
        assert after.placed == count, after.message
        for key, bookings in before.items():
            ledger.load(key, bookings)
        decide.append(t1 - t0)
        select.append(t2 - t1)
        again.append(t3 - t2)
        victims = len(plan.victims)
    ms = [statistics.median(x) * 1000 for x in (decide, select, again)]
    print(
        f"nodes={nodes_count:>6}  bookings={len(ledger):>6}  replicas={count}  "
        f"{'ssd-only' if constrained else 'any-node'}:  decide {ms[0]:7.1f} ms  "
        f"select victims {ms[1]:7.1f} ms  decide again {ms[2]:7.1f} ms  "
        f"total {sum(ms):7.1f} ms  victims {victims}",
        flush=True,
    )
    return {
        "bookings": len(ledger),
        "decide_ms": ms[0],
        "select victims_ms": ms[1],
        "decide again_ms": ms[2],
        "total_ms": sum(ms),
        "victims": victims,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append", help="node counts (repeatable)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-start-times", action="store_true", help="no creationTimestamp on any Workload"
    )
    args = parser.parse_args(argv)
    figures = {}
    for nodes_count in args.nodes or [5000]:
        for count in (1, 5):
            for constrained in (False, True):
                where = "ssd-only" if constrained else "any node"
                figures[f"{nodes_count} nodes, {count} replicas, {where}"] = run(
                    nodes_count,
                    count,
                    constrained,
                    args.repeat,
                    args.seed,
                    not args.no_start_times,
                )
    record("bench_preemption", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
