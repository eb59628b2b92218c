"""Certificates and kubeconfigs for the loopback control plane.

The API server authenticates users by client certificate (common name = user, organisation =
groups), exactly like envtest. That gives tests any identity they need for RBAC checks, e.g.
``system:serviceaccount:orca-system:orca-controller`` to run the operator with the RBAC of the
shipped manifests, without a token controller or a controller-manager.

The CA and its P-256 keys are ``controller.certificates``' (the operator's serving certificate
has the same), which says why P-256.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller import certificates

#: Admin identity written to ``DIR/kubeconfig``; ``system:masters`` bypasses RBAC.
ADMIN_USER = "admin"
ADMIN_GROUPS: tuple[str, ...] = ("system:masters",)

# Long enough that a dev cluster directory outlives any realistic session; short enough that
# nobody mistakes these for real credentials.
_VALIDITY = dt.timedelta(days=365)
# Tolerate small clock differences between processes and certificate creation.
_BACKDATE = dt.timedelta(hours=1)

#: SANs of the serving certificate: every name a client on this machine (or a future
#: in-cluster client using the ``kubernetes`` Service) may use to reach the API server.
_SERVING_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
#: 198.18.0.1 and 198.18.2.1: the real Node's address and the ``kubernetes`` Service's
#: ClusterIP in a cluster started with a kubelet (``controller.devcluster.node``).
_SERVING_IPS = ("127.0.0.1", "::1", "10.0.0.1", "198.18.0.1", "198.18.2.1")


@dataclass(frozen=True)
class PkiPaths:
    """Where the certificates of one control-plane directory live (``DIR/pki``)."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.root / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.root / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"

    def complete(self) -> bool:
        """True when every file exists, so a restarted cluster can reuse the same CA."""
        return all(
            p.is_file()
            for p in (
                self.ca_cert,
                self.ca_key,
                self.serving_cert,
                self.serving_key,
                self.admin_cert,
                self.admin_key,
                self.sa_key,
                self.sa_pub,
            )
        )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write_private(path: Path, data: bytes) -> None:
    """Write key material readable by the owner only (other users share /tmp)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _load_ca(paths: PkiPaths) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{paths.ca_key}: expected an EC private key")
    return cert, key


def _sign(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    *,
    usage: x509.ObjectIdentifier,
    sans: Sequence[x509.GeneralName] = (),
) -> x509.Certificate:
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def client_certificate(paths: PkiPaths, user: str, groups: Sequence[str]) -> tuple[bytes, bytes]:
    """Issue a client certificate (PEM cert, PEM key) for ``user`` in ``groups``.

    The API server maps CN to the user name and each O to a group, so this is how tests
    impersonate any identity without tokens.
    """
    if not user:
        raise ValueError("user must not be empty")
    ca_cert, ca_key = _load_ca(paths)
    key = certificates.new_key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert = _sign(
        ca_cert, ca_key, x509.Name(attrs), key.public_key(), usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    return _cert_pem(cert), _key_pem(key)


def generate(paths: PkiPaths) -> None:
    """Create a fresh CA, the API server's serving cert, the admin client cert and SA keys.

    One CA signs both serving and client certificates: there is a single trust root to hand
    to clients (kubeconfig) and to the API server (``--client-ca-file``).
    """
    paths.root.mkdir(parents=True, exist_ok=True)
    now = _now()
    ca_key = certificates.new_key()
    ca_cert = certificates.certificate_authority(
        "orca-devcluster-ca", ca_key, now - _BACKDATE, now + _VALIDITY
    )
    _write_private(paths.ca_key, _key_pem(ca_key))
    paths.ca_cert.write_bytes(_cert_pem(ca_cert))

    serving_key = certificates.new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in _SERVING_DNS]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in _SERVING_IPS]
    serving = _sign(
        ca_cert,
        ca_key,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key.public_key(),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=sans,
    )
    _write_private(paths.serving_key, _key_pem(serving_key))
    paths.serving_cert.write_bytes(_cert_pem(serving))

    admin_cert, admin_key = client_certificate(paths, ADMIN_USER, ADMIN_GROUPS)
    _write_private(paths.admin_key, admin_key)
    paths.admin_cert.write_bytes(admin_cert)

    sa_key = certificates.new_key()
    _write_private(paths.sa_key, _key_pem(sa_key))
    paths.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def write_kubeconfig(
    path: Path,
    *,
    server_url: str,
    ca_pem: bytes,
    cert_pem: bytes,
    key_pem: bytes,
    user: str,
    cluster_name: str = "orca-dev",
) -> Path:
    """Write a self-contained kubeconfig (certificates inlined, mode 0600).

    Inlining the data keeps the file valid when copied elsewhere or when ``DIR/pki`` is
    regenerated for another user.
    """
    context = f"{user}@{cluster_name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {"server": server_url, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    _write_private(path, yaml.safe_dump(config, sort_keys=False).encode("utf-8"))
    return path


def mint_kubeconfig(
    paths: PkiPaths, server_url: str, user: str, groups: Sequence[str], path: Path
) -> Path:
    """Issue a client certificate for ``user``/``groups`` and write a kubeconfig using it."""
    cert, key = client_certificate(paths, user, groups)
    return write_kubeconfig(
        path,
        server_url=server_url,
        ca_pem=paths.ca_cert.read_bytes(),
        cert_pem=cert,
        key_pem=key,
        user=user,
    )
