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

``--not-ready PCT`` turns that share of the Nodes NotReady (their Ready condition False since
``NOT_READY_SINCE``, spread evenly over the file) and plans at ``--now`` a minute later, while
the 300 s that Jobs and Services tolerate a not-ready node by default still run down: every
run passes that ``--now``, so runs with and without NotReady Nodes plan at the same clock.

``--mix needs`` plans what issue 46 added beside the usual mix: every fourth Node offers 8
``nvidia.com/gpu``; a tenth of the Workloads are training gangs of 8 workers of one GPU each
(``gang.minCount: 8``), a fifth carry a disruption budget (``minAvailable: 50%``), the rest as
before. ``--mix plain`` (the default) is the usual mix, on Nodes without GPUs.

``--runs N`` gives the best of N by wall time (the machine is shared: the fastest run is the one
least disturbed). ``--save DIR`` keeps each run's JSON output and ``--compare DIR`` checks the
placements against a saved run (e.g. made on another commit): same inputs, same plan. Each
size (Nodes, Workloads, mix) is recorded apart, merged with the other sizes' latest runs.

    python bench/bench_plan.py                        # 5,000 nodes; 5,000 and 20,000 Workloads
    python bench/bench_plan.py --workloads 5000 --runs 3 --compare /tmp/before
    python bench/bench_plan.py --workloads 3000 --not-ready 0 5   # all Ready, then 5 % NotReady
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
#: When the NotReady Nodes (``--not-ready``) went NotReady, and the clock every run plans at:
#: a minute later, inside the default 300 s toleration of a not-ready node.
NOT_READY_SINCE = "2026-01-01T00:00:00Z"
PLAN_NOW = "2026-01-01T00:01:00Z"


def not_ready_indexes(count: int, percent: float) -> set[int]:
    """``percent`` % of ``count`` Nodes, spread evenly (every 20th for 5 %)."""
    return {i for i in range(count) if int((i + 1) * percent / 100) != int(i * percent / 100)}


def make_not_ready(node: dict[str, Any]) -> None:
    """Turn a Node's Ready condition False since ``NOT_READY_SINCE`` (its kubelet reports it
    not ready; no taint yet: orca implies the node lifecycle controller's ``not-ready``)."""
    for condition in node["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition.update(
                status="False",
                reason="KubeletNotReady",
                message="container runtime network not ready",
                lastTransitionTime=NOT_READY_SINCE,
            )


GPU = "nvidia.com/gpu"
GPUS_PER_NODE = "8"
GPU_NODE_EVERY = 4


def needs_spec(rng: random.Random) -> dict[str, Any]:
    """The ``needs`` mix: a tenth training gangs of 8 one-GPU workers, a fifth with a
    disruption budget, the rest the usual mix (``random_spec``)."""
    draw = rng.random()
    if draw < 0.1:
        return {
            "kind": "Service",
            "count": 8,
            "resources": {"cpu": "1", "memory": "4Gi", GPU: 1},
            "gang": {"minCount": 8},
        }
    spec = random_spec(rng)
    if draw < 0.3:
        spec["disruption"] = {"minAvailable": "50%"}
    return spec


def write_workloads(path: Path, count: int, seed: int, mix: str = "plain") -> None:
    """``count`` Workload manifests in the benchmarks' mix (or ``needs``), one YAML document
    each."""
    rng = random.Random(seed)
    spec_of = needs_spec if mix == "needs" else random_spec
    docs = [
        {
            "apiVersion": "orca.cloudinit.dev/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": f"w{i}", "namespace": "bench"},
            "spec": spec_of(rng),
        }
        for i in range(count)
    ]
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump_all(docs, Dumper=dumper, sort_keys=False))


def write_node_file(
    path: Path, count: int, lean: bool, not_ready: float, gpus: bool = False
) -> int:
    """The Nodes file: kubelet-shaped (``bench_manifests``) or lean, ``not_ready`` % of them
    NotReady, every ``GPU_NODE_EVERY``-th offering ``GPUS_PER_NODE`` GPUs with ``gpus``;
    returns its size in bytes."""
    if not lean and not not_ready and not gpus:
        return write_nodes(path, count)  # the file the earlier figures were measured on
    rng = random.Random(7)
    items = [(lean_node if lean else _same)(node_object(i, rng)) for i in range(count)]
    for i in not_ready_indexes(count, not_ready):
        make_not_ready(items[i])
    if gpus:
        for item in items[::GPU_NODE_EVERY]:
            item["status"]["allocatable"][GPU] = GPUS_PER_NODE
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=dumper)
    path.write_text(text)
    return len(text.encode())


def _same(node: dict[str, Any]) -> dict[str, Any]:
    return node


