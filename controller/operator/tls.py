"""The serving certificate of the operator's HTTPS endpoints (metrics, probes, admission
webhook): where it comes from, and picking it up again when it changes.

Three sources, in the order ``orca run`` takes them:

    --tls-cert-dir DIR   ``tls.crt``, ``tls.key`` (and ``ca.crt``, the bundle clients trust;
                         else ``tls.crt`` itself) as cert-manager's Secrets hold them, mounted
                         into the Pod; read again when their contents change (the kubelet
                         swaps a Secret volume's files in place on rotation)
    --tls-secret NAME    a Secret the operator keeps itself (in ``$POD_NAMESPACE``): created
                         with a CA and a serving certificate when absent, renewed when it nears
                         its end; every replica serves the same certificate, so the one CA
                         bundle in the ValidatingWebhookConfiguration verifies them all
    neither              a CA and a certificate generated at start, in memory (local runs and
                         the dev cluster)

The ``ssl.SSLContext`` is made once and loaded again in place: OpenSSL hands each new
connection the context's current certificate, so a rotation needs no restart of the servers.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from controller import certificates
from controller.operator.kube import ApiError, KubeApi, TransportError

logger = logging.getLogger("orca.tls")

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"
#: How often the files or the Secret are looked at again (the kubelet refreshes a mounted
#: Secret within about a minute of its change).
RECHECK_SECONDS = 30.0
#: A generated serving certificate's life, and how long before its end it is renewed
#: (cert-manager's defaults: 90 days, renewed at two thirds).
CERT_DAYS = 90
RENEW_BEFORE = datetime.timedelta(days=30)
CA_DAYS = 3650


class CertificateError(Exception):
    """The certificate files or Secret cannot be used (the message says which and why)."""


@dataclass(frozen=True)
class CertBundle:
    """PEM bytes: the serving certificate and key, and the CA bundle clients verify it with."""

    cert: bytes
    key: bytes
    ca: bytes

    def digest(self) -> str:
        return hashlib.sha256(self.cert + self.key + self.ca).hexdigest()

    def not_after(self) -> datetime.datetime:
        return x509.load_pem_x509_certificate(self.cert).not_valid_after_utc

    def names(self) -> set[str]:
        """The certificate's DNS and IP subject alternative names."""
        cert = x509.load_pem_x509_certificate(self.cert)
        try:
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return set()
        ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
        return set(sans.get_values_for_type(x509.DNSName)) | ips

    def serves(self, hosts: Sequence[str], now: datetime.datetime) -> bool:
        """Still good for ``hosts``: names them all and is not about to expire."""
        return set(hosts) <= self.names() and self.not_after() - RENEW_BEFORE > now


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def generate(hosts: Sequence[str], now: datetime.datetime | None = None) -> CertBundle:
    """A fresh CA and a serving certificate it signs for ``hosts`` (DNS names or IPs): P-256
    keys, the CA for ten years, the certificate for ``CERT_DAYS``."""
    now = now or datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(minutes=5)  # clocks a little behind ours
    ca_key = certificates.new_key()
    ca = certificates.certificate_authority(
        "orca-controller-ca", ca_key, start, now + datetime.timedelta(days=CA_DAYS)
    )
    key = certificates.new_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(certificates.common_name(hosts[0] if hosts else "orca-controller"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return CertBundle(
        cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        ca=ca.public_bytes(pem),
    )


def read_dir(directory: Path) -> CertBundle:
    """The bundle in ``directory`` (``tls.crt``, ``tls.key``, optional ``ca.crt``)."""
    try:
        cert = (directory / CERT_FILE).read_bytes()
        key = (directory / KEY_FILE).read_bytes()
        ca_path = directory / CA_FILE
        ca = ca_path.read_bytes() if ca_path.exists() else cert
    except OSError as exc:
        raise CertificateError(
            f"--tls-cert-dir {directory}: {exc.strerror}: {exc.filename}"
        ) from None
    return CertBundle(cert, key, ca)


def _load(context: ssl.SSLContext, bundle: CertBundle) -> None:
    """Load ``bundle`` into ``context`` (OpenSSL reads PEM from files only: a private
    temporary directory, removed at once)."""
    with tempfile.TemporaryDirectory(prefix="orca-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert, key = Path(tmp, CERT_FILE), Path(tmp, KEY_FILE)
        cert.write_bytes(bundle.cert)
        key.write_bytes(bundle.key)
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, ValueError) as exc:
            raise CertificateError(f"the serving certificate and key do not load: {exc}") from None


class ServingCert:
    """The serving certificate as an ``ssl.SSLContext`` kept current, and the CA bundle
    clients verify it with (``ca``: the webhook configuration's ``caBundle``)."""

    def __init__(self, source: Callable[[], Awaitable[CertBundle]], what: str) -> None:
        self._source = source
        self.what = what  # for the log: where it comes from
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.bundle: CertBundle | None = None
        self.changed = asyncio.Event()  # set on every (re)load; the registrar waits on it

    @property
    def ca(self) -> bytes:
        assert self.bundle is not None, "ServingCert.load() first"
        return self.bundle.ca

    async def load(self) -> bool:
        """Read the source and load it if it changed; True when it did."""
        bundle = await self._source()
        if self.bundle is not None and bundle.digest() == self.bundle.digest():
            return False
        _load(self.context, bundle)
        first = self.bundle is None
        self.bundle = bundle
        self.changed.set()
        logger.info(
            "%s serving certificate %s (%s, until %s)",
            "using" if first else "rotated: now using",
            self.what,
            ", ".join(sorted(bundle.names())) or "no names",
            bundle.not_after().isoformat(),
        )
        return True

    async def watch(self, every: float = RECHECK_SECONDS) -> None:
        """Look at the source again every ``every`` seconds; a source that cannot be read
        keeps the certificate loaded (one warning line)."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.load()
            except (CertificateError, ApiError, TransportError) as exc:
                logger.warning("serving certificate not reloaded: %s", exc)


def from_dir(directory: Path) -> ServingCert:
    async def read() -> CertBundle:
        return read_dir(directory)

    return ServingCert(read, f"from {directory}")


def generated(hosts: Sequence[str]) -> ServingCert:
    bundle = generate(hosts)

    async def same() -> CertBundle:
        return bundle

    return ServingCert(same, "generated at start")


def from_secret(api: KubeApi, namespace: str, name: str, hosts: Sequence[str]) -> ServingCert:
    async def ensure() -> CertBundle:
        return await ensure_secret(api, namespace, name, hosts)

    return ServingCert(ensure, f"from Secret {namespace}/{name}")


def _bundle_of(secret: dict[str, Any] | None) -> CertBundle | None:
    data = (secret or {}).get("data") or {}
    try:
        cert, key = base64.b64decode(data[CERT_FILE]), base64.b64decode(data[KEY_FILE])
        ca = base64.b64decode(data.get(CA_FILE) or data[CERT_FILE])
        bundle = CertBundle(cert, key, ca)
        bundle.not_after()  # parses
    except (KeyError, ValueError, TypeError):
        return None
    return bundle


def _secret(namespace: str, name: str, bundle: CertBundle, version: str | None) -> dict[str, Any]:
    def b64(value: bytes) -> str:
        return base64.b64encode(value).decode()

    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/name": "orca-controller"},
    }
    if version:
        metadata["resourceVersion"] = version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": metadata,
        "data": {CERT_FILE: b64(bundle.cert), KEY_FILE: b64(bundle.key), CA_FILE: b64(bundle.ca)},
    }


async def ensure_secret(
    api: KubeApi, namespace: str, name: str, hosts: Sequence[str]
) -> CertBundle:
    """The bundle in Secret ``namespace/name``, made (or renewed) first when it is absent,
    unreadable, lacks one of ``hosts`` or nears its end. Replicas starting together race
    through optimistic concurrency: the loser's create or update is refused (409) and it
    reads the winner's."""
    path = f"/api/v1/namespaces/{namespace}/secrets"
    for _attempt in range(5):
        try:
            secret: dict[str, Any] | None = await api.request("GET", f"{path}/{name}")
        except ApiError as exc:
            if not exc.not_found:
                raise
            secret = None
        bundle = _bundle_of(secret)
        if bundle is not None and bundle.serves(hosts, datetime.datetime.now(datetime.UTC)):
            return bundle
        fresh = generate(hosts)
        try:
            if secret is None:
                await api.request("POST", path, _secret(namespace, name, fresh, None))
            else:
                version = (secret.get("metadata") or {}).get("resourceVersion")
                body = _secret(namespace, name, fresh, version)
                await api.request("PUT", f"{path}/{name}", body)
        except ApiError as exc:
            if exc.conflict:
                continue  # another replica wrote it first: read theirs
            raise
        logger.info("wrote a new serving certificate into Secret %s/%s", namespace, name)
        return fresh
    raise CertificateError(f"Secret {namespace}/{name}: kept changing under five attempts")
