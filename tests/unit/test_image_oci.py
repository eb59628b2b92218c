"""The OCI archive writer, the Debian lock and the SBOM of ``make image``
(``controller.imagebuild``): the parts whose bytes the image's digest depends on."""

from __future__ import annotations

import gzip
import json
import os
import tarfile
from pathlib import Path

import pytest

from controller.imagebuild import oci
from controller.imagebuild.debian import DebianError, Package, read_lock, write_lock
from controller.imagebuild.python import Wheel
from controller.imagebuild.sbom import spdx

EPOCH = 1_700_000_000


def tree(root: Path, mtime: float) -> Path:
    (root / "opt" / "app").mkdir(parents=True)
    (root / "opt" / "app" / "run").write_text("#!/bin/sh\n")
    (root / "opt" / "app" / "run").chmod(0o755)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/:/bin/false\n")
    (root / "bin").symlink_to("usr/bin")
    for path in [*root.rglob("*")]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return root


def test_a_layer_depends_on_content_not_on_mtimes_after_the_epoch_or_walk_order(
    tmp_path: Path,
) -> None:
    a = oci.layer_from_directory(tree(tmp_path / "a", EPOCH + 5000), EPOCH)
    b = oci.layer_from_directory(tree(tmp_path / "b", EPOCH + 99), EPOCH)
    assert a == b
    with tarfile.open(fileobj=__import__("io").BytesIO(gzip.decompress(a.blob))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert {m.mtime for m in members} == {EPOCH}
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert a.diff_id == oci.sha256(gzip.decompress(a.blob))


def test_older_files_keep_their_time_and_content_changes_the_digest(tmp_path: Path) -> None:
    old = oci.layer_from_directory(tree(tmp_path / "a", EPOCH - 10), EPOCH)
    root = tree(tmp_path / "b", EPOCH - 10)
    (root / "etc" / "passwd").write_text("root:x:0:0::/:/bin/true\n")
    os.utime(root / "etc" / "passwd", (EPOCH - 10, EPOCH - 10))
    assert oci.layer_from_directory(root, EPOCH).diff_id != old.diff_id


def test_an_archive_is_an_oci_layout_and_a_docker_archive_naming_the_same_blobs(
    tmp_path: Path,
) -> None:
    layer = oci.layer_from_directory(tree(tmp_path / "root", EPOCH), EPOCH)
    config = {"User": "10001:10001", "Labels": {"org.opencontainers.image.version": "1"}}
    archive = oci.write_archive(tmp_path / "x.tar", [layer], config, "orca-controller:1", EPOCH)
    again = oci.write_archive(tmp_path / "y.tar", [layer], config, "orca-controller:1", EPOCH)
    assert archive.path.read_bytes() == again.path.read_bytes()
    with tarfile.open(archive.path) as tar:
        names = tar.getnames()
        docker = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        layout = json.loads(tar.extractfile("oci-layout").read())  # type: ignore[union-attr]
    assert layout == {"imageLayoutVersion": "1.0.0"}
    assert docker[0]["RepoTags"] == ["orca-controller:1"]
    assert all(path in names for path in [docker[0]["Config"], *docker[0]["Layers"]])
    image = oci.read_archive(archive.path)
    assert image["digest"] == archive.digest
    assert image["config"]["config"] == config
    assert image["config"]["rootfs"]["diff_ids"] == [layer.diff_id]
    assert image["manifest"]["annotations"] == {"org.opencontainers.image.version": "1"}
    assert oci.references(archive.path) == [("docker.io/library/orca-controller:1", archive.digest)]


@pytest.mark.parametrize(
    ("reference", "stored"),
    [
        ("orca-controller:1", "docker.io/library/orca-controller:1"),
        ("team/orca:1", "docker.io/team/orca:1"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
        ("localhost/orca:1", "localhost/orca:1"),
        ("127.0.0.1:5000/orca:1", "127.0.0.1:5000/orca:1"),
    ],
)
def test_names_are_stored_as_containerd_and_docker_normalise_them(
    reference: str, stored: str
) -> None:
    assert oci._full_name(reference) == stored


def test_the_debian_lock_round_trips_and_a_bad_line_is_one_error(tmp_path: Path) -> None:
    packages = [Package("zlib1g", "1:1.2.13.dfsg-1", "a" * 64), Package("libc6", "2.36", "b" * 64)]
    lock = tmp_path / "debian.lock"
    write_lock(lock, packages)
    assert read_lock(lock) == sorted(packages)
    lock.write_text("libc6 2.36\n")
    with pytest.raises(DebianError, match=r"debian.lock:1: expected 'name version sha256'"):
        read_lock(lock)


def test_the_sbom_names_each_package_by_purl_with_its_file_hash() -> None:
    document = spdx(
        "orca-controller",
        "0.1.0",
        "sha256:" + "c" * 64,
        EPOCH,
        [Package("libcrypt1", "1:4.4.33-2", "a" * 64)],
        [Wheel("PyYAML", "6.0.2", "b" * 64, Path("x.whl"))],
    )
    refs = {
        p["name"]: (p["externalRefs"][0]["referenceLocator"], p["checksums"][0]["checksumValue"])
        for p in document["packages"]
    }
    assert refs["libcrypt1"] == (
        "pkg:deb/debian/libcrypt1@1%3A4.4.33-2?arch=amd64&distro=debian-12",
        "a" * 64,
    )
    assert refs["PyYAML"] == ("pkg:pypi/pyyaml@6.0.2", "b" * 64)
    assert document["creationInfo"]["created"] == "2023-11-14T22:13:20Z"
    contains = [r for r in document["relationships"] if r["relationshipType"] == "CONTAINS"]
    assert len(contains) == 2


def test_the_sbom_declares_the_licences_it_can_read() -> None:
    """The image's own licence; a wheel's ``License-Expression`` (SPDX already); nothing
    asserted where nothing was read (a Debian package, a wheel without the field)."""
    document = spdx(
        "orca-controller",
        "0.1.0",
        "sha256:" + "c" * 64,
        EPOCH,
        [Package("libcrypt1", "1:4.4.33-2", "a" * 64)],
        [
            Wheel("orca-controller", "0.1.0", "b" * 64, Path("o.whl"), "Apache-2.0"),
            Wheel("PyYAML", "6.0.2", "d" * 64, Path("y.whl")),
        ],
        "Apache-2.0",
    )
    declared = {p["name"]: p["licenseDeclared"] for p in document["packages"]}
    assert declared == {
        "orca-controller": "Apache-2.0",  # the image (its SPDXID says so) and the wheel
        "libcrypt1": "NOASSERTION",
        "PyYAML": "NOASSERTION",
    }
    image = next(p for p in document["packages"] if p.get("primaryPackagePurpose") == "CONTAINER")
    assert image["licenseDeclared"] == "Apache-2.0"
