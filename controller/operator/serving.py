"""The operator's own HTTP(S) endpoint: ``/metrics`` for who may read it, and the probes.

kube-scheduler and controller-manager serve their metrics this way (``k8s.io/apiserver``'s
delegating authenticator and authorizer; controller-runtime's
``WithAuthenticationAndAuthorization`` is the same): a request's bearer token is checked with a
``TokenReview`` (who is it?), then a ``SubjectAccessReview`` asks whether that user may ``get``
the non-resource URL ``/metrics`` (the ``metrics-reader`` ClusterRole grants it). Both answers
are cached for 10 s, allowed or not, as kube's delegating authenticator and authorizer cache
them (``CacheTTL``, ``AllowCacheTTL`` and ``DenyCacheTTL`` are all 10 s by default:
``k8s.io/apiserver/pkg/server/options/authentication.go`` and ``.../authorization.go``), so a
Prometheus scraping every few seconds costs the API server two requests per 10 s per token.
Tokens are cached by their SHA-256, never as they are; the caches are bounded (LRU), and
concurrent requests with one token share one review (kube's ``cached_token_authenticator``
does the same with singleflight).

``/healthz``, ``/livez`` and ``/readyz`` are open to all, as kube's ``AlwaysAllowPaths``:

    /livez, /healthz   the process's event loop answers (what liveness needs: a wedged loop
                       fails it, a missing API server does not)
    /readyz            every informer has listed once (the operator's view is whole): until
                       then 503 naming what has not synced. A standby replica (no Lease) is
                       ready too: it keeps a warm cache and serves the admission webhook, so
                       the Service may send it requests. Leadership is ``orca_leader``.

Every refusal is one line: ``401 Unauthorized: no bearer token`` and the like. A header larger
than aiohttp's bound (8190 bytes) is refused before it is read (400): no token that large is
ever sent for review. With
``--metrics-insecure`` the endpoint is plain HTTP and open (local use; a warning is logged).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from controller.operator.kube import ApiError, KubeApi, TransportError
from controller.operator.kube.informer import Informer

logger = logging.getLogger("orca.serving")

METRICS_PATH = "/metrics"
#: kube's defaults for the delegating authenticator's and authorizer's caches.
CACHE_TTL = 10.0
#: Entries per cache: a bound, so a flood of distinct tokens cannot grow memory without end.
CACHE_SIZE = 4096
#: Reviews in flight to the API server at once; more requests wait for a place.
MAX_REVIEWS = 16
#: The longest a review may take before the scrape is answered 503 (kube's ClientTimeout).
REVIEW_TIMEOUT = 10.0

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

K = TypeVar("K")
V = TypeVar("V")


class ExpiringLRU(Generic[K, V]):
    """At most ``size`` entries, each forgotten ``ttl`` seconds after it was put."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic):
        self.ttl, self.size, self.clock = ttl, size, clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] <= self.clock():
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return item[1]

    def put(self, key: K, value: V) -> None:
        self._items[key] = (self.clock() + self.ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class User:
    """Who a TokenReview said a token belongs to."""

    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Denial:
    """A request refused: the HTTP status and the one line sent back (and logged)."""

    status: int
    message: str


#: A SubjectAccessReview's "allowed", as the decision cache holds it.
ALLOWED = Denial(200, "allowed")


class ReviewFailed(Exception):
    """The API server did not answer a review (the scrape gets 503, nothing is cached)."""


class DelegatedAuth:
    """Who may read ``/metrics``, asked of the API server (TokenReview, SubjectAccessReview)
    and cached as kube's delegating authenticator and authorizer do."""

    def __init__(
        self,
        api: KubeApi,
        ttl: float = CACHE_TTL,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.users: ExpiringLRU[str, User | Denial] = ExpiringLRU(ttl, size, clock)
        self.decisions: ExpiringLRU[tuple[Any, ...], Denial] = ExpiringLRU(ttl, size, clock)
        self._inflight: dict[Any, asyncio.Future[Any]] = {}
        self._reviews = asyncio.Semaphore(MAX_REVIEWS)

    async def check(self, header: str | None, path: str, verb: str = "get") -> Denial | None:
        """None when the bearer token in ``header`` may ``verb`` ``path``; else the denial."""
        scheme, _, token = (header or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Denial(401, "Unauthorized: no bearer token")
        try:
            user = await self._authenticate(token)
            if isinstance(user, Denial):
                return user
            return await self._authorize(user, path, verb)
        except ReviewFailed as exc:
            return Denial(503, f"Service Unavailable: {exc}")

    async def _once(self, key: Any, review: Callable[[], Awaitable[V]]) -> V:
        """One review per key at a time: concurrent callers share its answer."""
        pending = self._inflight.get(key)
        if pending is not None:
            result: V = await asyncio.shield(pending)
            return result
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            async with self._reviews:
                value = await asyncio.wait_for(review(), REVIEW_TIMEOUT)
            future.set_result(value)
            return value
        except BaseException as exc:
            error = exc if isinstance(exc, ReviewFailed) else ReviewFailed(_why(exc))
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody shared it
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise error from None
        finally:
            del self._inflight[key]

    async def _authenticate(self, token: str) -> User | Denial:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self.users.get(key)
        if cached is not None:
            return cached
        answer = await self._once(("token", key), lambda: self._token_review(token))
        self.users.put(key, answer)
        return answer

    async def _token_review(self, token: str) -> User | Denial:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},  # no audiences: the API server's own are checked
        }
        status = (await self.api.request("POST", TOKEN_REVIEWS, body)).get("status") or {}
        if not status.get("authenticated"):
            why = str(status.get("error") or "token not valid").splitlines()[0][:200]
            return Denial(401, f"Unauthorized: {why}")
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(
            name=str(user.get("username") or ""),
            uid=str(user.get("uid") or ""),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(map(str, v or ()))) for k, v in extra.items())),
        )

    async def _authorize(self, user: User, path: str, verb: str) -> Denial | None:
        key = (user, path, verb)
        answer = self.decisions.get(key)
        if answer is None:
            answer = await self._once(
                ("access", key), lambda: self._access_review(user, path, verb)
            )
            self.decisions.put(key, answer)
        return None if answer is ALLOWED else answer

    async def _access_review(self, user: User, path: str, verb: str) -> Denial:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.name,
                "uid": user.uid,
                "groups": list(user.groups),
                "extra": {k: list(v) for k, v in user.extra},
                "nonResourceAttributes": {"path": path, "verb": verb},
            },
        }
        status = (await self.api.request("POST", ACCESS_REVIEWS, body)).get("status") or {}
        if status.get("allowed"):
            return ALLOWED
        # kube's words for it (``k8s.io/apiserver/pkg/endpoints/handlers/responsewriters``).
        return Denial(403, f'Forbidden: user "{user.name}" cannot {verb} path "{path}"')


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"the API server did not answer the review within {REVIEW_TIMEOUT:g}s"
    if isinstance(exc, ApiError | TransportError):
        return f"the review failed: {str(exc).splitlines()[0][:200]}"
    return f"the review failed: {type(exc).__name__}"


