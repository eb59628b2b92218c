"""The image's software bill of materials, SPDX 2.3 JSON: every Debian package and every
Python distribution in it, each with its version, the SHA-256 of the file it came from (the
``.deb``, the wheel) and a package URL (purl) that scanners (Trivy, Grype, Dependency-Track)
match against advisories. Written beside the archive, not inside the image (the document names
the image's digest, which a file inside it cannot).

Deterministic: its namespace and creation time come from the image digest and
``SOURCE_DATE_EPOCH``, packages are sorted.
"""

from __future__ import annotations

import datetime
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

from controller.imagebuild.debian import Package
from controller.imagebuild.python import Wheel

NAMESPACE = "https://orca.cloudinit.dev/spdx"


def _id(kind: str, name: str) -> str:
    return f"SPDXRef-{kind}-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


def spdx(
    image: str,
    version: str,
    digest: str,
    epoch: int,
    debian: Iterable[Package],
    python: Iterable[Wheel],
    license: str = "NOASSERTION",
    suite_version: str = "12",
) -> dict[str, Any]:
    """The SPDX document for ``image:version`` with manifest ``digest``; ``license`` is the
    image's own (orca's). A Python distribution's licence is declared as its wheel's
    ``License-Expression`` says (SPDX already); without one, and for Debian's packages (whose
    ``copyright`` files are free text), ``NOASSERTION``, as SPDX asks when nothing was
    determined."""
    root = _id("image", image)
    created = datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    packages: list[dict[str, Any]] = [
        {
            "SPDXID": root,
            "name": image,
            "versionInfo": version,
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "primaryPackagePurpose": "CONTAINER",
            "licenseDeclared": license,
            "checksums": [{"algorithm": "SHA256", "checksumValue": digest.split(":", 1)[1]}],
            "externalRefs": [_purl(f"pkg:oci/{image}@{urllib.parse.quote(digest)}")],
        }
    ]
    for deb in sorted(debian):
        ver = urllib.parse.quote(deb.version, safe="")
        purl = f"pkg:deb/debian/{deb.name}@{ver}?arch=amd64&distro=debian-{suite_version}"
        packages.append(_package(_id("deb", deb.name), deb.name, deb.version, deb.sha256, purl))
    for wheel in sorted(python):
        name = re.sub(r"[-_.]+", "-", wheel.name).lower()
        purl = f"pkg:pypi/{name}@{wheel.version}"
        packages.append(
            _package(
                _id("pypi", name),
                wheel.name,
                wheel.version,
                wheel.sha256,
                purl,
                wheel.license or "NOASSERTION",
            )
        )
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{image}-{version}",
        "documentNamespace": f"{NAMESPACE}/{image}/{digest}",
        "creationInfo": {"created": created, "creators": ["Tool: orca-image-build"]},
        "packages": packages,
        "relationships": [
            {
                "spdxElementId": "SPDXRef-DOCUMENT",
                "relationshipType": "DESCRIBES",
                "relatedSpdxElement": root,
            },
            *(
                {"spdxElementId": root, "relationshipType": "CONTAINS", "relatedSpdxElement": p}
                for p in (q["SPDXID"] for q in packages[1:])
            ),
        ],
    }


def _package(
    spdx_id: str, name: str, version: str, sha256: str, purl: str, declared: str = "NOASSERTION"
) -> dict[str, Any]:
    return {
        "SPDXID": spdx_id,
        "name": name,
        "versionInfo": version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": declared,
        "copyrightText": "NOASSERTION",
        "checksums": [{"algorithm": "SHA256", "checksumValue": sha256}],
        "externalRefs": [_purl(purl)],
    }


def _purl(locator: str) -> dict[str, str]:
    return {
        "referenceCategory": "PACKAGE-MANAGER",
        "referenceType": "purl",
        "referenceLocator": locator,
    }
