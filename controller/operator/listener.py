"""Every port the operator serves (``/metrics`` and the probes, the admission webhook): each
connection's TLS handshake, request headers, request and keep-alive within a deadline, and no
more connections open at once than a bound.

aiohttp answers the requests (a ``web.Application``); this module owns the connections around
them, as Go's ``http.Server`` does for kube-apiserver. A connection goes through::

    accepted --TLS handshake--> waiting --headers complete--> busy --answered--> idle
                                   ^                                               |
                                   +------------ the next request's first byte ----+

and each state has a deadline (``Limits``); one that passes aborts the connection (no TLS
close_notify exchange, which a peer that reads nothing could stall). The body is read by the
handler, within ``Limits.body`` (``webhook.read_review``); aiohttp drains a body nobody read
for as long, then closes.

The values, and what they are measured against:

- Go's ``http.Server`` sets no timeout by default (``ReadTimeout``, ``ReadHeaderTimeout``,
  ``WriteTimeout`` and ``IdleTimeout`` are 0: a connection that sends nothing stays forever),
  which is what these ports had. kube-apiserver sets ``ReadHeaderTimeout: 32s`` ("just shy of
  requestTimeoutUpperBound") and ``IdleTimeout: 90s`` ("matches http.DefaultTransport
  keep-alive timeout") in ``k8s.io/apiserver/pkg/server/secure_serving.go``, bounds the TLS
  handshake by the same 32 s (``net/http/server.go``, ``tlsHandshakeTimeout``: the smallest of
  the read and write timeouts set), and each request by its ``--request-timeout``, 60 s
  (``RequestTimeout`` in ``k8s.io/apiserver/pkg/server/config.go``).
- kube-apiserver serves any client, for up to a minute. These ports serve three, none of which
  waits more than 10 s for an answer: the API server calls the webhook with
  ``timeoutSeconds: 5`` (the shipped configuration), Prometheus scrapes within its
  ``scrape_timeout`` (10 s by default), the kubelet probes with ``timeoutSeconds: 5``; and
  Go's clients (all three) give up on a TLS handshake after 10 s (``TLSHandshakeTimeout`` of
  ``http.DefaultTransport``, which ``k8s.io/apimachinery/pkg/util/net``
  ``SetTransportDefaults`` copies). A handshake, the headers or a body that take longer than
  10 s serve nobody: ``handshake``, ``header`` and ``body`` are 10 s.
- ``request``: kube-apiserver's 60 s, a bound behind the handlers' own (a token review gives
  up after 10 s, ``serving.REVIEW_TIMEOUT``).
- ``idle``: kube-apiserver's 90 s, so the client's own idle timeout (Go's 90 s) closes first
  and a request is never sent on a connection this end is closing.
- ``connections``: 256 open at once per port. Each costs about 36 kB (TLS and aiohttp's
  buffers): 9 MB at most. Its clients need a few each (the API servers pool theirs for the
  webhook, Prometheus keeps one per target). At the bound, a new connection closes the one
  that has waited longest without a request in hand (handshaking, sending headers, idle), so
  a flood of connections that send nothing cannot lock the clients out; only when every
  connection has a request in hand is the new one closed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

logger = logging.getLogger("orca.listener")


@dataclass(frozen=True)
class Limits:
    """Seconds each state of a connection may last, and connections open at once."""

    handshake: float = 10.0
    header: float = 10.0
    body: float = 10.0
    request: float = 60.0
    idle: float = 90.0
    connections: int = 256


#: Every port's: the values the module's docstring argues for.
DEFAULT_LIMITS = Limits()


class State(enum.Enum):
    HANDSHAKE = "handshake"  # accepted, TLS not yet agreed
    WAITING = "waiting"  # for a request's headers
    BUSY = "busy"  # a request in hand (its body, its answer)
    IDLE = "idle"  # answered, kept alive for the next request


class _Handler(RequestHandler):
    """aiohttp's connection handler, with errors that say only their status: aiohttp's own
    text for a request it cannot parse repeats part of it (a header line too long comes back
    with its first 100 bytes)."""

    __slots__ = ("connection",)

    def __init__(self, connection: _Connection, server: web.Server, **kwargs: Any) -> None:
        super().__init__(server, **kwargs)
        self.connection = connection

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            logger.error("request from %s failed: %r", request.remote, exc, exc_info=exc)
        else:
            logger.info(
                "request from %s refused: %d (%s)", request.remote, status, type(exc).__name__
            )
        response = web.Response(status=status, text=f"{status} {HTTPStatus(status).phrase}\n")
        response.force_close()
        return response


class _Connection(asyncio.Protocol):
    """One accepted connection: its TLS handshake (``start_tls``), then the bytes each way
    between the transport and aiohttp's handler, its state and the deadline of that state."""

    def __init__(self, listener: Listener, server: web.Server) -> None:
        self.listener = listener
        self.loop = asyncio.get_running_loop()
        self.handler = _Handler(
            self,
            server,
            loop=self.loop,
            # aiohttp's own keep-alive timer, behind ours: it does not restart when a next
            # request begins, so it must not end one that began just before ``idle`` did.
            keepalive_timeout=listener.limits.idle + listener.limits.header,
            lingering_time=listener.limits.body,
            access_log=None,
        )
        self.transport: asyncio.Transport | None = None  # the accepted (TCP) transport
        self.serving = False  # the handler has its transport
        self.state = State.HANDSHAKE
        self.since = self.loop.time()
        self._deadline: asyncio.TimerHandle | None = None
        self._early: list[bytes] = []  # read with the handshake's last flight
        self._handshake: asyncio.Task[None] | None = None

    # -- the transport's side ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.listener.admit(self):
            transport.abort()
            return
        context = self.listener.tls
        if context is None:
            self._serve(transport)
            return
        transport.pause_reading()  # the ClientHello waits for start_tls's protocol
        self._enter(State.HANDSHAKE, self.listener.limits.handshake)
        self._handshake = self.loop.create_task(self._start_tls(transport, context))

    async def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        try:
            secured = await self.loop.start_tls(
                transport,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=self.listener.limits.handshake,
            )
        except Exception as exc:  # no TLS agreed, whatever the reason: this connection ends
            logger.debug("%s: TLS handshake failed: %r", self.listener.name, exc)
            self.abort()
            return
        if secured is None or self.transport is None or self.transport.is_closing():
            self.abort()
            return
        self._serve(secured)

    def _serve(self, transport: asyncio.Transport) -> None:
        self.serving = True
        self._enter(State.WAITING, self.listener.limits.header)
        self.handler.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self.handler.data_received(data)

    def data_received(self, data: bytes) -> None:
        if not self.serving:
            # The client's first request can come with the handshake's last flight, which
            # the TLS layer passes on before start_tls returns.
            self._early.append(data)
            return
        if self.state is State.IDLE:
            self._enter(State.WAITING, self.listener.limits.header)
        self.handler.data_received(data)

    def eof_received(self) -> None:
        if self.serving:
            self.handler.eof_received()

    def pause_writing(self) -> None:
        if self.serving:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.serving:
            self.handler.resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_clock()
        self.listener.forget(self)
        if self.serving:
            self.serving = False
            self.handler.connection_lost(exc)

    # -- the request's side (``Listener``'s middleware) -----------------------------------------

    def busy(self) -> None:
        self._enter(State.BUSY, self.listener.limits.request)

    def idle(self) -> None:
        self._enter(State.IDLE, self.listener.limits.idle)

    # -- deadlines -----------------------------------------------------------------------------

    def _enter(self, state: State, seconds: float) -> None:
        self.state, self.since = state, self.loop.time()
        self._stop_clock()
        if self.transport is None or self.transport.is_closing():
            return  # closed already (a request answered after its connection was aborted)
        self._deadline = self.loop.call_later(seconds, self._expire, state)

    def _stop_clock(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, state: State) -> None:
        logger.debug("%s: connection closed, %s for too long", self.listener.name, state.value)
        self.listener.expired[state] += 1
        self.abort()

    def abort(self) -> None:
        """Close now. The listener forgets it at once: during a TLS handshake nothing tells
        this protocol that its transport is gone."""
        self._stop_clock()
        self.listener.forget(self)
        if self.transport is not None:
            self.transport.abort()  # once serving, connection_lost follows (the handler's)


