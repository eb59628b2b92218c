"""The metrics endpoint's delegated authentication and authorization, against a stand-in for
the API server's two review endpoints: what is asked, what is cached for how long, and the
one line each refusal carries."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CONTENT_TYPE_LATEST

from controller.operator import serving
from controller.operator.kube import ApiError, KubeApi, TransportError
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


class Recorded(Reviews):
    """Reviews that keep every body, answer a TokenReview with ``user`` and a
    SubjectAccessReview from ``rbac`` (who is allowed: a username or a group), as the API
    server's authorizer would."""

    def __init__(self, user: dict[str, Any], rbac: set[str]) -> None:
        super().__init__()
        self.user, self.rbac = user, rbac
        self.bodies: list[dict[str, Any]] = []

    async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": self.user}}
        spec = body["spec"]
        return {"status": {"allowed": bool({spec["user"], *spec["groups"]} & self.rbac)}}


def test_a_user_allowed_through_a_group_is_allowed_and_asked_about_as_a_whole() -> None:
    """kube-prometheus-stack binds its Prometheus by ServiceAccount, others bind a group:
    the SubjectAccessReview carries the user's name, uid, groups and extra as the TokenReview
    said them, or the API server judges someone else."""
    user = {
        "username": "system:serviceaccount:monitoring:prometheus",
        "uid": "u-42",
        "groups": ["system:serviceaccounts", "scrapers"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
    }
    reviews = Recorded(user, rbac={"scrapers"})

    async def scenario() -> Any:
        return await auth(reviews, FakeClock()).check("Bearer t", "/metrics")

    assert asyncio.run(scenario()) is None
    token_review, access_review = reviews.bodies
    assert token_review["spec"] == {"token": "t"}
    assert access_review["spec"] == {
        "user": "system:serviceaccount:monitoring:prometheus",
        "uid": "u-42",
        "groups": ["system:serviceaccounts", "scrapers"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


def test_the_scheme_is_read_as_http_reads_it_in_any_case() -> None:
    """RFC 7235: the auth-scheme is case-insensitive (Go's net/http and kube's bearer
    authenticator compare it so); the token is what follows, spaces trimmed."""
    reviews, clock = Reviews(), FakeClock()

    async def scenario() -> list[Any]:
        a = auth(reviews, clock)
        return [
            await a.check(header, "/metrics")
            for header in ("bearer good", "BEARER good", "Bearer  good ", "Bearer", "Bearer   ")
        ]

    answers = asyncio.run(scenario())
    assert answers[:3] == [None, None, None]
    assert [(d.status, d.message) for d in answers[3:]] == [
        (401, "Unauthorized: no bearer token")
    ] * 2


def test_a_token_review_that_does_not_say_authenticated_is_a_401() -> None:
    """A TokenReview's status without ``authenticated: true`` authenticates nobody, even with
    a user in it (the API server sets both; a webhook authenticator may leave one out)."""

    class Unsure(Reviews):
        def __init__(self, status: dict[str, Any]) -> None:
            super().__init__()
            self.status = status

        async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
            self.calls.append(body["kind"])
            if body["kind"] == "TokenReview":
                return {"status": self.status}
            return {"status": {"allowed": True}}

    answers = []
    for status in (
        {},
        {"user": {"username": "alice"}},
        {"authenticated": False, "user": {"username": "alice"}},
        {"authenticated": None},
    ):
        reviews = Unsure(status)

        async def scenario(reviews: Unsure = reviews) -> Any:
            return await auth(reviews, FakeClock()).check("Bearer t", "/metrics")

        denial = asyncio.run(scenario())
        answers.append((denial.status, denial.message) if denial else None)
        assert reviews.calls == ["TokenReview"]  # never asked whether "" may scrape
    assert answers == [(401, "Unauthorized: token not valid")] * 4


def test_a_token_review_error_is_one_line_of_at_most_200_characters() -> None:
    class Wordy(Reviews):
        async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
            return {"status": {"authenticated": False, "error": "x" * 500 + "\nsecond line"}}

    async def scenario() -> Any:
        return await auth(Wordy(), FakeClock()).check("Bearer t", "/metrics")

    denial = asyncio.run(scenario())
    assert denial.message == "Unauthorized: " + "x" * 200


def test_a_hung_api_server_gives_503_within_the_review_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kube's delegating authenticator gives up after its ClientTimeout: a scrape is answered
    503 after ``REVIEW_TIMEOUT``, not when (if ever) the API server answers."""
    monkeypatch.setattr(serving, "REVIEW_TIMEOUT", 0.05)
    reviews = Reviews()
    reviews.gate = asyncio.Event()  # never set: the API server never answers

    async def scenario() -> Any:
        a = auth(reviews, FakeClock())
        return await asyncio.wait_for(a.check("Bearer good", "/metrics"), 5)

    denial = asyncio.run(scenario())
    assert (denial.status, denial.message) == (
        503,
        "Service Unavailable: the API server did not answer the review within 0.05s",
    )


def test_the_cache_forgets_the_least_recently_used_first_and_each_entry_after_its_ttl() -> None:
    clock = FakeClock()
    cache: ExpiringLRU[str, int] = ExpiringLRU(10.0, 2, clock)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3)  # one too many: b goes, not a
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    cache.put("a", 4)  # put again: refreshed, and most recent
    cache.put("d", 5)
    assert (cache.get("a"), cache.get("c"), cache.get("d")) == (4, None, 5)
    clock.now += 9.9
    assert cache.get("a") == 4
    clock.now += 0.1  # ten seconds after it was put: forgotten (expiry is inclusive)
    assert cache.get("a") is None and len(cache) == 1


def test_the_endpoint_serves_what_prometheus_reads_and_logs_each_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reviews = Reviews()

    async def scenario() -> None:
        secured = endpoint_app(auth(reviews, FakeClock()), Readiness(), render=lambda: b"m 1\n")
        async with TestClient(TestServer(secured)) as client:
            allowed = await client.get("/metrics", headers={"Authorization": "Bearer good"})
            assert allowed.status == 200
            assert allowed.headers["Content-Type"] == CONTENT_TYPE_LATEST
            assert await allowed.read() == b"m 1\n"
            forbidden = await client.get("/metrics", headers={"Authorization": "Bearer weak"})
            assert (forbidden.status, await forbidden.text()) == (
                403,
                'Forbidden: user "bob" cannot get path "/metrics"\n',
            )
            assert (await client.get("/readyz")).status == 200  # no informers: whole
            assert (await client.post("/metrics")).status == 405
        open_app = endpoint_app(None, Readiness(), render=lambda: b"open 1\n")
        async with TestClient(TestServer(open_app)) as client:  # --metrics-insecure
            plain = await client.get("/metrics")
            assert (plain.status, await plain.read()) == (200, b"open 1\n")

    with caplog.at_level(logging.INFO, logger="orca.serving"):
        asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.serving"]
    assert lines == [
        'GET /metrics from 127.0.0.1: Forbidden: user "bob" cannot get path "/metrics"'
    ]


def test_at_most_max_reviews_are_asked_at_once() -> None:
    """A flood of distinct tokens waits for a place: the API server is asked at most
    ``MAX_REVIEWS`` reviews at a time, and each one is answered in the end."""
    reviews = Reviews()
    reviews.gate = asyncio.Event()
    in_flight = [0, 0]
    request = reviews.request

    async def counted(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        try:
            return await request(method, path, body)
        finally:
            in_flight[0] -= 1

    reviews.request = counted  # type: ignore[method-assign]

    async def scenario() -> list[Any]:
        a = auth(reviews, FakeClock())
        checks = [
            asyncio.ensure_future(a.check(f"Bearer t{i}", "/metrics"))
            for i in range(serving.MAX_REVIEWS + 4)
        ]
        for _ in range(20):
            await asyncio.sleep(0)
        assert in_flight[1] == serving.MAX_REVIEWS
        assert reviews.gate is not None
        reviews.gate.set()
        return await asyncio.gather(*checks)

    answers = asyncio.run(scenario())
    assert {(d.status, d.message) for d in answers} == {(401, "Unauthorized: invalid bearer token")}
    assert in_flight[1] == serving.MAX_REVIEWS


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (
            ApiError(500, "InternalError", "etcd is\nunhappy" + "x" * 300),
            "Service Unavailable: the review failed: ",
        ),
        (TransportError("POST /x", ConnectionRefusedError("refused")), "the review failed: "),
        (ValueError("whatever"), "Service Unavailable: the review failed: ValueError"),
    ],
    ids=["api-error", "no-answer", "anything-else"],
)
def test_a_review_that_fails_is_a_503_of_one_line(error: Exception, says: str) -> None:
    class Failing(Reviews):
        async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
            raise error

    async def scenario() -> Any:
        return await auth(Failing(), FakeClock()).check("Bearer t", "/metrics")

    denial = asyncio.run(scenario())
    assert denial.status == 503 and says in denial.message
    assert "\n" not in denial.message and len(denial.message) <= 260


def test_a_review_cut_short_fails_whoever_shared_it_and_is_asked_afresh_next() -> None:
    """The scrape that asked is gone (its connection closed: its handler is cancelled): the
    others waiting on the same review are answered 503 rather than left waiting, and the
    next scrape asks again."""
    reviews = Reviews()
    reviews.gate = asyncio.Event()

    async def scenario() -> list[Any]:
        a = auth(reviews, FakeClock())
        asking = asyncio.ensure_future(a.check("Bearer good", "/metrics"))
        await asyncio.sleep(0)
        sharing = asyncio.ensure_future(a.check("Bearer good", "/metrics"))
        await asyncio.sleep(0)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
        shared = await sharing
        assert reviews.calls == ["TokenReview"]  # one review, shared
        assert reviews.gate is not None
        reviews.gate.set()
        return [shared, await a.check("Bearer good", "/metrics"), len(reviews.calls)]

    shared, again, calls = asyncio.run(scenario())
    assert (shared.status, shared.message) == (
        503,
        "Service Unavailable: the review failed: CancelledError",
    )
    assert again is None and calls == 3  # asked afresh: a TokenReview and an access review


class Exact(Reviews):
    """Reviews that keep each request as sent (method, path, body)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.sent.append((method, path, body))
        return await super().request(method, path, body)


def test_the_reviews_are_the_apis_own_objects_posted_where_they_belong() -> None:
    reviews = Exact()

    async def scenario() -> Any:
        return await auth(reviews, FakeClock()).check("Bearer good", "/metrics")

    assert asyncio.run(scenario()) is None
    (token_method, token_path, token_body), (access_method, access_path, access_body) = reviews.sent
    assert (token_method, token_path) == ("POST", "/apis/authentication.k8s.io/v1/tokenreviews")
    assert token_body == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "good"},
    }
    assert (access_method, access_path) == (
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    )
    assert access_body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "uid": "",
            "groups": [],
            "extra": {},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }


