"""The serving certificate: generated for the names asked, read from a directory, and picked
up again in place when its files are rotated (the same SSLContext, new handshakes)."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path

import pytest

from controller.operator import tls


def write(directory: Path, bundle: tls.CertBundle) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "tls.crt").write_bytes(bundle.cert)
    (directory / "tls.key").write_bytes(bundle.key)
    (directory / "ca.crt").write_bytes(bundle.ca)


def test_a_generated_certificate_serves_its_names_until_it_nears_its_end() -> None:
    bundle = tls.generate(["orca-webhook.orca-system.svc", "127.0.0.1"])
    now = datetime.datetime.now(datetime.UTC)
    assert bundle.names() == {"orca-webhook.orca-system.svc", "127.0.0.1"}
    assert bundle.serves(["127.0.0.1"], now)
    assert not bundle.serves(["elsewhere"], now)  # a name it lacks: renewed
    late = now + datetime.timedelta(days=tls.CERT_DAYS) - tls.RENEW_BEFORE
    assert not bundle.serves(["127.0.0.1"], late)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(tls.CertificateError) as caught:
        tls.read_dir(tmp_path)
    assert str(caught.value).count("\n") == 0
    assert "tls.crt" in str(caught.value)


async def handshake(port: int, ca: bytes) -> bool:
    """Whether a client trusting only ``ca`` completes a handshake with 127.0.0.1:port."""
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except ssl.SSLError:
        return False
    writer.close()
    return True


def test_rotated_files_are_picked_up_without_a_restart(tmp_path: Path) -> None:
    first, second = tls.generate(["127.0.0.1"]), tls.generate(["127.0.0.1"])
    write(tmp_path, first)
    cert = tls.from_dir(tmp_path)

    async def scenario() -> list[bool]:
        assert await cert.load()
        server = await asyncio.start_server(
            lambda r, w: w.close(), "127.0.0.1", 0, ssl=cert.context
        )
        port = server.sockets[0].getsockname()[1]
        seen = [await handshake(port, first.ca), await handshake(port, second.ca)]
        write(tmp_path, second)  # cert-manager renewed it; the kubelet swapped the files
        assert await cert.load()
        assert not await cert.load()  # unchanged since: nothing to do
        seen += [await handshake(port, first.ca), await handshake(port, second.ca)]
        server.close()
        await server.wait_closed()
        return seen

    assert asyncio.run(scenario()) == [True, False, False, True]
    assert cert.ca == second.ca
