"""The test harness's ports for child processes: never the same twice, never one the kernel
could give an outgoing connection in the meantime (the RBAC trials run a dozen operators)."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import harness


def ephemeral_range() -> range:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return range(int(low), int(high) + 1)


def test_ports_handed_out_in_parallel_are_distinct_and_outside_the_ephemeral_range() -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        ports = list(pool.map(lambda _: harness.free_port(), range(200)))
    assert len(set(ports)) == len(ports)
    assert not set(ports) & set(ephemeral_range())


def test_a_port_someone_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    taken, free = harness.free_port(), harness.free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", taken))
        listener.listen()
        monkeypatch.setattr(harness, "_OWN_PORTS", [taken, free])
        monkeypatch.setattr(harness, "_handed_out", set())
        assert harness.free_port() == free
        with pytest.raises(AssertionError, match="no free port"):
            harness.free_port()
