"""``orca plan``: the scheduler offline, on the same YAML a user would apply.

Workloads are planned highest priority first (their PriorityClass, read from either file;
equal priorities in file order), each seeing the placements made before it, as the operator's
queue orders them; placements already in a Workload's ``status`` (say, from ``kubectl get
workloads -o yaml``) are booked first, so they are kept where still valid, as the operator
would. A Workload short of room preempts lower-priority replicas as the operator would
(``controller.scheduler.preemption``): the results say who was preempted by whom. Exit codes: 0
when every Workload is fully placed, 1 when some are not, 2 for bad input (one line, no
traceback), which includes a spec the operator would mark ``Invalid`` whatever the cluster
(CEL that does not compile or is ill-typed, an unknown runtime alias:
``Scheduler.spec_errors``); a Workload ``Invalid`` for the cluster's sake (a PriorityClass
that does not exist) is planned as such, exit 1.
"""

from __future__ import annotations

import argparse
import functools
import gc
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from controller.api.models import Workload
from controller.cli import domains as domains_cli
from controller.cli import whatif as whatif_cli
from controller.cli.domains import Report, Survey
from controller.cli.flags import add_credential_flags
from controller.cli.output import STRUCTURED, add_output_flag, write_document
from controller.cli.table import write_table
from controller.cli.timings import PhaseTimer
from controller.cli.whatif import Asked, Outcome
from controller.inputs.manifests import (
    ManifestError,
    PendingRead,
    load_nodes,
    load_priority_classes,
    load_workloads,
    read_manifests,
)
from controller.scheduler.celcache import cache_path, install_cel_parser
from controller.scheduler.ledger import ledger_from_statuses
from controller.scheduler.nodes import NodeInfo, rfc3339_to_epoch
from controller.scheduler.plan import PlanResult, plan
from controller.scheduler.plugins.topology_spread import spread_lines
from controller.scheduler.priority import PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import rfc3339_now
from controller.scheduler.whatif import WhatIf

EXIT_PLACED, EXIT_SHORT, EXIT_BAD_INPUT = 0, 1, 2
MAX_NODES_SHOWN = 6
MAX_ERROR_CHARS = 1000
GC_THRESHOLDS = (100_000, 50, 100)


