"""kopf's PriorityClass watch, as the operator used it before issue 20, against the informer
that replaced it (``controller.operator.kube.informer``), on the same in-process API server
(``tests/support/fakeapi.py``, real HTTP on loopback):

- **deletions across a relist**: the watch is cut, a class is deleted and another created
  while nobody watches, the server compacts its history (the watch then gets 410 Gone), and
  each side lists again. What does its view hold afterwards?
- **CPU per event**: ``--events`` class updates streamed to each side, the process' CPU time
  from the first update to the last one seen, per event (the API server's share included,
  the same for both: compare the two, not the absolute figures).

kopf's side is kopf's own stream (``kopf._cogs.clients.watching.infinite_watch``, which
kopf's handlers are fed from) into the same ``PriorityIndex`` the old handler updated: a
``None`` event (kopf's listing) or ADDED/MODIFIED upserts, DELETED deletes. The informer's
side is the operator's ``PriorityClassEvents`` handler. Prints a line per side.

    python bench/bench_priorityclass_watch.py --classes 20 --events 2000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kopf
from kopf._cogs.clients import auth, watching
from kopf._cogs.structs import credentials, references

from bench.common import command_line, record
from controller.operator.handlers import PriorityClassEvents, StartupGate
from controller.operator.kube.informer import Informer
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from controller.scheduler.priority import LIST_PATH
from tests.support.fakeapi import FakeApiServer, Fault, until

RESOURCE = "priorityclasses"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}  # fmt: skip


class Side:
    """One way of following PriorityClasses into a ``PriorityIndex``."""

    name = ""

    def __init__(self, server: FakeApiServer) -> None:
        self.server = server
        self.index = PriorityIndex()
        self.events = 0
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    @property
    def classes(self) -> set[str]:
        return set(self.index.classes.by_name)


class Kopf(Side):
    name = "kopf's watch (before)"

    async def start(self) -> None:
        vault = credentials.Vault()
        info = kopf.ConnectionInfo(server=self.server.host, insecure=True)
        await vault.populate({"bench": info})
        auth.vault_var.set(vault)
        settings = kopf.OperatorSettings()
        settings.watching.reconnect_backoff = 0.01
        resource = references.Resource("scheduling.k8s.io", "v1", RESOURCE)

        async def follow() -> None:
            stream: AsyncIterator[Any] = watching.infinite_watch(
                settings=settings, resource=resource, namespace=None
            )
            async for event in stream:
                if not isinstance(event, dict) or event.get("type") == "BOOKMARK":
                    continue
                self.events += 1
                name = event["object"]["metadata"]["name"]
                if event["type"] == "DELETED":
                    self.index.delete(name)
                else:  # None (kopf's listing), ADDED, MODIFIED
                    self.index.upsert(event["object"])

        self.vault = vault
        self.task = asyncio.create_task(follow())
        await until(lambda: self.server.live_watches >= 1, "kopf watching", 60)

    async def stop(self) -> None:
        await super().stop()
        async for _key, _info, context in self.vault.extended(auth.APIContext, "contexts"):
            await context.session.close()


class Informed(Side):
    name = "orca's informer (now)"

    async def start(self) -> None:
        state, queue = ClusterState(), WorkQueue()
        handler = PriorityClassEvents(state, queue, StartupGate(state, queue), self.index)
        counting = _Counting(handler, self)
        self.informer = Informer(self.server.client(), LIST_PATH, RESOURCE, counting)
        self.task = asyncio.create_task(self.informer.run())
        await self.informer.synced.wait()
        await until(lambda: self.server.live_watches >= 1, "the informer watching", 60)

    async def stop(self) -> None:
        await super().stop()
        await self.informer.api.close()


class _Counting:
    """The handler, counting what it is given."""

    def __init__(self, handler: PriorityClassEvents, side: Side) -> None:
        self.handler, self.side = handler, side

    def added(self, obj: dict[str, Any]) -> None:
        self.side.events += 1
        self.handler.added(obj)

    def modified(self, obj: dict[str, Any]) -> None:
        self.side.events += 1
        self.handler.modified(obj)

    def deleted(self, obj: dict[str, Any]) -> None:
        self.side.events += 1
        self.handler.deleted(obj)

    def listed(self, initial: bool) -> None:
        self.handler.listed(initial)


async def deletions_across_a_relist(side: type[Side], classes: int) -> str:
    async with FakeApiServer() as server:
        for i in range(classes):
            server.put(RESOURCE, priority_class(f"c{i}", i))
        watcher = side(server)
        await watcher.start()
        held = server.add(Fault("GET", LIST_PATH, "hold", watch=True))
        server.cut_watches()
        await until(lambda: held.arrived == 1, "watching again", 60)
        server.delete(RESOURCE, "c0")
        server.put(RESOURCE, priority_class("late", 5))
        server.compact()  # the watch from the old version now gets 410 Gone
        held.gate.set()
        await until(lambda: "late" in watcher.classes, "the relist", 60)
        await asyncio.sleep(0.5)  # whatever else it would say, it has said by now
        kept = "c0" in watcher.classes
        await watcher.stop()
    return "still holds the class deleted meanwhile" if kept else "dropped the class deleted"


async def cpu_per_event(side: type[Side], classes: int, events: int) -> float:
    async with FakeApiServer() as server:
        for i in range(classes):
            server.put(RESOURCE, priority_class(f"c{i}", i))
        watcher = side(server)
        await watcher.start()
        seen = watcher.events
        started = time.process_time()
        for n in range(events):
            server.put(RESOURCE, priority_class(f"c{n % classes}", 1000 + n))
            if n % 50 == 49:
                await asyncio.sleep(0)  # let the stream flow, as a live server's would
        await until(lambda: watcher.events - seen >= events, "every update seen", 600)
        cpu = time.process_time() - started
        await watcher.stop()
    return cpu / events * 1e6


async def main(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    # The fake server's watch handlers find their clients gone when a side stops: not news.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    figures = {}
    for side in (Kopf, Informed):
        verdict = await deletions_across_a_relist(side, args.classes)
        micros = await cpu_per_event(side, args.classes, args.events)
        print(
            f"{side.name}: after a 410 relist it {verdict}; "
            f"{micros:.0f} us of CPU per event ({args.events} updates of {args.classes} "
            "classes, the in-process API server's share included)"
        )
        figures[side.name] = {"after a 410 relist": verdict, "CPU per event_us": micros}
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--events", type=int, default=2000)
    figures = asyncio.run(main(parser.parse_args()))
    record("bench_priorityclass_watch", figures, command_line())
