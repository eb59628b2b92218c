"""Benchmark ``orca plan`` end to end, through the real CLI in a child process, as a user runs it.

Writes a ``kubectl get nodes -o yaml``-shaped file of Nodes (``bench_manifests``' kubelet-shaped
Nodes, ~3 KB each; ``--lean-nodes``: only the fields orca reads, ~0.4 KB each) and a
multi-document file of Workloads in the benchmarks' mix
(``bench_scheduler``: Jobs and Services of 1-5 replicas, two CEL constraints each), runs
``orca plan --nodes F --workloads F -o json --timings`` and prints, per Workload count:

- the time to the first decision (from the child's own ``--timings`` line: since the process
  started, so interpreter start-up and imports are in it),
- the total wall time (spawn to exit, measured here) and Workloads per second end to end,
- the child's CPU time and peak RSS (its rusage, from ``wait4``),
- the CLI's phase times (imports, reading the Nodes, the Workloads, planning, output).

``--runs N`` gives the best of N by wall time (the machine is shared: the fastest run is the one
least disturbed). ``--save DIR`` keeps each run's JSON output and ``--compare DIR`` checks the
placements against a saved run (e.g. made on another commit): same inputs, same plan.

    python bench/bench_plan.py                        # 5,000 nodes; 5,000 and 20,000 Workloads
    python bench/bench_plan.py --workloads 5000 --runs 3 --compare /tmp/before
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_manifests import node_object, write_nodes
from bench.bench_scheduler import random_spec
from bench.common import child_usage, command_line, record

ORCA = Path(sys.executable).with_name("orca")
TIMINGS = re.compile(r"^orca plan: timings: (.*)$", re.MULTILINE)


def write_workloads(path: Path, count: int, seed: int) -> None:
    """``count`` Workload manifests in the benchmarks' mix, one YAML document each."""
    rng = random.Random(seed)
    docs = [
        {
            "apiVersion": "orca.cloudinit.dev/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": f"w{i}", "namespace": "bench"},
            "spec": random_spec(rng),
        }
        for i in range(count)
    ]
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump_all(docs, Dumper=dumper, sort_keys=False))


def write_lean_nodes(path: Path, count: int) -> int:
    """The same Nodes with only what orca reads (name, labels, allocatable, the Ready
    condition): ~0.4 KB each, as a generated or trimmed inventory would be."""
    rng = random.Random(7)
    items = []
    for i in range(count):
        full = node_object(i, rng)
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": full["metadata"]["name"],
                    "labels": full["metadata"]["labels"],
                },
                "status": {
                    "allocatable": full["status"]["allocatable"],
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=dumper)
    path.write_text(text)
    return len(text.encode())


@dataclass(frozen=True)
class Run:
    wall: float  # spawn to exit, seconds
    cpu: float  # user + system, seconds
    rss_mb: float  # peak resident set
    phases: dict[str, float]  # the CLI's own --timings, seconds
    exit_code: int


def run_cli(
    nodes: Path, workloads: Path, out: Path, timings: bool = True, extra: Sequence[str] = ()
) -> Run:
    """One ``orca plan`` (with ``extra`` arguments) in a child process; its stdout goes to
    ``out``."""
    cmd = [str(ORCA), "plan", "--nodes", str(nodes), "--workloads", str(workloads), "-o", "json"]
    cmd += ["--timings"] if timings else []
    cmd += extra
    with out.open("wb") as stdout, tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        err = stderr.read().decode()
    if child.returncode not in (0, 1):
        raise SystemExit(f"orca plan failed ({child.returncode}): {err.strip()}")
    phases: dict[str, float] = {}
    found = TIMINGS.search(err)
    if found:  # "imports 0.31 s, nodes 0.42 s, ..."
        for part in found.group(1).split(", "):
            name, _, value = part.rpartition(" ")[0].rpartition(" ")
            phases[name] = float(value)
    cpu, rss_mb = child_usage(usage)
    return Run(
        wall=wall,
        cpu=cpu,
        rss_mb=rss_mb,
        phases=phases,
        exit_code=child.returncode,
    )


