"""``KubeApi``'s contract with its callers (``controller/operator/kube/client.py``), over
loopback HTTP against the in-process API server (``fakeapi``):

- a request or a watch that gets no answer raises ``TransportError`` (with the cause), never
  an aiohttp or socket exception: the operator's tasks catch ``ApiError``/``TransportError``
  and nothing else, so anything else would stop the operator;
- a 401 loads the credentials again and retries once with them (requests and watches), and
  the session of the old credentials is retired, not closed under the requests it carries.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client as k8s_client
from prometheus_client import REGISTRY

from controller.api.models import API_VERSION
from controller.operator import tls
from controller.operator.kube import ApiError, Fenced, KubeApi, TransportError
from controller.operator.kube import client as kube
from tests.support.factories import stored_workload
from tests.support.fakeapi import FakeApiServer, Fault, run, until

NODES = "/api/v1/nodes"


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# -- no answer: one exception ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        ("drop", aiohttp.ServerDisconnectedError),  # closed before the answer (twice: retried)
        ("cut", aiohttp.ClientPayloadError),  # the answer cut short
        ("garbage", ValueError),  # a 200 that is not JSON (orjson.JSONDecodeError)
    ],
)
def test_a_request_without_an_answer_raises_transport_error(
    fault: str, cause: type[BaseException]
) -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.add(Fault("GET", NODES, fault, times=None))
        async with server.client() as api:
            with pytest.raises(TransportError) as raised:
                await api.request("GET", NODES)
            assert isinstance(raised.value.cause, cause)
            assert raised.value.__cause__ is raised.value.cause
            assert str(raised.value).startswith(f"GET {NODES}")
            server.clear()
            assert await api.request("GET", NODES) == {
                "items": [],
                "metadata": {"resourceVersion": "100"},
            }

    run(scenario)


def test_connection_refused_and_tls_failures_raise_transport_error() -> None:
    async def scenario(server: FakeApiServer) -> None:
        refused = k8s_client.Configuration()
        refused.host = f"http://127.0.0.1:{unused_port()}"
        # TLS spoken to a server that answers in plain HTTP: the handshake fails.
        tls = k8s_client.Configuration()
        tls.host = server.host.replace("http://", "https://")
        tls.verify_ssl = False
        for configuration in (refused, tls):
            async with KubeApi(configuration) as api:
                with pytest.raises(TransportError) as raised:
                    await api.request("GET", NODES)
                assert isinstance(raised.value.cause, aiohttp.ClientConnectionError)
                with pytest.raises(TransportError):
                    async for _ in api.watch(NODES, None, 30):
                        pass

    run(scenario)


def test_credentials_that_cannot_be_read_raise_transport_error_and_send_nothing() -> None:
    async def scenario(server: FakeApiServer) -> None:
        configuration = server.configuration(token="t")

        def hook(_configuration: Any) -> None:  # e.g. the service account token file gone
            raise FileNotFoundError("/var/run/secrets/kubernetes.io/serviceaccount/token")

        configuration.refresh_api_key_hook = hook  # type: ignore[assignment]
        async with KubeApi(configuration) as api:
            with pytest.raises(TransportError) as raised:
                await api.request("GET", NODES)
            assert isinstance(raised.value.cause, FileNotFoundError)
            assert str(raised.value).startswith("reading the credentials: FileNotFoundError: ")
        assert server.requests == []

    run(scenario)


def test_a_watch_broken_mid_stream_yields_what_came_then_raises_transport_error() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", {"metadata": {"name": "a"}})
        server.put("nodes", {"metadata": {"name": "b"}})
        seen: list[str] = []
        async with server.client() as api:
            with pytest.raises(TransportError) as raised:
                async for event in api.watch(NODES, "100", 300):
                    seen.append(event["object"]["metadata"]["name"])
                    if len(seen) == 2:
                        server.cut_watches()
            assert isinstance(raised.value.cause, aiohttp.ClientPayloadError)
            assert seen == ["a", "b"]
            server.add(Fault("GET", NODES, "garbage", watch=True))  # a watch that is not JSON
            with pytest.raises(TransportError):
                async for _ in api.watch(NODES, "100", 300):
                    pass

    run(scenario)


# -- a watch's own server: what the fake API server never does -------------------------------


class RawServer:
    """A loopback HTTP server whose one handler the test writes: a proxy's page, an ``ERROR``
    event that is not a ``Status``, a connection that goes silent."""

    def __init__(self, handler: Any) -> None:
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", handler)
        self.runner = web.AppRunner(self.app)

    async def __aenter__(self) -> k8s_client.Configuration:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        configuration = k8s_client.Configuration()
        configuration.host = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return configuration

    async def __aexit__(self, *_exc: object) -> None:
        await self.runner.cleanup()


async def watch_all(configuration: k8s_client.Configuration, seen: list[str]) -> None:
    async with KubeApi(configuration) as api:
        async for event in api.watch(NODES, None, 0):
            seen.append(event["object"]["metadata"]["name"])


def test_a_proxys_refusal_of_a_watch_keeps_the_http_reason() -> None:
    """A refusal that is not the API server's ``Status`` (a proxy's page): the ``ApiError``
    says the HTTP status and reason, and quotes the page, as the informer logs it."""

    async def refuse(_request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>upstream gone</html>", content_type="text/html")

    async def scenario() -> None:
        async with RawServer(refuse) as configuration:
            with pytest.raises(ApiError) as raised:
                await watch_all(configuration, [])
        assert str(raised.value) == "502 Bad Gateway: <html>upstream gone</html>"

    asyncio.run(scenario())


def test_an_error_event_without_a_status_is_a_server_error_not_an_expired_version() -> None:
    """An ``ERROR`` event whose object says nothing (no code, reason or message): a 500, so the
    informer watches again rather than LISTing everything as after a 410, and its log line
    is ``500 Error:`` and nothing made up."""

    async def error(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')
        await response.write(b'{"type":"ERROR","object":{}}\n')
        return response

    async def scenario() -> None:
        seen: list[str] = []
        async with RawServer(error) as configuration:
            with pytest.raises(ApiError) as raised:
                await watch_all(configuration, seen)
        assert seen == ["a"]
        assert (raised.value.status, str(raised.value)) == (500, "500 Error: ")

    asyncio.run(scenario())


def test_a_watch_gone_silent_is_cut_past_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch whose connection goes silent (half-open TCP, a proxy holding it) never errors
    by itself: it is cut ``WATCH_SILENCE_GRACE`` past the ``timeoutSeconds`` it asked for, a
    ``TransportError`` after the events that came, so the informer watches again. (The grace
    shortened from a minute; the watch asks for ``timeoutSeconds=0``.)"""
    monkeypatch.setattr(kube, "WATCH_SILENCE_GRACE", 0.5)
    held = asyncio.Event()

    async def silent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')
        await held.wait()  # silent until the client has given up
        return response

    async def scenario() -> None:
        seen: list[str] = []
        async with RawServer(silent) as configuration:
            try:
                with pytest.raises(TransportError) as raised:
                    await asyncio.wait_for(watch_all(configuration, seen), 10)
            finally:
                held.set()  # the handler ends, so the server need not wait for it to stop
        assert seen == ["a"]
        assert isinstance(raised.value.cause, TimeoutError)

    asyncio.run(scenario())