def test_a_user_the_token_review_leaves_unnamed_is_asked_about_as_nameless() -> None:
    """kube's authorizer sees what the TokenReview said: an empty name and uid stay empty."""
    reviews = Recorded({"groups": ["scrapers"]}, rbac={"scrapers"})

    async def scenario() -> Any:
        return await auth(reviews, FakeClock()).check("Bearer t", "/metrics")

    assert asyncio.run(scenario()) is None
    spec = reviews.bodies[1]["spec"]
    assert (spec["user"], spec["uid"], spec["groups"]) == ("", "", ["scrapers"])


def test_two_users_asked_about_at_once_each_get_their_own_answer() -> None:
    reviews = Reviews()
    reviews.gate = asyncio.Event()

    async def scenario() -> list[Any]:
        a = auth(reviews, FakeClock())
        both = [
            asyncio.ensure_future(a.check("Bearer good", "/metrics")),
            asyncio.ensure_future(a.check("Bearer weak", "/metrics")),
        ]
        for _ in range(10):
            await asyncio.sleep(0)
        assert reviews.gate is not None
        reviews.gate.set()
        return await asyncio.gather(*both)

    alice, bob = asyncio.run(scenario())
    assert alice is None
    assert (bob.status, bob.message) == (403, 'Forbidden: user "bob" cannot get path "/metrics"')


