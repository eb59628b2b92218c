"""Where the operator's memory goes, part by part, without a cluster: what ``orca run``
imports, then its ``ClusterState`` fed what its informers deliver in
``bench_vs_kube_scheduler.py``'s backlog (``--nodes`` Nodes, ``--workloads`` Workloads as the
API server lists them), then a status decided for each Workload and held in its record, as
the status-write transaction leaves it.

Printed per part: the Python memory it holds (``tracemalloc``, traced after the part is built
and the garbage collected: what stays, not what passed through), what the imports add to the
resident set, and the peak RSS (tracemalloc's own bookkeeping included). Two variants, each in
a process of its own: every Workload from one template (``one spec``: the backlog's, which
share one parsed spec) and every Workload with a spec of its own (``distinct specs``: its cpu
request differs).

    python bench/bench_state_memory.py --nodes 5000 --workloads 10000
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, format_figure, own_peak_rss_mb, print_table, record

ONE, DISTINCT = "one spec", "distinct specs"
#: Every Workload from one template (the backlog's), or each with a spec of its own.
VARIANTS = (ONE, DISTINCT)


def rss_mb() -> float:
    """This process's resident set now (``VmRSS``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def traced_mb() -> float:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


def measure(nodes_count: int, workloads_count: int, distinct: bool) -> dict[str, float]:
    """One variant, in this process (a fresh one: ``main`` runs each in a child)."""
    start = rss_mb()
    import controller.operator.app  # noqa: F401  (what ``orca run`` imports)

    imported = rss_mb()
    from bench.bench_vs_kube_scheduler import node_objects, workload_object
    from controller.operator.state import ClusterState
    from controller.scheduler.plan import plan
    from controller.scheduler.status import rfc3339_now

    nodes = node_objects(nodes_count, 1)
    bodies = []
    for i in range(workloads_count):
        body = workload_object(f"w{i}", "bench")
        body["metadata"].update(uid=f"uid-{i}", resourceVersion=str(100 + i), generation=1)
        if distinct:
            body["spec"]["resources"]["cpu"] = f"{100 + i}m"
        bodies.append(body)

    tracemalloc.start()
    base = traced_mb()
    state = ClusterState()
    for obj in nodes:
        state.upsert_node(obj)
    state.table()
    after_nodes = traced_mb()
    records = [state.upsert_workload(body) for body in bodies]
    after_workloads = traced_mb()
    workloads = [r.workload for r in records if r is not None and r.workload is not None]
    results = plan(state.nodes.values(), workloads, now=rfc3339_now())
    for result in results:
        state.set_status(state.records[result.workload.key], result.status)
    del results, workloads, records
    after_statuses = traced_mb()
    tracemalloc.stop()
    return {
        "imports RSS_mb": imported - start,
        "NodeInfos and table_mb": after_nodes - base,
        "Workload records_mb": after_workloads - after_nodes,
        "statuses held_mb": after_statuses - after_workloads,
        "per Workload_kib": (after_statuses - after_nodes) * 1024 / workloads_count,
        "peak RSS_mb": own_peak_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # a child's
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.workloads < 1:
        parser.error("--nodes and --workloads must be at least 1")
    if args.variant is not None:
        figures = measure(args.nodes, args.workloads, args.variant == DISTINCT)
        print(json.dumps(figures))
        return 0

    recorded: dict[str, dict[str, float]] = {}
    for variant in VARIANTS:
        child = [sys.executable, __file__, f"--nodes={args.nodes}"]
        child += [f"--workloads={args.workloads}", f"--variant={variant}"]
        done = subprocess.run(child, check=True, capture_output=True, text=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        recorded[f"{args.nodes} nodes, {args.workloads} workloads, {variant}"] = figures
    print(f"nodes={args.nodes} workloads={args.workloads}")
    names = list(next(iter(recorded.values())))
    print_table(
        ["figure", *VARIANTS],
        [(name, *(format_figure(f[name]) for f in recorded.values())) for name in names],
    )
    record("bench_state_memory", recorded, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
