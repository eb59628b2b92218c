"""The serving certificate: generated for the names asked, read from a directory, and picked
up again in place when its files are rotated (the same SSLContext, new handshakes)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ssl
from pathlib import Path
from typing import Any

import pytest

from controller.operator import tls
from controller.operator.kube import ApiError
from tests.support.fakeapi import FakeApiServer, run


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


# -- the Secret the operator keeps (--tls-secret) -----------------------------------------------

SECRETS = "/api/v1/namespaces/orca-system/secrets"


def secret_of(bundle: tls.CertBundle, ca: bool = True) -> dict[str, Any]:
    data = {"tls.crt": b64(bundle.cert), "tls.key": b64(bundle.key)}
    if ca:
        data["ca.crt"] = b64(bundle.ca)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "orca-tls", "namespace": "orca-system"},
        "data": data,
    }


def b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def kept(server: FakeApiServer) -> tls.CertBundle:
    bundle = tls._bundle_of(server.get("secrets", "orca-tls", "orca-system"))
    assert bundle is not None
    return bundle


def test_a_secret_that_serves_the_names_asked_is_used_as_it_is() -> None:
    """A user's own TLS Secret without ``ca.crt`` (a certificate from a public CA, say): its
    ``tls.crt`` is the bundle clients trust, and nothing is written."""
    mine = tls.generate(["orca-webhook.orca-system.svc", "127.0.0.1"])

    async def scenario(server: FakeApiServer) -> None:
        server.put("secrets", secret_of(mine, ca=False))
        async with server.client() as api:
            bundle = await tls.ensure_secret(api, "orca-system", "orca-tls", ["127.0.0.1"])
        assert bundle == tls.CertBundle(mine.cert, mine.key, mine.cert)
        assert server.seen("PUT") == [] and server.seen("POST") == []

    run(scenario)


def test_a_secret_without_a_name_now_asked_for_is_renewed_for_all_of_them() -> None:
    old = tls.generate(["orca-webhook.orca-system.svc"])

    async def scenario(server: FakeApiServer) -> None:
        server.put("secrets", secret_of(old))
        hosts = ["orca-webhook.orca-system.svc", "orca-controller.orca-system.svc"]
        async with server.client() as api:
            bundle = await tls.ensure_secret(api, "orca-system", "orca-tls", hosts)
        assert bundle.names() == set(hosts)
        assert kept(server) == bundle  # written back, over the old one
        assert len(server.seen("PUT", f"{SECRETS}/orca-tls")) == 1

    run(scenario)


def test_a_secret_near_its_end_or_unreadable_is_renewed() -> None:
    soon = tls.generate(
        ["127.0.0.1"], now=datetime.datetime.now(datetime.UTC) - tls.RENEW_BEFORE * 2
    )
    garbage = secret_of(soon)
    garbage["metadata"]["name"] = "orca-garbage"
    garbage["data"]["tls.crt"] = b64(b"not a certificate")

    async def scenario(server: FakeApiServer) -> None:
        server.put("secrets", secret_of(soon))
        server.put("secrets", garbage)
        async with server.client() as api:
            renewed = await tls.ensure_secret(api, "orca-system", "orca-tls", ["127.0.0.1"])
            replaced = await tls.ensure_secret(api, "orca-system", "orca-garbage", ["127.0.0.1"])
        assert renewed.cert != soon.cert and kept(server) == renewed
        assert replaced.names() == {"127.0.0.1"}

    run(scenario)


def test_replicas_racing_to_create_the_secret_all_serve_the_winners() -> None:
    """Two replicas start together: both find no Secret; the other one's create lands first,
    so this one's is refused (409 AlreadyExists) and it reads and serves the other's, so the
    one CA in the webhook configuration verifies both."""
    winner = tls.generate(["127.0.0.1"])

    async def scenario(server: FakeApiServer) -> None:
        def the_other_replica_creates_it() -> None:
            server.put("secrets", secret_of(winner))

        server.before("POST", SECRETS, the_other_replica_creates_it)
        async with server.client() as api:
            bundle = await tls.ensure_secret(api, "orca-system", "orca-tls", ["127.0.0.1"])
        assert bundle == winner
        assert [s.outcome for s in server.seen("POST", SECRETS)] == ["409"]

    run(scenario)


def test_a_secret_that_keeps_changing_is_one_line_after_five_attempts() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.refuse("POST", SECRETS, 409, "AlreadyExists", times=None)
        async with server.client() as api:
            with pytest.raises(tls.CertificateError) as caught:
                await tls.ensure_secret(api, "orca-system", "orca-tls", ["127.0.0.1"])
        assert str(caught.value) == (
            "Secret orca-system/orca-tls: kept changing under five attempts"
        )
        assert len(server.seen("POST", SECRETS)) == 5

    run(scenario)


def test_a_refusal_other_than_a_conflict_is_raised() -> None:
    async def scenario(server: FakeApiServer) -> None:
        server.refuse("GET", f"{SECRETS}/orca-tls", 403, "Forbidden")
        async with server.client() as api:
            with pytest.raises(ApiError) as caught:
                await tls.ensure_secret(api, "orca-system", "orca-tls", ["127.0.0.1"])
        assert caught.value.status == 403

    run(scenario)


def test_a_change_of_the_ca_alone_is_picked_up(tmp_path: Path) -> None:
    """cert-manager re-issues the CA and the kubelet swaps ``ca.crt`` before the rest: the
    webhook configuration's caBundle must follow that change too."""
    first = tls.generate(["127.0.0.1"])
    write(tmp_path, first)
    cert = tls.from_dir(tmp_path)

    async def scenario() -> list[bool]:
        loaded = [await cert.load()]
        cert.changed.clear()
        (tmp_path / "ca.crt").write_bytes(first.ca + tls.generate(["x"]).ca)
        loaded.append(await cert.load())
        loaded.append(cert.changed.is_set())
        return loaded

    assert asyncio.run(scenario()) == [True, True, True]
    assert cert.ca.startswith(first.ca) and cert.ca != first.ca
