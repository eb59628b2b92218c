"""Benchmark the what-if through the CLI a user runs: ``orca plan --drain`` and
``--add-nodes FILE:auto`` at 5,000 Nodes and 10,000 Workloads (issue 26), and with
``--resilience`` and ``--consolidate`` the failure domains' what-if and consolidation (issue 48).

The inputs are a cluster as ``kubectl get`` would show it after orca has placed it: lean Nodes
(``bench_plan``'s, spread round-robin over ``--zones`` zones, five by default, each with its
``kubernetes.io/hostname`` label) and the benchmarks' mix of Workloads (``bench_scheduler``:
Jobs and Services of 1-5 replicas, two CEL constraints each), their cpu requests scaled by
``--cpu-scale`` so the cluster is well used, and each Workload's status holding the
placements a first ``orca plan`` made (so the drain has replicas to displace). Then, each
the best of ``--runs`` by wall time, in one run side by side:

- ``plan``: the same files without a question, i.e. planning the whole world once (the
  reference: what any what-if has to cost at least);
- ``drain``: ``--drain topology.kubernetes.io/zone=<zone>``;
- ``drain + auto``: the same with ``--add-nodes TEMPLATE:auto`` (an 8-core template), with the
  count found and how many plans its search made;
- with ``--resilience``: ``resilience (zones)``, ``--resilience topology.kubernetes.io/zone``
  (one what-if per zone; the issue's target: within 3x ``plan``), and ``resilience (N-1)``,
  ``--resilience kubernetes.io/hostname`` (every node lost alone; the target: under 60 s at
  5,000 Nodes), with the domains whose loss strands replicas and the most stranded; and
  ``operator answer``: the same zones' what-if as ``orca run`` computes it every
  ``--resilience-interval``, in a process of its own (its CPU seconds per answer, and the
  share of one core that makes at the default 60 s: the operator spreads an answer over ten
  times its CPU time, then waits the interval; the target: under 10 %);
- with ``--consolidate``: ``consolidate``, ``--consolidate``: the nodes that could go, the
  replicas that would move and the nodes blocked.

Printed per row: wall and CPU seconds, peak RSS, the answer's figures (displaced, moved,
unplaced, the count), and the ratio to ``plan``.

    python bench/bench_whatif.py                     # 5,000 Nodes, 10,000 Workloads
    python bench/bench_whatif.py --resilience --consolidate
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

from bench.bench_manifests import node_object
from bench.bench_plan import PLAN_NOW, Run, lean_node, run_cli
from bench.bench_scheduler import random_spec
from bench.common import command_line, record

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ZONE_NAMES = ["eu-1a", "eu-1b", "eu-1c", "eu-1d", "us-2a", "us-2b", "us-2c", "us-2d"]
#: ``orca run --resilience-interval``'s default, and the share of a core it paces an answer to.
OPERATOR_INTERVAL_S = 60.0
OPERATOR_SHARE = 0.1


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


def write_nodes(path: Path, count: int, zones: int) -> None:
    """``bench_plan``'s lean Nodes, zone ``i % zones`` for node ``i``."""
    rng = random.Random(7)
    items = []
    for i in range(count):
        node = lean_node(node_object(i, rng))
        node["metadata"]["labels"][ZONE] = ZONE_NAMES[i % zones]
        items.append(node)
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=dumper))


def write_inputs(
    directory: Path, nodes: int, workloads: int, seed: int, scale: float, zones: int
) -> None:
    write_nodes(directory / "nodes.yaml", nodes, zones)
    write_workloads(directory / "fresh.yaml", workloads, seed, scale)
    write_template(directory / "template.yaml")


