"""The serving certificate: generated for the names asked, read from a directory, and picked
up again in place when its files are rotated (the same SSLContext, new handshakes)."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import logging
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from prometheus_client import REGISTRY

from controller.operator import tls
from controller.operator.kube import ApiError
from tests.support.fakeapi import FakeApiServer, run, until


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


# -- what is generated, read and loaded ---------------------------------------------------------


def test_a_generated_certificate_is_what_a_tls_client_and_cert_manager_would_make() -> None:
    """A CA (P-256, ten years, a CA of path length 0 that signs certificates and CRLs) and a
    serving certificate it signs (P-256, ``CERT_DAYS``, server auth only, not a CA, named for
    the first host, every host a SAN: IPs as IP addresses), both valid from five minutes
    before ``now`` (a client's clock a little behind ours)."""
    now = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.UTC)
    bundle = tls.generate(["orca-webhook.orca-system.svc", "127.0.0.1", "::1"], now=now)
    ca = x509.load_pem_x509_certificate(bundle.ca)
    cert = x509.load_pem_x509_certificate(bundle.cert)
    start = now - datetime.timedelta(minutes=5)
    assert ca.not_valid_before_utc == cert.not_valid_before_utc == start
    assert ca.not_valid_after_utc == now + datetime.timedelta(days=tls.CA_DAYS)
    assert cert.not_valid_after_utc == now + datetime.timedelta(days=tls.CERT_DAYS)
    assert ca.subject == ca.issuer == cert.issuer
    assert ca.subject.rfc4514_string() == "CN=orca-controller-ca"
    assert cert.subject.rfc4514_string() == "CN=orca-webhook.orca-system.svc"
    ca_constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert ca_constraints.critical and ca_constraints.value.ca
    assert ca_constraints.value.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical
    assert (usage.value.key_cert_sign, usage.value.crl_sign, usage.value.digital_signature) == (
        True,
        True,
        True,
    )
    assert not (usage.value.key_encipherment or usage.value.content_commitment)
    leaf = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert leaf.critical and not leaf.value.ca
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    assert list(eku.value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["orca-webhook.orca-system.svc"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    for key in (ca.public_key(), cert.public_key()):
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    cert.verify_directly_issued_by(ca)
    private = serialization.load_pem_private_key(bundle.key, None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.public_key() == cert.public_key()
    assert b"BEGIN PRIVATE KEY" in bundle.key  # PKCS #8, unencrypted: what OpenSSL loads


def test_a_certificate_without_names_serves_no_host_and_is_named_for_orca() -> None:
    bundle = tls.generate([])
    cert = x509.load_pem_x509_certificate(bundle.cert)
    assert cert.subject.rfc4514_string() == "CN=orca-controller"
    assert bundle.names() == set()
    assert not bundle.serves(["127.0.0.1"], datetime.datetime.now(datetime.UTC))
    assert bundle.serves([], datetime.datetime.now(datetime.UTC))


def test_a_certificate_without_a_san_extension_names_nothing() -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bare")])
    now = datetime.datetime.now(datetime.UTC)
    bare = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    pem = bare.public_bytes(serialization.Encoding.PEM)
    assert tls.CertBundle(pem, b"", pem).names() == set()


def test_a_bundle_is_good_for_its_names_until_renew_before_its_end() -> None:
    now = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.UTC)
    bundle = tls.generate(["a.example", "10.0.0.1"], now=now)
    end = now + datetime.timedelta(days=tls.CERT_DAYS)
    assert bundle.not_after() == end
    assert bundle.serves(
        ["a.example", "10.0.0.1"], end - tls.RENEW_BEFORE - datetime.timedelta(seconds=1)
    )
    assert not bundle.serves(["a.example"], end - tls.RENEW_BEFORE)
    assert not bundle.serves(["a.example", "b.example"], now)


def test_files_read_from_a_directory_and_what_is_missing_said_in_one_line(tmp_path: Path) -> None:
    bundle = tls.generate(["127.0.0.1"])
    write(tmp_path, bundle)
    assert tls.read_dir(tmp_path) == bundle
    (tmp_path / "ca.crt").unlink()  # no CA bundle: the certificate is its own
    assert tls.read_dir(tmp_path) == tls.CertBundle(bundle.cert, bundle.key, bundle.cert)
    (tmp_path / "tls.key").unlink()
    with pytest.raises(tls.CertificateError) as caught:
        tls.read_dir(tmp_path)
    assert str(caught.value) == (
        f"--tls-cert-dir {tmp_path}: No such file or directory: {tmp_path / 'tls.key'}"
    )


def test_a_key_that_does_not_fit_its_certificate_does_not_load() -> None:
    one, other = tls.generate(["127.0.0.1"]), tls.generate(["127.0.0.1"])
    cert = tls.ServingCert(_returns(tls.CertBundle(one.cert, other.key, one.ca)), "test")
    with pytest.raises(tls.CertificateError) as caught:
        asyncio.run(cert.load())
    assert str(caught.value).startswith("the serving certificate and key do not load: ")
    assert cert.bundle is None and not cert.changed.is_set()


def _returns(bundle: tls.CertBundle) -> Any:
    async def source() -> tls.CertBundle:
        return bundle

    return source


def test_the_context_serves_tls_1_2_and_later_and_asks_no_client_certificate() -> None:
    cert = tls.generated(["127.0.0.1"])
    assert cert.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert cert.context.verify_mode == ssl.CERT_NONE
    assert cert.what == "generated at start"
    assert tls.from_dir(Path("/etc/orca/tls")).what == "from /etc/orca/tls"


def test_loads_and_rotations_are_logged_and_a_source_that_fails_keeps_the_last(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.UTC)
    first, second = tls.generate(["b", "a"], now=now), tls.generate(["c"], now=now)
    answers: list[tls.CertBundle | Exception] = [first, first, second, tls.CertificateError("gone")]

    async def source() -> tls.CertBundle:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    cert = tls.ServingCert(source, "from test")

    async def scenario() -> None:
        assert await cert.load() is True
        watching = asyncio.create_task(cert.watch(every=0.01))
        await until(lambda: cert.bundle == second, "rotated", timeout=5)
        await until(lambda: any("not reloaded" in r.message for r in caplog.records), "", 5)
        watching.cancel()

    with caplog.at_level(logging.INFO, logger="orca.tls"):
        asyncio.run(scenario())
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "orca.tls"]
    end = "until 2027-03-01T10:00:00+00:00"  # now + CERT_DAYS
    assert lines[:2] == [
        ("INFO", f"using serving certificate from test (a, b, {end})"),
        ("INFO", f"rotated: now using serving certificate from test (c, {end})"),
    ]
    assert lines[2] == ("WARNING", "serving certificate not reloaded: gone")
    assert cert.bundle == second  # kept


def test_a_secret_is_read_only_when_it_holds_a_certificate_and_its_key() -> None:
    good = tls.generate(["x"])
    assert tls._bundle_of(None) is None
    assert tls._bundle_of({}) is None
    assert tls._bundle_of({"data": None}) is None
    assert tls._bundle_of({"data": {"tls.crt": b64(good.cert)}}) is None
    assert tls._bundle_of({"data": {"tls.crt": "%%%", "tls.key": b64(good.key)}}) is None
    assert tls._bundle_of({"data": {"tls.crt": 7, "tls.key": b64(good.key)}}) is None
    garbled = {"tls.crt": b64(b"not PEM"), "tls.key": b64(good.key)}
    assert tls._bundle_of({"data": garbled}) is None
    assert tls._bundle_of(secret_of(good)) == good


def test_the_secret_written_is_a_labelled_tls_secret_updated_at_its_version() -> None:
    bundle = tls.generate(["x"])
    made = tls._secret("orca-system", "orca-tls", bundle, None)
    assert made == {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": "orca-tls",
            "namespace": "orca-system",
            "labels": {"app.kubernetes.io/name": "orca-controller"},
        },
        "data": {"tls.crt": b64(bundle.cert), "tls.key": b64(bundle.key), "ca.crt": b64(bundle.ca)},
    }
    assert (
        tls._secret("orca-system", "orca-tls", bundle, "42")["metadata"]["resourceVersion"] == "42"
    )


