"""``orca explain NAME [-n NS]`` (and ``kubectl orca explain``): why a Workload is where it is.

Reads the live cluster (Nodes and every Workload's placements, as ``orca plan --from-cluster``
does), runs the scheduler's cycle for the one Workload (``controller.scheduler.explain``) and prints
each replica (kept, or why it moves) and each node: the filter that rejects it, with the
reason text the status uses, or its score parts and total, best first; each topology spread
constraint's domains, with the node inclusion policy that counted or ignored each. Preemption,
from the ``Preempted`` conditions the operator writes on victims: who preempted this
Workload's replicas, and whose replicas it preempted. Writes nothing.
Exit 0; 1 when the Workload does not exist; 2 when the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TextIO

from controller.api.models import Workload, workload_key
from controller.cli import whatif as whatif_cli
from controller.cli.flags import add_credential_flags
from controller.cli.output import STRUCTURED, add_output_flag, write_document
from controller.cli.table import write_table
from controller.inputs.fromcluster import ClusterView
from controller.inputs.manifests import ManifestError
from controller.scheduler.explain import Explanation, explain
from controller.scheduler.ledger import Ledger
from controller.scheduler.plugins.topology_spread import spread_lines
from controller.scheduler.preemption import preemption_outlook
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.vocabulary import CONDITION_PREEMPTED
from controller.scheduler.whatif import WhatIf

EXIT_OK, EXIT_NOT_FOUND, EXIT_CLUSTER = 0, 1, 2


@dataclass(frozen=True)
class Preemptions:
    """Who preempted this Workload (its ``Preempted`` condition), and whom it preempted
    (other Workloads' ``Preempted`` conditions naming it): the last preemption of each."""

    suffered: str | None
    caused: tuple[tuple[str, str], ...]  # (victim key, message)


def preemptions(key: str, workloads: Mapping[str, Workload]) -> Preemptions:
    def condition(w: Workload) -> str | None:
        for c in w.status.conditions if w.status else ():
            if c.type == CONDITION_PREEMPTED:
                return c.message
        return None

    mine = workloads.get(key)
    suffered = condition(mine) if mine is not None else None
    caused = []
    for other_key in sorted(workloads):
        message = condition(workloads[other_key])
        if message is not None and f" preempted by {key} (" in message:
            caused.append((other_key, message))
    return Preemptions(suffered, tuple(caused))


def to_json(
    e: Explanation, p: Preemptions | None = None, outlook: str | None = None
) -> dict[str, Any]:
    d = e.decision
    p = p or Preemptions(None, ())
    return {
        "workload": e.workload,
        "kind": e.kind,
        "phase": d.phase.value,
        "desired": d.desired,
        "placed": d.placed,
        "message": d.message,
        "unschedulable": [r.model_dump(mode="json", exclude_none=True) for r in d.unschedulable],
        "errors": list(e.errors),
        "priority": d.priority,
        "preemptedBy": p.suffered,
        "preempted": [{"workload": k, "message": m} for k, m in p.caused],
        **({"preemption": outlook} if outlook else {}),
        "replicas": [
            {"allocId": r.alloc_id, "node": r.node, "score": r.score, "kept": r.kept, "why": r.why}
            for r in e.replicas
        ],
        "topologySpread": [c.to_json() for c in e.spread],
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


def render(
    e: Explanation, out: TextIO, p: Preemptions | None = None, outlook: str | None = None
) -> None:
    d = e.decision
    p = p or Preemptions(None, ())
    priority = "" if d.priority is None else f" priority {d.priority},"
    out.write(f"Workload {e.workload} ({e.kind}):{priority} {d.phase.value}, {d.message}\n")
    for error in e.errors:
        out.write(f"  invalid: {error}\n")
    if p.suffered:
        out.write(f"  last preempted: {p.suffered}\n")
    for victim, message in p.caused:
        out.write(f"  preempted {victim}: {message}\n")
    if outlook:
        out.write(f"  preemption: {outlook}\n")
    if e.replicas:
        out.write("\nREPLICAS\n")
        replicas = [(r.alloc_id, r.node, str(r.score), r.why) for r in e.replicas]
        write_table(out, [("ALLOC ID", "NODE", "SCORE", "WHY"), *replicas])
    if e.spread:
        out.write("\nTOPOLOGY SPREAD (domains as the next replica sees them)\n")
        out.writelines(spread_lines(e.spread))
    if e.nodes:
        names = sorted({name for n in e.nodes for name in n.scores})
        out.write("\nNODES (as the next replica sees them, best first)\n")
        header = ("NODE", "REPLICAS", *[name.upper() for name in names], "TOTAL", "VERDICT")
        rows: list[tuple[str, ...]] = [header]
        for n in e.nodes:
            if n.filter is None:
                parts = [str(n.scores.get(name, 0)) for name in names]
                rows.append((n.node, str(n.replicas), *parts, str(n.total), "fits"))
            else:
                blank = ["-"] * len(names)
                verdict = f"{n.reason} ({n.filter})"
                rows.append((n.node, str(n.replicas), *blank, "-", verdict))
        write_table(out, rows)


def run(args: argparse.Namespace) -> int:
    """The ``orca explain`` command."""
    from controller.cli.cluster import namespace_of, read_cluster
    from controller.inputs.fromcluster import ClusterError

    try:
        flags = whatif_cli.asked(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CLUSTER
    try:
        args.namespace = namespace_of(args)
        cluster = read_cluster(args.kubeconfig, args.context)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CLUSTER
    key = workload_key(args.namespace, args.name)
    workload = cluster.parsed.get(key)
    if workload is None:
        print(
            f"error: Workload {key} not found (kubectl get orcawl -n {args.namespace} lists "
            "the Workloads there)",
            file=sys.stderr,
        )
        return EXIT_NOT_FOUND
    scheduler = Scheduler()
    ledger = cluster.ledger()
    header = None
    if flags is not None:
        try:
            ledger, header = _after(flags, cluster, workload, scheduler)
        except ManifestError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_CLUSTER
    clock = time.time()
    explanation = explain(scheduler, workload, ledger, cluster.classes, now=clock)
    who = preemptions(key, cluster.parsed)
    outlook = preemption_outlook(
        scheduler,
        workload,
        ledger,
        explanation.decision,
        cluster.classes,
        cluster.parsed,
        now=clock,
    )
    if args.output in STRUCTURED:
        document = to_json(explanation, who, outlook)
        if header is not None:
            document["whatIf"] = header
        write_document(document, args.output, sys.stdout)
    else:
        if header is not None:
            sys.stdout.write(f"What if: {header}; {key} at its turn in that plan:\n")
        render(explanation, sys.stdout, who, outlook)
    return EXIT_OK


def _after(
    flags: whatif_cli.Asked, cluster: ClusterView, workload: Workload, scheduler: Scheduler
) -> tuple[Ledger, str]:
    """The cluster as the what-if plan leaves it just before ``workload``'s turn (every
    Workload of higher priority, and of equal priority listed before it, decided), and a line
    naming the question. ``auto`` first finds its count."""
    whatif = WhatIf(cluster.ledger(), list(cluster.parsed.values()), scheduler, cluster.classes)
    question = whatif_cli.question_of(flags, cluster.nodes)
    if flags.add is not None and flags.add.count is None:
        capacity = whatif_cli.answer(whatif, flags, question).capacity
        if capacity is not None and capacity.count is not None:
            question = replace(question, count=capacity.count)
    seen: list[Ledger] = []

    def at_its_turn(planned: Workload, ledger: Ledger) -> None:
        if planned.key == workload.key:
            seen.append(ledger.copy())

    whatif.answer(question, before_each=at_its_turn)
    parts = []
    if question.drain:
        parts.append(f"drained {', '.join(sorted(question.drain))}")
    if question.template is not None:
        parts.append(f"{question.count} x {question.template.hostname} added")
    return seen[0], " and ".join(parts)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``explain`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "explain",
        help="why a Workload is where it is, or why it is not placed (live cluster, read-only)",
        description="Per replica: kept or why it moves. Per node: the filter that rejects it, "
        "or its score parts and total, best first. Writes nothing. NAME is a Workload "
        "(workloads.orca.cloudinit.dev, short name orcawl: kubectl get orcawl -n NS lists them).",
    )
    p.add_argument("name", help="the Workload's name")
    p.add_argument(
        "-n",
        "--namespace",
        help="the Workload's namespace (default: the context's namespace, else the Pod's, "
        "else default)",
    )
    add_credential_flags(p)
    add_output_flag(p)
    whatif_cli.add_arguments(p)
    p.set_defaults(func=run)
