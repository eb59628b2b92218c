"""The size of the image ``make image`` builds, beside an estimate of the Dockerfile's.

No engine here can build the Dockerfile, and no registry can be asked for
``python:3.11.14-slim-bookworm``'s size, so the Dockerfile's image is estimated from its parts,
each rebuilt the way its maker builds it:

1. debian:bookworm-slim: ``mmdebstrap --variant=minbase`` (docker-debian-artifacts builds the
   slim images from the minbase variant) with the slim images' dpkg excludes (docs, manuals,
   locales), plus what python:3.11-slim's Dockerfile installs with apt: ca-certificates,
   netbase, tzdata and the interpreter's shared libraries;
2. python.org's CPython 3.11 in ``/usr/local`` as python:slim leaves it: this machine's CPython
   3.11 prefix (a ``make install`` of the same version line) without the test suites, ``*.pyc``
   and ``libpython*.a`` (the image's Dockerfile deletes them); pip, setuptools and wheel, which
   the orca Dockerfile uninstalls, left out;
   (the one difference: this machine's interpreter, 3.11.7, beside the image's 3.11.14);
3. the virtualenv ``/opt/orca``: the same locked packages as make image's, so its size is taken
   from the built image.

Uncompressed sizes (what a node stores); the archive's gzip size for make image. Needs root
and Debian's package lists (mmdebstrap); prints one line per figure.

    sudo .venv/bin/python bench/image_size.py [ARCHIVE]
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, record
from controller.imagebuild.build import build
from controller.imagebuild.oci import read_archive

SLIM_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/info/*",
    "/usr/share/locale/*",
    "/usr/share/lintian/*",
)
PYTHON_SLIM_APT = (
    "ca-certificates,netbase,tzdata,libbz2-1.0,libexpat1,libffi8,liblzma5,libncursesw6,"
    "libreadline8,libsqlite3-0,libssl3,libtinfo6,libuuid1,zlib1g,libgdbm6,libdb5.3,libnsl2,"
    "libtirpc3"
)


#: What CPython's ``make install`` puts in ``bin/``.
CPYTHON_SCRIPTS = ("python", "pydoc", "idle", "2to3")


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def tar_payload(data: bytes) -> int:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return sum(m.size for m in tar.getmembers() if m.isfile())


def cpython_size(prefix: Path, work: Path) -> int:
    """This machine's CPython prefix as python:slim leaves ``/usr/local``: without the test
    suites, bytecode, ``libpython*.a``, site-packages (pip, setuptools and wheel there, which
    the Dockerfile uninstalls) and ``share``; binaries stripped (its build links with
    ``-Wl,--strip-all``)."""
    stdlib = f"lib/python{sys.version_info.major}.{sys.version_info.minor}"
    copy = work / "usr-local"
    excludes = [f"--exclude={p}" for p in (f"{stdlib}/site-packages", "*/test", "*/tests",
                "*/idle_test", "*.pyc", "*.pyo", "libpython*.a", "lib/pkgconfig")]  # fmt: skip
    scripts = [p.name for p in (prefix / "bin").iterdir() if p.name.startswith(CPYTHON_SCRIPTS)]
    copy.mkdir()
    packed = subprocess.run(
        ["tar", "-cf", "-", *excludes, "-C", str(prefix), "include", "lib",
         *(f"bin/{name}" for name in scripts)],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-xf", "-", "-C", str(copy)], input=packed, check=True)
    for path in copy.rglob("*"):
        if path.is_file() and not path.is_symlink() and (".so" in path.name or "bin" in path.parts):
            subprocess.run(["strip", "--strip-all", str(path)], capture_output=True, check=False)
    return sum(p.stat().st_size for p in copy.rglob("*") if p.is_file() and not p.is_symlink())


def slim_base(work: Path) -> int:
    out = work / "slim.tar"
    excludes = [f"--dpkgopt=path-exclude={p}" for p in SLIM_EXCLUDES]
    subprocess.run(
        ["mmdebstrap", "--quiet", "--mode=root", "--variant=minbase", *excludes,
         f"--include={PYTHON_SLIM_APT}", "bookworm", str(out)],
        check=True,
    )  # fmt: skip
    return tar_payload(out.read_bytes())


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        given = len(sys.argv) > 1
        archive = Path(sys.argv[1]) if given else build(work / "dist").archive.path
        image = read_archive(archive)
        layer = image["layers"][0]
        ours = tar_payload(layer)
        with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
            venv = sum(m.size for m in tar.getmembers() if m.isfile() and m.name.startswith("opt/"))
        prefix = Path(sysconfig.get_config_var("prefix"))
        python = cpython_size(prefix, work)
        base = slim_base(work)
        print(f"make image: {mib(ours)} uncompressed, {mib(archive.stat().st_size)} archive "
              f"(the virtualenv /opt/orca {mib(venv)})")  # fmt: skip
        print(f"Dockerfile (estimate): {mib(base + python + venv)} = bookworm-slim with "
              f"python:slim's apt packages {mib(base)} + CPython in /usr/local {mib(python)} "
              f"(from {prefix}) + the same virtualenv {mib(venv)}")  # fmt: skip
        figures = {
            "make image": {
                "uncompressed_mib": ours / 2**20,
                "archive_mib": archive.stat().st_size / 2**20,
                "the virtualenv /opt/orca_mib": venv / 2**20,
            },
            "Dockerfile (estimate)": {
                "uncompressed_mib": (base + python + venv) / 2**20,
                "bookworm-slim with python:slim's apt packages_mib": base / 2**20,
                "CPython in /usr/local_mib": python / 2**20,
                "the same virtualenv_mib": venv / 2**20,
            },
        }
        record("image_size", figures, command_line())
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
