"""``make image``: the operator's image built here without a container engine or a registry
(``controller.imagebuild``), checked as the tools that consume it see it.

- Reproducible: a second build of the same commit has the same digest, byte for byte.
- Accepted by the tools a user loads it with: ``skopeo`` reads it both as an OCI archive and as
  a docker-archive (the ``manifest.json`` ``docker load`` reads), ``podman load`` loads it.
  ``docker load`` itself needs a daemon, which no machine here has: the docker-archive half is
  checked through skopeo, which implements the same format.
- What runs: user 10001, no pip, setuptools or wheel anywhere, the OCI labels, ``orca`` starting
  as the image's user in the image's root filesystem (a chroot), CEL's cache in place.
- The SBOM names every Debian package and every Python distribution the image holds.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.imagebuild import build as image_build
from controller.imagebuild.build import Built, build
from controller.imagebuild.debian import read_lock
from controller.imagebuild.oci import read_archive
from tests.packaging.dockerfile import REPO_ROOT

pytestmark = pytest.mark.timeout(1200)

CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"  # /usr/sbin: not on the image's PATH


@pytest.fixture(scope="module")
def rootfs(built_image: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The image's layer unpacked (as a runtime unpacks it), for running what it holds."""
    root = tmp_path_factory.mktemp("rootfs")
    root.chmod(0o755)  # the image's "/" (mktemp makes it 0700: the image's user could not enter)
    image = read_archive(built_image.archive.path)
    with tarfile.open(fileobj=io.BytesIO(image["layers"][0])) as tar:
        tar.extractall(root, filter="fully_trusted")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def members(built: Built) -> dict[str, tarfile.TarInfo]:
    layer = read_archive(built.archive.path)["layers"][0]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_two_builds_of_one_commit_are_the_same_bytes(built_image: Built, tmp_path: Path) -> None:
    again = build(tmp_path)
    assert again.archive.digest == built_image.archive.digest
    assert again.archive.path.read_bytes() == built_image.archive.path.read_bytes()
    assert again.sbom.read_bytes() == built_image.sbom.read_bytes()


def test_config_user_entrypoint_and_labels(built_image: Built) -> None:
    image = read_archive(built_image.archive.path)
    config = image["config"]["config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["/opt/orca/bin/orca"]
    assert config["Cmd"] == ["run", "--log-format=json"]
    labels = config["Labels"]
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert labels["org.opencontainers.image.revision"] == head
    assert labels["org.opencontainers.image.version"] == "0.1.0"
    assert labels["org.opencontainers.image.source"]
    assert image["digest"] == built_image.archive.digest


def test_no_packaging_tools_anywhere_and_nothing_owned_by_the_pod_user(built_image: Built) -> None:
    names = members(built_image)
    tools = [n for n in names if n.split("/")[-1].split("-")[0] in ("pip", "setuptools", "wheel")]
    assert tools == []
    assert "usr/share/python-wheels" not in {n.rsplit("/", 1)[0] for n in names}
    assert all(m.uid == 0 and m.gid == 0 for m in names.values())  # read-only to 10001
    assert not [n for n, m in names.items() if m.isfile() and m.mode & 0o022]


def test_orca_runs_as_the_image_user_in_the_image(rootfs: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CHROOT, "--userspec=10001:10001", str(rootfs), *args],
            env={"PATH": "/opt/orca/bin:/usr/bin", "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    version = run("/opt/orca/bin/orca", "version")
    assert version.returncode == 0 and version.stdout.strip() == "orca 0.1.0", version
    # The image holds no control plane: `dev-cluster start` says so in one line, no traceback.
    dev = run("/opt/orca/bin/orca", "dev-cluster", "start", "--dir", "/tmp/x")
    assert dev.returncode == 1 and dev.stderr.count("\n") == 1, dev.stderr
    assert "control-plane binaries missing" in dev.stderr and "hack/testcp" in dev.stderr
    # The CEL parser cache the image ships loads as it is (Lark names its file by version).
    probe = run(
        "/opt/orca/bin/python",
        "-c",
        "from controller.scheduler.celcache import cache_path, shipped_cache_path;"
        "print(cache_path() == shipped_cache_path(), shipped_cache_path().exists())",
    )
    assert probe.stdout.split() == ["True", "True"], probe
    packages = run(
        "/opt/orca/bin/python",
        "-c",
        "import pip",
    )
    assert packages.returncode != 0 and "No module named 'pip'" in packages.stderr


def test_skopeo_reads_it_as_oci_and_as_docker_archive_and_podman_loads_it(
    built_image: Built, tmp_path: Path
) -> None:
    for tool in ("skopeo", "podman"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is needed: bash hack/install-node-tools.sh (as root)")
    archive = built_image.archive.path
    for transport in ("oci-archive", "docker-archive"):
        out = tmp_path / transport
        done = subprocess.run(
            ["skopeo", "copy", "--quiet", f"{transport}:{archive}", f"dir:{out}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["config"]["digest"] == built_image.archive.config_digest
    run = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))  # podman: at most 50 chars
    storage = ["--root", str(tmp_path / "storage"), "--runroot", str(run),
               "--storage-driver", "vfs"]  # fmt: skip
    loaded = subprocess.run(
        ["podman", *storage, "load", "--quiet", "--input", str(archive)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    inspect = subprocess.run(
        ["podman", *storage, "image", "inspect", "orca-controller:0.1.0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert inspect.returncode == 0, inspect.stderr
    (info,) = json.loads(inspect.stdout)
    assert info["Config"]["User"] == "10001:10001"
    assert "sha256:" + info["Id"].removeprefix("sha256:") == built_image.archive.config_digest


def test_sbom_covers_every_debian_package_and_python_distribution(
    built_image: Built, rootfs: Path
) -> None:
    document = json.loads(built_image.sbom.read_text())
    assert document["spdxVersion"] == "SPDX-2.3"
    purls = {
        ref["referenceLocator"]
        for package in document["packages"]
        for ref in package.get("externalRefs", [])
    }
    debs = read_lock(image_build.DEBIAN_LOCK)
    assert {p.name for p in debs} == {
        purl.split("/")[2].split("@")[0] for purl in purls if purl.startswith("pkg:deb/")
    }
    site = rootfs / "opt/orca/lib/python3.11/site-packages"
    installed = set()
    for dist in site.glob("*.dist-info"):
        name, version = dist.name.removesuffix(".dist-info").rsplit("-", 1)
        installed.add(f"pkg:pypi/{name.lower().replace('_', '-')}@{version}")
    assert installed == {p for p in purls if p.startswith("pkg:pypi/")}
    assert os.path.getsize(built_image.sbom) > 1000


def test_the_licence_is_in_the_image_the_wheel_and_the_sbom(
    built_image: Built, rootfs: Path
) -> None:
    """Apache-2.0's text at /licenses/LICENSE (as the Dockerfile's image has it) and in orca's
    wheel (pyproject's ``license-files``, PEP 639), and declared in the SBOM for the image and
    for orca's distribution."""
    text = (REPO_ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in text and b"Version 2.0, January 2004" in text
    assert (rootfs / "licenses" / "LICENSE").read_bytes() == text
    site = rootfs / "opt/orca/lib/python3.11/site-packages"
    (dist,) = site.glob("orca_controller-*.dist-info")
    assert (dist / "licenses" / "LICENSE").read_bytes() == text
    metadata = (dist / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata
    document = json.loads(built_image.sbom.read_text())
    ours = [p for p in document["packages"] if p["name"] == "orca-controller"]
    assert [p["licenseDeclared"] for p in ours] == ["Apache-2.0", "Apache-2.0"]  # image, wheel
