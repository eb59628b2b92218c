"""Every port's connections within their deadlines and bound (``controller.operator.listener``),
with deadlines short enough for a unit test: each state of a connection ends by its own
deadline (told apart by which one the listener counts), a connection that keeps to them is
served, keep-alive included, the bound makes room by closing who waited longest without a
request, and an error says its status and nothing of the request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from controller.operator import tls
from controller.operator.listener import Limits, Listener, State

SHORT = Limits(handshake=0.3, header=0.3, body=0.3, request=0.3, idle=0.3, connections=3)
#: What a test waits at most for the server to act (a guard against a hang, not a measure).
PATIENCE = 10.0
GET = b"GET /ok HTTP/1.1\r\nHost: orca\r\n\r\n"


def app() -> web.Application:
    release = asyncio.Event()

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def hang(_: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="late\n")

    application = web.Application()
    application.router.add_get("/ok", ok)
    application.router.add_get("/hang", hang)
    return application


def client_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


Scenario = Callable[[Listener, int], Awaitable[Any]]


def serve(scenario: Scenario, *, secure: bool = True, limits: Limits = SHORT) -> Any:
    """Run ``scenario(listener, port)`` against a started listener of ``app()``."""

    async def run() -> Any:
        context = None
        if secure:
            cert = tls.generated(["127.0.0.1"])
            await cert.load()
            context = cert.context
        listener = Listener(app(), "127.0.0.1", 0, context, limits, "test")
        await listener.start()
        try:
            return await asyncio.wait_for(scenario(listener, listener.bound_port), PATIENCE * 3)
        finally:
            await listener.stop()

    return asyncio.run(run())


async def connect(
    port: int, secure: bool = True
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = client_context() if secure else None
    return await asyncio.open_connection("127.0.0.1", port, ssl=context)


async def closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server still sends, until it closes the connection."""
    data = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), PATIENCE):
            data += chunk
    except (ConnectionError, ssl.SSLError):
        pass
    return data


async def response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length: its status and body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE)
    status = int(head.split(b" ", 2)[1])
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return status, await reader.readexactly(length)


# -- each state ends by its own deadline ------------------------------------------------------


async def tcp_only(listener: Listener, port: int) -> dict[State, int]:
    """A TCP connection to the HTTPS port that never starts TLS."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


async def silent(listener: Listener, port: int) -> dict[State, int]:
    """TLS agreed, then not a byte."""
    reader, writer = await connect(port)
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


async def half_headers(listener: Listener, port: int) -> dict[State, int]:
    reader, writer = await connect(port)
    writer.write(b"GET /ok HTTP/1.1\r\nHost: orca\r\n")  # no blank line: never complete
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


async def kept_alive(listener: Listener, port: int) -> dict[State, int]:
    """Answered, then nothing more."""
    reader, writer = await connect(port)
    writer.write(GET)
    assert await response(reader) == (200, b"ok\n")
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


async def next_request_half_sent(listener: Listener, port: int) -> dict[State, int]:
    """Answered, then half of a next request: its first byte starts the headers' deadline."""
    reader, writer = await connect(port)
    writer.write(GET)
    assert await response(reader) == (200, b"ok\n")
    writer.write(b"GET /ok HTT")
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


async def hung_answer(listener: Listener, port: int) -> dict[State, int]:
    reader, writer = await connect(port)
    writer.write(b"GET /hang HTTP/1.1\r\nHost: orca\r\n\r\n")
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


@pytest.mark.parametrize(
    ("scenario", "ended_by"),
    [
        pytest.param(tcp_only, State.HANDSHAKE, id="no TLS handshake"),
        pytest.param(silent, State.WAITING, id="no headers"),
        pytest.param(half_headers, State.WAITING, id="half the headers"),
        pytest.param(kept_alive, State.IDLE, id="idle after an answer"),
        pytest.param(next_request_half_sent, State.WAITING, id="half a next request"),
        pytest.param(hung_answer, State.BUSY, id="an answer that never comes"),
    ],
)
def test_each_state_of_a_connection_ends_by_its_deadline(
    scenario: Scenario, ended_by: State
) -> None:
    expired = serve(scenario)
    assert {state: n for state, n in expired.items() if n} == {ended_by: 1}