def placements(path: Path) -> dict[str, Any]:
    """What a plan decided, without the timestamps: workload -> (phase, placements, reasons)."""
    results = json.loads(path.read_text())["results"]
    return {
        r["workload"]: (
            r.get("phase"),
            [(p["node"], p["allocId"], p["score"]) for p in r.get("placements", [])],
            r.get("message"),
            r.get("unschedulable"),
        )
        for r in results
    }


def compare(ours: Path, theirs: Path) -> str:
    if not theirs.exists():
        return f"no {theirs} to compare with"
    a, b = placements(ours), placements(theirs)
    if list(a) != list(b):
        return "DIFFERENT: not the same Workloads in the same order"
    differing = [key for key in a if a[key] != b[key]]
    if differing:
        return f"DIFFERENT: {len(differing)} Workloads, first {differing[0]}"
    return f"same plan as {theirs} ({len(a)} Workloads)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument(
        "--lean-nodes",
        action="store_true",
        help="Nodes with only the fields orca reads (~0.4 KB each) instead of kubelet-shaped",
    )
    parser.add_argument("--workloads", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--runs", type=int, default=1, help="best of N (by wall time)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--save", type=Path, help="keep each plan's JSON output here")
    parser.add_argument("--compare", type=Path, help="check the plans against those saved here")
    parser.add_argument(
        "--no-timings", action="store_true", help="for an orca without --timings (older commits)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        nodes = Path(tmp) / "nodes.yaml"
        counts = tuple(args.workloads)
        # In a process of its own: a child's peak RSS (ru_maxrss) counts the memory of the
        # parent it was forked from, so this process stays small.
        writer = multiprocessing.get_context("spawn").Process(
            target=write_inputs, args=(Path(tmp), args.nodes, args.lean_nodes, counts, args.seed)
        )
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            raise SystemExit(f"writing the inputs failed ({writer.exitcode})")
        shape = "lean" if args.lean_nodes else "kubelet-shaped"
        print(f"{args.nodes} {shape} Nodes, {nodes.stat().st_size / 1e6:.1f} MB of YAML")
        figures: dict[str, Any] = {"nodes file_mb": nodes.stat().st_size / 1e6}
        for count in args.workloads:
            workloads = Path(tmp) / f"workloads-{count}.yaml"
            out = Path(tmp) / f"plan-{count}.json"
            runs = [run_cli(nodes, workloads, out, not args.no_timings) for _ in range(args.runs)]
            best = min(runs, key=_wall)
            first = best.phases.get("first decision")
            shown = f"{first:5.2f} s" if first is not None else "  n/a"
            print(
                f"{count:>6} Workloads ({workloads.stat().st_size / 1e6:.1f} MB): "
                f"first decision {shown}  total {best.wall:5.2f} s wall "
                f"{best.cpu:5.2f} s CPU  {count / best.wall:7,.0f} Workloads/s end to end  "
                f"peak RSS {best.rss_mb:4.0f} MB  exit {best.exit_code}"
            )
            figures[f"{args.nodes} {shape} nodes, {count} workloads"] = {
                "first decision_s": first,
                "total wall_s": best.wall,
                "cpu_s": best.cpu,
                "end to end_workloads_per_s": count / best.wall,
                "peak RSS_mb": best.rss_mb,
                "exit code": best.exit_code,
                **{f"phase: {k}_s": v for k, v in best.phases.items() if k != "first decision"},
            }
            if best.phases:
                print("       " + ", ".join(f"{k} {v:.2f} s" for k, v in best.phases.items()))
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / out.name).write_bytes(out.read_bytes())
            if args.compare:
                print("       " + compare(out, args.compare / out.name))
    record("bench_plan", figures, command_line(argv))
    return 0


def write_inputs(
    directory: Path, nodes: int, lean: bool, workloads: tuple[int, ...], seed: int
) -> None:
    """``nodes.yaml`` and ``workloads-<count>.yaml`` for each count, in ``directory``."""
    (write_lean_nodes if lean else write_nodes)(directory / "nodes.yaml", nodes)
    for count in workloads:
        write_workloads(directory / f"workloads-{count}.yaml", count, seed)


def _wall(run: Run) -> float:
    return run.wall


if __name__ == "__main__":
    sys.exit(main())
