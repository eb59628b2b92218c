"""The image's Python side: the virtualenv ``/opt/orca`` laid out without running the image's
interpreter, and filled from the hashed locks.

The Dockerfile makes the same virtualenv with ``python -m venv --without-pip`` and pip; here
nothing runs inside the image to make it: ``pyvenv.cfg`` and the interpreter links are what
``venv`` writes, and each wheel is unpacked by ``installer`` (the PyPA's reference installer, the
code pip's own installs follow), with console scripts whose ``#!`` names the image's
interpreter. So no pip, setuptools or wheel is ever in the image, not even for a moment.

The wheels: every package of ``requirements.lock`` downloaded with ``pip download
--require-hashes --only-binary=:all:`` (the same options as the Dockerfile's install), and
orca's own wheel built from the commit's tree with the build backend from
``requirements-build.lock``, in a virtualenv of its own that is not the image's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile

VENV = "opt/orca"
PYTHON = "python3.11"
SITE = f"{VENV}/lib/{PYTHON}/site-packages"


@dataclass(frozen=True, order=True)
class Wheel:
    name: str
    version: str
    sha256: str
    path: Path
    #: ``License-Expression`` (core metadata 2.4: an SPDX expression), when the wheel has one.
    license: str | None = None


def download_locked(lock: Path, cache: Path) -> list[Path]:
    """Every wheel ``lock`` pins, checked against its hashes (pip's cache makes re-runs cheap)."""
    cache.mkdir(parents=True, exist_ok=True)
    _run(
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--require-hashes", "--no-deps", "--only-binary=:all:", "--dest", str(cache),
        "-r", str(lock),
    )  # fmt: skip
    pins = {_pin(line) for line in lock.read_text().splitlines()} - {None}
    wheels = [w for w in cache.glob("*.whl") if _pin("==".join(w.name.split("-")[:2])) in pins]
    if len(wheels) != len(pins):
        raise RuntimeError(f"{lock}: {len(pins)} packages pinned, {len(wheels)} wheels found")
    return sorted(wheels)


def build_own_wheel(source: Path, build_lock: Path, work: Path, epoch: int) -> Path:
    """orca's wheel from ``source`` (a tree exported from the commit), built by the locked
    backend in a build-only virtualenv (as the Dockerfile's build stage does)."""
    venv = work / "build-venv"
    if not (venv / "bin" / "python").exists():
        _run(sys.executable, "-m", "venv", str(venv))
        _run(
            str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
            "--require-hashes", "--no-deps", "--only-binary=:all:", "-r", str(build_lock),
        )  # fmt: skip
    out = work / "own-wheel"
    for old in out.glob("*.whl"):
        old.unlink()
    # The wheel's zip entries carry SOURCE_DATE_EPOCH, so the file (whose hash the SBOM
    # records) is the same for the same commit.
    _run(
        str(venv / "bin" / "pip"), "wheel", "--quiet", "--disable-pip-version-check",
        "--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(source),
        env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)},
    )  # fmt: skip
    (wheel,) = out.glob("orca_controller-*.whl")
    return wheel


def make_venv(root: Path, python_version: str) -> None:
    """What ``python3.11 -m venv --without-pip /opt/orca`` writes, with the image's Debian
    interpreter at ``/usr/bin/python3.11`` as its base."""
    venv = root / VENV
    (venv / "bin").mkdir(parents=True)
    (root / SITE).mkdir(parents=True)
    (venv / "lib64").symlink_to("lib")
    (venv / "bin" / "python").symlink_to(f"/usr/bin/{PYTHON}")
    (venv / "bin" / "python3").symlink_to("python")
    (venv / "bin" / PYTHON).symlink_to("python")
    (venv / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {python_version}\n"
        f"executable = /usr/bin/{PYTHON}\n"
        f"command = /usr/bin/{PYTHON} -m venv --without-pip /{VENV}\n"
    )


def install_wheels(root: Path, wheels: list[Path]) -> list[Wheel]:
    """Unpack each wheel into the virtualenv; their names, versions and hashes (the SBOM)."""
    site = root / SITE
    destination = SchemeDictionaryDestination(
        {
            "purelib": str(site),
            "platlib": str(site),
            "headers": str(root / VENV / "include" / "site" / PYTHON),
            "scripts": str(root / VENV / "bin"),
            "data": str(root / VENV),
        },
        interpreter=f"/{VENV}/bin/python",
        script_kind="posix",
        bytecode_optimization_levels=[],  # compiled later by the image's own interpreter
    )
    installed = []
    for path in wheels:
        with WheelFile.open(path) as source:
            install(source, destination, {"INSTALLER": b"orca-image\n"})
            metadata = HeaderParser().parsestr(source.read_dist_info("METADATA"))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        installed.append(
            Wheel(
                metadata["Name"],
                metadata["Version"],
                digest,
                path,
                metadata.get("License-Expression"),
            )
        )
    return sorted(installed)


def _pin(line: str) -> tuple[str, str] | None:
    """``(normalised name, version)`` of a lock line ``name==version \\`` (or a wheel's
    ``name==version`` from its file name); None for other lines."""
    line = line.strip()
    if not line or line.startswith(("#", "-")) or "==" not in line:
        return None
    name, version = line.split("==", 1)
    return _normal(name), version.split()[0].rstrip("\\").strip()


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _run(*args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(args[:3])}...: {' / '.join(tail)}")
