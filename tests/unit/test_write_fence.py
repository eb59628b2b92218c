"""Write fencing: a replica writes only while its leader Lease is locally valid
(``controller/operator/kube/leader.py``, ``client.py``). The chaos suite checks it end to end
with SIGSTOP; these pin the rule itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client as k8s_client

from controller.operator.kube import Fenced, KubeApi
from controller.operator.kube.leader import LeaderElector


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(clock: Clock) -> LeaderElector:
    e = LeaderElector(api=None, namespace="ns", name="lease", renew_deadline=10.0)  # type: ignore[arg-type]
    e.clock = clock
    return e


def test_a_leader_holds_the_lease_only_until_renew_plus_deadline() -> None:
    clock = Clock()
    e = elector(clock)
    elected: list[bool] = []
    e.on_elected = lambda: elected.append(True)
    assert not e.holds_lease()  # never elected
    e._last_renew = clock.now
    e._set(True)
    clock.now += 9.9
    assert e.holds_lease()
    clock.now += 0.2  # frozen past the deadline: no renew since 10.1 s
    assert not e.holds_lease()
    assert not e.is_leader  # stepped down at once, not at the next renew attempt
    e._last_renew = clock.now  # a later successful renew is a new election
    e._set(True)
    assert e.holds_lease() and elected == [True, True]


async def _server(hits: list[str], release: asyncio.Event) -> web.AppRunner:
    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path)
        if request.path == "/slow":
            await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


def _api(runner: web.AppRunner, fence: Any, max_connections: int = 4) -> KubeApi:
    port = runner.addresses[0][1]
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.verify_ssl = False
    return KubeApi(configuration, max_connections=max_connections, fence=fence)


def test_a_fenced_request_is_not_sent_when_the_lease_lapsed() -> None:
    async def scenario() -> list[str]:
        hits: list[str] = []
        runner = await _server(hits, asyncio.Event())
        api = _api(runner, fence=lambda: False)
        try:
            with pytest.raises(Fenced):
                await api.create_event("ns", {"reason": "Scheduled"})
            await api.request("GET", "/lease")  # not fenced: the Lease protocol itself
        finally:
            await api.close()
            await runner.cleanup()
        return hits

    assert asyncio.run(scenario()) == ["/lease"]


def test_a_write_started_while_the_lease_held_is_refused_as_its_bytes_would_leave() -> None:
    """aiohttp writes a request from a task of its own, a loop iteration later: the process
    can freeze in between. Here the fence says yes when the write starts, no right after."""

    async def scenario() -> tuple[list[str], BaseException | None]:
        hits: list[str] = []
        runner = await _server(hits, asyncio.Event())
        answers = iter([True])
        api = _api(runner, fence=lambda: next(answers, False))
        try:
            outcome = (
                await asyncio.gather(
                    api.write_workload_status("ns", "w", {}, "1"), return_exceptions=True
                )
            )[0]
            await api.request("GET", "/after")  # the client still works
        finally:
            await api.close()
            await runner.cleanup()
        return hits, outcome if isinstance(outcome, BaseException) else None

    hits, error = asyncio.run(scenario())
    assert hits == ["/after"]
    assert isinstance(error, Fenced)


def test_a_write_queued_before_the_lease_lapsed_is_not_sent_after() -> None:
    """The case SIGSTOP creates: the write passed every check while the Lease held, then waited
    (here for the only connection); when it can go, the Lease has lapsed: it must not go."""

    async def scenario() -> tuple[list[str], BaseException | None]:
        hits: list[str] = []
        release = asyncio.Event()
        runner = await _server(hits, release)
        valid, asked = [True], [0]

        def fence() -> bool:
            asked[0] += 1
            return valid[0]

        api = _api(runner, fence=fence, max_connections=1)
        try:
            slow = asyncio.create_task(api.request("GET", "/slow"))
            while not hits:
                await asyncio.sleep(0.01)
            write = asyncio.create_task(api.write_workload_status("ns", "w", {}, "1"))
            while not asked[0]:  # passed the first check, now waits for the connection
                await asyncio.sleep(0.01)
            valid[0] = False
            release.set()
            await slow
            outcome = (await asyncio.gather(write, return_exceptions=True))[0]
        finally:
            await api.close()
            await runner.cleanup()
        return hits, outcome if isinstance(outcome, BaseException) else None

    hits, error = asyncio.run(scenario())
    assert hits == ["/slow"]
    assert isinstance(error, Fenced)