def test_a_plain_http_connection_has_the_same_deadlines() -> None:
    expired = serve(silent_plain, secure=False)
    assert {state: n for state, n in expired.items() if n} == {State.WAITING: 1}


async def silent_plain(listener: Listener, port: int) -> dict[State, int]:
    reader, writer = await connect(port, secure=False)
    assert await closed(reader) == b""
    writer.close()
    return listener.expired


# -- what keeps to them is served ----------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False], ids=["https", "http"])
def test_requests_on_one_kept_alive_connection_are_each_answered(secure: bool) -> None:
    async def scenario(listener: Listener, port: int) -> list[tuple[int, bytes]]:
        reader, writer = await connect(port, secure)
        answers = []
        for _ in range(3):
            writer.write(GET)
            answers.append(await response(reader))
        writer.write(b"GET /missing HTTP/1.1\r\nHost: orca\r\n\r\n")
        answers.append(await response(reader))
        writer.close()
        assert not any(listener.expired.values())
        return answers

    answers = serve(scenario, secure=secure, limits=Limits(connections=3))
    assert [status for status, _ in answers] == [200, 200, 200, 404]
    assert answers[0][1] == b"ok\n"


def test_a_request_sent_with_the_handshake_is_answered() -> None:
    """A client may send its request right behind its last handshake message: the bytes the
    TLS layer hands over before the handshake is known to be done are not lost."""

    async def scenario(listener: Listener, port: int) -> tuple[int, bytes]:
        raw, writer = await asyncio.open_connection("127.0.0.1", port)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls_client = client_context().wrap_bio(incoming, outgoing)
        while True:
            try:
                tls_client.do_handshake()
                break
            except ssl.SSLWantReadError:
                writer.write(outgoing.read())
                incoming.write(await asyncio.wait_for(raw.read(65536), PATIENCE))
        tls_client.write(GET)  # the request, in the same write as the client's Finished
        writer.write(outgoing.read())
        data = b""
        while b"ok\n" not in data:
            chunk = await asyncio.wait_for(raw.read(65536), PATIENCE)
            assert chunk, "closed without an answer"
            incoming.write(chunk)
            with contextlib.suppress(ssl.SSLWantReadError):
                data += tls_client.read(65536)
        writer.close()
        return int(data.split(b" ", 2)[1]), data.rsplit(b"\r\n\r\n", 1)[1]

    assert serve(scenario, limits=Limits(connections=3)) == (200, b"ok\n")


# -- the bound ---------------------------------------------------------------------------------


def test_at_the_bound_a_new_connection_closes_the_one_that_waited_longest() -> None:
    async def scenario(listener: Listener, port: int) -> None:
        oldest = [await connect(port)]
        await asyncio.sleep(0.01)
        others = [await connect(port), await connect(port)]  # 3 open: the bound
        reader, writer = await connect(port)  # one more, with a request
        writer.write(GET)
        assert await response(reader) == (200, b"ok\n")
        assert await closed(oldest[0][0]) == b""  # made room
        for other_reader, other_writer in others:  # still open: a request is answered
            other_writer.write(GET)
            assert await response(other_reader) == (200, b"ok\n")
        assert (listener.evicted, listener.refused) == (1, 0)

    serve(scenario, limits=Limits(connections=3))


def test_at_the_bound_with_every_request_in_hand_a_new_connection_is_refused() -> None:
    async def scenario(listener: Listener, port: int) -> None:
        busy = []
        for _ in range(3):
            reader, writer = await connect(port)
            writer.write(b"GET /hang HTTP/1.1\r\nHost: orca\r\n\r\n")
            busy.append((reader, writer))
        while sum(c.state is State.BUSY for c in listener.open) < 3:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await closed(reader) == b""
        assert (listener.evicted, listener.refused) == (0, 1)
        assert len(listener.open) == 3

    serve(scenario, limits=Limits(connections=3))