def test_a_watch_whose_tls_handshake_never_ends_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connecting includes the TLS handshake: a server that accepts the connection and then
    says nothing (a load balancer with no backend) is given up after
    ``WATCH_CONNECT_LIMIT`` (shortened from 30 s), a ``TransportError``, not a watch that
    hangs until asyncio's own 60 s handshake limit."""
    monkeypatch.setattr(kube, "WATCH_CONNECT_LIMIT", 0.5)

    async def mute(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        configuration = k8s_client.Configuration()
        configuration.host = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        configuration.verify_ssl = False
        try:
            with pytest.raises(TransportError) as raised:
                await asyncio.wait_for(watch_all(configuration, []), 10)
            assert isinstance(raised.value.cause, TimeoutError)
        finally:
            server.close()

    asyncio.run(scenario())


def test_refusals_stay_api_errors() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.add(Fault("GET", NODES, "status", status=503, reason="ServiceUnavailable"))
        async with server.client() as api:
            with pytest.raises(ApiError) as raised:
                await api.request("GET", NODES)
            assert raised.value.status == 503

    run(scenario)


# -- what an answer that is not 2xx says ------------------------------------------------------


def test_an_api_error_carries_the_status_objects_reason_and_message() -> None:
    """The API server writes a ``metav1.Status``: its ``reason`` (more precise than the HTTP
    one: AlreadyExists is a 409 too) and its message, trimmed, are what callers branch on and
    log."""
    body = orjson.dumps({"kind": "Status", "reason": "AlreadyExists", "message": " lease exists\n"})
    error = kube.api_error(409, "Conflict", body)
    assert (error.status, error.reason, error.message) == (409, "AlreadyExists", "lease exists")
    assert str(error) == "409 AlreadyExists: lease exists"
    without_reason = kube.api_error(500, "Internal Server Error", b'{"message": "etcd down"}')
    assert (without_reason.reason, without_reason.message) == ("Internal Server Error", "etcd down")


@pytest.mark.parametrize(
    "body",
    [b"<html>" + b"x" * 300 + b"\xff</html>", b'["not", "a", "Status"]' + b" " * 300],
    ids=["a-proxys-page", "json-but-not-a-status"],
)
def test_an_answer_that_is_not_a_status_is_quoted_in_part(body: bytes) -> None:
    """A proxy's page (or any body that is not a ``Status``): the HTTP reason, and the first
    200 bytes of the body as the message, undecodable bytes replaced, never an exception."""
    error = kube.api_error(502, "Bad Gateway", body)
    assert error.reason == "Bad Gateway"
    assert error.message == body[:200].decode(errors="replace").strip()
    error = kube.api_error(502, "Bad Gateway", b"\xff\xfe broken")
    assert error.message == "\ufffd\ufffd broken"


def test_a_transport_error_names_the_request_and_the_cause() -> None:
    silent = TransportError("PUT /x", TimeoutError())
    assert (str(silent), silent.what, silent.kind) == (
        "PUT /x: TimeoutError",
        "PUT /x",
        "TimeoutError",
    )
    reset = TransportError("GET /y", ConnectionResetError("reset by peer"))
    assert str(reset) == "GET /y: ConnectionResetError: reset by peer"
    assert reset.what == "GET /y" and reset.cause.args == ("reset by peer",)


# -- 401: the credentials loaded again -----------------------------------------------------------


class Loader:
    """``KubeApi.reload``: the credentials as they are now (the rotated token)."""

    def __init__(self, server: FakeApiServer, token: str) -> None:
        self.server, self.token, self.calls = server, token, 0

    def __call__(self) -> k8s_client.Configuration:
        self.calls += 1
        return self.server.configuration(token=self.token)


def test_a_401_loads_the_credentials_again_and_retries_once_with_them() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.tokens = {"new"}  # "old" was revoked as it was rotated
        loader = Loader(server, "new")
        async with server.client(token="old", reload=loader) as api:
            assert await api.request("GET", NODES) == {
                "items": [],
                "metadata": {"resourceVersion": "100"},
            }
            assert [s.token for s in server.requests] == ["old", "new"]
            assert [s.outcome for s in server.requests] == ["401", "200"]
            assert loader.calls == 1
            await api.request("GET", NODES)  # the new credentials stay
            assert server.requests[-1].token == "new" and loader.calls == 1

    run(scenario)


def test_a_fenced_write_refused_with_a_401_is_sent_again_whole_by_a_leader() -> None:
    """A status write of a replica that holds the Lease (its fence says yes) goes out; refused
    with a 401, it is sent once more with the credentials loaded again, and the same body,
    query and ``Accept``: the status lands, answered with the metadata alone. The 401 changed
    nothing, so it does not count as a first sending: a 409 on the write sent again is the
    API server's own refusal (``ApiError``), not a write that may have landed."""

    async def scenario(server: FakeApiServer) -> None:
        stored = server.put("workloads", stored_workload("web"))
        version = stored["metadata"]["resourceVersion"]
        server.tokens = {"new"}  # "old" was revoked as it was rotated
        async with server.client(token="old", reload=Loader(server, "new")) as api:
            api.fence = lambda: True
            answer = await api.write_workload_status("ns", "web", {"phase": "Scheduled"}, version)
            assert answer["kind"] == "PartialObjectMetadata" and "status" not in answer
        writes = server.seen("PUT", "/workloads/web/status")
        assert [(s.token, s.outcome) for s in writes] == [("old", "401"), ("new", "200")]
        assert writes[0].query == writes[1].query == {"fieldValidation": "Ignore"}
        assert writes[0].body == writes[1].body
        written = server.get("workloads", "web", "ns")
        assert written is not None and written["status"] == {"phase": "Scheduled"}
        async with server.client(token="old", reload=Loader(server, "new")) as api:
            api.fence = lambda: True
            with pytest.raises(ApiError) as refused:  # from the version before that write
                await api.write_workload_status("ns", "web", {"phase": "Pending"}, version)
            assert refused.value.conflict
        writes = server.seen("PUT", "/workloads/web/status")[2:]
        assert [(s.token, s.outcome) for s in writes] == [("old", "401"), ("new", "409")]

    run(scenario)


def test_a_list_is_asked_for_page_by_page_and_handed_on_whole() -> None:
    """``list_objects`` asks for ``limit`` objects a page and carries each page's ``continue``
    into the next request, as the API server's chunked LIST expects (a request without them
    gets the whole list in one answer); every object of every page is handed on, and the
    list's resourceVersion (the last page's) is returned. A LIST refused with a 401 is asked
    again with the same query."""
    items = [{"metadata": {"name": f"n{i}"}} for i in range(5)]
    queries: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        if len(queries) > 10:  # a client that never carries ``continue`` on: fail, not hang
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        limit = int(request.query.get("limit", "1000"))
        start = int(request.query.get("continue", "0"))
        more = str(start + limit) if start + limit < len(items) else ""
        page = {"items": items[start : start + limit], "metadata": {"resourceVersion": "7"}}
        if more:
            page["metadata"] = {"resourceVersion": "7", "continue": more}
        return web.json_response(page)

    async def scenario() -> tuple[str | None, list[str]]:
        names: list[str] = []
        async with RawServer(handle) as served:

            def configuration(token: str) -> k8s_client.Configuration:
                configuration = k8s_client.Configuration()
                configuration.host = served.host
                configuration.api_key = {"BearerToken": f"Bearer {token}"}
                return configuration

            async with KubeApi(configuration("old"), reload=lambda: configuration("new")) as api:
                version = await api.list_objects(
                    NODES, lambda obj: names.append(obj["metadata"]["name"]), page=2
                )
        return version, names

    version, names = asyncio.run(scenario())
    assert (version, names) == ("7", ["n0", "n1", "n2", "n3", "n4"])
    assert queries == [
        {"limit": "2"},  # refused: 401
        {"limit": "2"},
        {"limit": "2", "continue": "2"},
        {"limit": "2", "continue": "4"},
    ]


def test_the_next_page_is_asked_for_while_this_one_is_handed_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the objects of page n are handed on, the request for page n+1 has already
    reached the API server, so it serves that page while orca reads this one (asked for one
    after the other, each side waited for the other). Here every object is a turn of the
    event loop (``LIST_TURN`` 1), and by each page's last object the next page was asked for.
    A failure while a page is handed on leaves no request of the next page running."""
    monkeypatch.setattr(kube, "LIST_TURN", 1)
    size, pages = 20, 3
    items = [{"metadata": {"name": f"n{i}"}} for i in range(size * pages)]
    queries: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        start = int(request.query.get("continue", "0"))
        end = start + int(request.query["limit"])
        metadata = {"resourceVersion": "7"} | ({"continue": str(end)} if end < len(items) else {})
        return web.json_response({"items": items[start:end], "metadata": metadata})

    def qualname(coroutine: Any) -> str:
        return str(getattr(coroutine, "__qualname__", ""))

    async def scenario() -> tuple[list[int], int, int]:
        asked: list[int] = []  # requests the server had seen as each object was handed on
        async with RawServer(handle) as served:
            configuration = k8s_client.Configuration()
            configuration.host = served.host
            async with KubeApi(configuration) as api:
                await api.list_objects(NODES, lambda _: asked.append(len(queries)), page=size)

                def broken(obj: dict[str, Any]) -> None:
                    if obj["metadata"]["name"] == "n0":
                        raise RuntimeError("a bug in the handler")

                before = len(queries)
                with pytest.raises(RuntimeError):
                    await api.list_objects(NODES, broken, page=size)
                await asyncio.sleep(0)  # the cancelled request's task ends
                requests = [
                    task for task in asyncio.all_tasks() if "KubeApi" in qualname(task.get_coro())
                ]
        return asked, len(queries) - before, len(requests)

    asked, after_failure, requests = asyncio.run(scenario())
    assert len(asked) == size * pages
    assert [asked[size * n - 1] for n in range(1, pages + 1)] == [2, 3, 3]
    assert after_failure <= 2 and requests == 0


def test_a_401_on_a_watch_loads_the_credentials_again_and_watches_with_them() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", {"metadata": {"name": "a"}})
        server.tokens = {"new"}
        loader = Loader(server, "new")
        async with server.client(token="old", reload=loader) as api:
            async for event in api.watch(NODES, "100", 300):
                assert event["object"]["metadata"]["name"] == "a"
                break
        assert [(s.token, s.outcome) for s in server.requests] == [("old", "401"), ("new", "200")]
        assert loader.calls == 1

    run(scenario)


def test_a_watch_refused_with_a_401_by_the_new_credentials_too_is_a_401() -> None:
    """Credentials loaded again after a 401 are tried once: refused again, the watch is the
    API server's 401 (``ApiError``, which the informer logs as a refused watch), not a watch
    that ended by itself, and the credentials are not loaded a second time."""

    async def scenario(server: FakeApiServer) -> None:
        server.tokens = {"someone-else"}
        loader = Loader(server, "new")
        async with server.client(token="old", reload=loader) as api:
            with pytest.raises(ApiError) as refused:
                async for _ in api.watch(NODES, "100", 300):
                    pass
        assert refused.value.status == 401
        assert [(s.token, s.outcome) for s in server.requests] == [("old", "401"), ("new", "401")]
        assert loader.calls == 1

    run(scenario)


def test_a_watch_asks_for_bookmarks_and_its_end_and_reads_events_as_they_come() -> None:
    """A watch asks the API server for what the informer relies on: ``watch=1`` from the
    ``resourceVersion`` given, bookmarks (``allowWatchBookmarks``: the server sends this
    watch a BOOKMARK, and a quiet watch moves on) and ``timeoutSeconds`` (the server ends it
    in time). Events that arrive one at a time, each in a read of its own, are each handed
    on whole."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", {"metadata": {"name": "before"}})
        since = str(server.revision)
        server.put("nodes", {"metadata": {"name": "a"}})
        events: list[tuple[str, str | None]] = []
        async with server.client() as api:
            async for event in api.watch(NODES, since, 42):
                events.append((event["type"], event["object"]["metadata"].get("name")))
                await asyncio.sleep(0.01)  # the next event comes in a read of its own
                if len(events) == 1:
                    assert server.bookmark() == 1  # this watch asked for bookmarks
                elif len(events) == 2:
                    server.put("nodes", {"metadata": {"name": "c"}})
                else:
                    break
            (watch,) = server.seen("GET", NODES, watch=True)
        assert events == [("ADDED", "a"), ("BOOKMARK", None), ("ADDED", "c")]
        asked = {k: v for k, v in watch.query.items() if k != "allowWatchBookmarks"}
        assert asked == {"watch": "1", "timeoutSeconds": "42", "resourceVersion": since}

    run(scenario)


