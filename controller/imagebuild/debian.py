"""The image's Debian packages: a lock of exact versions and hashes, their download, and their
files laid out as a root filesystem.

No base image is pulled (no registry is reachable from our machines, and a tag moves): the
image is the Python interpreter's own Debian packages (``python3.11-minimal``,
``libpython3.11-stdlib``) and what they depend on, unpacked. ``debian.lock`` lists each with
its version and the SHA-256 of its ``.deb`` as Debian's signed indexes give it; the build
downloads exactly those (``apt-get download NAME=VERSION``) and refuses a file whose hash
differs. Debian's archive keeps only the current version of a suite's packages, so a security
or point release makes the lock stale: the build then says so in one line and
``make image-lock`` writes the new versions (a commit to review, like a Python lock bump).

Maintainer scripts do not run (nothing here runs as root inside the image, and a root
filesystem assembled from ``dpkg-deb`` contents is the same every time): what they would have
made is made by the build (``/etc/passwd``, ``ld.so.cache``, bytecode), and the packages only
needed to run them (dpkg, perl, debconf...) stay out, each with its reason in ``EXCLUDED``.
Debian's merged ``/usr`` is kept: ``/bin``, ``/sbin``, ``/lib`` and ``/lib64`` are links into
``/usr`` and files packaged under them land there.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: What the image needs from Debian: the interpreter and its standard library, the C++ runtime
#: that manylinux wheels take from the system (google-re2's ``_re2``, for CEL), and
#: ``base-files`` (``/etc/os-release``: what image scanners identify the distribution by).
ROOTS = ("python3.11-minimal", "libpython3.11-stdlib", "libstdc++6", "base-files")
#: Packages the roots pull in that the image does without, and why.
EXCLUDED = {
    "dpkg": "runs maintainer scripts; nothing is installed in the image at run time",
    "perl-base": "only maintainer scripts use it",
    "debconf": "only maintainer scripts use it",
    "install-info": "info pages are not shipped",
    "tar": "dpkg's dependency",
    "awk": "base-files' maintainer scripts use it (a virtual package)",
    "mailcap": "mime-support's alternative to media-types; needs perl",
    "mime-support": "media-types provides /etc/mime.types",
}
MERGED_USR = ("bin", "sbin", "lib", "lib64")
#: Never shipped: documentation, manuals, translations (as debian:*-slim's dpkg excludes).
DROPPED = re.compile(r"^usr/share/(doc|man|info|locale|lintian|linda)/")
SUITE = "bookworm"


class DebianError(Exception):
    """A package cannot be had as the lock says: one line, with what to do."""


@dataclass(frozen=True, order=True)
class Package:
    name: str
    version: str
    sha256: str

    @property
    def pin(self) -> str:
        return f"{self.name}={self.version}"


def read_lock(path: Path) -> list[Package]:
    packages = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{64}", parts[2]):
            raise DebianError(f"{path}:{number}: expected 'name version sha256', got {line!r}")
        packages.append(Package(*parts))
    return sorted(packages)


def write_lock(path: Path, packages: Iterable[Package]) -> None:
    lines = [
        f"# The image's Debian packages ({SUITE}, amd64): name, version, SHA-256 of the .deb.",
        "# Written by `make image-lock` (controller/imagebuild/debian.py); the build",
        "# downloads exactly these and checks each hash.",
        *(f"{p.name} {p.version} {p.sha256}" for p in sorted(packages)),
    ]
    path.write_text("\n".join(lines) + "\n")


def _apt(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DebianError(f"{' '.join(args[:2])}: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def resolve(roots: Sequence[str] = ROOTS) -> list[Package]:
    """The roots and their dependencies (Depends and Pre-Depends, first alternative that is a
    real package and not ``EXCLUDED``), at the versions apt would install now."""
    wanted: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo.extend(d for d in _dependencies(name) if d not in wanted)
    return [_candidate(name) for name in sorted(wanted)]


def _dependencies(name: str) -> list[str]:
    out = _apt(
        "apt-cache", "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
        "--no-breaks", "--no-replaces", "--no-enhances", name,
    )  # fmt: skip
    chosen: list[str] = []
    group: list[str] = []
    for line in out.splitlines()[1:]:
        match = re.match(r"\s+(\|?)(Pre)?Depends: (\S+)", line)
        if not match:
            continue
        group.append(match.group(3))
        if match.group(1):  # "|Depends": an alternative follows
            continue
        real = [d for d in group if not d.startswith("<") and d not in EXCLUDED]
        if real:
            chosen.append(real[0])
        elif not any(d.strip("<>") in EXCLUDED for d in group):
            raise DebianError(f"{name}: no installable package for {' | '.join(group)}")
        group = []
    return chosen


def _candidate(name: str) -> Package:
    fields = dict(
        line.split(": ", 1)
        for line in _apt("apt-cache", "show", "--no-all-versions", name).splitlines()
        if ": " in line and not line.startswith(" ")
    )
    return Package(name, fields["Version"], fields["SHA256"])


def download(packages: Iterable[Package], cache: Path) -> dict[Package, Path]:
    """Each package's ``.deb`` in ``cache`` (downloaded when missing), its hash checked."""
    cache.mkdir(parents=True, exist_ok=True)
    packages = list(packages)
    found = {p: _deb_path(cache, p) for p in packages}
    missing = [p for p, path in found.items() if path is None]
    if missing:
        done = subprocess.run(
            ["apt-get", "download", "-q", *(p.pin for p in missing)],
            cwd=cache,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["apt-get download failed"])[-1]
            raise DebianError(
                f"{why} (Debian keeps only a suite's current versions: run 'make image-lock' "
                "and review the new hack/image/debian.lock; after 'apt-get update' if the "
                "package lists are old)"
            )
        found = {p: _deb_path(cache, p) for p in packages}
    result: dict[Package, Path] = {}
    for package, path in found.items():
        if path is None:
            raise DebianError(f"{package.pin}: apt-get download wrote no .deb")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != package.sha256:
            path.unlink()
            raise DebianError(f"{path.name}: SHA-256 {digest}, the lock says {package.sha256}")
        result[package] = path
    return result


