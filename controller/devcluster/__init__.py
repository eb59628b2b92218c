"""A living cluster on loopback (etcd, kube-apiserver, kube-controller-manager, kwok), for
development and tests (envtest in Python, with heartbeating Nodes).

Binaries come from ``hack/testcp/build.sh`` (built from the Go module proxy, cached outside
the repository). ``ControlPlane`` is the library API used by the pytest fixtures;
``orca dev-cluster`` is the command-line front end (``controller.cli.dev_cluster``).

Names are imported lazily: ``orca`` imports this package to register its sub-command, and
pulling in ``cryptography`` there would slow down every ``orca`` invocation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller.devcluster.binaries import (
        ETCD_VERSION,
        KUBE_VERSION,
        BinariesNotFound,
        default_bin_dir,
        find_bin_dir,
    )
    from controller.devcluster.controlplane import (
        SILENT_LABEL,
        ControlPlane,
        ControlPlaneError,
        KubectlError,
        KubectlRunner,
        NodeTiming,
        running_control_plane,
    )

_LAZY = {
    "ETCD_VERSION": "binaries",
    "KUBE_VERSION": "binaries",
    "BinariesNotFound": "binaries",
    "default_bin_dir": "binaries",
    "find_bin_dir": "binaries",
    "ControlPlane": "controlplane",
    "ControlPlaneError": "controlplane",
    "KubectlError": "controlplane",
    "KubectlRunner": "controlplane",
    "NodeTiming": "controlplane",
    "SILENT_LABEL": "controlplane",
    "running_control_plane": "controlplane",
}

__all__ = [
    "ETCD_VERSION",
    "KUBE_VERSION",
    "SILENT_LABEL",
    "BinariesNotFound",
    "ControlPlane",
    "ControlPlaneError",
    "KubectlError",
    "KubectlRunner",
    "NodeTiming",
    "default_bin_dir",
    "find_bin_dir",
    "running_control_plane",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