def test_a_401_without_new_credentials_stays_a_401() -> None:
    """No loader, or one that fails (the token file being replaced): the 401 stands, and
    the loader's own error (``OSError``...) never reaches the operator's tasks."""

    async def scenario(server: FakeApiServer) -> None:
        server.tokens = {"new"}

        def broken() -> k8s_client.Configuration:
            raise OSError("token file being replaced")

        for reload in (None, broken):
            async with server.client(token="old", reload=reload) as api:
                with pytest.raises(ApiError) as raised:
                    await api.request("GET", NODES)
                assert raised.value.status == 401
                with pytest.raises(ApiError):
                    async for _ in api.watch(NODES, None, 30):
                        pass

    run(scenario)


def test_a_401_without_new_credentials_is_not_sent_again_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without loaded credentials there is nothing new to send: the 401 is the answer, after
    one request (sending the refused token again would only double the refusals an API server
    under a token rotation sees). A loader that fails says why, in the log an operator reads."""
    caplog.set_level(logging.INFO, logger="orca.kube")

    async def scenario(server: FakeApiServer) -> None:
        server.tokens = {"new"}

        def broken() -> k8s_client.Configuration:
            raise OSError("token file being replaced")

        for reload in (None, broken):
            server.requests.clear()
            async with server.client(token="old", reload=reload) as api:
                with pytest.raises(ApiError):
                    await api.request("GET", NODES)
            assert [(s.token, s.outcome) for s in server.requests] == [("old", "401")]

    run(scenario)
    logged = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert logged == [
        (logging.INFO, f"credentials refused (401 on GET {NODES}): loading them again"),
        (logging.WARNING, "could not load the credentials again: token file being replaced"),
    ]


def test_a_401_that_loads_new_credentials_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """The log line of a reload names the request that was refused: a 401 storm is then
    traced to the credentials, not to the network."""
    caplog.set_level(logging.INFO, logger="orca.kube")

    async def scenario(server: FakeApiServer) -> None:
        server.tokens = {"new"}
        async with server.client(token="old", reload=Loader(server, "new")) as api:
            await api.request("GET", NODES)

    run(scenario)
    assert [r.getMessage() for r in caplog.records] == [
        f"credentials refused (401 on GET {NODES}): loading them again"
    ]


def test_retired_sessions_are_closed_and_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each 401 retires a session; once closed after its grace it is no longer kept: a
    long-running operator under repeated rotations does not accumulate sessions (and their
    connection pools)."""
    monkeypatch.setattr(kube, "RETIRED_SESSION_GRACE", 0.05)

    async def scenario(server: FakeApiServer) -> None:
        async with server.client(token="t0", reload=Loader(server, "t0")) as api:
            await api.request("GET", NODES)
            retired = []
            for turn in range(1, 4):
                server.tokens = {f"t{turn}"}
                api.reload = Loader(server, f"t{turn}")
                old = api._session
                await api.request("GET", NODES)  # 401, reloaded, retried on a new session
                retired.append(old)
            await until(lambda: all(s is not None and s.closed for s in retired), "closed")
            await until(lambda: not api._retired, "the retired sessions let go")

    run(scenario)