def _deb_path(cache: Path, package: Package) -> Path | None:
    version = package.version.replace(":", "%3a")
    matches = sorted(cache.glob(f"{package.name}_{version}_*.deb"))
    return matches[0] if matches else None


def unpack(debs: Iterable[Path], root: Path) -> None:
    """Each package's files under ``root``, merged-``/usr`` style, without docs or manuals."""
    for directory in MERGED_USR:
        (root / "usr" / directory).mkdir(parents=True, exist_ok=True)
        (root / directory).symlink_to(f"usr/{directory}")
    for deb in sorted(debs):
        data = subprocess.run(
            ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True
        ).stdout
        _extract(data, root)


def _extract(data: bytes, root: Path) -> None:
    import io

    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("./").rstrip("/")
            if not name:
                continue
            if DROPPED.match(name + "/") and not _is_copyright(name):
                continue  # (the copyright files stay: the licences travel with the image)
            top, _, rest = name.partition("/")
            if top in MERGED_USR:
                if not rest:
                    continue  # the link made by ``unpack`` stands for the directory
                name = f"usr/{top}/{rest}"
            target = root / name
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(member.mode)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            if member.issym():
                target.symlink_to(member.linkname)
            elif member.islnk():
                source = member.linkname.removeprefix("./")
                shutil.copy2(root / _merged(source), target)
            elif member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                target.write_bytes(extracted.read())
                target.chmod(member.mode)
            # device files and FIFOs: none in these packages


def _is_copyright(name: str) -> bool:
    return name.startswith("usr/share/doc/") and name.endswith("/copyright")


def _merged(name: str) -> str:
    top, _, rest = name.partition("/")
    return f"usr/{top}/{rest}" if top in MERGED_USR and rest else name
