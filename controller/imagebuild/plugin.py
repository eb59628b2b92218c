"""``kubectl orca`` as a krew plugin, and the checksums of a release (``make release``).

The plugin is the same program as ``orca``, as one executable: a PEX (pex, the PyPA-listed
tool for self-contained Python applications) of exactly the locked wheels (``requirements.lock``,
hashes checked as the image's are) and orca's own wheel, run by the ``python3.11`` it finds on
the machine (the lock's interpreter; its wheels are CPython 3.11's, manylinux x86-64). On
first run it lays out a virtualenv of its own under ``~/.cache/pex``; later runs start from
there. It is packed as krew packs plugins, a ``.tar.gz`` holding the executable and the
LICENSE, and krew's manifest names that archive by its URL and SHA-256: ``kubectl krew
install --manifest=orca.yaml`` downloads it, or takes it from ``--archive=FILE``, checks the
hash and links ``kubectl-orca`` into krew's bin directory (sigs.k8s.io/krew: its manifest
checks are ``internal/index/validation``'s ``ValidatePlugin``).

``SHA256SUMS`` lists every artifact of the release in ``sha256sum``'s format, so ``sha256sum -c
SHA256SUMS`` checks a download.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import subprocess
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from controller.imagebuild import python

#: krew's name for it (``kubectl krew install orca``) and the executable kubectl runs.
PLUGIN = "orca"
BIN = "kubectl-orca"
#: Where a release's files are downloaded from: ``{base}/v{version}/{file}``.
RELEASES = "https://github.com/cloudinit/orca-controller/releases/download"
HOMEPAGE = "https://github.com/cloudinit/orca-controller"
#: The platforms the archive runs on: the lock's wheels are manylinux x86-64 CPython 3.11's.
PLATFORM = {"os": "linux", "arch": "amd64"}
INTERPRETER = "python3.11"


def archive_name(version: str) -> str:
    return f"{BIN}_v{version}_{PLATFORM['os']}_{PLATFORM['arch']}.tar.gz"


def build_executable(wheels: Iterable[Path], out: Path) -> Path:
    """A PEX of ``wheels`` alone (no resolution: they are the lock), running ``kubectl-orca``
    (orca's entry point) in a virtualenv it makes on first run (later starts take what
    ``orca`` takes), with the first ``python3.11`` on PATH.

    The build resolves for this interpreter alone (``--python-path`` its directory): given
    ``--python`` and the constraint, pex resolves once per matching interpreter it finds on
    PATH, and two of the same version (a virtualenv's and pyenv's 3.11.7) ran two ``pip
    download`` runs into one directory at once, one reading a wheel the other was still copying
    (``BadZipFile``, now and then)."""
    command = [
        sys.executable, "-m", "pex", "--intransitive", "--no-pypi",
        "--python-path", str(Path(sys.executable).parent),
        "--interpreter-constraint", "CPython==3.11.*",
        "--entry-point", "controller.cli:main", "--venv", "--sh-boot",
        "--python-shebang", f"/usr/bin/env {INTERPRETER}",
        "-o", str(out), *map(str, wheels),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pex: {' / '.join(done.stderr.strip().splitlines()[-3:])}")
    return out


def pack(files: dict[str, bytes], epoch: int) -> bytes:
    """A ``.tar.gz`` of ``files`` (name: bytes; executables: names without a dot, mode 755),
    the same bytes for the same files: sorted, owned by root, stamped ``epoch``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            info.mtime = epoch
            info.mode = 0o644 if "." in name or name == "LICENSE" else 0o755
            tar.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(buffer.getvalue(), mtime=0)


def krew_manifest(version: str, sha256: str, url: str) -> dict[str, Any]:
    """krew's Plugin manifest for the archive at ``url`` with ``sha256``."""
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": PLUGIN},
        "spec": {
            "version": f"v{version}",
            "homepage": HOMEPAGE,
            "shortDescription": "Plan, explain and rebalance orca Workload placements",
            "description": (
                "orca-controller's command line as a kubectl plugin: plan Workloads onto the\n"
                "cluster's Nodes offline or against the live cluster (kubectl orca plan\n"
                "--from-cluster, --drain, --add-nodes), explain why a Workload is where it\n"
                "is (kubectl orca explain NAME), preview the rebalancer's moves; reads with\n"
                "your kubeconfig, writes nothing.\n"
            ),
            "caveats": (
                f"Runs with {INTERPRETER} from your PATH (CPython 3.11, x86-64 Linux); the\n"
                "first run unpacks it into ~/.cache/pex (a few seconds).\n"
            ),
            "platforms": [
                {
                    "selector": {"matchLabels": dict(PLATFORM)},
                    "uri": url,
                    "sha256": sha256,
                    "bin": BIN,
                    "files": [{"from": BIN, "to": "."}, {"from": "LICENSE", "to": "."}],
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (``|``), as krew's own manifests write them."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def build_plugin(
    source: Path, out: Path, version: str, epoch: int, cache: Path, releases: str = RELEASES
) -> tuple[Path, Path]:
    """The plugin's archive and krew manifest for the tree ``source`` (a commit's), in
    ``out``: ``kubectl-orca_vVERSION_linux_amd64.tar.gz`` and ``krew-orca.yaml``."""
    wheels = python.download_locked(source / "requirements.lock", cache / "wheels")
    wheels.append(
        python.build_own_wheel(source, source / "requirements-build.lock", cache / "own", epoch)
    )
    executable = build_executable(wheels, cache / BIN)
    files = {BIN: executable.read_bytes(), "LICENSE": (source / "LICENSE").read_bytes()}
    archive = out / archive_name(version)
    archive.write_bytes(pack(files, epoch))
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    url = f"{releases}/v{version}/{archive.name}"
    manifest = out / f"krew-{PLUGIN}.yaml"
    header = (
        f"# kubectl-orca {version} for krew: kubectl krew install --manifest={manifest.name}"
        f" [--archive={archive.name}]\n"
    )
    manifest.write_text(
        header + yaml.dump(krew_manifest(version, sha256, url), Dumper=_Dumper, sort_keys=False)
    )
    return archive, manifest


def write_checksums(out: Path, files: Iterable[Path]) -> Path:
    """``out/SHA256SUMS``: ``<sha256>  <name>`` per file, by name (``sha256sum -c`` reads it)."""
    names = sorted((str(path.relative_to(out)), path) for path in files)
    lines = [f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {name}\n" for name, path in names]
    sums = out / "SHA256SUMS"
    sums.write_text("".join(lines))
    return sums
