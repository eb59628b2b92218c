"""Hostile CEL against the scheduling loop: refused at compile time, the rest unharmed.

Issue 7 measured one Job whose constraint nests three comprehensions over ten-item literal
lists (112 characters) taking ~116 s to plan over 1,000 nodes. This script prints, through
``controller.scheduler.plan.plan`` (the ``orca plan`` path):

1. how long compiling each hostile expression takes to be refused, and the message;
2. the time to plan 1 hostile Workload (constraint, then affinity target) + 20 ordinary Jobs
   over ``--nodes`` nodes, with the hostile Workload's phase and how many Jobs were placed;
3. the costliest *accepted* shape (two nested comprehensions over ten items, reading the
   hostname so every node is a distinct value) over ``--accepted-nodes`` nodes: what a
   Workload can still cost the loop within the static budget; and an ordinary comprehension
   over 30 labels of nodes that each carry their own ``kubernetes.io/hostname`` label;
4. microseconds per evaluation of ordinary expressions, cel-python's plain interpreter against
   the metered one (the runtime cost limit's overhead).

Read it as: the hostile Workload is ``Invalid`` after milliseconds of compiling and the plan
of the rest takes as long as without it; metering costs nothing measurable on ordinary
expressions (cel-python is slow either way: hundreds of microseconds per evaluation, about
0.5 ms per comprehension step). What the static budget still accepts can cost tens of
milliseconds per distinct node; the per-Workload cycle budget bounds that in the operator:
it evaluates the nodes the budget allows and reports the rest as not evaluated.

    python bench/bench_cel_hostile.py
    python bench/bench_cel_hostile.py --nodes 1000 --accepted-nodes 1000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_scheduler import workload
from bench.common import command_line, record
from controller.api.models import Workload
from controller.scheduler.celexpr import CelCompileError, cel_view, compile_expression
from controller.scheduler.nodes import NodeInfo
from controller.scheduler.plan import plan

DIGITS = "[0,1,2,3,4,5,6,7,8,9]"
DEPTH3 = f'{DIGITS}.all(a, {DIGITS}.all(b, {DIGITS}.all(c, node.hostname != "")))'
DEPTH4 = f'{DIGITS}.all(a, {DIGITS}.all(b, {DIGITS}.all(c, {DIGITS}.all(d, node.hostname != ""))))'
ACCEPTED = f'{DIGITS}.all(a, {DIGITS}.all(b, node.hostname != ""))'
HOSTILE = {
    "depth-3 (issue, 112 chars)": DEPTH3,
    "depth-4 (issue, 143 chars)": DEPTH4,
    "tags x tags": "node.tags.exists(a, node.tags.exists(b, a == b))",
    "string doubling x16": "[node.hostname]"
    + "".join(f".map(a{i}, a{i} + a{i})" for i in range(16))
    + ".exists(s, s.size() > 0)",
    "55 nested parentheses": "(" * 55 + "true" + ")" * 55,
}
ORDINARY = [
    '"ssd" in node.tags && node.labels["topology.kubernetes.io/zone"] != "eu-1c"',
    'node.tags.exists(t, t.startsWith("gp"))',
    'node.labels.exists(k, k.startsWith("node.") && node.labels[k] == "m5.xlarge")',
    "node.cpu >= 8000",
]


def make_nodes(count: int, rng: random.Random) -> list[NodeInfo]:
    """Nodes with the labels of a cloud cluster (zone, instance type) and a few tags."""
    return [
        NodeInfo(
            hostname=f"node-{i:06d}",
            runtimes=("docker",),
            tags=tuple(sorted(t for t in ("ssd", "gpu", "edge") if rng.random() < 0.4)),
            labels={
                "topology.kubernetes.io/zone": rng.choice(["eu-1a", "eu-1b", "eu-1c"]),
                "node.kubernetes.io/instance-type": rng.choice(["m5.xlarge", "m5.2xlarge"]),
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
            },
            kind="linux",
            cpu=8000,
            memory=32 << 30,
        )
        for i in range(count)
    ]


def compile_times() -> dict[str, float]:
    """Milliseconds to compile (and refuse) each hostile expression."""
    figures = {}
    for name, source in HOSTILE.items():
        compile_expression.cache_clear()
        started = time.perf_counter()
        try:
            compile_expression(source)
            outcome = "ACCEPTED"
        except CelCompileError as exc:
            outcome = f"refused: {exc}"
        ms = (time.perf_counter() - started) * 1000
        print(f"compile  {name:<28} {ms:8.2f} ms  {outcome[:110]}", flush=True)
        figures[f"{name}, {outcome.split(':')[0]}_ms"] = ms
    return figures


def jobs(count: int) -> list[Workload]:
    return [
        workload(
            f"job-{i}",
            {
                "kind": "Job",
                "constraints": [ORDINARY[i % 2]],
                "resources": {"cpu": "100m", "memory": "64Mi"},
            },
        )
        for i in range(count)
    ]


def plan_with(nodes: list[NodeInfo], label: str, spec: dict[str, Any]) -> dict[str, Any]:
    hostile = workload("hostile", {"kind": "Job", **spec})
    ordinary = jobs(20)
    started = time.perf_counter()
    results = plan(nodes, [hostile, *ordinary])
    elapsed = time.perf_counter() - started
    placed = sum(1 for r in results[1:] if r.fully_placed)
    phase = results[0].status.phase
    print(
        f"plan     {label:<28} {len(nodes)} nodes: {elapsed * 1000:9.1f} ms  "
        f"hostile {phase and phase.value}, ordinary Jobs placed {placed}/20",
        flush=True,
    )
    return {
        f"{label}_ms": elapsed * 1000,
        f"{label}: the hostile Workload's phase": phase and phase.value,
        f"{label}: ordinary Jobs placed (of 20)": placed,
    }


def accepted_cost(nodes: list[NodeInfo]) -> dict[str, float]:
    expr = compile_expression(ACCEPTED)
    job = workload("costly", {"kind": "Job", "constraints": [ACCEPTED]})
    started = time.perf_counter()
    (result,) = plan(nodes, [job])
    elapsed = time.perf_counter() - started
    print(
        f"accepted depth-2 over 10 (est. cost {expr.cost}) {len(nodes)} nodes: "
        f"{elapsed:7.2f} s = {elapsed / len(nodes) * 1000:6.2f} ms per distinct node, "
        f"phase {result.status.phase and result.status.phase.value}",
        flush=True,
    )
    return {
        "depth-2 comprehension over 10 items: estimated cost": expr.cost,
        f"depth-2 comprehension over 10 items, {len(nodes)} nodes_s": elapsed,
        "depth-2 comprehension over 10 items, per node_ms": elapsed / len(nodes) * 1000,
    }


def labels_per_node(count: int) -> dict[str, float]:
    """An ordinary comprehension over the labels of real-looking nodes: 30 labels, one of them
    ``kubernetes.io/hostname``, so every node is a distinct value and evaluated once each."""
    nodes = [
        NodeInfo(
            hostname=f"node-{i:06d}",
            labels={
                "kubernetes.io/hostname": f"node-{i:06d}",
                **{f"feature.node.kubernetes.io/cpu-{j}": "true" for j in range(29)},
            },
            cpu=8000,
            memory=32 << 30,
        )
        for i in range(count)
    ]
    source = 'node.labels.exists(k, k.startsWith("nvidia.com/"))'
    job = workload("labels", {"kind": "Job", "affinity": [{"target": source, "weight": 5}]})
    started = time.perf_counter()
    plan(nodes, [job])
    elapsed = time.perf_counter() - started
    print(
        f"ordinary {source} (est. cost {compile_expression(source).cost}), 30 labels, "
        f"{count} nodes: {elapsed:6.2f} s = {elapsed / count * 1000:6.2f} ms per node",
        flush=True,
    )
    return {"labels.exists over 30 labels, per node_ms": elapsed / count * 1000}


def overhead(nodes: list[NodeInfo], repeats: int) -> dict[str, float]:
    try:
        from controller.scheduler.celexpr import _Meter, _MeteredEvaluator
    except ImportError:  # before the runtime limit existed: nothing to compare
        return {}
    from celpy.adapter import json_to_cel

    node = nodes[0]
    activation = {"node": json_to_cel(cel_view(node, node.cpu, node.memory))}
    figures = {}
    for source in ORDINARY:
        expr = compile_expression(source)
        plain, metered = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            expr.program.evaluate(activation)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            evaluator = _MeteredEvaluator(
                expr.program.ast, expr.program.new_activation(), _Meter(10**9)
            )
            evaluator.evaluate(activation)
            metered.append(time.perf_counter() - started)
        p, m = statistics.median(plain) * 1e6, statistics.median(metered) * 1e6
        print(
            f"eval     plain {p:8.1f} us  metered {m:8.1f} us  ({(m - p) / p:+6.1%})  {source}",
            flush=True,
        )
        figures[f"{source}, plain_us"] = p
        figures[f"{source}, metered_us"] = m
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--accepted-nodes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    nodes = make_nodes(args.nodes, random.Random(args.seed))
    figures: dict[str, dict[str, Any]] = {"compiling a hostile expression": compile_times()}
    planned = plan_with(nodes, "1 hostile constraint + 20", {"constraints": [DEPTH3]})
    planned |= plan_with(
        nodes, "1 hostile affinity + 20", {"affinity": [{"target": DEPTH3, "weight": 5}]}
    )
    planned |= plan_with(nodes, "no hostile, 1 trivial + 20", {"constraints": ["true"]})
    figures[f"planning over {args.nodes} nodes"] = planned
    accepted = accepted_cost(make_nodes(args.accepted_nodes, random.Random(args.seed)))
    accepted |= labels_per_node(args.accepted_nodes)
    figures[f"what the budget lets through, {args.accepted_nodes} nodes"] = accepted
    figures["one evaluation, plain and metered"] = overhead(nodes, args.repeats)
    record("bench_cel_hostile", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
