"""Benchmark and figures for the rebalancer's planner (``controller.scheduler.rebalance``,
issue 13).

Prints, for the issue's scenarios, the moves proposed and the objective before/after
(utilisation stddev, topology skew, nodes in use against first-fit-decreasing), then the
planning time on drifted clusters of 1,000 and 5,000 nodes: half the nodes busy (the
benchmarks' mixed batch of Jobs and Services with CEL constraints, placed by the scheduler),
half new and empty, half the Workloads ``rebalance: Allowed``.

On the scenarios the planner should reach the objective's optimum (stddev 0 on the spread
scenario, the first-fit-decreasing count of nodes on the fragmented one, skew 0 on the zone).
The drifted clusters show what a pass costs: with a budget of moves, and until nothing
improves; a second pass on that output finds nothing to move but visits every Allowed
Workload, which is why the operator plans in a worker thread.

    python bench/bench_rebalance.py                  # scenarios, then 1,000 and 5,000 nodes
    python bench/bench_rebalance.py --nodes 5000 --max-moves 50
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_scheduler import make_nodes, random_spec, workload
from bench.common import command_line, own_peak_rss_mb, print_table, record
from controller.api.models import Workload
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.rebalance import MAX_MOVES, Plan, Rebalancer, moved
from controller.scheduler.scheduler import Scheduler

GiB = 1 << 30
ZONE = "topology.kubernetes.io/zone"


def node(
    name: str, cpu: int = 4000, memory: int = 8 * GiB, labels: dict[str, str] | None = None
) -> NodeInfo:
    return NodeInfo(
        hostname=name, cpu=cpu, memory=memory, labels=labels or {}, runtimes=("docker",)
    )


def placed(nodes: list[NodeInfo], workloads: list[Workload], scheduler: Scheduler) -> Ledger:
    ledger = Ledger(NodeTable(nodes))
    for w in workloads:
        ledger.load(w.key, scheduler.schedule(w, ledger, now=time.time()).bookings)
    return ledger


def report(title: str, plan: Plan, seconds: float) -> dict[str, Any]:
    b, a = plan.before, plan.after
    rows = [
        ("moves proposed", f"{len(plan.moves)} (budget {plan.max_moves}, "
                           f"complete: {plan.complete})"),
        ("utilisation stddev", f"{b.utilisation_stddev:.4f} -> {a.utilisation_stddev:.4f}"),
        ("topology skew", f"{b.skew} -> {a.skew} (over maxSkew: {b.over_max_skew} -> "
                          f"{a.over_max_skew})"),
        ("nodes in use", f"{b.nodes_in_use} -> {a.nodes_in_use} (freed {plan.nodes_freed}; "
                         f"first-fit-decreasing: {plan.ffd_nodes})"),
        ("planning time", f"{seconds * 1000:.1f} ms"),
    ]  # fmt: skip
    print(f"\n{title}")
    print_table(("", ""), [(f"  {name}", value) for name, value in rows])
    return {
        "moves proposed": len(plan.moves),
        "utilisation stddev before": b.utilisation_stddev,
        "utilisation stddev after": a.utilisation_stddev,
        "topology skew before": b.skew,
        "topology skew after": a.skew,
        "nodes in use before": b.nodes_in_use,
        "nodes in use after": a.nodes_in_use,
        "nodes in use, first-fit-decreasing": plan.ffd_nodes,
        "planning time_ms": seconds * 1000,
    }


def timed(rebalancer: Rebalancer, workloads: list[Workload], ledger: Ledger) -> tuple[Plan, float]:
    started = time.perf_counter()
    plan = rebalancer.plan(workloads, ledger, now=time.time())
    return plan, time.perf_counter() - started


def scenarios(max_moves: int) -> dict[str, dict[str, Any]]:
    scheduler = Scheduler()
    rebalancer = Rebalancer(scheduler, max_moves=max_moves)

    # 10 busy nodes, then 10 new empty ones; Spread Services.
    services = [
        workload(f"svc-{k}", {"kind": "Service", "count": 5, "rebalance": "Allowed",
                              "resources": {"cpu": "500m", "memory": "1Gi"}})
        for k in range(12)
    ]  # fmt: skip
    ledger = placed([node(f"old-{i:02}") for i in range(10)], services, scheduler)
    ledger.rebind(NodeTable([*ledger.table.nodes, *(node(f"new-{i:02}") for i in range(10))]))
    figures = {}
    figures["10 busy + 10 new nodes, 12 Spread Services x 5"] = report(
        "10 busy + 10 new empty nodes, 12 Spread Services x 5 (60 replicas)",
           *timed(rebalancer, services, ledger))  # fmt: skip

    # A fragmented BinPack cluster: 40 replicas of 1-2 cpu, one or two per node on 30 nodes.
    rng = random.Random(7)
    nodes = [node(f"n-{i:02}", cpu=8000, memory=32 * GiB) for i in range(30)]
    jobs = []
    ledger = Ledger(NodeTable(nodes))
    for i in range(40):
        cpu = rng.choice([1000, 2000])
        size = {"cpu": f"{cpu}m", "memory": "2Gi"}
        job = {"kind": "Job", "strategy": "BinPack", "rebalance": "Allowed", "resources": size}
        jobs.append(workload(f"job-{i:02}", job))
        ledger.load(jobs[-1].key, [Booking(f"n-{i % 30:02}", f"{jobs[-1].key}-0", cpu, 2 * GiB)])
    figures["fragmented BinPack: 40 Jobs, 30 nodes"] = report(
        "Fragmented BinPack: 40 Jobs of 1-2 cpu over 30 nodes of 8 cpu",
           *timed(rebalancer, jobs, ledger))  # fmt: skip

    # A zone restored: 9 replicas spread over zones a and b while c was down.
    spread = [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]
    service: dict[str, Any] = {"kind": "Service", "count": 9, "rebalance": "Allowed"}
    service |= {"topologySpread": spread, "resources": {"cpu": "250m"}}
    web = [workload(f"web-{k}", service) for k in range(4)]
    a_b = [node(f"{z}-{i}", labels={ZONE: z}) for z in "ab" for i in range(3)]
    ledger = placed(a_b, web, scheduler)
    ledger.rebind(NodeTable([*a_b, *(node(f"c-{i}", labels={ZONE: "c"}) for i in range(3))]))
    figures["zone c restored: 4 Services x 9, maxSkew 1"] = report(
        "Zone c restored: 4 Services x 9 replicas, topologySpread zone maxSkew 1",
           *timed(rebalancer, web, ledger))  # fmt: skip
    return figures


def drifted(n_nodes: int, rng: random.Random) -> tuple[list[Workload], Ledger, Scheduler]:
    """Half the nodes busy with the benchmarks' mixed batch, then the other half joins."""
    nodes = make_nodes(n_nodes, rng)
    old, new = nodes[: n_nodes // 2], nodes[n_nodes // 2 :]
    workloads = []
    for i in range(n_nodes):  # about 3 replicas per old node
        spec: dict[str, Any] = random_spec(rng)
        spec["rebalance"] = "Allowed" if i % 2 == 0 else "Never"
        spec["strategy"] = "BinPack" if i % 5 == 0 else "Spread"
        spec["resources"] = {"cpu": "1", "memory": "2Gi"}
        workloads.append(workload(f"w-{i:06d}", spec))
    scheduler = Scheduler()
    ledger = placed(old, workloads, scheduler)
    ledger.rebind(NodeTable([*old, *new]))
    return workloads, ledger, scheduler


def scale(n_nodes: int, budgets: list[int]) -> dict[str, Any]:
    workloads, ledger, scheduler = drifted(n_nodes, random.Random(n_nodes))
    replicas = len(ledger)
    allowed = sum(1 for w in workloads if w.spec.rebalance.value == "Allowed")
    print(f"\n{n_nodes:,} nodes ({n_nodes // 2:,} busy, {n_nodes - n_nodes // 2:,} new), "
          f"{len(workloads):,} Workloads ({allowed:,} Allowed), {replicas:,} replicas")  # fmt: skip
    figures: dict[str, Any] = {"replicas": replicas}
    for budget in budgets:
        plan, seconds = timed(Rebalancer(scheduler, max_moves=budget), workloads, ledger)
        b, a = plan.before, plan.after
        print(f"  max {budget:>4} moves: {len(plan.moves):>4} moves in {seconds:6.2f} s  "
              f"({seconds / max(len(plan.moves), 1) * 1000:.1f} ms/move); stddev "
              f"{b.utilisation_stddev:.4f} -> {a.utilisation_stddev:.4f}, nodes in use "
              f"{b.nodes_in_use} -> {a.nodes_in_use} (FFD {plan.ffd_nodes})")  # fmt: skip
        figures[f"at most {budget} moves: moves"] = len(plan.moves)
        figures[f"at most {budget} moves: planning_s"] = seconds
    # Until nothing improves, then a pass over that output: it finds nothing, visiting all.
    plan, seconds = timed(Rebalancer(scheduler, max_moves=MAX_MOVES), workloads, ledger)
    b, a = plan.before, plan.after
    print(f"  until converged: {len(plan.moves):>5} moves in {seconds:6.2f} s; stddev "
          f"{b.utilisation_stddev:.4f} -> {a.utilisation_stddev:.4f}")  # fmt: skip
    figures["until converged: moves"] = len(plan.moves)
    figures["until converged: planning_s"] = seconds
    after = ledger.copy()
    for m in plan.moves:
        after.load(m.workload, moved(after.bookings(m.workload), m))
    again, seconds = timed(Rebalancer(scheduler, max_moves=MAX_MOVES), workloads, after)
    print(f"  a second pass on that output: {len(again.moves)} moves in {seconds:.2f} s")
    figures["a second pass (nothing to move): moves"] = len(again.moves)
    figures["a second pass (nothing to move): planning_s"] = seconds
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, action="append", help="cluster sizes (repeatable)")
    parser.add_argument("--max-moves", type=int, action="append", help="budgets (repeatable)")
    parser.add_argument("--no-scenarios", action="store_true")
    args = parser.parse_args(argv)
    budgets = args.max_moves or [10, 100]
    figures: dict[str, Any] = {}
    if not args.no_scenarios:
        figures |= scenarios(max(budgets))
    for n in args.nodes or [1000, 5000]:
        figures[f"drifted cluster of {n} nodes"] = scale(n, budgets)
    rss = own_peak_rss_mb()
    print(f"\npeak RSS {rss:.0f} MB")
    figures["peak RSS_mb"] = rss
    record("bench_rebalance", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
