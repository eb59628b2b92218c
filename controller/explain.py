"""``orca explain NAME [-n NS]`` (and ``kubectl orca explain``): why a Workload is where it is.

Reads the live cluster (Nodes and every Workload's placements, as ``orca plan --from-cluster``
does), runs the scheduler's cycle for the one Workload (``controller.core.explain``) and prints
each replica (kept, or why it moves) and each node: the filter that rejects it, with the
reason text the status uses, or its score parts and total, best first. Writes nothing.
Exit 0; 1 when the Workload does not exist; 2 when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from controller.core.explain import Explanation, explain
from controller.core.scheduler import Scheduler

EXIT_OK, EXIT_NOT_FOUND, EXIT_CLUSTER = 0, 1, 2


def to_json(e: Explanation) -> dict[str, Any]:
    d = e.decision
    return {
        "workload": e.workload,
        "kind": e.kind,
        "phase": d.phase.value,
        "desired": d.desired,
        "placed": d.placed,
        "message": d.message,
        "errors": list(e.errors),
        "replicas": [
            {"allocId": r.alloc_id, "node": r.node, "score": r.score, "kept": r.kept, "why": r.why}
            for r in e.replicas
        ],
        "nodes": [
            {
                "node": n.node,
                "replicas": n.replicas,
                "passes": n.filter is None,
                **({"filter": n.filter, "reason": n.reason} if n.filter else {}),
                **({"scores": n.scores, "total": n.total} if n.filter is None else {}),
            }
            for n in e.nodes
        ],
    }


def render(e: Explanation, out: TextIO) -> None:
    d = e.decision
    out.write(f"Workload {e.workload} ({e.kind}): {d.phase.value}, {d.message}\n")
    for error in e.errors:
        out.write(f"  invalid: {error}\n")
    if e.replicas:
        out.write("\nREPLICAS\n")
        _table(
            out,
            [("ALLOC ID", "NODE", "SCORE", "WHY")],
            [(r.alloc_id, r.node, str(r.score), r.why) for r in e.replicas],
        )
    if e.nodes:
        names = sorted({name for n in e.nodes for name in n.scores})
        out.write("\nNODES (as the next replica sees them, best first)\n")
        header = ("NODE", "REPLICAS", *[name.upper() for name in names], "TOTAL", "VERDICT")
        rows = []
        for n in e.nodes:
            if n.filter is None:
                parts = [str(n.scores.get(name, 0)) for name in names]
                rows.append((n.node, str(n.replicas), *parts, str(n.total), "fits"))
            else:
                blank = ["-"] * len(names)
                verdict = f"{n.reason} ({n.filter})"
                rows.append((n.node, str(n.replicas), *blank, "-", verdict))
        _table(out, [header], rows)


def _table(out: TextIO, header: list[tuple[str, ...]], rows: list[tuple[str, ...]]) -> None:
    all_rows = header + rows
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]) - 1)]
    for row in all_rows:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        out.write(("   ".join([*cells, row[-1]])).rstrip() + "\n")


def run(args: argparse.Namespace) -> int:
    """The ``orca explain`` command."""
    from controller.fromcluster import ClusterError, read_cluster

    try:
        cluster = read_cluster(args.kubeconfig)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CLUSTER
    key = f"{args.namespace}/{args.name}"
    workload = cluster.parsed.get(key)
    if workload is None:
        print(f"error: workload {key} not found", file=sys.stderr)
        return EXIT_NOT_FOUND
    explanation = explain(Scheduler(), workload, cluster.ledger())
    if args.output == "json":
        json.dump(to_json(explanation), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(explanation, sys.stdout)
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``explain`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "explain",
        help="why a Workload is where it is, or why it is not placed (live cluster, read-only)",
        description="Per replica: kept or why it moves. Per node: the filter that rejects it, "
        "or its score parts and total, best first. Writes nothing.",
    )
    p.add_argument("name", help="the Workload's name")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.set_defaults(func=run)
