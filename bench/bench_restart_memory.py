"""Where a restarted operator's memory goes, step by step, without a cluster: ``orca run``'s
restart on ``--workloads`` placed Workloads and ``--nodes`` Nodes (``bench_scale``'s step 2
and 3) replayed in one process.

The API server's answers are made first, in a process of their own, and kept as files:
``bench_vs_kube_scheduler``'s Nodes and backlog Workloads as the API server stores them
(uid, resourceVersion, generation, creationTimestamp, the CRD's defaults, ``managedFields``),
each Workload with the status the operator writes (``status_body`` of ``orca plan``'s
decision for it, its conditions' times spread as a backlog's 300 placements a second spread
them), in JSON pages of ``LIST_PAGE`` objects. Then, in a fresh process, the operator as
``Operator.wire`` makes it, its ``KubeApi`` answering each LIST page from those files (the
real ``list_objects``: each page parsed by orjson, ``managedFields`` popped), step by step:

    imports          what ``orca run`` imports, and the operator wired
    Nodes listed     the Node informer's ``list_once`` (the start-up gate already waiting)
    Workloads listed the Workload informer's ``list_once``, merged into ``WorkloadEvents``;
                     the gate opens (every Workload queued; the collector's ``heap`` pace)
    decided again    every key processed by the real ``SchedulingLoop`` (each decision finds
                     nothing to write: no request is made)
    answered         the failure domains' answer (``ResilienceLoop.refresh``), once

After each step: the resident set (``VmRSS``) and its peak so far (``VmHWM``), per
Workload stored the growth since the Nodes were listed, and the step's CPU seconds (the
process's, the first process only; a cluster's restart adds the HTTP client's and waits for
the API server's pages: ``bench_scale`` times that). With ``--trace``, a second process
runs the same under ``tracemalloc``: the Python memory live after a collection (what stays),
per Workload too, and the top allocation sites of each step's growth (file:line; a block is
named by where it was first allocated, so a dict reused from the free list keeps its first
site). The resident figures come from the first process only (tracemalloc's bookkeeping
roughly doubles the second's); the gap between the two processes' figures is what the
allocators hold beyond the live objects (fragmentation, freed memory not given back).

What it found at 5,000 Nodes and 30,000 Workloads (``--trace``), before the cuts it led to:
331 MB at rest, 7.9 KiB per Workload (``bench_scale`` measured 7.8 on a cluster): 5.3 KiB
traced after the listing (each Workload's conditions, ``status.resources`` and repeated
names parsed into objects and strings of its own: ``state.SharedParts``), then 2.0 KiB more
resident after the answer (its decisions kept until the next one, and freed blocks glibc
kept: ``resilience``, ``heap.give_back``); the gap between resident and traced stayed under
10 %. After: 197 MB at rest, 3.3 KiB per Workload.

At 100,000 Workloads the answer's peak was then 502 MB, 112 above the rest: one domain's
decided statuses, held to the domain's end by its full answer (the operator reads three
figures of it: ``DomainLoss.figure_steps`` counts them and keeps none), and four strings per
Workload in the plan's ``Batch`` (``Workload.key`` builds one per call). After: 435 MB,
traced at the first domain's end 55 MB above the rest: the keys, the copies of the ledger
(the snapshot's, the domain's trial), the Batch's mappings, the settled set.

    python bench/bench_restart_memory.py --nodes 5000 --workloads 30000 --trace
    python bench/bench_restart_memory.py --nodes 5000 --workloads 100000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO_ROOT, command_line, format_figure, print_table, record

#: The steps, in order (see the module's docstring).
STEPS = ("imports", "Nodes listed", "Workloads listed", "decided again", "answered")
#: Placements a second the backlog's conditions' times are spread at.
PLACED_PER_S = 300
#: Allocation sites shown per step with ``--trace``.
TOP_SITES = 12
NAMESPACE = "bench"
#: The fields of the status orca writes, as its ``managedFields`` entry names them.
STATUS_FIELDS = (
    *("observedGeneration", "phase", "desired", "placed", "placements", "conditions"),
    *("message", "nodes", "resources", "priority", "selector"),
)


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident set now (``VmRSS``), or its peak (``VmHWM``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- the API server's answers, made once ----------------------------------------------------------


def _managed(manager: str, subresource: str | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "time": "2026-12-01T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def prepare(nodes_count: int, workloads_count: int, directory: Path) -> None:
    """The Nodes' and Workloads' LIST pages into ``directory`` (see the module's docstring)."""
    import orjson

    from bench.bench_vs_kube_scheduler import node_objects, workload_object
    from controller.api.models import Workload, key_of, status_body
    from controller.operator.kube.client import LIST_PAGE
    from controller.scheduler.nodes import node_info_from_node
    from controller.scheduler.plan import plan

    created = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    version = 1000
    nodes = node_objects(nodes_count, 1)
    for i, node in enumerate(nodes):
        version += 1
        node["metadata"].update(
            uid=f"00000000-0000-4000-8000-{i:012d}",
            resourceVersion=str(version),
            creationTimestamp="2026-12-01T09:00:00Z",
        )
    bodies = []
    for i in range(workloads_count):
        version += 1
        body = workload_object(f"w{i}", NAMESPACE)
        body["metadata"].update(
            uid=f"10000000-0000-4000-8000-{i:012d}",
            resourceVersion=str(version),
            generation=1,
            creationTimestamp=(created + timedelta(seconds=i // 1000)).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
        )
        body["spec"].update(strategy="Spread", rebalance="Never")  # the CRD's defaults
        bodies.append(body)
    workloads = [Workload.model_validate(body) for body in bodies]
    infos = [node_info_from_node(node) for node in nodes]
    statuses = {
        r.workload.key: r.status for r in plan(infos, workloads, now="2026-12-01T10:05:00Z")
    }
    del workloads, infos
    spec_fields: dict[str, Any] = {
        "f:spec": {".": {}, "f:kind": {}, "f:resources": {}, "f:constraints": {}}
    }
    status_fields: dict[str, Any] = {"f:status": {f"f:{name}": {} for name in STATUS_FIELDS}}
    for i, body in enumerate(bodies):
        version += 1
        status = status_body(statuses[key_of(body)])
        placed = created + timedelta(minutes=5, seconds=i // PLACED_PER_S)
        for condition in status.get("conditions", ()):
            condition["lastTransitionTime"] = placed.strftime("%Y-%m-%dT%H:%M:%SZ")
        body["status"] = status
        body["metadata"]["resourceVersion"] = str(version)
        body["metadata"]["managedFields"] = [
            _managed("bench", None, spec_fields),
            _managed("orca", "status", status_fields),
        ]
    directory.mkdir(parents=True, exist_ok=True)
    for kind, objects in (("nodes", nodes), ("workloads", bodies)):
        pages = [objects[i : i + LIST_PAGE] for i in range(0, len(objects), LIST_PAGE)]
        for number, items in enumerate(pages):
            more = number + 1 < len(pages)
            metadata = {
                "resourceVersion": str(version),
                **({"continue": str(number + 1)} if more else {}),
            }
            answer = {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": items}
            (directory / f"{kind}-{number:05d}.json").write_bytes(orjson.dumps(answer))
    (directory / "done").write_text("")


# -- the restart, replayed -----------------------------------------------------------------------


class Steps:
    """The figures after each step (and with ``trace``, what tracemalloc holds)."""

    def __init__(self, workloads: int, trace: bool) -> None:
        self.workloads = workloads
        self.trace = trace
        self.figures: dict[str, dict[str, float]] = {}
        self.sites: dict[str, list[str]] = {}
        self._snapshot: tracemalloc.Snapshot | None = None
        self._nodes_rss = self._nodes_traced = 0.0
        self._cpu = time.process_time()  # the step's CPU: from the last mark's end

    def mark(self, step: str, collect: bool = True) -> None:
        cpu = time.process_time()
        if collect:
            gc.collect()
        rss = rss_mb()
        if step == "Nodes listed":
            self._nodes_rss = rss
        figures = {"RSS_mb": rss, "peak RSS_mb": rss_mb("VmHWM")}
        if not self.trace:  # tracemalloc's bookkeeping slows every allocation
            figures["CPU_s"] = cpu - self._cpu
        self._cpu = time.process_time()
        if step not in STEPS[:2]:
            figures["RSS per Workload_kib"] = (rss - self._nodes_rss) * 1024 / self.workloads
        if self.trace:
            traced = tracemalloc.get_traced_memory()[0] / 2**20
            figures["traced_mb"] = traced
            if step == "Nodes listed":
                self._nodes_traced = traced
            if step not in STEPS[:2]:
                figures["traced per Workload_kib"] = (
                    (traced - self._nodes_traced) * 1024 / self.workloads
                )
            snapshot = tracemalloc.take_snapshot().filter_traces(
                (tracemalloc.Filter(False, tracemalloc.__file__),)
            )
            if self._snapshot is not None:
                self.sites[step] = _sites(snapshot.compare_to(self._snapshot, "lineno"))
            self._snapshot = snapshot
        self.figures[step] = figures


def _sites(differences: list[tracemalloc.StatisticDiff]) -> list[str]:
    """The top allocation sites of what a step left behind."""
    lines = []
    for diff in sorted(differences, key=lambda d: -d.size_diff)[:TOP_SITES]:
        frame = diff.traceback[0]
        path = Path(frame.filename)
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        if "site-packages" in path.parts:
            shown = Path(*path.parts[path.parts.index("site-packages") + 1 :])
        size, count = diff.size_diff / 2**20, diff.count_diff
        lines.append(f"{size:+8.2f} MB {count:+9d} blocks  {shown}:{frame.lineno}")
    return lines


async def restart(directory: Path, workloads: int, trace: bool) -> Steps:
    """The operator's restart on the pages in ``directory``, measured after each step."""
    import orjson

    import controller.operator.app  # noqa: F401  (what ``orca run`` imports)
    from controller.operator.app import Operator
    from controller.operator.kube.client import KubeApi
    from controller.operator.kube.credentials import ClientConfiguration

    class PagedApi(KubeApi):
        """Answers each LIST page from its file, as the API server would (GETs only)."""

        async def request(self, method: str, path: str, *_: Any, **kw: Any) -> dict[str, Any]:
            assert method == "GET", f"{method} {path}: nothing is written on a restart at rest"
            kind = "nodes" if path.endswith("/nodes") else "workloads"
            if "priorityclasses" in path:
                return {"metadata": {"resourceVersion": "1"}, "items": []}
            params = kw.get("params") or {}
            page = directory / f"{kind}-{int(params.get('continue', 0)):05d}.json"
            answer: dict[str, Any] = orjson.loads(page.read_bytes())
            return answer

    steps = Steps(workloads, trace)
    api = PagedApi(cast(ClientConfiguration, None))
    operator = Operator.wire(api, resilience_every=60)  # ``orca run``'s default: on
    answering = operator.resilience
    assert answering is not None
    answering.share = 1.0  # paced by nothing: no decision waits here
    steps.mark("imports")
    nodes, classes, listed = operator.informers
    assert listed.path.endswith("/workloads"), listed.path
    gate = asyncio.create_task(operator.gate.open(operator.informers))
    await asyncio.sleep(0)  # the gate waits, as in ``orca run``, from before the first LIST
    await nodes.list_once(initial=True)
    await classes.list_once(initial=True)
    steps.mark("Nodes listed", collect=False)  # the gate holds the collector while it waits
    await listed.list_once(initial=True)
    await gate
    steps.mark("Workloads listed")
    queue, loop = operator.queue, operator.loop
    while len(queue):
        await loop.process_next()
    unchanged = sum(
        int(sample.value)
        for metric in _collect("orca_schedule_unchanged")
        for sample in metric.samples
        if sample.name.endswith("_total")
    )
    assert unchanged == workloads, f"{unchanged} of {workloads} decided unchanged"
    steps.mark("decided again")
    answered = await answering.refresh()
    assert answered is not None and answered.domains
    steps.mark("answered")
    return steps


def _collect(name: str) -> list[Any]:
    from prometheus_client import REGISTRY

    return [m for m in REGISTRY.collect() if m.name == name]


def measure(directory: Path, workloads: int, trace: bool) -> dict[str, Any]:
    if trace:
        tracemalloc.start()
    steps = asyncio.run(restart(directory, workloads, trace))
    return {"figures": steps.figures, "sites": steps.sites}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=30000)
    parser.add_argument(
        "--trace", action="store_true", help="also a tracemalloc run, its top sites"
    )
    parser.add_argument("--pages", type=Path, help=argparse.SUPPRESS)  # a child's
    parser.add_argument("--child", choices=("prepare", "rss", "trace"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.workloads < 1:
        parser.error("--nodes and --workloads must be at least 1")
    if args.child == "prepare":
        prepare(args.nodes, args.workloads, args.pages)
        return 0
    if args.child is not None:
        print(json.dumps(measure(args.pages, args.workloads, args.child == "trace")))
        return 0

    def child(mode: str) -> dict[str, Any]:
        command = [sys.executable, __file__, f"--nodes={args.nodes}"]
        command += [f"--workloads={args.workloads}", f"--pages={pages}", f"--child={mode}"]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        return cast(
            dict[str, Any],
            json.loads(done.stdout.strip().splitlines()[-1]) if mode != "prepare" else {},
        )

    with tempfile.TemporaryDirectory(prefix="orca-restart-") as temporary:
        pages = Path(temporary)
        child("prepare")
        runs = {"RSS": child("rss")}
        if args.trace:
            runs["traced"] = child("trace")
    figures: dict[str, float] = {}
    for step in STEPS:
        for mode, run in runs.items():
            for name, value in run["figures"][step].items():
                if mode == "RSS" or name.startswith("traced"):
                    figures[f"{step}: {name}"] = value
    print(f"nodes={args.nodes} workloads={args.workloads}")
    names = ["RSS_mb", "peak RSS_mb", "RSS per Workload_kib", "CPU_s"]
    names += ["traced_mb", "traced per Workload_kib"] if args.trace else []
    print_table(
        ["step", *names],
        [
            (step, *(format_figure(figures.get(f"{step}: {name}", "")) for name in names))
            for step in STEPS
        ],
    )
    if args.trace:
        for step, lines in runs["traced"]["sites"].items():
            print(f"\n{step}: what stays, by allocation site (the step's growth)")
            print("\n".join(lines))
    group = f"{args.nodes} nodes, {args.workloads} workloads"
    record("bench_restart_memory", {group: figures}, command_line(argv), merge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
