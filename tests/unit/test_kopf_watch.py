"""kopf's own PriorityClass watch (``handlers``) rides through dropped connections.

orca's client maps every "no answer" to ``TransportError``; kopf has its own client, and the
operator relies on its watch loop surviving the same faults (kopf 1.45: ``api.request``
retries ``aiohttp.ClientConnectionError`` and ``TimeoutError`` with ``error_backoffs``;
``watching.watch_objs`` and ``continuous_watch`` swallow ``ClientConnectionError``,
``ClientPayloadError`` and ``TimeoutError`` and watch again). This drives kopf's real watch
loop against the in-process API server, so a kopf release that lets one of them escape (and
stop the operator) fails here. ``app.configure_kopf`` sets the real back-offs (~5 minutes of
retries); they are milliseconds here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from kopf._cogs.clients import auth, watching
from kopf._cogs.structs import credentials, references

from tests.unit.fakeapi import FakeApiServer, Fault, until

PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}  # fmt: skip


def test_kopfs_priority_class_watch_rides_through_dropped_connections() -> None:
    async def scenario(server: FakeApiServer) -> None:
        vault = credentials.Vault()
        await vault.populate({"test": kopf.ConnectionInfo(server=server.host, insecure=True)})
        auth.vault_var.set(vault)
        settings = kopf.OperatorSettings()
        settings.networking.error_backoffs = [0.01, 0.01, 0.01]
        settings.watching.reconnect_backoff = 0.01
        resource = references.Resource("scheduling.k8s.io", "v1", "priorityclasses")
        server.put("priorityclasses", priority_class("high", 1000))
        # The first LIST: its answer cut short. Then the watch: two attempts closed before
        # the answer (kopf retries), and later the live stream cut.
        server.add(Fault("GET", PRIORITY_CLASSES, "cut", watch=False))
        server.add(Fault("GET", PRIORITY_CLASSES, "drop", times=2, watch=True))
        seen: list[tuple[str | None, str]] = []

        async def follow() -> None:
            async for event in watching.infinite_watch(
                settings=settings, resource=resource, namespace=None
            ):
                if isinstance(event, dict):
                    seen.append((event["type"], event["object"]["metadata"]["name"]))

        task = asyncio.create_task(follow())
        await until(lambda: server.live_watches == 1 or task.done(), "kopf watching")
        assert not task.done(), task
        assert (None, "high") in seen  # listed (kopf's type None)
        assert server.cut_watches() == 1
        server.put("priorityclasses", priority_class("low", 10))
        await until(lambda: ("ADDED", "low") in seen or task.done(), "low seen after the cut")
        assert not task.done(), task
        outcomes = [s.outcome for s in server.seen("GET", PRIORITY_CLASSES)]
        assert {"cut", "dropped"} <= set(outcomes)  # the faults happened
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for _key, _info, context in [x async for x in vault.extended(auth.APIContext, "contexts")]:
            await context.session.close()

    async def main() -> None:
        async with FakeApiServer() as server:
            await asyncio.wait_for(scenario(server), 120)

    asyncio.run(main())
