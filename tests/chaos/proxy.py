"""A loopback TCP proxy that drops connections on demand: the flaky network of the chaos suite.

It forwards bytes (TLS passes through untouched: the client's handshake is with the API server
behind it) and, when told to, breaks connections the way a load balancer, an API server restart
or a GOAWAY does:

* ``cut_all()`` closes every live connection at once, whatever is on it: a request being
  written or answered, a watch streaming, a Lease renew, an idle pooled connection;
* ``cut_requests`` mode closes an established connection the moment the client sends a
  request's bytes on it, after forwarding them or not (the request reaches the API server and
  its answer is lost, or it never arrives): what aiohttp reports as ``ServerDisconnectedError``
  on a pooled connection.

Each cut either resets the connection (RST, ``SO_LINGER`` 0) or closes it (FIN), at random.
"Established" is read from the TLS record layer, the one thing visible without decrypting: a
connection is established once the server has sent application data after the client first
did (the client's first application-data record is its Finished in TLS 1.3, or its first
request in TLS 1.2). The first request on a new connection therefore goes through; every later
one on that connection is cut while the mode is on.

asyncio in a thread of its own; the test drives it from its thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

APPLICATION_DATA = 0x17
T = TypeVar("T")
_CHUNK = 65536


class TlsRecords:
    """Follows the TLS record layer of one direction of a stream: the content type of each
    record whose header has gone by (the payload is skipped, encrypted or not)."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._skip = 0
        self.application_data = 0

    def feed(self, data: bytes) -> list[int]:
        """The content types of the records whose 5-byte header ends in ``data``."""
        types = []
        view = memoryview(data)
        while view:
            if self._skip:
                step = min(self._skip, len(view))
                self._skip -= step
                view = view[step:]
                continue
            need = 5 - len(self._header)
            self._header += view[:need]
            view = view[need:]
            if len(self._header) == 5:
                kind, _, length = struct.unpack("!BHH", self._header)
                types.append(kind)
                self.application_data += kind == APPLICATION_DATA
                self._header.clear()
                self._skip = length
        return types


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    up: TlsRecords = field(default_factory=TlsRecords)
    down: TlsRecords = field(default_factory=TlsRecords)
    established: bool = False
    last_down: float = 0.0  # monotonic time of the last bytes from the server
    closed: bool = False


class FlakyProxy:
    """``127.0.0.1:<port>`` -> ``upstream``; ``cuts`` counts the connections cut, by how."""

    def __init__(self, upstream: tuple[str, int], seed: int = 0) -> None:
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.cuts: Counter[str] = Counter()
        self.accepted = 0
        self._forward_share = 0.0
        self._cutting_requests = False
        self._live: set[_Connection] = set()
        self._loop = asyncio.new_event_loop()
        # A daemon: a proxy a failed test never stopped must not keep pytest's process alive.
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="flaky-proxy", daemon=True
        )
        self._server: asyncio.Server | None = None
        self.port = 0

    # -- driven from the test's thread ---------------------------------------------------------

    def start(self) -> FlakyProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        # The server is closed in its own loop: asyncio's Server is not thread-safe, and closing
        # it from the test's thread raced the loop detaching a connection (a TypeError in
        # ``Server._wakeup``).
        if self._server is not None:
            self._call(self._close_server())
            self.cut_all("stop")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def cut_all(self, reason: str = "all") -> int:
        """Cut every live connection now; how many there were."""
        return self._call(self._cut_all(reason))

    def cut_requests(self, on: bool, forward: float = 0.5) -> None:
        """Cut each established connection as a request's bytes arrive on it (``on``), after
        forwarding them with probability ``forward``."""
        self._cutting_requests = on
        self._forward_share = forward

    @property
    def total_cut(self) -> int:
        return sum(n for reason, n in self.cuts.items() if reason != "stop")

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    # -- in the proxy's loop -------------------------------------------------------------------

    async def _close_server(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _cut_all(self, reason: str) -> int:
        live = [c for c in self._live if not c.closed]
        for conn in live:
            busy = time.monotonic() - conn.last_down < 0.2
            self._cut(conn, f"{reason}, {'answering' if busy else 'idle'}")
        return len(live)

    def _cut(self, conn: _Connection, reason: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.cuts[reason] += 1
        reset = self.rng.random() < 0.5
        for writer in (conn.client, conn.upstream):
            sock = writer.get_extra_info("socket")
            if reset and sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._live.discard(conn)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.transport.abort()
            return
        conn = _Connection(client_w, up_w)
        self._live.add(conn)
        await asyncio.gather(
            self._pump_up(conn, client_r), self._pump_down(conn, up_r), return_exceptions=True
        )
        if not conn.closed:
            conn.closed = True
            self._live.discard(conn)
            for writer in (client_w, up_w):
                writer.transport.abort()

    async def _pump_up(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        """Client -> server; the place a request is cut as it arrives."""
        while not conn.closed:
            data = await reader.read(_CHUNK)
            if not data:
                break
            types = conn.up.feed(data)
            if self._cutting_requests and conn.established and APPLICATION_DATA in types:
                if self.rng.random() < self._forward_share:
                    conn.upstream.write(data)  # the server gets it, the answer is lost
                    await conn.upstream.drain()
                    self._cut(conn, "request, forwarded")
                else:
                    self._cut(conn, "request, dropped")
                return
            conn.upstream.write(data)
            await conn.upstream.drain()
        if not conn.closed:
            conn.upstream.write_eof()

    async def _pump_down(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        """Server -> client; marks the connection established."""
        while not conn.closed:
            data = await reader.read(_CHUNK)
            if not data:
                break
            conn.last_down = time.monotonic()
            types = conn.down.feed(data)
            if conn.up.application_data and APPLICATION_DATA in types:
                conn.established = True
            conn.client.write(data)
            await conn.client.drain()
        if not conn.closed and conn.client.can_write_eof():
            conn.client.write_eof()
