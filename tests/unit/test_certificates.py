"""The one CA builder (``controller.certificates``) and its two users: the operator's generated
serving certificate (``operator.tls``) and the dev cluster's PKI (``devcluster.pki``)."""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from controller import certificates
from controller.devcluster import pki
from controller.operator import tls


def _extensions(cert: x509.Certificate) -> dict[type[x509.ExtensionType], bool]:
    return {type(e.value): e.critical for e in cert.extensions}


CA_EXTENSIONS = {
    x509.BasicConstraints: True,
    x509.KeyUsage: True,
    x509.SubjectKeyIdentifier: False,
}


def test_a_ca_signs_end_entities_only_and_names_its_key() -> None:
    key = certificates.new_key()
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    ca = certificates.certificate_authority("test-ca", key, start, start + datetime.timedelta(1))
    assert ca.subject == ca.issuer == certificates.common_name("test-ca")
    assert ca.not_valid_before_utc == start
    assert ca.not_valid_after_utc == start + datetime.timedelta(1)
    assert _extensions(ca) == CA_EXTENSIONS
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca and constraints.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign and usage.digital_signature
    assert not usage.key_encipherment
    ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    ca.verify_directly_issued_by(ca)  # self-signed


def test_the_operator_and_the_dev_cluster_make_their_ca_the_same_way(tmp_path: Path) -> None:
    operator_ca = x509.load_pem_x509_certificate(tls.generate(["orca.example"]).ca)
    paths = pki.PkiPaths(tmp_path)
    pki.generate(paths)
    cluster_ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    for ca, name in ((operator_ca, "orca-controller-ca"), (cluster_ca, "orca-devcluster-ca")):
        assert ca.subject == certificates.common_name(name)
        assert _extensions(ca) == CA_EXTENSIONS
    serving = x509.load_pem_x509_certificate(tls.generate(["orca.example"]).cert)
    assert serving.issuer == operator_ca.subject