def lean_node(full: dict[str, Any]) -> dict[str, Any]:
    """A Node with only what orca reads (name, labels, allocatable, the Ready condition):
    ~0.4 KB, as a generated or trimmed inventory would be."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": full["metadata"]["name"], "labels": full["metadata"]["labels"]},
        "status": {
            "allocatable": full["status"]["allocatable"],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


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
    """One ``orca plan`` at ``PLAN_NOW`` (with ``extra`` arguments) in a child process; its
    stdout goes to ``out``."""
    cmd = [str(ORCA), "plan", "--nodes", str(nodes), "--workloads", str(workloads), "-o", "json"]
    cmd += ["--now", PLAN_NOW, *(["--timings"] if timings else []), *extra]
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
    parser.add_argument(
        "--mix",
        choices=("plain", "needs"),
        default="plain",
        help="the Workloads: the usual mix, or with GPU gangs and budgets (see above)",
    )
    parser.add_argument(
        "--not-ready",
        type=float,
        nargs="+",
        default=[0.0],
        metavar="PCT",
        help="the share of NotReady Nodes, in %% (several: one Nodes file each, runs alternate)",
    )
    args = parser.parse_args(argv)
    if any(not 0 <= p <= 100 for p in args.not_ready):
        parser.error("--not-ready: a percentage, 0 to 100")
    with tempfile.TemporaryDirectory() as tmp:
        counts = tuple(args.workloads)
        # In a process of its own: a child's peak RSS (ru_maxrss) counts the memory of the
        # parent it was forked from, so this process stays small.
        writer = multiprocessing.get_context("spawn").Process(
            target=write_inputs,
            args=(
                Path(tmp),
                args.nodes,
                args.lean_nodes,
                tuple(args.not_ready),
                counts,
                args.seed,
                args.mix,
            ),
        )
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            raise SystemExit(f"writing the inputs failed ({writer.exitcode})")
        shape = "lean" if args.lean_nodes else "kubelet-shaped"
        figures: dict[str, Any] = {}
        for count in args.workloads:
            workloads = Path(tmp) / f"workloads-{count}.yaml"
            runs: dict[float, list[Run]] = {p: [] for p in args.not_ready}
            for _ in range(args.runs):  # alternating: the machine's load drifts
                for percent in args.not_ready:
                    nodes, out = _nodes_file(Path(tmp), percent), _out(Path(tmp), count, percent)
                    runs[percent].append(run_cli(nodes, workloads, out, not args.no_timings))
            for percent, made in runs.items():
                nodes, out = _nodes_file(Path(tmp), percent), _out(Path(tmp), count, percent)
                print(
                    f"{args.nodes} {shape} Nodes ({percent:g} % NotReady, {args.mix} mix), "
                    f"{nodes.stat().st_size / 1e6:.1f} MB of YAML; --now {PLAN_NOW}"
                )
                best = min(made, key=_wall)
                report(best, count, workloads)
                key = f"{args.nodes} {shape} nodes ({percent:g} % NotReady), {count} workloads"
                if args.mix != "plain":
                    key += f", {args.mix} mix"
                figures[key] = figures_of(best, count)
                if args.save:
                    args.save.mkdir(parents=True, exist_ok=True)
                    (args.save / out.name).write_bytes(out.read_bytes())
                if args.compare:
                    print("       " + compare(out, args.compare / out.name))
    record("bench_plan", figures, command_line(argv), merge=True)
    return 0


def report(best: Run, count: int, workloads: Path) -> None:
    first = best.phases.get("first decision")
    shown = f"{first:5.2f} s" if first is not None else "  n/a"
    print(
        f"{count:>6} Workloads ({workloads.stat().st_size / 1e6:.1f} MB): "
        f"first decision {shown}  total {best.wall:5.2f} s wall "
        f"{best.cpu:5.2f} s CPU  {count / best.wall:7,.0f} Workloads/s end to end  "
        f"peak RSS {best.rss_mb:4.0f} MB  exit {best.exit_code}"
    )
    if best.phases:
        print("       " + ", ".join(f"{k} {v:.2f} s" for k, v in best.phases.items()))
        planning = best.phases.get("planning")
        if planning:
            print(f"       planning through the CLI: {count / planning:,.0f} Workloads/s")


def figures_of(best: Run, count: int) -> dict[str, Any]:
    """One run's figures for ``bench/results``."""
    planning = best.phases.get("planning")
    return {
        "total wall_s": best.wall,
        "cpu_s": best.cpu,
        "end to end_workloads_per_s": count / best.wall,
        "planning through the CLI_workloads_per_s": count / planning if planning else None,
        "peak RSS_mb": best.rss_mb,
        "exit code": best.exit_code,
        **{f"phase: {k}_s": v for k, v in best.phases.items()},
    }


def _nodes_file(directory: Path, percent: float) -> Path:
    return directory / f"nodes-{percent:g}.yaml"


def _out(directory: Path, count: int, percent: float) -> Path:
    """A plan's output; named as before when every Node is Ready (``--compare`` old runs)."""
    return directory / (f"plan-{count}.json" if not percent else f"plan-{count}-{percent:g}.json")


def write_inputs(
    directory: Path,
    nodes: int,
    lean: bool,
    not_ready: tuple[float, ...],
    workloads: tuple[int, ...],
    seed: int,
    mix: str = "plain",
) -> None:
    """A Nodes file per share of NotReady Nodes and ``workloads-<count>.yaml`` for each count,
    in ``directory``."""
    for percent in not_ready:
        write_node_file(_nodes_file(directory, percent), nodes, lean, percent, mix == "needs")
    for count in workloads:
        write_workloads(directory / f"workloads-{count}.yaml", count, seed, mix)


def _wall(run: Run) -> float:
    return run.wall


if __name__ == "__main__":
    sys.exit(main())