class Readiness:
    """``/readyz``: ready once every informer has listed (its ``synced`` is set)."""

    def __init__(self, informers: Iterable[Informer] = ()) -> None:
        self.informers = list(informers)

    def not_synced(self) -> list[str]:
        return [i.path for i in self.informers if not i.synced.is_set()]


def endpoint_app(
    auth: DelegatedAuth | None,
    readiness: Readiness,
    render: Callable[[], bytes] = lambda: generate_latest(REGISTRY),
) -> web.Application:
    """The aiohttp application: ``/metrics`` (behind ``auth`` unless it is None) and the
    three probes. Requests carry no body worth reading: 1 KiB at most."""

    async def metrics(request: web.Request) -> web.Response:
        if auth is not None:
            denial = await auth.check(request.headers.get("Authorization"), METRICS_PATH)
            if denial is not None:
                logger.info(
                    "%s %s from %s: %s",
                    request.method,
                    request.path,
                    _peer(request),
                    denial.message,
                )
                return web.Response(status=denial.status, text=denial.message + "\n")
        # Rendering every series takes milliseconds at thousands of nodes: not on the loop
        # that decides and answers the webhook.
        body = await asyncio.get_running_loop().run_in_executor(None, render)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def live(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def ready(_: web.Request) -> web.Response:
        missing = readiness.not_synced()
        if missing:
            return web.Response(
                status=503, text="informers not synced: " + ", ".join(missing) + "\n"
            )
        return web.Response(text="ok\n")

    app = web.Application(client_max_size=1024)
    app.router.add_get(METRICS_PATH, metrics)
    for path in ("/healthz", "/livez"):
        app.router.add_get(path, live)
    app.router.add_get("/readyz", ready)
    return app


def _peer(request: web.Request) -> str:
    return str(request.remote or "?")
