"""``make image``: the operator's image, built without a container engine or a registry.

    python -m controller.imagebuild build [--out dist] [--ref orca-controller:VERSION]
    python -m controller.imagebuild lock        # rewrite hack/image/debian.lock
    python -m controller.imagebuild release --repository R --kubectl K --helm H   # make release

From the commit checked out (``git archive HEAD``: uncommitted changes are not in the image),
the Debian packages of ``hack/image/debian.lock`` and the Python lock, it lays out a root
filesystem (``debian.unpack``, ``python.make_venv``/``install_wheels``), lets the image's own
interpreter compile its bytecode and CEL's parser cache inside it (``chroot``: needs root, as
CI has), and writes ``dist/orca-controller-VERSION.oci.tar`` (``oci.write_archive``) and its
SBOM (``dist/orca-controller-VERSION.spdx.json``), then prints the image's digest.

The same commit gives the same digest: every time stamp is the commit's
(``SOURCE_DATE_EPOCH``), the archive's entries are sorted and owned by root, bytecode is
hash-based (``unchecked-hash``: no source mtime inside), and hash seeds are fixed.

What the image holds is what the Dockerfile's image holds (tests/packaging compares them): the
virtualenv ``/opt/orca`` with exactly the locked packages and orca, ``/opt/orca/share/orca``
with CEL's analysed parser, user and group 10001, ``ENTRYPOINT ["/opt/orca/bin/orca"]``,
``CMD ["run", "--log-format=json"]``; the interpreter is Debian's ``python3.11`` (the
Dockerfile's base image builds CPython 3.11 from source into ``/usr/local``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from controller.imagebuild import debian, oci, plugin, python, sbom

REPO = Path(__file__).resolve().parents[2]
DEBIAN_LOCK = REPO / "hack" / "image" / "debian.lock"
IMAGE_NAME = "orca-controller"
#: orca's licence, an SPDX expression (pyproject.toml's ``license``, the LICENSE file's).
LICENSE = "Apache-2.0"
UID = 10001
CACHE_ENV = "ORCA_IMAGE_CACHE"
ENTRYPOINT = ["/opt/orca/bin/orca"]
CMD = ["run", "--log-format=json"]
ENV = [
    "PATH=/opt/orca/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
]
HEALTHCHECK = {
    "Test": [
        "CMD",
        "/opt/orca/bin/python",
        "-c",
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)",
    ],
    "Interval": 30_000_000_000,
    "Timeout": 5_000_000_000,
    "StartPeriod": 30_000_000_000,
}


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "orca-image")


@dataclass(frozen=True)
class Built:
    archive: oci.Archive
    sbom: Path
    reference: str
    seconds: float


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def _version(source: Path) -> str:
    import tomllib

    with (source / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def labels(version: str, revision: str, epoch: int) -> dict[str, str]:
    source = os.environ.get("IMAGE_SOURCE") or _origin()
    return {
        "org.opencontainers.image.title": IMAGE_NAME,
        "org.opencontainers.image.description": (
            "Runtime-aware workload placement controller for Kubernetes"
        ),
        "org.opencontainers.image.licenses": LICENSE,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.source": source,
        "org.opencontainers.image.created": oci._rfc3339(epoch),
    }


def _origin() -> str:
    try:
        return _git("config", "--get", "remote.origin.url") or "unknown"
    except subprocess.CalledProcessError:
        return "unknown (no git remote: set IMAGE_SOURCE)"


def build(out: Path, reference: str | None = None, commit: str = "HEAD") -> Built:
    """Build the image of ``commit`` into ``out`` (module docstring)."""
    started = time.monotonic()
    revision = _git("rev-parse", commit)
    epoch = int(_git("log", "-1", "--format=%ct", revision))
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        work = Path(tmp)
        source = work / "src"
        source.mkdir()
        archive = subprocess.run(
            ["git", "archive", revision], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
        version = _version(source)
        reference = reference or f"{IMAGE_NAME}:{version}"
        packages = debian.read_lock(source / "hack" / "image" / "debian.lock")
        debs = debian.download(packages, cache / "debs")
        root = work / "rootfs"
        root.mkdir()
        debian.unpack(debs.values(), root)
        interpreter = next(p for p in packages if p.name == "python3.11-minimal")
        python.make_venv(root, interpreter.version.split("-", 1)[0].split(":")[-1])
        wheels = python.download_locked(source / "requirements.lock", cache / "wheels")
        wheels.append(
            python.build_own_wheel(source, source / "requirements-build.lock", cache / "own", epoch)
        )
        installed = python.install_wheels(root, wheels)
        _system_files(root)
        _licenses(source, root)
        _inside(root, epoch)
        layer = oci.layer_from_directory(root, epoch)
        config = {
            "User": f"{UID}:{UID}",
            "Entrypoint": ENTRYPOINT,
            "Cmd": CMD,
            "Env": ENV,
            "WorkingDir": "/",
            "ExposedPorts": {"8080/tcp": {}, "9090/tcp": {}},
            "Labels": labels(version, revision, epoch),
            "Healthcheck": HEALTHCHECK,
        }
        name = f"{IMAGE_NAME}-{version}"
        written = oci.write_archive(out / f"{name}.oci.tar", [layer], config, reference, epoch)
        document = sbom.spdx(
            IMAGE_NAME, version, written.digest, epoch, packages, installed, LICENSE
        )
        sbom_path = out / f"{name}.spdx.json"
        sbom_path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        _make_deletable(root)
    return Built(written, sbom_path, reference, time.monotonic() - started)


def _licenses(source: Path, root: Path) -> None:
    """orca's licence at ``/licenses/LICENSE``, where the Dockerfile's image has it too (and
    where Red Hat's container certification looks); every installed distribution also keeps
    its own in its ``.dist-info``, and the SBOM declares each one it can read."""
    licenses = root / "licenses"
    licenses.mkdir()
    shutil.copyfile(source / "LICENSE", licenses / "LICENSE")
    (licenses / "LICENSE").chmod(0o644)


def _system_files(root: Path) -> None:
    """What base-passwd's and the Dockerfile's ``useradd`` make: root, nobody and orca (10001,
    no home, no shell); a world-writable ``/tmp`` (the Pod mounts an emptyDir there)."""
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        f"orca:x:{UID}:{UID}::/nonexistent:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nnogroup:x:65534:\norca:x:{UID}:\n")
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)
    for path in (etc / "passwd", etc / "group"):
        path.chmod(0o644)


#: ``compileall`` with ``--invalidation-mode unchecked-hash``, minus its imports: marshal marks
#: an object shared when its reference count is above one, so compiling a module that the
#: compiling process has itself imported (compileall imports argparse, enum, functools...)
#: gives bytes that depend on that process's state. This imports nothing but the interpreter's
#: frozen modules, whose objects are static.
COMPILE = """
import sys, os, _imp, _frozen_importlib_external as b
for top in sys.argv[1:]:
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith('.py'):
                continue
            path = os.path.join(d, f)
            with open(path, 'rb') as fh:
                data = fh.read()
            try:
                code = compile(data, path, 'exec', dont_inherit=True)
            except (SyntaxError, ValueError):
                continue
            pyc = b.cache_from_source(path)
            os.makedirs(os.path.dirname(pyc), exist_ok=True)
            digest = _imp.source_hash(b._RAW_MAGIC_NUMBER, data)
            with open(pyc, 'wb') as fh:
                fh.write(b._code_to_hash_pyc(code, digest, False))
"""


def _inside(root: Path, epoch: int) -> None:
    """Run the image's interpreter in the image (chroot): hash-based bytecode for the standard
    library and the virtualenv, and CEL's parser cache, as its own Python version names it."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "SOURCE_DATE_EPOCH": str(epoch),
        "HOME": "/nonexistent",
    }
    compile_all = [
        "/opt/orca/bin/python", "-I", "-S", "-B", "-c", COMPILE,
        "/usr/lib/python3.11", f"/{python.SITE}",
    ]  # fmt: skip
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    # Without address-space randomisation: Lark orders some of its LALR states by id() (object
    # addresses), and marshal marks shared objects by reference counts that follow the same
    # allocation pattern; with the addresses the same every run, so are the bytes.
    fixed = ["setarch", "x86_64", "--addr-no-randomize", chroot, str(root)]
    for command in (compile_all, ["/opt/orca/bin/python", "-m", "controller.scheduler.celcache"]):
        done = subprocess.run(
            [*fixed, *command], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            tail = " / ".join(done.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"in the image: {' '.join(command[2:4])}: {tail}")


def _make_deletable(root: Path) -> None:
    for directory, _, _ in os.walk(root):
        os.chmod(directory, 0o755)


def release(
    out: Path, repository: str, kubectl: Path, helm: Path, releases: str = plugin.RELEASES
) -> list[Path]:
    """``make release``: the image archive and its SBOM, ``install.yaml`` (``kubectl
    kustomize manifests/default`` with the image set to ``repository@<digest>``, one file to
    ``kubectl apply -f``), the chart packaged (``helm package``), ``kubectl orca`` as a krew
    plugin (its archive and manifest, ``plugin``), and ``SHA256SUMS`` of all of them."""
    built = build(out, f"{repository}:{_version(REPO)}")
    with tempfile.TemporaryDirectory() as tmp:
        overlay = Path(tmp)
        base = os.path.relpath(REPO / "manifests" / "default", overlay)
        (overlay / "kustomization.yaml").write_text(
            json.dumps(
                {
                    "resources": [base],
                    "images": [
                        {
                            "name": IMAGE_NAME,
                            "newName": repository,
                            "digest": built.archive.digest,
                        }
                    ],
                }
            )
        )
        rendered = subprocess.run(
            [str(kubectl), "kustomize", str(overlay)], capture_output=True, text=True, check=True
        ).stdout
    install = out / "install.yaml"
    install.write_text(
        f"# orca-controller {_version(REPO)}: kubectl apply -f install.yaml\n"
        f"# image {repository}@{built.archive.digest}\n" + rendered
    )
    packaged = subprocess.run(
        [str(helm), "package", str(REPO / "charts" / IMAGE_NAME), "--destination", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    chart = Path(packaged.rsplit(": ", 1)[-1])
    epoch = int(_git("log", "-1", "--format=%ct", "HEAD"))
    archive, manifest = plugin.build_plugin(
        REPO, out, _version(REPO), epoch, cache_dir() / "plugin", releases
    )
    artifacts = [built.archive.path, built.sbom, install, chart, archive, manifest]
    return [*artifacts, plugin.write_checksums(out, artifacts)]


def lock(path: Path = DEBIAN_LOCK) -> list[debian.Package]:
    """Resolve the roots at the versions apt offers now and write the lock."""
    packages = debian.resolve()
    debian.write_lock(path, packages)
    return packages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.imagebuild")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the image archive and its SBOM")
    b.add_argument("--out", type=Path, default=REPO / "dist")
    b.add_argument("--ref", help=f"name:tag (default: {IMAGE_NAME}:<version>)")
    b.add_argument("--commit", default="HEAD")
    sub.add_parser("lock", help=f"rewrite {DEBIAN_LOCK.relative_to(REPO)}")
    r = sub.add_parser("release", help="image, SBOM, install.yaml and the chart package")
    r.add_argument("--out", type=Path, default=REPO / "dist")
    r.add_argument("--repository", default=IMAGE_NAME, help="where the image will be pushed")
    r.add_argument("--kubectl", type=Path, required=True)
    r.add_argument("--helm", type=Path, required=True)
    r.add_argument(
        "--releases",
        default=plugin.RELEASES,
        help="where the release's files are downloaded from (the krew manifest's URL): "
        "BASE/vVERSION/FILE (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            packages = lock()
            print(f"{len(packages)} packages written to {DEBIAN_LOCK.relative_to(REPO)}")
            return 0
        if os.geteuid() != 0 or not shutil.which("chroot"):
            print("error: make image needs root (chroot into the image)", file=sys.stderr)
            return 2
        if args.command == "release":
            for path in release(args.out, args.repository, args.kubectl, args.helm, args.releases):
                print(path)
            return 0
        built = build(args.out, args.ref, args.commit)
    except (debian.DebianError, RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())[:400]}", file=sys.stderr)
        return 1
    a = built.archive
    print(f"{a.path} ({a.size / 2**20:.1f} MiB, {built.seconds:.0f} s)")
    print(f"{built.sbom}")
    print(f"{built.reference}@{a.digest}")
    return 0