def test_answering_tells_when_the_api_server_answers_again() -> None:
    """``answering`` is what an informer backing off waits on: not set before any answer,
    set by one, replaced by an unset one when a request gets no answer, and set again by
    the next answer (any status)."""

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            first = api.answering()
            assert not first.is_set() and api.answering() is first
            await api.request("GET", NODES)
            assert first.is_set() and api.answering().is_set()
            server.add(Fault("GET", NODES, "cut"))
            with pytest.raises(TransportError):
                await api.request("GET", NODES)
            waiting = api.answering()
            assert not waiting.is_set()
            server.refuse("GET", NODES, 503, "ServiceUnavailable")
            with pytest.raises(ApiError):
                await api.request("GET", NODES)
            assert waiting.is_set()
            # Asked only after the server came back: it has answered since the failure.
            server.add(Fault("GET", NODES, "cut"))
            with pytest.raises(TransportError):
                await api.request("GET", NODES)
            await api.request("GET", NODES)
            assert api.answering().is_set()

    run(scenario)


def test_a_list_hands_on_each_object_without_managed_fields() -> None:
    """Nothing in orca reads ``managedFields``, a third to a half of a Workload: they are
    dropped as each object is handed on, before anything keeps it. The LIST counts itself."""

    async def scenario(server: FakeApiServer) -> None:
        fields = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
        for name in ("a", "b"):
            server.put("nodes", {"metadata": {"name": name, "managedFields": fields}})
        seen: list[dict[str, Any]] = []
        labels = {"verb": "GET", "resource": "nodes", "code": "200"}
        before = REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0
        async with server.client() as api:
            version = await api.list_objects(NODES, seen.append)
        assert REGISTRY.get_sample_value("orca_api_requests_total", labels) == before + 1
        assert version == str(server.revision)
        assert [o["metadata"] for o in seen] == [
            {"name": "a", "resourceVersion": "101"},
            {"name": "b", "resourceVersion": "102"},
        ]

    run(scenario)


def test_a_watch_counts_itself_and_names_itself_when_it_breaks() -> None:
    """A watch is counted as ``WATCH`` of its resource; one that breaks or sends a line that
    is not JSON is a ``TransportError`` naming the watch (the informer logs it)."""

    async def scenario(server: FakeApiServer) -> None:
        labels = {"verb": "WATCH", "resource": "nodes", "code": "200"}
        before = REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0
        server.put("nodes", {"metadata": {"name": "a"}})
        async with server.client() as api:
            with pytest.raises(TransportError) as broken:
                async for _ in api.watch(NODES, "100", 300):
                    server.cut_watches()
            assert str(broken.value).startswith(f"WATCH {NODES}: ClientPayloadError")
            server.add(Fault("GET", NODES, "garbage", watch=True))
            with pytest.raises(TransportError) as garbled:
                async for _ in api.watch(NODES, "100", 300):
                    pass
            assert str(garbled.value).startswith(f"WATCH {NODES} (unreadable event): ")
            assert isinstance(garbled.value.cause, orjson.JSONDecodeError)
        assert REGISTRY.get_sample_value("orca_api_requests_total", labels) == before + 2

    run(scenario)


