"""The metrics endpoint's delegated authentication and authorization, against a stand-in for
the API server's two review endpoints: what is asked, what is cached for how long, and the
one line each refusal carries."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer

from controller.operator.kube import KubeApi, TransportError
from controller.operator.serving import (
    CACHE_TTL,
    DelegatedAuth,
    ExpiringLRU,
    Readiness,
    endpoint_app,
)
from tests.support.fakeapi import FakeClock


class Reviews:
    """Answers TokenReviews (``tokens``: token -> username) and SubjectAccessReviews
    (``allowed``: usernames), counting them; ``down`` makes every review fail."""

    def __init__(self) -> None:
        self.tokens = {"good": "alice", "weak": "bob"}
        self.allowed = {"alice"}
        self.calls: list[str] = []
        self.down = False
        self.gate: asyncio.Event | None = None

    async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(body["kind"])
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise TransportError(f"{method} {path}", ConnectionRefusedError("refused"))
        if body["kind"] == "TokenReview":
            user = self.tokens.get(body["spec"]["token"])
            if user is None:
                return {"status": {"authenticated": False, "error": "invalid bearer token"}}
            return {"status": {"authenticated": True, "user": {"username": user}}}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


def auth(reviews: Reviews, clock: FakeClock) -> DelegatedAuth:
    return DelegatedAuth(cast(KubeApi, reviews), clock=clock)


def test_who_gets_what() -> None:
    reviews, clock = Reviews(), FakeClock()

    async def scenario() -> list[Any]:
        a = auth(reviews, clock)
        return [
            await a.check(None, "/metrics"),
            await a.check("Basic abc", "/metrics"),
            await a.check("Bearer nope", "/metrics"),
            await a.check("Bearer weak", "/metrics"),
            await a.check("Bearer good", "/metrics"),
        ]

    answers = asyncio.run(scenario())
    assert [(d.status, d.message) if d else None for d in answers] == [
        (401, "Unauthorized: no bearer token"),
        (401, "Unauthorized: no bearer token"),
        (401, "Unauthorized: invalid bearer token"),
        (403, 'Forbidden: user "bob" cannot get path "/metrics"'),
        None,
    ]


def test_answers_are_cached_for_the_ttl_allowed_or_not_and_shared_while_asked() -> None:
    reviews, clock = Reviews(), FakeClock()

    async def scenario() -> None:
        a = auth(reviews, clock)
        reviews.gate = asyncio.Event()
        pending = [asyncio.ensure_future(a.check("Bearer good", "/metrics")) for _ in range(10)]
        await asyncio.sleep(0)
        reviews.gate.set()
        assert await asyncio.gather(*pending) == [None] * 10
        assert reviews.calls == ["TokenReview", "SubjectAccessReview"]  # one each, shared
        for _ in range(5):
            assert (await a.check("Bearer weak", "/metrics")).status == 403  # type: ignore[union-attr]
            assert (await a.check("Bearer nope", "/metrics")).status == 401  # type: ignore[union-attr]
        assert len(reviews.calls) == 2 + 3  # bob: token + access; nope: token; cached after
        clock.now += CACHE_TTL + 0.1
        await a.check("Bearer good", "/metrics")
        assert len(reviews.calls) == 5 + 2

    asyncio.run(scenario())


def test_an_api_server_that_does_not_answer_gives_503_and_nothing_is_cached() -> None:
    reviews, clock = Reviews(), FakeClock()

    async def scenario() -> None:
        a = auth(reviews, clock)
        reviews.down = True
        denial = await a.check("Bearer good", "/metrics")
        assert denial is not None and denial.status == 503
        assert denial.message.startswith("Service Unavailable: the review failed: ")
        assert "\n" not in denial.message
        reviews.down = False
        assert await a.check("Bearer good", "/metrics") is None

    asyncio.run(scenario())


def test_the_cache_is_bounded() -> None:
    clock = FakeClock()
    cache: ExpiringLRU[int, int] = ExpiringLRU(10.0, 3, clock)
    for i in range(5):
        cache.put(i, i)
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) == 4


def test_the_probes_are_open_and_readyz_waits_for_the_informers() -> None:
    class Informer:
        def __init__(self, path: str) -> None:
            self.path, self.synced = path, asyncio.Event()

    async def scenario() -> None:
        informers = [Informer("/api/v1/nodes"), Informer("/apis/x/v1/workloads")]
        reviews = Reviews()
        app = endpoint_app(auth(reviews, FakeClock()), Readiness(informers), render=lambda: b"m")  # type: ignore[arg-type]
        async with TestClient(TestServer(app)) as client:
            for path in ("/healthz", "/livez"):
                assert (await client.get(path)).status == 200
            ready = await client.get("/readyz")
            assert (ready.status, await ready.text()) == (
                503,
                "informers not synced: /api/v1/nodes, /apis/x/v1/workloads\n",
            )
            for informer in informers:
                informer.synced.set()
            assert (await client.get("/readyz")).status == 200
            denied = await client.get("/metrics")
            assert (denied.status, await denied.text()) == (401, "Unauthorized: no bearer token\n")
            allowed = await client.get("/metrics", headers={"Authorization": "Bearer good"})
            assert (allowed.status, await allowed.read()) == (200, b"m")
            assert reviews.calls == ["TokenReview", "SubjectAccessReview"]

    asyncio.run(scenario())