def to_json(results: Sequence[PlanResult]) -> dict[str, Any]:
    """``{"results": [{"workload": "<ns>/<name>", <status fields>, "priority": N}]}`` in
    planning order; a preemptor's result lists its ``victims``, a victim's its
    ``preemptedBy`` (each ``{workload, allocId, node, priority}`` / ``{allocId, node, by,
    priority}``), present only when there are some; a Workload with ``topologySpread`` its
    constraints with every field (defaults filled in: ``minDomains``, ``nodeAffinityPolicy``,
    ``nodeTaintsPolicy``) and the domains counted after its placement."""
    out = []
    for r in results:
        item: dict[str, Any] = {
            "workload": r.workload.key,
            **r.status.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        if r.victims:
            item["victims"] = [
                {
                    "workload": p.victim.key,
                    "allocId": p.victim.booking.alloc_id,
                    "node": p.victim.booking.node,
                    "priority": p.victim.priority,
                }
                for p in r.victims
            ]
        if r.spread:
            item["topologySpread"] = [c.to_json() for c in r.spread]
        if r.preempted:
            item["preemptedBy"] = [
                {
                    "allocId": p.victim.booking.alloc_id,
                    "node": p.victim.booking.node,
                    "by": p.by,
                    "priority": p.priority,
                }
                for p in r.preempted
            ]
        out.append(item)
    return {"results": out}


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
    write_table(out, rows)
    spreads = [r for r in results if r.spread]
    if spreads:
        out.write("\nTOPOLOGY SPREAD\n")
        for r in spreads:
            out.write(f"{r.workload.key}\n")
            out.writelines(spread_lines(r.spread, indent="  "))
    preemptions = [p for r in results for p in r.victims]
    if preemptions:
        out.write("\nPREEMPTED\n")
        for p in preemptions:
            v = p.victim
            out.write(
                f"{v.booking.alloc_id} (priority {v.priority}) on {v.booking.node} "
                f"by {p.by} (priority {p.priority})\n"
            )


def run(args: argparse.Namespace) -> int:
    """The ``orca plan`` command.

    A batch run builds a large heap that lives to the end (the Nodes, the Workloads, the
    results) and makes little cyclic garbage: at the collector's default pace (a young
    collection every 700 allocations, full ones as the heap grows) validating 20,000 Workloads
    after 5,000 Nodes took 0.9 s, 0.3 s of it validating. So it collects less often, not never,
    while it runs (and as before after, for a caller in the same process)."""
    previous = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        return _run(args)
    finally:
        gc.set_threshold(*previous)


def _run(args: argparse.Namespace) -> int:
    timer = PhaseTimer()
    if bool(args.nodes) == bool(args.from_cluster):
        print("error: give exactly one of --nodes FILE and --from-cluster", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        flags = whatif_cli.asked(args)
        survey = domains_cli.asked(args)
    except ValueError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    question: Asked | Survey | None = survey if survey is not None else flags
    if args.workloads is None and not (args.from_cluster and question is not None):
        print(
            "error: --workloads FILE is needed (with --from-cluster and --drain, --add-nodes, "
            "--resilience or --consolidate it may be left out: the cluster's Workloads are "
            "planned)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if args.now is not None:
        try:
            rfc3339_to_epoch(args.now)
        except ValueError as exc:
            print(f"error: --now: {one_line(str(exc))}", file=sys.stderr)
            return EXIT_BAD_INPUT
    install_cel_parser(cache_path())
    timer.phase("start-up")  # the interpreter, the imports and the CEL parser
    try:
        if args.from_cluster:
            results, outcome = _plan_from_cluster(args, timer, question)
        else:
            results, outcome = _plan_from_files(args, timer, question)
    except ManifestError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    timer.phase("planning")
    if isinstance(outcome, Report):
        return _report(args, outcome, timer)
    if args.output in STRUCTURED:
        document = to_json(results)
        if outcome is not None:
            document.update(whatif_cli.to_json(outcome))
        write_document(document, args.output, sys.stdout)
    elif outcome is None:
        render_table(results, sys.stdout)
    else:
        touched = _touched(outcome)
        render_table([r for r in results if r.workload.key in touched], sys.stdout)
        whatif_cli.render(outcome, sys.stdout)
    sys.stdout.flush()
    timer.phase("output")
    if args.timings:
        timer.report(sys.stderr)
    if outcome is not None:
        return outcome.exit_code
    return EXIT_PLACED if all(r.fully_placed for r in results) else EXIT_SHORT


def _report(args: argparse.Namespace, report: Report, timer: PhaseTimer) -> int:
    """``--resilience`` and ``--consolidate``: their own sections, no plan's results."""
    if args.output in STRUCTURED:
        write_document(domains_cli.to_json(report), args.output, sys.stdout)
    else:
        domains_cli.render(report, sys.stdout)
    sys.stdout.flush()
    timer.phase("output")
    if args.timings:
        timer.report(sys.stderr)
    return report.exit_code


def _touched(outcome: Outcome) -> set[str]:
    """The Workloads a what-if changes: they get a row in the table."""
    a = outcome.answer
    keys = {m.workload for m in a.moved} | {u.workload for u in a.unplaced}
    keys |= {e.workload for e in a.ended}
    keys |= {r.workload.key for r in a.results if r.victims or r.preempted}
    return keys


def _what_if(
    flags: Asked,
    nodes: list[NodeInfo],
    whatif: WhatIf,
) -> tuple[list[PlanResult], Outcome]:
    outcome = whatif_cli.answer(whatif, flags, whatif_cli.question_of(flags, nodes))
    return outcome.answer.results, outcome


def _plan_from_files(
    args: argparse.Namespace, timer: PhaseTimer, flags: Asked | Survey | None
) -> tuple[list[PlanResult], Outcome | Report | None]:
    """Nodes, Workloads and PriorityClasses from the files, each file read once (a large
    Workloads file in a child process, while the Nodes are read)."""
    pending = PendingRead(Path(args.workloads))
    try:
        nodes_file = read_manifests(Path(args.nodes))
        nodes = load_nodes(nodes_file)
        nodes_file = nodes_file.priority_classes()  # the Node objects' memory is free to go
        timer.phase("nodes")
        workloads_file = pending.result()
    finally:
        pending.cancel()
    classes = load_priority_classes(nodes_file, workloads_file)
    scheduler = Scheduler(gang_grace=False)  # a plan answers where the cluster settles
    workloads = load_workloads(workloads_file, check=scheduler.spec_errors)
    del workloads_file
    timer.phase("workloads")
    if isinstance(flags, Survey):
        ledger = ledger_from_statuses(nodes, workloads)
        now = args.now or rfc3339_now()
        return [], domains_cli.answer(flags, nodes, ledger, workloads, classes, now)
    if flags is not None:
        ledger = ledger_from_statuses(nodes, workloads)
        now = args.now or rfc3339_now()
        return _what_if(flags, nodes, WhatIf(ledger, workloads, scheduler, classes, now))
    first = functools.partial(timer.point, "first decision")
    results = plan(
        nodes,
        workloads,
        scheduler=scheduler,
        classes=classes,
        on_first_decision=first,
        now=args.now,
    )
    return results, None


def _plan_from_cluster(
    args: argparse.Namespace, timer: PhaseTimer, flags: Asked | Survey | None
) -> tuple[list[PlanResult], Outcome | Report | None]:
    """``--from-cluster``: the Workloads from the file, the rest from the cluster. Imported
    here: the client (aiohttp, the kubernetes client's credential loaders) costs start-up
    that planning from files never needs. A what-if plans every Workload of the cluster (the
    file's, if one is given, in place of the cluster's of the same name)."""
    from controller.cli.cluster import read_cluster
    from controller.inputs.fromcluster import ClusterError

    scheduler = Scheduler(gang_grace=False)  # a plan answers where the cluster settles
    workloads: list[Workload] = []
    given = PriorityClasses.of([])
    if args.workloads is not None:
        workloads_file = read_manifests(Path(args.workloads))
        workloads = load_workloads(workloads_file, check=scheduler.spec_errors)
        given = load_priority_classes(workloads_file)
    timer.phase("workloads")
    try:
        cluster = read_cluster(args.kubeconfig, args.context)
    except ClusterError as exc:
        raise ManifestError(str(exc)) from None
    timer.phase("cluster")
    for warning in cluster.warnings:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    classes = PriorityClasses.of([*cluster.classes.by_name.values(), *given.by_name.values()])
    if isinstance(flags, Survey):
        planned = {**cluster.parsed, **{w.key: w for w in workloads}}
        now = args.now or rfc3339_now()
        report = domains_cli.answer(
            flags, cluster.nodes, cluster.ledger(), list(planned.values()), classes, now
        )
        return [], report
    if flags is not None:
        planned = {**cluster.parsed, **{w.key: w for w in workloads}}
        whatif = WhatIf(
            cluster.ledger(),
            list(planned.values()),
            scheduler,
            classes,
            args.now or rfc3339_now(),
        )
        return _what_if(flags, cluster.nodes, whatif)
    known = {
        key: w.status.priority
        for key, w in cluster.parsed.items()
        if w.status is not None and w.status.priority is not None
    }
    started = {
        key: w.metadata.creation_timestamp
        for key, w in cluster.parsed.items()
        if w.metadata.creation_timestamp is not None
    }
    results = plan(
        cluster.nodes,
        workloads,
        ledger=cluster.ledger(),
        scheduler=scheduler,
        classes=classes,
        known_priorities=known,
        on_first_decision=functools.partial(timer.point, "first decision"),
        known_started=started,
        now=args.now,
    )
    return results, None


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
    p.add_argument(
        "--workloads",
        metavar="FILE",
        help="Workload manifests (with --from-cluster and a what-if, optional: the cluster's "
        "Workloads are planned)",
    )
    p.add_argument(
        "--from-cluster",
        action="store_true",
        help="dry run against the live cluster: its Nodes and the placements already made "
        "(every Workload's status); writes nothing",
    )
    add_credential_flags(p, "with --from-cluster: ")
    add_output_flag(p)
    p.add_argument(
        "--now",
        metavar="RFC3339",
        help="the plan's clock, e.g. 2026-12-01T10:00:00Z (default: the current time): when "
        "replicas on a NotReady node or one with a NoExecute taint they tolerate for a while "
        "move, and the conditions' times; the same files and --now plan the same",
    )
    whatif_cli.add_arguments(p)
    domains_cli.add_arguments(p)
    p.add_argument(
        "--timings",
        action="store_true",
        help="print where the time went on stderr: start-up, reading each file, the first "
        "decision (since the process started), planning, output",
    )
    p.set_defaults(func=run)