def test_a_request_without_an_answer_or_cancelled_is_counted_as_an_error() -> None:
    """Every request counts itself under its verb and resource: one that got no answer (the
    connection closed) and one cancelled while it waited for its answer (a stop, a timeout
    of the caller's) under the code ``error``, as they never got an HTTP status."""

    def errors(verb: str, resource: str) -> float:
        labels = {"verb": verb, "resource": resource, "code": "error"}
        return REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0

    async def scenario(server: FakeApiServer) -> None:
        server.put("configmaps", {"metadata": {"name": "c", "namespace": "ns"}})
        path = "/api/v1/namespaces/ns/configmaps/c"
        before = (errors("GET", "nodes"), errors("PUT", "configmaps"))
        async with server.client() as api:
            server.drop("GET", NODES, times=2)  # aiohttp sends a GET once more: one failure
            with pytest.raises(TransportError):
                await api.request("GET", NODES)
            held = server.hold("PUT", path)
            waiting = asyncio.create_task(api.request("PUT", path, {"metadata": {"name": "c"}}))
            await until(lambda: held.arrived == 1, "the PUT at the server")
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            held.gate.set()
        assert (errors("GET", "nodes"), errors("PUT", "configmaps")) == (
            before[0] + 1,
            before[1] + 1,
        )

    run(scenario)


def test_answers_that_are_not_2xx_are_api_errors_and_no_content_is_an_empty_answer() -> None:
    """Only a 2xx is an answer: a 300 (a proxy's Multiple Choices; aiohttp follows only the
    redirects 301-308) is an ``ApiError`` as any other status, and a refusal that is not a
    Kubernetes ``Status`` (a proxy's page) keeps the HTTP reason and quotes the page. A 204
    No Content has no body by definition (RFC 9110 15.3.5): an answer, read as empty, not an
    unreadable one that would make the caller retry what succeeded."""

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/choices":
            return web.json_response({"kind": "Status", "code": 300}, status=300)
        if request.path == "/proxy":
            return web.Response(status=502, text="<html>upstream down</html>")
        return web.Response(status=204)

    async def scenario() -> tuple[ApiError, ApiError, dict[str, Any]]:
        async with RawServer(handle) as configuration, KubeApi(configuration) as api:
            with pytest.raises(ApiError) as choices:
                await api.request("GET", "/choices")
            with pytest.raises(ApiError) as proxy:
                await api.request("GET", "/proxy")
            empty = await api.request("DELETE", "/empty")
        return choices.value, proxy.value, empty

    choices, proxy, empty = asyncio.run(scenario())
    assert choices.status == 300
    assert (proxy.status, proxy.reason, proxy.message) == (
        502,
        "Bad Gateway",
        "<html>upstream down</html>",
    )
    assert empty == {}


def _stored_web(server: FakeApiServer) -> str:
    """A Workload team-a/web stored in the fake API server; its resourceVersion."""
    stored = server.put(
        "workloads",
        {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"replicas": 1},
        },
    )
    return str(stored["metadata"]["resourceVersion"])


def test_a_status_write_replaces_the_status_on_the_version_it_was_decided_from() -> None:
    """What the API server needs of a status PUT (``fakeapi`` refuses as it does a body
    without the Workload's kind and apiVersion, or naming another object): the status is
    stored, the answer is the metadata alone with the new resourceVersion, and a write from
    an older version is a 409."""

    async def scenario(server: FakeApiServer) -> None:
        version = _stored_web(server)
        labels = {"verb": "PUT", "resource": "workloads/status", "code": "200"}
        before = REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0
        async with server.client() as api:
            answer = await api.write_workload_status(
                "team-a", "web", {"phase": "Scheduled"}, version
            )
            assert answer["kind"] == "PartialObjectMetadata" and "status" not in answer
            # counted under the verb as the API server's apiserver_request_total spells it
            assert REGISTRY.get_sample_value("orca_api_requests_total", labels) == before + 1
            written = server.get("workloads", "web", "team-a")
            assert written is not None and written["status"] == {"phase": "Scheduled"}
            assert answer["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
            assert written["metadata"]["resourceVersion"] != version
            with pytest.raises(ApiError) as raised:
                await api.write_workload_status("team-a", "web", {"phase": "Pending"}, version)
            assert raised.value.conflict
        assert [s.outcome for s in server.seen("PUT")] == ["200", "409"]

    run(scenario)


def test_a_status_write_applied_cut_and_refused_when_sent_again_got_no_answer() -> None:
    """aiohttp sends a PUT once more, at once, when its connection closed before the answer
    (``retry_persistent_connection``); the first one was applied, so the second meets the
    write's own new resourceVersion: 409. That refusal says nothing of the write that landed:
    the caller gets ``TransportError`` (no answer: both outcomes possible), not a conflict,
    which would make it give the room back while the object records it. A write refused the
    first time it is sent stays the API server's 409, and so does an unfenced PUT (a Lease
    renew: the elector reads the Lease again on the next round)."""

    async def scenario(server: FakeApiServer) -> None:
        version = _stored_web(server)
        async with server.client() as api:
            server.drop("PUT", "/workloads/web/status", after=True)
            with pytest.raises(TransportError) as unanswered:
                await api.write_workload_status("team-a", "web", {"phase": "Scheduled"}, version)
            assert [s.outcome for s in server.seen("PUT")] == ["dropped", "409"]
            assert "(sent twice, the second refused)" in str(unanswered.value)
            assert isinstance(unanswered.value.cause, ApiError)
            assert unanswered.value.cause.conflict
            written = server.get("workloads", "web", "team-a")
            assert written is not None and written["status"] == {"phase": "Scheduled"}
            with pytest.raises(ApiError) as refused:  # sent once, from the old version
                await api.write_workload_status("team-a", "web", {"phase": "Pending"}, version)
            assert refused.value.conflict
            path = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases/l"
            lease = {"metadata": {"name": "l", "namespace": "team-a"}, "spec": {}}
            created = await api.request("PUT", path, lease)  # no version: created
            server.drop("PUT", path, after=True)
            with pytest.raises(ApiError) as lease_refused:
                await api.request("PUT", path, created)
            assert lease_refused.value.conflict
            assert [s.outcome for s in server.seen("PUT", path)] == ["201", "dropped", "409"]

    run(scenario)


def test_an_event_is_posted_with_its_body_in_its_namespace() -> None:
    async def scenario(server: FakeApiServer) -> None:
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": "web."},
            "reason": "Scheduled",
            "message": "placed 2 replicas",
        }
        async with server.client() as api:
            labels = {"verb": "POST", "resource": "events", "code": "201"}
            before = REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0
            answer = await api.create_event("team-a", event)
            after = REGISTRY.get_sample_value("orca_api_requests_total", labels)
            assert after == before + 1  # counted under the verb the API server's metrics use
        stored = server.get("events", answer["metadata"]["name"], "team-a")
        assert stored is not None
        assert (stored["reason"], stored["message"]) == ("Scheduled", "placed 2 replicas")
        assert answer["kind"] == "PartialObjectMetadata"  # the metadata alone came back

    run(scenario)