def test_a_failed_review_says_the_first_line_of_why_cut_at_200_characters() -> None:
    class Failing(Reviews):
        def __init__(self, error: Exception) -> None:
            super().__init__()
            self.error = error

        async def request(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
            raise self.error

    async def scenario(error: Exception) -> Any:
        return await auth(Failing(error), FakeClock()).check("Bearer t", "/metrics")

    long = ApiError(500, "InternalError", "x" * 300 + "\nsecond")
    denial = asyncio.run(scenario(long))
    assert (
        denial.message
        == "Service Unavailable: the review failed: " + ("500 InternalError: " + "x" * 300)[:200]
    )
    short = asyncio.run(scenario(ApiError(500, "InternalError", "etcd is\nunhappy")))
    assert short.message == "Service Unavailable: the review failed: 500 InternalError: etcd is"


def test_the_probes_answer_ok_in_one_line() -> None:
    class Informer:
        def __init__(self) -> None:
            self.path, self.synced = "/api/v1/nodes", asyncio.Event()

    async def scenario() -> list[tuple[int, str]]:
        informer = Informer()
        informer.synced.set()
        app = endpoint_app(None, Readiness([informer]), render=lambda: b"")  # type: ignore[list-item]
        async with TestClient(TestServer(app)) as client:
            answers = []
            for path in ("/healthz", "/livez", "/readyz"):
                response = await client.get(path)
                answers.append((response.status, await response.text()))
            return answers

    assert asyncio.run(scenario()) == [(200, "ok\n")] * 3
