"""``kubectl orca`` as kubectl's users get it: the krew plugin ``make release`` writes
(``controller.imagebuild.plugin``) installed by the real krew (built from the Go module proxy,
hack/krew/build.sh) as ``kubectl krew install --manifest=... --archive=...``, which checks the
manifest (``ValidatePlugin``) and the archive's SHA-256 against it, then run through the real
kubectl; ``kubectl orca`` completing through ``kubectl_complete-orca`` as kubectl's plugin
completion asks it; ``SHA256SUMS`` read back by ``sha256sum -c``."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from packaging.utils import parse_wheel_filename

from controller.devcluster.binaries import find_bin_dir
from controller.imagebuild import plugin
from controller.version import version
from tests.packaging.dockerfile import REPO_ROOT
from tests.packaging.test_lock import pins

# The plugin is a PEX of every locked wheel (the first build downloads them).
pytestmark = pytest.mark.timeout(1200)

VENV_BIN = Path(sys.executable).parent


def krew() -> Path:
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "krew" / "build.sh"), "--print-path"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail("krew is not built: bash hack/krew/build.sh")
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """The plugin's archive and manifest and SHA256SUMS, as ``make release`` writes them."""
    out = tmp_path_factory.mktemp("dist")
    cache = Path(os.environ.get("ORCA_IMAGE_CACHE") or Path.home() / ".cache" / "orca-image")
    archive, manifest = plugin.build_plugin(
        REPO_ROOT, out, version(), int(time.time()), cache / "plugin"
    )
    yield archive, manifest, plugin.write_checksums(out, [archive, manifest])


def _kubectl_env(tmp: Path, *bins: Path) -> dict[str, str]:
    """kubectl, krew as ``kubectl-krew`` and ``bins`` on PATH, krew's root in ``tmp``."""
    tools = tmp / "tools"
    tools.mkdir(exist_ok=True)
    for tool in (find_bin_dir() / "kubectl", krew()):
        link = tools / tool.name
        if not link.exists():
            link.symlink_to(tool)
    path = ":".join(map(str, [tools, *bins, "/usr/bin", "/bin"]))
    return {"PATH": path, "HOME": str(tmp), "KREW_ROOT": str(tmp / "krew")}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=600)


def test_krew_installs_the_released_plugin_and_kubectl_runs_it(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    archive, manifest, _ = released
    document = yaml.safe_load(manifest.read_text())
    (platform,) = document["spec"]["platforms"]
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["uri"].endswith(f"/v{version()}/{archive.name}")
    env = _kubectl_env(tmp_path)
    installed = _run(
        env, "kubectl", "krew", "install", f"--manifest={manifest}", f"--archive={archive}"
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert f"Installed plugin: {plugin.PLUGIN}" in installed.stdout + installed.stderr
    env["PATH"] = f"{tmp_path / 'krew' / 'bin'}:{env['PATH']}"  # as krew tells users to
    listed = _run(env, "kubectl", "plugin", "list")
    assert f"{tmp_path / 'krew' / 'bin' / 'kubectl-orca'}" in listed.stdout, listed.stdout
    ran = _run(env, "kubectl", "orca", "version")
    assert (ran.returncode, ran.stdout.strip()) == (0, f"orca {version()}"), ran.stderr
    usage = _run(env, "kubectl", "orca", "plan", "--help")
    assert usage.stdout.startswith("usage: kubectl orca plan"), usage.stdout[:200]


def test_the_plugin_runs_only_on_the_locks_interpreter(released: tuple[Path, Path, Path]) -> None:
    """The PEX carries the lock's interpreter constraint (its wheels are CPython 3.11's),
    although the build now names only the directory of its interpreter, and every locked
    wheel once, with orca's own."""
    archive, _, _ = released
    with tarfile.open(archive) as tar:
        member = tar.extractfile(plugin.BIN)
        assert member is not None
        executable = io.BytesIO(member.read())
    with zipfile.ZipFile(executable) as pex:
        info = json.loads(pex.read("PEX-INFO"))
    assert info["interpreter_constraints"] == ["CPython==3.11.*"]
    wheels = [parse_wheel_filename(name)[:2] for name in info["distributions"]]
    locked = {name: version for name, (version, _) in pins(REPO_ROOT / "requirements.lock").items()}
    assert {str(name): str(release) for name, release in wheels} == {
        **locked,
        "orca-controller": version(),
    }
    assert len(wheels) == len(locked) + 1


def test_krew_refuses_an_archive_whose_sha256_is_not_the_manifests(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The manifest pins the archive: another file under the same name is refused."""
    archive, manifest, _ = released
    forged = tmp_path / archive.name
    forged.write_bytes(archive.read_bytes() + b"\0")
    env = _kubectl_env(tmp_path)
    refused = _run(
        env, "kubectl", "krew", "install", f"--manifest={manifest}", f"--archive={forged}"
    )
    assert refused.returncode != 0
    assert "checksum does not match" in refused.stderr, refused.stderr


def test_sha256sums_checks_every_artifact(released: tuple[Path, Path, Path]) -> None:
    archive, manifest, sums = released
    names = [line.split("  ", 1)[1] for line in sums.read_text().splitlines()]
    assert names == sorted([archive.name, manifest.name])
    checked = subprocess.run(
        ["sha256sum", "-c", sums.name], cwd=sums.parent, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    archive.write_bytes(archive.read_bytes()[:-1])
    broken = subprocess.run(
        ["sha256sum", "-c", sums.name], cwd=sums.parent, capture_output=True, text=True, check=False
    )
    assert broken.returncode != 0 and f"{archive.name}: FAILED" in broken.stdout


def test_kubectl_completes_kubectl_orca_through_kubectl_complete_orca(tmp_path: Path) -> None:
    """kubectl's plugin completion (k8s.io/kubectl/pkg/cmd/plugin/plugin_completion.go) finds
    ``kubectl_complete-orca`` beside ``kubectl-orca`` on PATH and offers what it answers."""
    assert shutil.which("kubectl_complete-orca", path=str(VENV_BIN))
    env = _kubectl_env(tmp_path, VENV_BIN)
    commands = _run(env, "kubectl", "__complete", "orca", "re")
    assert commands.returncode == 0, commands.stderr
    lines = commands.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines[:-1]] == ["rebalance"]
    assert lines[-1] == ":0"
    formats = _run(env, "kubectl", "__complete", "orca", "explain", "web", "-o", "")
    assert [line.split("\t")[0] for line in formats.stdout.splitlines()[:-1]] == [
        "table",
        "json",
        "yaml",
    ]


def test_sha256sums_lists_the_files_by_name_whatever_their_digests(tmp_path: Path) -> None:
    """Two files whose digests sort the other way round from their names (the lines were
    once sorted whole, so by digest: the order changed with every build's timestamp)."""
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.yaml"
    second.write_text("manifest")
    content = next(
        str(i)
        for i in range(1000)
        if hashlib.sha256(str(i).encode()).hexdigest() > hashlib.sha256(b"manifest").hexdigest()
    )
    first.write_text(content)
    sums = plugin.write_checksums(tmp_path, [second, first])
    assert [line.split("  ", 1)[1] for line in sums.read_text().splitlines()] == [
        "a.tar.gz",
        "b.yaml",
    ]