def test_connections_that_end_are_no_longer_counted() -> None:
    async def scenario(listener: Listener, port: int) -> None:
        for _ in range(5):
            reader, writer = await connect(port)
            writer.write(GET)
            assert await response(reader) == (200, b"ok\n")
            writer.close()
            await writer.wait_closed()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # no TLS: fails
        writer.write(b"not a ClientHello\r\n\r\n")
        assert await closed(reader) == b""
        writer.close()
        while listener.open:
            await asyncio.sleep(0.01)
        assert (listener.evicted, listener.refused) == (0, 0)

    serve(scenario, limits=Limits(connections=3))


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        pytest.param(
            b"GET /ok HTTP/1.1\r\nHost: orca\r\nX-Secret: " + b"s3cr3t" * 2000 + b"\r\n\r\n",
            400,
            id="a header line too long",
        ),
        pytest.param(
            b"GET /ok HTTP/1.1\r\n" + b"X-A: s3cr3t\r\n" * 200 + b"\r\n", 400, id="200 headers"
        ),
        pytest.param(b"G\x00T /s3cr3t HTTP/1.1\r\n\r\n", 400, id="not a method"),
    ],
)
def test_an_error_says_its_status_and_nothing_of_the_request(
    request_bytes: bytes, status: int
) -> None:
    async def scenario(listener: Listener, port: int) -> bytes:
        reader, writer = await connect(port)
        writer.write(request_bytes)
        data = await closed(reader)
        writer.close()
        return data

    answer = serve(scenario, limits=Limits(connections=3))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"%d" % status, answer
    assert body == b"%d Bad Request\n" % status
    assert b"s3cr3t" not in answer


def test_stop_closes_every_connection() -> None:
    async def run() -> bytes:
        listener = Listener(app(), "127.0.0.1", 0, None, Limits(connections=3), "test")
        await listener.start()
        reader, writer = await connect(listener.bound_port, secure=False)
        writer.write(b"GET /hang HTTP/1.1\r\nHost: orca\r\n\r\n")
        while not listener.open or next(iter(listener.open)).state is not State.BUSY:
            await asyncio.sleep(0.01)
        await listener.stop()
        return await closed(reader)

    assert asyncio.run(run()) == b""


# -- handlers: errors, cancellation, a slow reader, access logs ------------------------------


def test_a_handler_that_fails_is_a_500_that_says_nothing_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom(_: web.Request) -> web.Response:
        raise RuntimeError("s3cr3t internals")

    application = web.Application()
    application.router.add_get("/boom", boom)

    async def run() -> bytes:
        listener = Listener(application, "127.0.0.1", 0, None, Limits(connections=3), "test")
        await listener.start()
        try:
            reader, writer = await connect(listener.bound_port, secure=False)
            writer.write(b"GET /boom HTTP/1.1\r\nHost: orca\r\n\r\n")
            return await closed(reader)
        finally:
            await listener.stop()

    with caplog.at_level(logging.INFO):
        answer = asyncio.run(run())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"500"
    assert body == b"500 Internal Server Error\n"
    errors = [r for r in caplog.records if r.name == "orca.listener"]
    assert [r.levelno for r in errors] == [logging.ERROR]
    assert errors[0].exc_info is not None  # the traceback is in the log, not the answer
    assert not [r for r in caplog.records if r.name == "aiohttp.access"]  # no access log


def test_a_refused_request_is_one_info_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(listener: Listener, port: int) -> bytes:
        reader, writer = await connect(port)
        writer.write(b"G\x00T / HTTP/1.1\r\n\r\n")
        return await closed(reader)

    with caplog.at_level(logging.DEBUG):
        serve(scenario, limits=Limits(connections=3))
    lines = [r for r in caplog.records if r.name == "orca.listener" and r.levelno >= logging.INFO]
    assert [(r.levelno, r.exc_info) for r in lines] == [(logging.INFO, None)]
    assert "refused: 400 (BadHttpMethod)" in lines[0].getMessage()


