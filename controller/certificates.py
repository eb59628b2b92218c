"""The one certificate authority orca makes for itself, wherever it needs one: the operator's
serving certificate when nothing else provides it (``controller.operator.tls``) and the dev
cluster's PKI (``controller.devcluster.pki``). Both sign with a fresh P-256 key (generated in
milliseconds, where RSA 2048 takes noticeably longer on a small machine; Go's TLS, Python's
``ssl`` and the service-account token signer all accept it) under a self-signed root that may
sign end-entity certificates only (``path_length=0``). The root carries its Subject Key
Identifier, as RFC 5280 (4.2.1.2) asks of a CA and Go's ``x509.CreateCertificate`` adds to one.
What each signs, and for how long, stays with its caller.
"""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def common_name(name: str) -> x509.Name:
    """``CN=name``."""
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def certificate_authority(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
) -> x509.Certificate:
    """A self-signed CA certificate ``CN=name`` for ``key``, valid from ``not_before`` to
    ``not_after``: it signs certificates (and revocation lists), not other CAs."""
    subject = common_name(name)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