def test_a_fenced_write_says_it_was_not_sent_and_why() -> None:
    """The line an operator finds in the log for a write a deposed leader dropped."""

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            api.fence = lambda: False
            with pytest.raises(Fenced) as raised:
                await api.create_event("ns", {"kind": "Event", "metadata": {"name": "e"}})
        assert str(raised.value) == "not sent: this replica does not hold a valid leader Lease"
        assert server.requests == []

    run(scenario)


def test_the_old_session_is_retired_not_closed_under_the_requests_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Lease renew in flight when another request meets the 401 must still get its answer:
    closing the old session at once left such a request silent until its timeout (30 s,
    longer than the renew deadline). The old session is closed once its grace is over."""
    monkeypatch.setattr(kube, "RETIRED_SESSION_GRACE", 0.5)

    async def scenario(server: FakeApiServer) -> None:
        server.tokens = {"old"}
        lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
        server.put("leases", {"metadata": {"name": "l", "namespace": "ns"}})
        held = server.add(Fault("GET", lease, "hold"))
        async with server.client(token="old", reload=Loader(server, "new")) as api:
            renew = asyncio.create_task(api.request("GET", lease))
            await until(lambda: held.arrived == 1, "the renew in flight")
            old = api._session
            server.tokens = {"new"}  # rotated: the old token is refused from now on
            await api.request("GET", NODES)  # 401, reloaded, retried on a new session
            assert [s.outcome for s in server.seen("GET", NODES)] == ["401", "200"]
            assert old is not None and not old.closed and api._session is not old
            held.gate.set()
            answer = await asyncio.wait_for(renew, 10)  # answered, on the old session
            assert answer["metadata"]["name"] == "l"
            await until(lambda: old.closed, "the retired session closed after its grace")

    run(scenario)


def test_a_request_gets_a_connection_in_turn_while_busy_callers_keep_every_one_in_use() -> None:
    """Four callers as many as the connections (the scheduling loop's workers, each issuing
    its next status write as soon as the last is answered) and one more request (an Event,
    a Lease renewal): it is answered after a few of theirs, not starved. aiohttp hands an
    idle connection to whoever asks for one first, before the requests that waited for it
    (``TCPConnector.connect`` tries its pool before its waiters), so a caller that asks again
    as soon as it is answered took every connection back: in the 5,000-Node backlog every
    Event POST timed out after 30 s (88 tried, none posted)."""

    async def scenario() -> tuple[int, int]:
        async with FakeApiServer() as server:
            server.put("configmaps", {"metadata": {"name": "c", "namespace": "ns"}})
            api = KubeApi(server.configuration(), max_connections=4)
            answered = [0]
            event_done: list[int] = []

            async def busy() -> None:
                for _ in range(150):
                    await api.request("GET", "/api/v1/namespaces/ns/configmaps/c")
                    answered[0] += 1

            async def event() -> None:
                await until(lambda: answered[0] >= 20, "the busy callers under way")
                asked = answered[0]
                await api.create_event("ns", {"metadata": {"generateName": "c."}})
                event_done.append(answered[0] - asked)

            try:
                await asyncio.gather(*(busy() for _ in range(4)), event())
            finally:
                await api.close()
            return event_done[0], answered[0]

    after, total = asyncio.run(scenario())
    assert total == 600
    assert after <= 3 * 4  # in turn: behind the four requests in flight (and a few more)


def test_every_turn_has_a_connection_of_its_own_past_aiohttps_default_pool() -> None:
    """``max_connections`` turns, and as many connections: with more than aiohttp's default
    pool (100; ``--max-in-flight`` is the operator's knob) every caller holding a turn is
    sent at once, none left waiting in aiohttp's pool, which hands connections out unfairly
    (the test above)."""
    connections = 101

    async def scenario(server: FakeApiServer) -> None:
        server.put("configmaps", {"metadata": {"name": "c", "namespace": "ns"}})
        path = "/api/v1/namespaces/ns/configmaps/c"
        held = server.hold("GET", path, times=None)
        api = KubeApi(server.configuration(), max_connections=connections)
        try:
            requests = [asyncio.create_task(api.request("GET", path)) for _ in range(connections)]
            await until(lambda: held.arrived == connections, "every request at the server")
            held.gate.set()
            answers = await asyncio.gather(*requests)
            assert len(answers) == connections
        finally:
            await api.close()

    run(scenario)


def test_requests_say_what_they_send_and_accept_and_keep_no_cookies() -> None:
    """The headers the API server negotiates on (k8s.io/apiserver pkg/endpoints/handlers/
    negotiation/negotiate.go): a body's ``Content-Type`` is ``application/json`` (read through
    ``mime.ParseMediaType``, which lowercases it; another type is 415); an answer is asked
    for as ``application/json``, compared case by case with what it can serve (goautoneg's
    ``ParseAccept`` keeps the case; anything else is 406), and a write that reads only the
    metadata asks for that alone, in one ``Accept`` (``req.Header.Get`` reads the first of
    several); a watch asks for JSON too. The bearer token goes in ``Authorization``. No
    cookie is kept: a ``Set-Cookie`` (a load balancer's affinity cookie) is never sent
    back."""
    seen: list[tuple[str, str, list[str], list[str], list[str], list[str]]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        headers = request.headers
        seen.append(
            (
                request.method,
                request.query.get("watch", ""),
                headers.getall("Accept", []),
                headers.getall("Content-Type", []) if request.body_exists else [],
                headers.getall("Authorization", []),
                headers.getall("Cookie", []),
            )
        )
        if request.query.get("watch"):
            stream = web.StreamResponse()
            stream.content_type = "application/json"
            await stream.prepare(request)
            await stream.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')
            return stream
        answer = web.json_response({"metadata": {"name": "a", "resourceVersion": "1"}})
        answer.set_cookie("affinity", "replica-1")
        return answer

    async def scenario() -> None:
        async with RawServer(handle) as configuration:
            # A name, not an address: aiohttp's default cookie jar keeps no cookie of an IP
            # address.
            configuration.host = configuration.host.replace("127.0.0.1", "localhost")
            configuration.api_key = {"BearerToken": "Bearer t"}
            async with KubeApi(configuration) as api:
                await api.request("GET", NODES)
                await api.request("PUT", "/api/v1/namespaces/ns/configmaps/a", {"data": {}})
                await api.create_event("ns", {"metadata": {"generateName": "a."}})
                async for event in api.watch(NODES, "1", 30):
                    assert event["object"]["metadata"]["name"] == "a"

    asyncio.run(scenario())
    json, metadata_only, bearer = ["application/json"], [kube.METADATA_ONLY], ["Bearer t"]
    assert [(method, watch, accept) for method, watch, accept, *_ in seen] == [
        ("GET", "", json),
        ("PUT", "", json),
        ("POST", "", metadata_only),
        ("GET", "1", json),
    ]
    bodies = [[value.lower() for value in content] for _, _, _, content, _, _ in seen]
    assert bodies == [[], json, json, []]  # a GET sends no body
    assert all(auth == bearer for *_, auth, _ in seen)
    assert all(cookie == [] for *_, cookie in seen)


def test_a_request_gives_up_before_its_retired_session_is_closed() -> None:
    """Every request has a total timeout (30 s: an API server that never answers costs a
    worker that long, not aiohttp's default five minutes), shorter than the grace a session
    retired after a 401 keeps for the requests it carries, so none is cut by the close."""

    async def scenario() -> None:
        async with KubeApi(k8s_client.Configuration()) as api:
            session = await api.session()
            assert session.timeout.total == 30
            assert session.timeout.total < kube.RETIRED_SESSION_GRACE

    asyncio.run(scenario())


def test_a_refused_watch_is_an_api_error_at_once_without_loading_credentials() -> None:
    """Only a 401 loads the credentials again; any other refusal (a 503 from an API server
    starting, a 300 from a misconfigured proxy) is the caller's to retry."""

    async def scenario(server: FakeApiServer) -> None:
        loader = Loader(server, "t")
        async with server.client(token="t", reload=loader) as api:
            for code, reason in ((503, "ServiceUnavailable"), (300, "MultipleChoices")):
                server.refuse("GET", NODES, code, reason)
                with pytest.raises(ApiError) as raised:
                    async for _ in api.watch(NODES, None, 30):
                        pass
                assert (raised.value.status, raised.value.reason) == (code, reason)
        assert loader.calls == 0
        assert [s.outcome for s in server.seen("GET", NODES)] == ["503", "300"]

    run(scenario)


def test_a_401_on_a_watch_says_which_watch_was_refused(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="orca.kube")

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", {"metadata": {"name": "a"}})
        server.tokens = {"new"}
        async with server.client(token="old", reload=Loader(server, "new")) as api:
            async for _ in api.watch(NODES, None, 30):
                break

    run(scenario)
    assert [r.getMessage() for r in caplog.records] == [
        f"credentials refused (401 watching {NODES}): loading them again"
    ]


def test_a_watch_event_larger_than_a_chunk_arrives_whole() -> None:
    """A Node with large annotations (or a Workload with many placements) comes in several
    chunks of the stream: the event is the one object, not its pieces."""

    async def scenario(server: FakeApiServer) -> None:
        big = "x" * 300_000
        server.put("nodes", {"metadata": {"name": "a", "annotations": {"big": big}}})
        server.put("nodes", {"metadata": {"name": "b"}})
        names = []
        async with server.client() as api:
            async for event in api.watch(NODES, None, 30):
                names.append(event["object"]["metadata"]["name"])
                if names == ["a"]:
                    assert event["object"]["metadata"]["annotations"]["big"] == big
                if len(names) == 2:
                    break
        assert names == ["a", "b"]

    run(scenario)


def test_a_watch_from_a_compacted_version_is_the_api_servers_410() -> None:
    """The ``ERROR`` event's ``Status`` becomes the ``ApiError``: its code (410, LIST again),
    reason and message, as the informer logs them."""

    async def scenario(server: FakeApiServer) -> None:
        server.put("nodes", {"metadata": {"name": "a"}})
        server.compact()
        async with server.client() as api:
            with pytest.raises(ApiError) as raised:
                async for _ in api.watch(NODES, "100", 30):
                    pass
        expired = raised.value
        assert (expired.status, expired.reason) == (410, "Expired")
        assert expired.message == f"too old resource version: 100 ({server.revision})"

    run(scenario)


def test_one_client_serves_one_event_loop_after_another() -> None:
    """A client used from one event loop after another (``asyncio.run`` each time, its
    session closed in between): the turns callers waited for in one loop are not the next
    loop's (an asyncio semaphore that made a caller wait is bound to that loop, and waiting on
    it from another raises ``RuntimeError``)."""

    async def busy(api: KubeApi) -> None:
        async with api:  # its session closed with the loop; the client goes on
            await asyncio.gather(*(api.request("GET", NODES) for _ in range(4)))  # callers wait

    async def main() -> None:
        async with FakeApiServer() as server:
            api = KubeApi(server.configuration(), max_connections=1)
            for _ in range(2):
                await asyncio.to_thread(asyncio.run, busy(api))
            assert [s.outcome for s in server.requests] == ["200"] * 8

    asyncio.run(main())


# -- TLS: the API server's certificate checked, the client's own sent -----------------------------


def test_requests_and_watches_verify_the_api_server_and_present_the_client_certificate(
    tmp_path: Path,
) -> None:
    """As a kubeconfig describes it: the API server's certificate is verified against the
    configured CA (``certificate-authority``), and the client's certificate and key
    (``client-certificate``, ``client-key``) are presented, for requests and for watches
    (each on a session of its own). A client that does not trust the CA gets no answer
    (``TransportError``), and ``insecure-skip-tls-verify`` (``verify_ssl`` False) skips the
    check: the CA file is then not read at all, so one that is not a certificate stops
    nothing."""
    server_bundle = tls.generate(["127.0.0.1"])
    client_bundle = _client_certificate()
    for name, data in {
        "ca.crt": server_bundle.ca,
        "client.crt": client_bundle.cert,
        "client.key": client_bundle.key,
        "other-ca.crt": tls.generate(["127.0.0.1"]).ca,
        "not-a-ca.crt": b"not a certificate\n",
    }.items():
        (tmp_path / name).write_bytes(data)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=client_bundle.ca.decode())
    context.load_cert_chain(*_pem_files(tmp_path / "server", server_bundle))
    context.verify_mode = ssl.CERT_REQUIRED  # the API server asks for a client certificate

    def configuration(host: str, ca: str | None, verify: bool = True) -> k8s_client.Configuration:
        configuration = k8s_client.Configuration()
        configuration.host = host
        configuration.verify_ssl = verify
        configuration.ssl_ca_cert = None if ca is None else str(tmp_path / ca)
        configuration.cert_file = str(tmp_path / "client.crt")
        configuration.key_file = str(tmp_path / "client.key")
        return configuration

    async def main() -> None:
        async with FakeApiServer(ssl_context=context) as server:
            server.put("nodes", {"metadata": {"name": "a"}})
            for trusted in (
                configuration(server.host, "ca.crt"),
                configuration(server.host, None, verify=False),
                configuration(server.host, "not-a-ca.crt", verify=False),
            ):
                async with KubeApi(trusted) as api:
                    listed = await api.request("GET", NODES)
                    assert [n["metadata"]["name"] for n in listed["items"]] == ["a"]
                    async for event in api.watch(NODES, None, 30):
                        assert event["object"]["metadata"]["name"] == "a"
                        break
            async with KubeApi(configuration(server.host, "other-ca.crt")) as api:
                with pytest.raises(TransportError):
                    await api.request("GET", NODES)
                with pytest.raises(TransportError):
                    async for _ in api.watch(NODES, None, 30):
                        pass
            anonymous = configuration(server.host, "ca.crt")
            anonymous.cert_file = anonymous.key_file = None
            async with KubeApi(anonymous) as api:  # no client certificate: refused in the handshake
                with pytest.raises(TransportError):
                    await api.request("GET", NODES)

    asyncio.run(asyncio.wait_for(main(), 120))


def test_tls_connections_read_64_kib_at_a_time_and_a_larger_answer_arrives_whole(
    tmp_path: Path,
) -> None:
    """asyncio's 256 KiB buffer per TLS connection (resident: zeroed when the connection is
    made) is 64 KiB in the operator's process; an answer four times that size still arrives
    whole, over a TLS connection made after the client module was loaded."""
    bundle = tls.generate(["127.0.0.1"])
    (tmp_path / "ca.crt").write_bytes(bundle.ca)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*_pem_files(tmp_path / "server", bundle))
    padding = "x" * 1024
    names = [f"node-{i:03d}" for i in range(256)]  # ~280 KB of JSON

    async def main() -> None:
        loop = asyncio.get_running_loop()
        made = asyncio.sslproto.SSLProtocol(
            loop, asyncio.Protocol(), ssl.create_default_context(), loop.create_future()
        )
        assert len(made._ssl_buffer) == kube.TLS_READ_BUFFER == 64 * 1024  # type: ignore[attr-defined]
        async with FakeApiServer(ssl_context=context) as server:
            for name in names:
                server.put("nodes", {"metadata": {"name": name}, "spec": {"padding": padding}})
            configuration = k8s_client.Configuration()
            configuration.host = server.host
            configuration.ssl_ca_cert = str(tmp_path / "ca.crt")
            async with KubeApi(configuration) as api:
                listed = await api.request("GET", NODES)
        assert sorted(n["metadata"]["name"] for n in listed["items"]) == names
        assert len(orjson.dumps(listed)) > 4 * kube.TLS_READ_BUFFER

    asyncio.run(asyncio.wait_for(main(), 60))


