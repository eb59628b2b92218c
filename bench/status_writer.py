"""A status writer: the floor under any controller that records its placements in a Workload's
status, the third side of ``bench_vs_kube_scheduler.py --floor``.

It decides nothing. It lists the Nodes once, keeps those that pass the bench's two constraints
(the ``ssd`` tag, an allowed zone), and for each Workload the watch shows without a phase it
sends, at once, the status write orca sends (``KubeApi.write_workload_status``: a PUT of the
status alone, preconditioned on the Workload's resourceVersion, answered with metadata), with
the status orca's scheduler decides for the bench's Workload (``bench_server_cost``'s
``current_status``) on the next of those Nodes in turn; at most ``IN_FLIGHT`` at once (orca's
``--max-in-flight`` default). No Events, no ledger, no queue, no scoring: what is left is the
watch, the write and the API server's work for both. The bench's validity check still holds
every placement to the constraints and the Nodes' room (the burst's objects fit round-robin).

    python -m bench.status_writer --kubeconfig KUBECONFIG
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_server_cost import current_status
from bench.bench_vs_kube_scheduler import SIDES, WORKLOADS, WRITER, passes
from controller.operator.kube import KubeApi, load_configuration

#: Status writes in flight at once: orca's ``--max-in-flight`` default.
IN_FLIGHT = 32
#: Seconds a watch lasts before it is started again from the last version seen.
WATCH_SECONDS = 300


def eligible(nodes: list[dict[str, Any]]) -> list[str]:
    """The Nodes that pass the bench's two constraints (``passes``), by name."""
    return sorted(node["metadata"]["name"] for node in nodes if passes(node))


class Writer:
    """Writes each Workload's status once, on the next eligible Node in turn."""

    def __init__(self, api: KubeApi, nodes: list[str]) -> None:
        if not nodes:
            raise SystemExit("status writer: no Node passes the constraints")
        self.api = api
        self.nodes: Iterator[str] = itertools.cycle(nodes)
        self.template = current_status("namespace", "name")
        self.written: set[tuple[str, str]] = set()
        self.slots = asyncio.Semaphore(IN_FLIGHT)
        self.tasks: set[asyncio.Task[None]] = set()

    def see(self, obj: dict[str, Any]) -> None:
        """A Workload listed or watched: its write started, unless it has a phase or one was
        started already."""
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if SIDES[WRITER].decided(obj) or key in self.written:
            return
        self.written.add(key)
        task = asyncio.create_task(self.write(key, meta["resourceVersion"], next(self.nodes)))
        self.tasks.add(task)
        task.add_done_callback(self.done)

    def done(self, task: asyncio.Task[None]) -> None:
        """A write ended: a failed one is said on stderr (its Workload stays without a phase,
        and the bench's wait for every decision runs out)."""
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            print(f"status writer: {task.exception()!r}", file=sys.stderr, flush=True)

    async def write(self, key: tuple[str, str], version: str, node: str) -> None:
        namespace, name = key
        placement = {"node": node, "allocId": f"{namespace}/{name}-0", "score": 83}
        status = {**self.template, "placements": [placement], "nodes": node}
        async with self.slots:
            await self.api.write_workload_status(namespace, name, status, version)

    async def run(self) -> None:
        path = f"{WORKLOADS}/workloads"
        version = await self.api.list_objects(path, self.see)
        while True:
            async for event in self.api.watch(path, version, WATCH_SECONDS):
                obj = event["object"]
                version = obj["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.see(obj)


async def serve(kubeconfig: str) -> None:
    api = KubeApi(load_configuration(kubeconfig), max_connections=IN_FLIGHT + 8)
    try:
        nodes: list[dict[str, Any]] = []
        await api.list_objects("/api/v1/nodes", nodes.append)
        await Writer(api, eligible(nodes)).run()
    finally:
        await api.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.kubeconfig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
