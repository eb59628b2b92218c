"""Where the control-plane binaries built by ``hack/testcp/build.sh`` live.

The build script caches binaries per version outside the repository (they are 100+ MB and
must never be committed). This module mirrors its path rule so tests and ``orca dev-cluster``
find them without running the script; ``ORCA_TESTCP_BIN`` overrides everything (CI, or a
developer pointing at a hand-built set).
"""

from __future__ import annotations

import os
from pathlib import Path

#: Pinned versions; must equal hack/testcp/kube/go.mod and hack/testcp/etcd/go.mod (an
#: integration test checks this, so a version bump cannot leave the lookup path stale).
KUBE_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"

#: Environment variable naming a directory with the binaries; wins over the cache path.
BIN_ENV = "ORCA_TESTCP_BIN"
#: Environment variable overriding the cache root (same meaning as in build.sh).
CACHE_ENV = "ORCA_TESTCP_CACHE"

REQUIRED = ("etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kwok")
#: Files (not executables) the control plane reads from the same directory.
REQUIRED_FILES = ("kwok-stages.yaml",)
BUILD_HINT = "build them with: hack/testcp/build.sh  (or set ORCA_TESTCP_BIN to their directory)"


class BinariesNotFound(RuntimeError):
    """The control-plane binaries are missing; the message says where we looked and why."""


def default_bin_dir() -> Path:
    """The cache path build.sh uses for the pinned versions."""
    cache = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "orca-testcp")
    return Path(cache) / f"k8s-{KUBE_VERSION}-etcd-{ETCD_VERSION}" / "bin"


def find_bin_dir(explicit: Path | str | None = None) -> Path:
    """Return a directory holding the control plane's binaries (etcd, kube-apiserver, kubectl,
    kube-controller-manager, kwok) and kwok's Stages, or raise with the reason.

    Precedence: ``explicit`` argument, then ``$ORCA_TESTCP_BIN``, then the build cache.
    """
    if explicit is not None:
        candidate, source = Path(explicit), "--bin-dir"
    elif os.environ.get(BIN_ENV):
        candidate, source = Path(os.environ[BIN_ENV]), f"${BIN_ENV}"
    else:
        candidate, source = default_bin_dir(), "the default cache path"
    missing = [b for b in REQUIRED if not os.access(candidate / b, os.X_OK)]
    missing += [f for f in REQUIRED_FILES if not (candidate / f).is_file()]
    if missing:
        raise BinariesNotFound(
            f"control-plane binaries missing in {candidate} (from {source}): "
            f"{', '.join(missing)}; {BUILD_HINT}"
        )
    return candidate.resolve()