class Listener:
    """One port: aiohttp's ``app`` served at ``host:port`` (HTTPS with ``tls``), every
    connection within ``limits``."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        limits: Limits = DEFAULT_LIMITS,
        name: str = "listener",
    ) -> None:
        self.app, self.host, self.port, self.tls = app, host, port, tls
        self.limits, self.name = limits, name
        self.open: set[_Connection] = set()
        #: Connections closed by a deadline, by the state they were in (for the tests).
        self.expired: dict[State, int] = dict.fromkeys(State, 0)
        #: Connections closed at the bound: another's new one, or its own.
        self.evicted = 0
        self.refused = 0
        self._runner: web.AppRunner | None = None
        self._sockets: asyncio.base_events.Server | None = None
        app.middlewares.append(_track)

    async def start(self) -> None:
        """Listen; an ``OSError`` (the port taken, an address not this machine's) ends it."""
        # A connection that ends (its client gone, a deadline passed) cancels its handler: no
        # answer is computed for nobody, and a stop does not wait for one.
        self._runner = web.AppRunner(
            self.app, handle_signals=False, handler_cancellation=True, shutdown_timeout=5.0
        )
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        try:
            self._sockets = await asyncio.get_running_loop().create_server(
                lambda: _Connection(self, server), self.host, self.port, reuse_address=True
            )
        except OSError:
            await self._runner.cleanup()
            raise

    @property
    def bound_port(self) -> int:
        """The port listened on (``port`` 0 asks the kernel for one)."""
        assert self._sockets is not None
        return int(self._sockets.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._sockets is not None:
            self._sockets.close()
        for connection in list(self.open):
            connection.abort()
        if self._sockets is not None:
            await self._sockets.wait_closed()
        if self._runner is not None:
            await self._runner.cleanup()

    def admit(self, connection: _Connection) -> bool:
        """Count ``connection`` in, making room at the bound; False: close it."""
        if len(self.open) >= self.limits.connections:
            waiting = [c for c in self.open if c.state is not State.BUSY]
            if not waiting:
                self.refused += 1
                if self.refused % 1000 == 1:  # the first, then one line per thousand
                    logger.warning(
                        "%s: %d connections with a request in hand: new ones refused (%d)",
                        self.name,
                        len(self.open),
                        self.refused,
                    )
                return False
            self.evicted += 1
            min(waiting, key=lambda c: c.since).abort()  # forgotten there
        self.open.add(connection)
        return True

    def forget(self, connection: _Connection) -> None:
        self.open.discard(connection)


@web.middleware
async def _track(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """A request in hand from its headers until it is answered."""
    connection: _Connection | None = getattr(request.protocol, "connection", None)
    if connection is not None:
        connection.busy()
    try:
        return await handler(request)
    finally:
        if connection is not None:
            connection.idle()
