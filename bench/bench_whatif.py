"""Benchmark the what-if through the CLI a user runs: ``orca plan --drain`` and
``--add-nodes FILE:auto`` at 5,000 Nodes and 10,000 Workloads (issue 26).

The inputs are a cluster as ``kubectl get`` would show it after orca has placed it: lean Nodes
(``bench_plan``'s, four zones) and the benchmarks' mix of Workloads (``bench_scheduler``:
Jobs and Services of 1-5 replicas, two CEL constraints each), their cpu requests scaled by
``--cpu-scale`` so the cluster is well used, and each Workload's status holding the
placements a first ``orca plan`` made (so the drain has replicas to displace). Then, each
the best of ``--runs`` by wall time, in one run side by side:

- ``plan``: the same files without a question, i.e. planning the whole world once (the
  reference: what any what-if has to cost at least);
- ``drain``: ``--drain topology.kubernetes.io/zone=<zone>``;
- ``drain + auto``: the same with ``--add-nodes TEMPLATE:auto`` (an 8-core template), with the
  count found and how many plans its search made.

Printed per row: wall and CPU seconds, peak RSS, the answer's figures (displaced, moved,
unplaced, the count), and the ratio to ``plan``.

    python bench/bench_whatif.py                     # 5,000 Nodes, 10,000 Workloads
    python bench/bench_whatif.py --nodes 500 --workloads 1000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_plan import Run, run_cli, write_node_file
from bench.bench_scheduler import random_spec
from bench.common import command_line, record

ZONE = "topology.kubernetes.io/zone"


def write_workloads(path: Path, count: int, seed: int, cpu_scale: float) -> None:
    """``count`` Workloads in the benchmarks' mix, cpu requests scaled."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        spec = random_spec(rng)
        millis = int(spec["resources"]["cpu"].removesuffix("m"))
        spec["resources"]["cpu"] = f"{round(millis * cpu_scale)}m"
        docs.append(
            {
                "apiVersion": "orca.cloudinit.dev/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": f"w{i}", "namespace": "bench"},
                "spec": spec,
            }
        )
    dump(path, docs)


def dump(path: Path, docs: list[dict[str, Any]]) -> None:
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump_all(docs, Dumper=dumper, sort_keys=False))


def settle(workloads: Path, plan_json: Path, out: Path) -> int:
    """The Workloads with the statuses the plan gave them (placements and the size they hold),
    as ``kubectl get orcawl -o yaml`` would show them once the operator has placed them; the
    number of placements."""
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = list(yaml.load_all(workloads.read_text(), Loader=loader))
    results = {r["workload"]: r for r in json.loads(plan_json.read_text())["results"]}
    total = 0
    for doc in docs:
        result = results[f"bench/{doc['metadata']['name']}"]
        placements = result.get("placements", [])
        total += len(placements)
        doc["status"] = {"placements": placements, "resources": result.get("resources", {})}
    dump(out, docs)
    return total


def write_template(path: Path) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "spare",
            "labels": {
                ZONE: "eu-1d",
                "runtime.orca.cloudinit.dev/docker": "true",
                "runtime.orca.cloudinit.dev/process": "true",
                "runtime.orca.cloudinit.dev/wasmtime": "true",
                "tag.orca.cloudinit.dev/ssd": "",
            },
        },
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}},
    }
    dump(path, [node])


def write_inputs(directory: Path, nodes: int, workloads: int, seed: int, scale: float) -> None:
    write_node_file(directory / "nodes.yaml", nodes, lean=True, not_ready=0)
    write_workloads(directory / "fresh.yaml", workloads, seed, scale)
    write_template(directory / "template.yaml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument("--cpu-scale", type=float, default=4.0)
    parser.add_argument("--zone", default="eu-1a", help="the zone to drain")
    parser.add_argument("--runs", type=int, default=1, help="best of N (by wall time)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # In a process of its own: a child's peak RSS counts the parent it was forked from.
        writer = multiprocessing.get_context("spawn").Process(
            target=write_inputs, args=(d, args.nodes, args.workloads, args.seed, args.cpu_scale)
        )
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            raise SystemExit(f"writing the inputs failed ({writer.exitcode})")
        nodes, settled = d / "nodes.yaml", d / "settled.yaml"
        run_cli(nodes, d / "fresh.yaml", d / "first.json", timings=False)
        placed = settle(d / "fresh.yaml", d / "first.json", settled)
        print(
            f"{args.nodes} Nodes, {args.workloads} Workloads ({placed} replicas placed, cpu "
            f"requests x{args.cpu_scale:g}); draining {ZONE}={args.zone}"
        )
        rows = [
            ("plan", []),
            ("drain", ["--drain", f"{ZONE}={args.zone}"]),
            (
                "drain + auto",
                ["--drain", f"{ZONE}={args.zone}", "--add-nodes", f"{d / 'template.yaml'}:auto"],
            ),
        ]
        reference: Run | None = None
        figures: dict[str, Any] = {"replicas placed": placed}
        for name, extra in rows:
            out = d / "out.json"
            runs = [run_cli(nodes, settled, out, extra=extra) for _ in range(args.runs)]
            best = min(runs, key=lambda r: r.wall)
            reference = reference or best
            answer = json.loads(out.read_text())
            figures[name] = {
                "wall_s": best.wall,
                "cpu_s": best.cpu,
                "ratio to plan (wall)_x": best.wall / reference.wall,
                "peak RSS_mb": best.rss_mb,
                "exit code": best.exit_code,
                **answer_figures(answer),
            }
            print(
                f"  {name:<13} {best.wall:6.2f} s wall {best.cpu:6.2f} s CPU "
                f"({best.wall / reference.wall:4.1f}x plan)  peak RSS {best.rss_mb:4.0f} MB  "
                f"exit {best.exit_code}  {describe(answer)}"
            )
    record("bench_whatif", figures, command_line(argv))
    return 0


def answer_figures(answer: dict[str, Any]) -> dict[str, int | None]:
    """What ``describe`` prints, as figures."""
    if "drained" not in answer:
        short = sum(1 for r in answer["results"] if r.get("phase") != "Scheduled")
        return {"workloads not fully placed": short}
    added = answer.get("nodesToAdd")
    return {
        "nodes drained": len(answer["drained"]),
        "replicas displaced": answer["displaced"],
        "replicas moved": len(answer["moved"]),
        "replicas unplaced": len(answer["unplaced"]),
        **({"nodes to add": added["count"], "plans searched": added.get("plans")} if added else {}),
    }


def describe(answer: dict[str, Any]) -> str:
    if "drained" not in answer:
        short = sum(1 for r in answer["results"] if r.get("phase") != "Scheduled")
        return f"{len(answer['results'])} Workloads, {short} not fully placed"
    text = (
        f"{len(answer['drained'])} nodes drained, {answer['displaced']} displaced, "
        f"{len(answer['moved'])} moved, {len(answer['unplaced'])} unplaced"
    )
    added = answer.get("nodesToAdd")
    if added is not None:
        text += f"; nodes to add: {added['count']} ({added.get('plans')} plans)"
    return text


if __name__ == "__main__":
    sys.exit(main())