def operator_answer(nodes: Path, workloads: Path, queue: Any) -> None:
    """In a process of its own: the zones' what-if as ``orca run`` answers it (a snapshot of
    the ledger, ``DomainLoss`` over it: the settling pass, then every zone), its CPU seconds
    (the operator's pacing only spreads them out) and the number of zones, on ``queue``."""
    import time

    from controller.inputs.manifests import load_nodes, load_workloads, read_manifests
    from controller.scheduler.celcache import cache_path, install_cel_parser
    from controller.scheduler.ledger import ledger_from_statuses
    from controller.scheduler.resilience import DomainLoss, domains_of, finish
    from controller.scheduler.scheduler import Scheduler

    install_cel_parser(cache_path())
    infos = load_nodes(read_manifests(nodes))
    parsed = load_workloads(read_manifests(workloads), check=Scheduler().spec_errors)
    ledger = ledger_from_statuses(infos, parsed)
    started = time.thread_time()
    loss = DomainLoss(ledger.copy(), parsed, now=PLAN_NOW)
    finish(loss.settling())
    zones = domains_of(ZONE, ledger.table.nodes)
    for domain in zones:
        finish(loss.steps(domain.nodes))
    queue.put((time.thread_time() - started, len(zones)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument("--cpu-scale", type=float, default=4.0)
    parser.add_argument("--zone", default="eu-1a", help="the zone to drain")
    parser.add_argument("--runs", type=int, default=1, help="best of N (by wall time)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--zones", type=int, default=5, choices=range(1, len(ZONE_NAMES) + 1))
    parser.add_argument(
        "--resilience",
        action="store_true",
        help="also every zone's loss, every node's (N-1) and the operator's answer",
    )
    parser.add_argument("--consolidate", action="store_true", help="also --consolidate")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # In a process of its own: a child's peak RSS counts the parent it was forked from.
        writer = multiprocessing.get_context("spawn").Process(
            target=write_inputs,
            args=(d, args.nodes, args.workloads, args.seed, args.cpu_scale, args.zones),
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
            f"requests x{args.cpu_scale:g}, {args.zones} zones); draining {ZONE}={args.zone}"
        )
        rows = [
            ("plan", []),
            ("drain", ["--drain", f"{ZONE}={args.zone}"]),
            (
                "drain + auto",
                ["--drain", f"{ZONE}={args.zone}", "--add-nodes", f"{d / 'template.yaml'}:auto"],
            ),
        ]
        if args.resilience:
            rows += [
                ("resilience (zones)", ["--resilience", ZONE]),
                ("resilience (N-1)", ["--resilience", HOSTNAME]),
            ]
        if args.consolidate:
            rows.append(("consolidate", ["--consolidate"]))
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
                f"  {name:<18} {best.wall:6.2f} s wall {best.cpu:6.2f} s CPU "
                f"({best.wall / reference.wall:4.1f}x plan)  peak RSS {best.rss_mb:4.0f} MB  "
                f"exit {best.exit_code}  {describe(answer)}"
            )
        if args.resilience:
            figures["operator answer"] = operator_figures(nodes, settled)
    record("bench_whatif", figures, command_line(argv))
    return 0


def operator_figures(nodes: Path, workloads: Path) -> dict[str, float]:
    """The operator's answer (``operator_answer``): its CPU, and the share of a core."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=operator_answer, args=(nodes, workloads, queue))
    child.start()
    cpu, zones = queue.get()
    child.join()
    period = cpu / OPERATOR_SHARE + OPERATOR_INTERVAL_S  # paced over 10x its CPU, then a wait
    share = cpu / period
    print(
        f"  {'operator answer':<18} {cpu:6.2f} s CPU per answer of {zones} zones: "
        f"{share:.1%} of a core at --resilience-interval {OPERATOR_INTERVAL_S:g}s"
    )
    return {
        "zones": zones,
        "CPU per answer_s": cpu,
        "answer paced over (wall)_s": cpu / OPERATOR_SHARE,
        "share of a core at the default interval_pct": 100 * share,
    }


def answer_figures(answer: dict[str, Any]) -> dict[str, int | None]:
    """What ``describe`` prints, as figures."""
    if "resilience" in answer:
        entries = answer["resilience"]
        stranding = [e for e in entries if e["unplaced"]]
        return {
            "domains": len(entries),
            "domains whose loss strands replicas": len(stranding),
            "most replicas stranded": max((len(e["unplaced"]) for e in entries), default=0),
            "replicas displaced (sum)": sum(e["displaced"] for e in entries),
        }
    if "consolidation" in answer:
        c = answer["consolidation"]
        return {
            "nodes removable": len(c["removable"]),
            "replicas moved": len(c["moves"]),
            "nodes blocked": len(c["blocked"]),
        }
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
    if "resilience" in answer or "consolidation" in answer:
        return ", ".join(f"{k}: {v}" for k, v in answer_figures(answer).items())
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
