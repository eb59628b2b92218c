"""``orca rebalance`` (and ``kubectl orca rebalance``): the rebalancer's plan, as a dry run.

From Node and Workload manifests (the Workloads' ``status.placements`` are the current
placements, e.g. ``kubectl get workloads -A -o yaml``) or from the live cluster
(``--from-cluster``, read as ``orca plan --from-cluster`` reads it), prints each move in the
order it is to be made (Workload, allocId, from, to, the Workload's objective before and
after) and the totals (``controller.scheduler.rebalance``). Writes nothing. Exit 0 whether or not
moves are proposed; 2 for bad input (one line, no traceback), as ``orca plan``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from controller.cli.flags import add_credential_flags, whole_number
from controller.cli.output import STRUCTURED, add_output_flag, write_document
from controller.cli.plan import EXIT_BAD_INPUT, one_line
from controller.cli.table import write_table
from controller.inputs.manifests import ManifestError, load_nodes, load_workloads
from controller.scheduler.ledger import ledger_from_statuses
from controller.scheduler.rebalance import DEFAULT_MAX_MOVES, MAX_MOVES, Objective, Plan, Rebalancer

EXIT_OK = 0


def to_json(plan: Plan) -> dict[str, Any]:
    """``{"moves": [...], "totals": {...}}``, the moves in the order they are to be made."""
    return {
        "moves": [
            {
                "workload": m.workload,
                "allocId": m.alloc_id,
                "from": m.source,
                "to": m.target,
                "score": m.score,
                "strategy": m.before.strategy.value,
                "before": m.before.as_dict(),
                "after": m.after.as_dict(),
            }
            for m in plan.moves
        ],
        "totals": {
            "moves": len(plan.moves),
            "maxMoves": plan.max_moves,
            "complete": plan.complete,
            "utilisationStddev": {
                "before": round(plan.before.utilisation_stddev, 4),
                "after": round(plan.after.utilisation_stddev, 4),
            },
            "nodesInUse": {
                "before": plan.before.nodes_in_use,
                "after": plan.after.nodes_in_use,
                "ffd": plan.ffd_nodes,
            },
            "nodesFreed": plan.nodes_freed,
            "skew": {"before": plan.before.skew, "after": plan.after.skew},
            "overMaxSkew": {"before": plan.before.over_max_skew, "after": plan.after.over_max_skew},
        },
    }


def _objective(o: Objective) -> str:
    return ", ".join(f"{name} {value}" for name, value in o.as_dict().items())


def render_table(plan: Plan, out: TextIO) -> None:
    """One row per move, in order, then the totals in a sentence."""
    if plan.moves:
        rows = [("#", "WORKLOAD", "ALLOC ID", "FROM", "TO", "BEFORE", "AFTER")]
        for n, m in enumerate(plan.moves, 1):
            rows.append(
                (
                    str(n),
                    m.workload,
                    m.alloc_id,
                    m.source,
                    m.target,
                    _objective(m.before),
                    _objective(m.after),
                )
            )
        write_table(out, rows)
    else:
        out.write("No moves: no Workload with rebalance: Allowed has a move that improves it.\n")
    b, a = plan.before, plan.after
    state = "complete" if plan.complete else f"budget of {plan.max_moves} reached, more to do"
    out.write(
        f"{len(plan.moves)} move(s) ({state}). Utilisation stddev {b.utilisation_stddev:.4f} -> "
        f"{a.utilisation_stddev:.4f}; nodes in use {b.nodes_in_use} -> {a.nodes_in_use} "
        f"(first-fit-decreasing: {plan.ffd_nodes}); topology skew {b.skew} -> {a.skew}"
        f" ({b.over_max_skew} -> {a.over_max_skew} Workloads over maxSkew).\n"
    )


def run(args: argparse.Namespace) -> int:
    """The ``orca rebalance`` command."""
    from controller.cli.cluster import namespace_of, read_cluster
    from controller.inputs.fromcluster import ClusterError

    if args.from_cluster == bool(args.nodes or args.workloads) or (
        not args.from_cluster and not (args.nodes and args.workloads)
    ):
        print(
            "error: give either --nodes FILE and --workloads FILE, or --from-cluster",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        rebalancer = Rebalancer(max_moves=whole_number("--max-moves", args.max_moves, 0, MAX_MOVES))
        if args.from_cluster:
            if args.namespace and args.all_namespaces:
                raise ValueError("give -n NS or -A, not both")
            if not args.all_namespaces:
                args.namespace = namespace_of(args)
            cluster = read_cluster(args.kubeconfig, args.context)
            for warning in cluster.warnings:
                print(f"warning: {one_line(warning)}", file=sys.stderr)
            mine = [
                w
                for w in cluster.parsed.values()
                if args.all_namespaces or w.metadata.namespace == args.namespace
            ]
            plan = rebalancer.plan(mine, cluster.ledger(), now=time.time())
        else:
            if args.namespace or args.all_namespaces:
                raise ValueError("-n and -A go with --from-cluster (a file plans all it holds)")
            nodes = load_nodes(Path(args.nodes))
            workloads = load_workloads(Path(args.workloads))  # a name given twice: an error
            ledger = ledger_from_statuses(nodes, workloads)
            plan = rebalancer.plan(workloads, ledger, now=time.time())
    except (ValueError, ManifestError, ClusterError) as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.output in STRUCTURED:
        write_document(to_json(plan), args.output, sys.stdout)
    else:
        render_table(plan, sys.stdout)
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rebalance`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "rebalance",
        help="the rebalancer's plan: replica moves that would even out or pack the cluster "
        "(dry run)",
        description="Plan moves for the Workloads with rebalance: Allowed (Spread: lower "
        "topology skew, then utilisation stddev; BinPack: fewer nodes in use), each valid when "
        "made and in the order to make them. Writes nothing. Exit 0 with or without moves; "
        "2: bad input.",
    )
    p.add_argument("--nodes", metavar="FILE", help="Node manifests (YAML)")
    p.add_argument(
        "--workloads",
        metavar="FILE",
        help="Workload manifests with their status (their placements are the starting point)",
    )
    p.add_argument(
        "--from-cluster",
        action="store_true",
        help="plan from the live cluster's Nodes and Workloads; writes nothing",
    )
    add_credential_flags(p, "with --from-cluster: ")
    p.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="with --from-cluster: move only Workloads in NS (default: the context's "
        "namespace, else the Pod's, else default; capacity is counted cluster-wide)",
    )
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="with --from-cluster: Workloads in every namespace",
    )
    p.add_argument(
        "--max-moves",
        default=str(DEFAULT_MAX_MOVES),
        metavar="N",
        help=f"at most N moves (0..{MAX_MOVES}, default: %(default)s)",
    )
    add_output_flag(p)
    p.set_defaults(func=run)