def test_a_handler_whose_connection_ended_is_cancelled() -> None:
    """An answer for nobody is not computed: the client gone (here: its deadline passed), its
    handler is cancelled, and a stop does not wait for it."""
    ended = asyncio.Event()

    async def forever(_: web.Request) -> web.Response:
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()
        raise AssertionError("unreachable")

    application = web.Application()
    application.router.add_get("/forever", forever)

    async def run() -> None:
        listener = Listener(application, "127.0.0.1", 0, None, SHORT, "test")
        await listener.start()
        try:
            reader, writer = await connect(listener.bound_port, secure=False)
            writer.write(b"GET /forever HTTP/1.1\r\nHost: orca\r\n\r\n")
            assert await closed(reader) == b""
            await asyncio.wait_for(ended.wait(), PATIENCE)
            assert listener.expired[State.BUSY] == 1
        finally:
            await listener.stop()

    asyncio.run(run())


def test_a_client_that_does_not_read_holds_the_answer_back_then_gets_all_of_it() -> None:
    """Flow control passes through: while the client reads nothing, the handler's writes wait
    once the transport's buffer is full (memory stays bounded); when it reads, it gets every
    byte."""
    total, chunk = 8 * 1024 * 1024, 64 * 1024
    written = [0]

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(total)})
        await response.prepare(request)
        for _ in range(total // chunk):
            await response.write(b"x" * chunk)
            written[0] += chunk
        await response.write_eof()
        return response

    application = web.Application()
    application.router.add_get("/big", big)

    async def run() -> int:
        limits = Limits(request=30, connections=3)
        listener = Listener(application, "127.0.0.1", 0, None, limits, "test")
        await listener.start()
        try:
            reader, writer = await connect(listener.bound_port, secure=False)
            writer.write(b"GET /big HTTP/1.1\r\nHost: orca\r\n\r\n")
            await asyncio.sleep(0.5)  # the client reads nothing for a while
            assert 0 < written[0] < total, written[0]
            status, body = await response(reader)
            assert (status, len(body)) == (200, total)
            writer.close()
            return written[0]
        finally:
            await listener.stop()

    assert asyncio.run(run()) == total


def test_a_listener_started_again_binds_the_port_its_predecessor_just_served_on() -> None:
    """A restart (a rollout, a crash) must not wait for the closed connections' TIME_WAIT."""

    async def run() -> tuple[int, int]:
        first = Listener(app(), "127.0.0.1", 0, None, Limits(connections=3), "test")
        await first.start()
        port = first.bound_port
        reader, writer = await connect(port, secure=False)
        writer.write(b"GET /ok HTTP/1.1\r\nHost: orca\r\nConnection: close\r\n\r\n")
        await closed(reader)  # the server closed first: its side of the connection waits
        writer.close()
        await first.stop()
        second = Listener(app(), "127.0.0.1", port, None, Limits(connections=3), "test")
        await second.start()
        try:
            return port, second.bound_port
        finally:
            await second.stop()

    port, again = asyncio.run(run())
    assert again == port


def test_refusals_at_the_bound_are_logged_once_per_thousand(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(listener: Listener, port: int) -> None:
        held = []  # kept: a StreamWriter collected closes its connection
        for _ in range(2):
            reader, writer = await connect(port)
            writer.write(b"GET /hang HTTP/1.1\r\nHost: orca\r\n\r\n")
            held.append(writer)
        while sum(c.state is State.BUSY for c in listener.open) < 2:
            await asyncio.sleep(0.01)
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await closed(reader) == b""
        assert listener.refused == 3

    with caplog.at_level(logging.WARNING, logger="orca.listener"):
        serve(scenario, limits=Limits(connections=2))
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.listener"]
    assert lines == ["test: 2 connections with a request in hand: new ones refused (1)"]


def test_each_end_is_one_debug_line_and_leaves_nothing_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A deadline passed, a handshake that fails: one debug line each, naming the listener
    and why; and the connection is no longer counted against the bound (a handshake cut
    short is never reported closed by the TLS layer: the listener must forget it itself)."""

    async def scenario(listener: Listener, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # no TLS: deadline
        assert await closed(reader) == b""
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\n\r\n")  # plain HTTP to the HTTPS port
        assert await closed(reader) == b""
        writer.close()
        reader, writer = await connect(port)  # TLS, then nothing: the headers' deadline
        assert await closed(reader) == b""
        writer.close()
        deadline = asyncio.get_running_loop().time() + PATIENCE
        while listener.open and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert listener.open == set()

    with caplog.at_level(logging.DEBUG, logger="orca.listener"):
        serve(scenario)
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.listener"]
    assert len(lines) == 3
    assert lines[0] == "test: connection closed, handshake for too long"
    # Plain HTTP is not a ClientHello (OpenSSL's words; the line of _ssl.c varies).
    assert lines[1].startswith("test: TLS handshake failed: SSLError(1, '[SSL: HTTP_REQUEST]")
    assert lines[2] == "test: connection closed, waiting for too long"


def test_what_a_failed_request_logs_names_the_client_and_the_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom(_: web.Request) -> web.Response:
        raise RuntimeError("inside")

    application = web.Application()
    application.router.add_get("/boom", boom)

    async def run() -> None:
        listener = Listener(application, "127.0.0.1", 0, None, Limits(connections=3), "test")
        await listener.start()
        try:
            for request in (b"GET /boom HTTP/1.1\r\nHost: o\r\n\r\n", b"G\x00T / HTTP/1.1\r\n\r\n"):
                reader, writer = await connect(listener.bound_port, secure=False)
                writer.write(request)
                await closed(reader)
                writer.close()
        finally:
            await listener.stop()

    with caplog.at_level(logging.INFO, logger="orca.listener"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.listener"]
    assert lines == [
        "request from 127.0.0.1 failed: RuntimeError('inside')",
        "request from 127.0.0.1 refused: 400 (BadHttpMethod)",
    ]


def test_every_end_is_counted_and_every_eviction() -> None:
    async def scenario(listener: Listener, port: int) -> tuple[int, int]:
        first = [await connect(port), await connect(port)]  # 2 open: the bound
        second = [await connect(port), await connect(port)]  # each evicts one of the first
        for reader, _ in first:
            assert await closed(reader) == b""
        for reader, _ in second:  # then both end by the headers' deadline
            assert await closed(reader) == b""
        return listener.evicted, listener.expired[State.WAITING]

    # The headers' deadline long enough that the four connect before the first pair's ends,
    # even on a loaded machine (at 0.3 s, one of the first pair expired before it was evicted).
    assert serve(scenario, limits=Limits(header=2.0, connections=2)) == (2, 2)


def test_an_answer_after_its_connection_ended_arms_no_deadline() -> None:
    """The middleware marks a connection idle once its handler ends, even when the handler
    ended because its connection was aborted: no deadline is armed on it then (it would
    count an end that did not happen)."""

    async def scenario(listener: Listener, port: int) -> dict[State, int]:
        await hung_answer(listener, port)
        await asyncio.sleep(SHORT.idle * 3)
        return listener.expired

    assert serve(scenario) == {State.HANDSHAKE: 0, State.WAITING: 0, State.BUSY: 1, State.IDLE: 0}


def test_a_body_nobody_reads_is_drained_for_the_body_deadline_then_closed() -> None:
    """aiohttp drains a body its handler did not read (a 404, a GET with a body) for
    ``lingering_time``: that is the body's deadline, well before the idle one."""

    async def scenario(listener: Listener, port: int) -> dict[State, int]:
        reader, writer = await connect(port)
        writer.write(b"POST /missing HTTP/1.1\r\nHost: o\r\nContent-Length: 100\r\n\r\nab")
        answer = await closed(reader)
        assert answer.split(b" ")[1] in (b"404", b"405")
        return listener.expired

    expired = serve(scenario, limits=Limits(body=0.2, idle=5, connections=3))
    assert expired[State.IDLE] == 0


def test_a_listener_that_never_started_stops_quietly_and_one_stopped_is_gone() -> None:
    cleaned: list[bool] = []

    async def cleanup(_: web.Application) -> None:
        cleaned.append(True)

    async def run() -> None:
        never = Listener(app(), "127.0.0.1", 0, None, Limits(connections=3))
        await never.stop()  # nothing to stop
        application = app()
        application.on_cleanup.append(cleanup)
        listener = Listener(application, "127.0.0.1", 0, None, Limits(connections=3))
        await listener.start()
        port = listener.bound_port
        await listener.stop()
        assert cleaned == [True]  # the application's own clean-up ran
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)

    asyncio.run(run())


def test_a_port_taken_is_an_os_error_and_leaves_nothing_running() -> None:
    async def run() -> None:
        first = Listener(app(), "127.0.0.1", 0, None, Limits(connections=3))
        await first.start()
        try:
            taken = Listener(app(), "127.0.0.1", first.bound_port, None, Limits(connections=3))
            with pytest.raises(OSError):
                await taken.start()
            await taken.stop()
        finally:
            await first.stop()

    asyncio.run(run())


def test_the_listener_leaves_the_processs_signals_alone() -> None:
    """kopf handles SIGINT and SIGTERM (a graceful stop); a listener must not take them."""
    import signal

    async def run() -> list[object]:
        before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
        listener = Listener(app(), "127.0.0.1", 0, None, Limits(connections=3))
        await listener.start()
        try:
            return [before, [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]]
        finally:
            await listener.stop()

    before, during = asyncio.run(run())
    assert during == before


def test_a_listener_without_a_name_says_listener(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        listener = Listener(app(), "127.0.0.1", 0, None, Limits(header=0.1, connections=3))
        await listener.start()
        try:
            reader, writer = await connect(listener.bound_port, secure=False)
            assert await closed(reader) == b""
            writer.close()
        finally:
            await listener.stop()

    with caplog.at_level(logging.DEBUG, logger="orca.listener"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.listener"]
    assert lines == ["listener: connection closed, waiting for too long"]


def test_refusals_past_the_first_thousand_are_logged_at_the_thousand_and_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(listener: Listener, port: int) -> None:
        _reader, writer = await connect(port, secure=False)
        writer.write(b"GET /hang HTTP/1.1\r\nHost: orca\r\n\r\n")
        while not listener.open or next(iter(listener.open)).state is not State.BUSY:
            await asyncio.sleep(0.01)
        for _ in range(1001):
            refused, sent = await asyncio.open_connection("127.0.0.1", port)
            await refused.read()
            sent.close()
        assert listener.refused == 1001

    with caplog.at_level(logging.WARNING, logger="orca.listener"):
        serve(scenario, secure=False, limits=Limits(connections=1))
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.listener"]
    assert lines == [
        "test: 1 connections with a request in hand: new ones refused (1)",
        "test: 1 connections with a request in hand: new ones refused (1001)",
    ]


def test_a_listener_listens_on_its_address_only() -> None:
    """``--metrics-bind-address 127.0.0.1`` (``make demo``): nothing is served on the machine's
    other addresses. On Linux all of 127.0.0.0/8 is the loopback interface, so 127.0.0.2 stands
    for another address of this machine; a listener on every address (0.0.0.0) answers there,
    which shows the probe can reach one."""

    async def reachable(host: str, port: int) -> bool:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except ConnectionRefusedError:
            return False
        writer.close()
        return True

    async def run() -> list[bool]:
        seen: list[bool] = []
        for address in ("127.0.0.1", "0.0.0.0"):
            listener = Listener(app(), address, 0, None, Limits(connections=3))
            await listener.start()
            try:
                port = listener.bound_port
                seen += [await reachable("127.0.0.1", port), await reachable("127.0.0.2", port)]
            finally:
                await listener.stop()
        return seen

    assert asyncio.run(run()) == [True, False, True, True]
