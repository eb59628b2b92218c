"""The Argo CD health check ships twice: as ``health.lua`` in Argo CD's resource_customizations
layout, and inside the ``argocd-cm`` entry users merge. They must be the same script (what the
GitOps health tests run is the file)."""

from __future__ import annotations

from pathlib import Path

import yaml

ARGOCD = Path(__file__).resolve().parents[2] / "manifests" / "argocd"
SCRIPT = ARGOCD / "resource_customizations" / "orca.cloudinit.dev" / "Workload" / "health.lua"
# Argo CD's key for a custom health check: resource.customizations.health.<group>_<kind>.
KEY = "resource.customizations.health.orca.cloudinit.dev_Workload"


def test_the_argocd_cm_entry_is_the_shipped_script() -> None:
    config = yaml.safe_load((ARGOCD / "argocd-cm.yaml").read_text())
    assert (config["kind"], config["metadata"]["name"]) == ("ConfigMap", "argocd-cm")
    assert config["data"][KEY] == SCRIPT.read_text(), (
        "manifests/argocd/argocd-cm.yaml drifted from health.lua: copy the script into it"
    )
