"""``orca plan``: the scheduler offline, on the same YAML a user would apply.

Workloads are planned in file order, each seeing the placements made before it; placements
already in a Workload's ``status`` (say, from ``kubectl get workloads -o yaml``) are booked
first, so they are kept where still valid, as the operator would. Exit codes: 0 when every
Workload is fully placed, 1 when some are not, 2 for bad input (one line, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from controller.api.models import NodeInfo, Phase, Workload, WorkloadStatus
from controller.core.ledger import Ledger, ledger_from_statuses
from controller.core.scheduler import Scheduler
from controller.core.status import rfc3339_now, status_from_decision
from controller.manifests import ManifestError, load_nodes, load_workloads

EXIT_PLACED, EXIT_SHORT, EXIT_BAD_INPUT = 0, 1, 2
MAX_NODES_SHOWN = 6
MAX_ERROR_CHARS = 1000


@dataclass(frozen=True)
class PlanResult:
    workload: Workload
    status: WorkloadStatus

    @property
    def fully_placed(self) -> bool:
        return self.status.phase is Phase.SCHEDULED


def plan(
    nodes: Iterable[NodeInfo],
    workloads: Sequence[Workload],
    ledger: Ledger | None = None,
    scheduler: Scheduler | None = None,
    now: str | None = None,
) -> list[PlanResult]:
    """Plan ``workloads`` in order onto ``nodes`` (or onto ``ledger``'s table if given)."""
    if ledger is None:
        ledger = ledger_from_statuses(nodes, workloads)
    scheduler = scheduler or Scheduler()
    timestamp = now or rfc3339_now()
    results: list[PlanResult] = []
    for workload in workloads:
        decision = scheduler.schedule(workload, ledger)
        ledger.load(workload.key, decision.bookings)
        status = status_from_decision(
            decision, workload.metadata.generation, workload.status, timestamp
        )
        results.append(PlanResult(workload, status))
    return results


def to_json(results: Sequence[PlanResult]) -> dict[str, Any]:
    """``{"results": [{"workload": "<ns>/<name>", <status fields>}]}``."""
    return {
        "results": [
            {
                "workload": r.workload.key,
                **r.status.model_dump(by_alias=True, mode="json", exclude_none=True),
            }
            for r in results
        ]
    }


def render_table(results: Sequence[PlanResult], out: TextIO) -> None:
    """A kubectl-style table: workload, kind, placed/desired, phase, nodes, reason when short."""
    rows = [("WORKLOAD", "KIND", "PLACED", "PHASE", "NODES", "REASON")]
    for r in results:
        status = r.status
        placements = status.placements
        shown = " ".join(f"{p.node}({p.score})" for p in placements[:MAX_NODES_SHOWN])
        if len(placements) > MAX_NODES_SHOWN:
            shown += f" +{len(placements) - MAX_NODES_SHOWN} more"
        rows.append(
            (
                r.workload.key,
                r.workload.spec.kind.value,
                f"{status.placed}/{status.desired}",
                status.phase.value if status.phase else "",
                shown or "-",
                "" if r.fully_placed else (status.message or ""),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.write(("   ".join([*cells, row[-1]])).rstrip() + "\n")


def run(args: argparse.Namespace) -> int:
    """The ``orca plan`` command."""
    from controller.fromcluster import ClusterError, read_cluster

    if bool(args.nodes) == bool(args.from_cluster):
        print("error: give exactly one of --nodes FILE and --from-cluster", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if args.from_cluster:
            workloads = load_workloads(Path(args.workloads))
            cluster = read_cluster(args.kubeconfig)
            for warning in cluster.warnings:
                print(f"warning: {one_line(warning)}", file=sys.stderr)
            results = plan(cluster.nodes, workloads, ledger=cluster.ledger())
        else:
            nodes = load_nodes(Path(args.nodes))
            results = plan(nodes, load_workloads(Path(args.workloads)))
    except (ManifestError, ClusterError) as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.output == "json":
        json.dump(to_json(results), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_table(results, sys.stdout)
    return EXIT_PLACED if all(r.fully_placed for r in results) else EXIT_SHORT


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """The error contract (one line on stderr) held even if a message quotes user input."""
    flat = " ".join(message.splitlines())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``plan`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "plan",
        help="plan Workloads onto Nodes offline (no cluster needed)",
        description="Run orca's scheduler on Node and Workload manifests. Exit 0: all placed; "
        "1: some not placed; 2: bad input.",
    )
    p.add_argument("--nodes", metavar="FILE", help="Node manifests (YAML)")
    p.add_argument("--workloads", required=True, metavar="FILE", help="Workload manifests")
    p.add_argument(
        "--from-cluster",
        action="store_true",
        help="dry run against the live cluster: its Nodes and the placements already made "
        "(every Workload's status); writes nothing",
    )
    p.add_argument("--kubeconfig", help="with --from-cluster (default: $KUBECONFIG)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.set_defaults(func=run)
