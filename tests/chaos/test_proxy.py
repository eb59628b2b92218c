"""The flaky network's proxy must cut what it says it cuts, or the scenario proves nothing.

A plain TCP echo server speaking TLS-framed records (the proxy only reads the record headers)
stands in for the API server."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from tests.chaos.proxy import APPLICATION_DATA, FlakyProxy, TlsRecords

HANDSHAKE = 0x16


def record(kind: int, payload: bytes) -> bytes:
    return struct.pack("!BHH", kind, 0x0303, len(payload)) + payload


def test_tls_records_are_followed_across_chunks() -> None:
    stream = record(HANDSHAKE, b"hello" * 3) + record(APPLICATION_DATA, b"x" * 10)
    records = TlsRecords()
    seen = [t for i in range(0, len(stream), 4) for t in records.feed(stream[i : i + 4])]
    assert seen == [HANDSHAKE, APPLICATION_DATA]
    assert records.application_data == 1


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """Answers every record with an application-data record of the same payload."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the proxy resets it
            while True:
                header = conn.recv(5)
                if len(header) < 5:
                    return
                length = struct.unpack("!BHH", header)[2]
                payload = conn.recv(length) if length else b""
                conn.sendall(record(APPLICATION_DATA, payload))

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()
    stop.set()
    thread.join()
    server.close()


def _exchange(sock: socket.socket, kind: int, payload: bytes) -> bytes:
    sock.sendall(record(kind, payload))
    return sock.recv(100)


def test_cut_all_closes_every_live_connection(echo: tuple[str, int]) -> None:
    proxy = FlakyProxy(echo).start()
    try:
        clients = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(3)]
        for c in clients:
            assert _exchange(c, HANDSHAKE, b"hi") == record(APPLICATION_DATA, b"hi")
        assert proxy.cut_all() == 3
        for c in clients:
            c.settimeout(5)
            with contextlib.suppress(ConnectionResetError):  # RST, else FIN:
                assert c.recv(10) == b""
            c.close()
        assert proxy.total_cut == 3
    finally:
        proxy.stop()


@pytest.mark.parametrize("forward", [0.0, 1.0])
def test_a_request_on_an_established_connection_is_cut(
    echo: tuple[str, int], forward: float
) -> None:
    proxy = FlakyProxy(echo).start()
    try:
        proxy.cut_requests(True, forward=forward)
        sock = socket.create_connection(("127.0.0.1", proxy.port))
        sock.settimeout(5)
        # The handshake and the first request pass; the server's answer establishes it.
        assert _exchange(sock, HANDSHAKE, b"hello") == record(APPLICATION_DATA, b"hello")
        assert _exchange(sock, APPLICATION_DATA, b"GET 1") == record(APPLICATION_DATA, b"GET 1")
        with contextlib.suppress(ConnectionResetError):
            assert _exchange(sock, APPLICATION_DATA, b"GET 2") == b""
        sock.close()
        how = "request, forwarded" if forward else "request, dropped"
        assert proxy.cuts == {how: 1}
    finally:
        proxy.stop()
