"""OCI image archives written byte for byte the same from the same inputs.

An image is a list of layers (tar archives of a root filesystem's changes), a config (user,
entrypoint, environment, labels, the layers' uncompressed digests) and a manifest naming both;
an *archive* is those blobs in an OCI image layout (``oci-layout``, ``index.json``,
``blobs/sha256/...``) packed into one tar. This one is also a docker-archive: a
``manifest.json`` beside them names the same blobs, as ``docker save`` has written since
Docker 25, so ``docker load``, ``podman load``, ``skopeo copy oci-archive:...`` and
``ctr images import`` all read the same file.

Reproducible (https://reproducible-builds.org/docs/archives/): entries sorted by name,
owner ``0:0`` with no user or group names, every mtime clamped to ``SOURCE_DATE_EPOCH``, no
PAX headers that carry times, gzip with no name and a zero timestamp, JSON with sorted keys.
Nothing here reads the clock or the machine's users.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def json_bytes(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces (the bytes are what gets digested)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Layer:
    """A gzipped layer and the digest of its uncompressed tar (the config's ``diff_ids``)."""

    blob: bytes
    diff_id: str

    @property
    def digest(self) -> str:
        return sha256(self.blob)


def _tarinfo(path: Path, name: str, epoch: int) -> tarfile.TarInfo:
    info = os.lstat(path)
    entry = tarfile.TarInfo(name)
    entry.mode = stat.S_IMODE(info.st_mode)
    entry.mtime = min(int(info.st_mtime), epoch)
    entry.uid = entry.gid = 0
    entry.uname = entry.gname = ""
    if stat.S_ISLNK(info.st_mode):
        entry.type = tarfile.SYMTYPE
        entry.linkname = os.readlink(path)
    elif stat.S_ISDIR(info.st_mode):
        entry.type = tarfile.DIRTYPE
    elif stat.S_ISREG(info.st_mode):
        entry.size = info.st_size
    else:
        raise ValueError(f"{path}: only files, directories and symlinks go into a layer")
    return entry


def layer_from_directory(root: Path, epoch: int, owners: Mapping[str, int] | None = None) -> Layer:
    """The tree under ``root`` as one layer: every entry sorted by path, owned by root unless
    ``owners`` maps its path (``opt/orca/x``) to a uid (= gid), mtimes clamped to ``epoch``.
    Hard links are stored as copies (tar's hard-link entries depend on walk order)."""
    owners = owners or {}
    names: list[tuple[str, Path]] = []
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        base = Path(directory)
        for name in [*subdirs, *files]:
            path = base / name
            names.append((path.relative_to(root).as_posix(), path))
    names.sort()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, path in names:
            entry = _tarinfo(path, name, epoch)
            if name in owners:
                entry.uid = entry.gid = owners[name]
            if entry.type == tarfile.REGTYPE:
                with path.open("rb") as f:
                    tar.addfile(entry, f)
            else:
                tar.addfile(entry)
    data = raw.getvalue()
    return Layer(gzip_bytes(data), sha256(data))


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no file name and mtime 0: the same bytes for the same input."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return out.getvalue()


def descriptor(media_type: str, blob: bytes, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": sha256(blob), "size": len(blob), **extra}


@dataclass(frozen=True)
class Archive:
    """What ``write_archive`` wrote: the manifest's digest is the image's digest."""

    path: Path
    digest: str
    config_digest: str
    size: int


def write_archive(
    path: Path,
    layers: Iterable[Layer],
    config: Mapping[str, Any],
    reference: str,
    epoch: int,
) -> Archive:
    """Write the OCI layout + docker-archive tar for one linux/amd64 image. ``config`` is the
    image config's ``config`` member (User, Entrypoint, Cmd, Env, Labels...); ``reference``
    (``name:tag``) names it in ``index.json`` and ``manifest.json``."""
    layers = list(layers)
    labels = dict(config.get("Labels") or {})
    created = _rfc3339(epoch)
    config_blob = json_bytes(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": created,
            "config": dict(config),
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [{"created": created, "created_by": "orca image build"} for _ in layers],
        }
    )
    manifest_blob = json_bytes(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": descriptor(MEDIA_CONFIG, config_blob),
            "layers": [descriptor(MEDIA_LAYER, layer.blob) for layer in layers],
            "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers")},
        }
    )
    tag = reference.rpartition(":")[2]
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            descriptor(
                MEDIA_MANIFEST,
                manifest_blob,
                platform={"architecture": "amd64", "os": "linux"},
                annotations={
                    "io.containerd.image.name": _full_name(reference),
                    "org.opencontainers.image.ref.name": tag,
                },
            )
        ],
    }
    blobs = {sha256(b): b for b in (config_blob, manifest_blob, *(x.blob for x in layers))}
    docker = [
        {
            "Config": _blob_path(sha256(config_blob)),
            "RepoTags": [reference],
            "Layers": [_blob_path(layer.digest) for layer in layers],
        }
    ]
    files: dict[str, bytes] = {
        "oci-layout": json_bytes({"imageLayoutVersion": "1.0.0"}),
        "index.json": json_bytes(index),
        "manifest.json": json_bytes(docker),
        **{_blob_path(digest): blob for digest, blob in blobs.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            entry = tarfile.TarInfo(directory)
            entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(entry)
        for member in sorted(files):
            entry = tarfile.TarInfo(member)
            entry.size, entry.mode, entry.mtime = len(files[member]), 0o644, epoch
            tar.addfile(entry, io.BytesIO(files[member]))
    tmp.replace(path)
    return Archive(path, sha256(manifest_blob), sha256(config_blob), path.stat().st_size)


def _blob_path(digest: str) -> str:
    return "blobs/sha256/" + digest.removeprefix("sha256:")


def _full_name(reference: str) -> str:
    """The name containerd and Docker store ``reference`` under (``docker.io/library/...`` for
    a name without a registry), so a Pod's ``image: orca-controller:0.1.0`` finds it."""
    first = reference.split("/", 1)[0]
    if "/" in reference and ("." in first or ":" in first or first == "localhost"):
        return reference
    return f"docker.io/{reference}" if "/" in reference else f"docker.io/library/{reference}"


def _rfc3339(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def references(path: Path) -> list[tuple[str, str]]:
    """``(name, manifest digest)`` of each image an archive names (its ``index.json``; the
    names as containerd stores them), without reading the layers."""
    with tarfile.open(path) as tar:
        index_file = tar.extractfile("index.json")
        if index_file is None:
            return []
        index = json.loads(index_file.read())
    return [
        (str((m.get("annotations") or {}).get("io.containerd.image.name", "")), str(m["digest"]))
        for m in index.get("manifests", [])
    ]


def read_archive(path: Path) -> dict[str, Any]:
    """The image in an archive this module wrote (or any OCI archive with one manifest):
    ``{"digest", "manifest", "config", "layers": [tar bytes...]}`` for tests and tools."""
    with tarfile.open(path) as tar:

        def blob(digest: str) -> bytes:
            member = tar.extractfile(_blob_path(digest))
            assert member is not None
            return member.read()

        index_file = tar.extractfile("index.json")
        assert index_file is not None
        index = json.loads(index_file.read())
        top = index["manifests"][0]
        manifest = json.loads(blob(top["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        layers = [gzip.decompress(blob(d["digest"])) for d in manifest["layers"]]
    return {"digest": top["digest"], "manifest": manifest, "config": config, "layers": layers}