def _pem_files(directory: Path, bundle: tls.CertBundle) -> tuple[str, str]:
    directory.mkdir()
    (directory / "tls.crt").write_bytes(bundle.cert)
    (directory / "tls.key").write_bytes(bundle.key)
    return str(directory / "tls.crt"), str(directory / "tls.key")


def _client_certificate() -> tls.CertBundle:
    """A CA and a client certificate it signs (``clientAuth``), as kubeadm issues an admin's."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client-ca")])

    def certificate(subject: x509.Name, public: Any, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
            builder = builder.add_extension(usage, critical=False)
        return builder.sign(ca_key, hashes.SHA256())

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "orca-controller")])
    pem = serialization.Encoding.PEM
    return tls.CertBundle(
        cert=certificate(subject, key.public_key(), ca=False).public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        ca=certificate(ca_name, ca_key.public_key(), ca=True).public_bytes(pem),
    )


# -- the resource label ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/nodes", "nodes"),
        ("/apis/orca.cloudinit.dev/v1alpha1/workloads", "workloads"),
        ("/apis/orca.cloudinit.dev/v1alpha1/namespaces/ns/workloads", "workloads"),
        ("/apis/orca.cloudinit.dev/v1alpha1/namespaces/ns/workloads/w/status", "workloads/status"),
        ("/api/v1/namespaces/ns/events", "events"),
        ("/apis/coordination.k8s.io/v1/namespaces/default/leases/orca", "leases"),
        ("/api/v1/namespaces/ns", "namespaces"),
        ("/version", "other"),
        ("/api/v1", "other"),  # a group version's discovery document, no resource
        ("/apis/coordination.k8s.io/v1", "other"),
        ("/api", "other"),
    ],
)
def test_api_resource_names_the_resource_not_the_verb(path: str, resource: str) -> None:
    """The ``resource`` label of ``orca_api_requests_total``: the resource and subresource a
    path addresses (the pair the API server's ``apiserver_request_total`` labels), so a
    dashboard can set the two side by side; a name or a namespace never becomes a label, and
    a path that addresses no resource (discovery, ``/version``) is ``other``."""
    assert kube.api_resource(path) == resource


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/nodes?labelSelector=zone%3Da", "nodes"),
        ("/api/v1/namespaces/ns/events?fieldValidation=Ignore&note=why?", "events"),
        ("/apis/orca.cloudinit.dev/v1alpha1/workloads?watch=1&x=?/a", "workloads"),
    ],
)
def test_the_resource_label_ends_at_the_first_question_mark(path: str, resource: str) -> None:
    """A path's query starts at its first ``?`` (RFC 3986 3.4), and a query may hold more
    (``/`` and ``?`` are data there): the label is the resource before it, never a piece of
    the query, which would make the metric's label set unbounded."""
    assert kube.api_resource(path) == resource