def test_the_usages_are_encoded_as_cert_manager_encodes_them_and_none_is_critical_but_ca() -> None:
    bundle = tls.generate(["a.example"])
    ca = x509.load_pem_x509_certificate(bundle.ca)
    cert = x509.load_pem_x509_certificate(bundle.cert)
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    want = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    assert usage.public_bytes() == want.public_bytes()
    assert not cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).critical
    assert not cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).critical


def test_a_certificate_made_now_is_valid_from_five_minutes_ago_in_any_time_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        before = datetime.datetime.now(datetime.UTC)
        cert = x509.load_pem_x509_certificate(tls.generate(["a"]).cert)
        after = datetime.datetime.now(datetime.UTC)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    five = datetime.timedelta(minutes=5)
    second = datetime.timedelta(seconds=1)
    assert before - five - second <= cert.not_valid_before_utc <= after - five


def test_the_key_is_written_only_into_a_private_directory_that_is_gone_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenSSL reads PEM from files: the key is written into a directory only this user may
    enter, never into the working directory, and removed once loaded."""
    monkeypatch.chdir(tmp_path)
    seen: list[tuple[Path, int]] = []

    class Context:
        def load_cert_chain(self, cert: Path, key: Path) -> None:
            assert cert.is_absolute() and key.is_absolute()
            assert cert.parent == key.parent != tmp_path
            seen.append((cert.parent, cert.parent.stat().st_mode & 0o777))
            assert key.read_bytes() == bundle.key

    bundle = tls.generate(["a"])
    tls._load(Context(), bundle)  # type: ignore[arg-type]
    ((directory, mode),) = seen
    assert mode == 0o700
    assert not directory.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_certificate_without_names_is_logged_as_such(caplog: pytest.LogCaptureFixture) -> None:
    cert = tls.ServingCert(_returns(tls.generate([])), "from test")
    with caplog.at_level(logging.INFO, logger="orca.tls"):
        asyncio.run(cert.load())
    (line,) = [r.getMessage() for r in caplog.records if r.name == "orca.tls"]
    assert line.startswith("using serving certificate from test (no names, until ")


def test_the_secret_kept_by_the_operator_is_made_once_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def count(verb: str, code: str) -> float:
        labels = {"verb": verb, "resource": "secrets", "code": code}
        return REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0

    asked = (("GET", "404"), ("POST", "201"), ("GET", "200"), ("PUT", "200"))
    before = {key: count(*key) for key in asked}

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            cert = tls.from_secret(api, "orca-system", "orca-tls", ["127.0.0.1"])
            assert cert.what == "from Secret orca-system/orca-tls"
            assert await cert.load() is True
            assert kept(server) == cert.bundle
            secret = server.get("secrets", "orca-tls", "orca-system")
            assert secret is not None
            stale = copy.deepcopy(secret)
            stale["data"] = secret_of(tls.generate(["elsewhere"]))["data"]
            server.put("secrets", stale)
            assert await cert.load() is True  # renewed: PUT over it
            assert cert.bundle is not None and cert.bundle.names() == {"127.0.0.1"}

    with caplog.at_level(logging.INFO, logger="orca.tls"):
        run(scenario)
    wrote = [r.getMessage() for r in caplog.records if r.getMessage().startswith("wrote")]
    assert wrote == ["wrote a new serving certificate into Secret orca-system/orca-tls"] * 2
    assert {key: count(*key) - n for key, n in before.items()} == dict.fromkeys(asked, 1.0)
