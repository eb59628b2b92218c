"""Who owns a Workload's status, as the API server's field manager records it, with orca
running on the real API server.

orca names itself to the API server (``USER_AGENT``), so the field manager records its writes
as ``orca-controller``'s, not aiohttp's "Python". The CRD declares ``status`` one atomic map
(``controller/api/crd.py`` says why: one managedFields path per status write instead of one
per field). Installed over the CRD of the release before, whose status fields were tracked
one by one, with orca running: the Workloads orca placed under the old schema keep being
written, and their next write collapses orca's entry to the one path (structured-merge-diff
reconciles managed fields with the schema's change).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.factories import node_object, workload_obj
from tests.support.harness import Cluster, observed

pytestmark = pytest.mark.controlplane

CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "workloads.orca.cloudinit.dev.yaml"
CRD_NAME = "workloads.orca.cloudinit.dev"
MANAGER = "orca-controller"


def granular(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD of the release before: ``status`` a map whose fields are tracked one by one."""
    crd = copy.deepcopy(crd)
    (version,) = crd["spec"]["versions"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status.pop("x-kubernetes-map-type") == "atomic"
    return crd


def install(cluster: Cluster, crd: dict[str, Any]) -> None:
    cluster.run("apply", "-f", "-", input=json.dumps(crd))
    cluster.run("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")


def status_owners(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """Each manager of the Workload's status subresource and the fields it owns there."""
    out = cluster.run("get", CRD_NAME, name, "-n", namespace, "-o", "json", "--show-managed-fields")
    return {
        entry["manager"]: entry.get("fieldsV1", {})
        for entry in json.loads(out)["metadata"].get("managedFields", [])
        if entry.get("subresource") == "status"
    }


def served_as(cluster: Cluster, namespace: str, atomic: bool) -> None:
    """Wait until the API server serves the CRD just installed: a status write to a probe
    Workload in ``namespace`` (one orca does not watch) is recorded as the schema says (the
    CRD is Established before every handler has its new schema)."""
    cluster.apply(workload_obj("probe", namespace, kind="Job", resources={"cpu": "1"}))
    fields: Any = None
    for attempt in range(60):
        patch = json.dumps({"status": {"message": f"probe {attempt}"}})
        cluster.run(
            "patch", CRD_NAME, "probe", "-n", namespace, "--subresource=status",
            "--type=merge", "--field-manager=probe", "-p", patch,
        )  # fmt: skip
        fields = status_owners(cluster, namespace, "probe")["probe"]
        if (fields == {"f:status": {}}) == atomic:
            return
        time.sleep(1)
    raise AssertionError(f"the CRD's status is not served as installed after 60 s: {fields}")


def test_orca_owns_the_status_whole_and_writes_it_on_across_the_crd_change(
    cluster: Cluster, namespace: str, start_operator: Any
) -> None:
    shipped = yaml.safe_load(CRD_PATH.read_text())
    probes = f"{namespace}-probe"
    cluster.run("create", "namespace", probes)
    try:
        install(cluster, granular(shipped))
        served_as(cluster, probes, atomic=False)
        cluster.apply(*(node_object(n, cpu="4", memory="8Gi") for n in ("a", "b", "c")))
        start_operator()
        cluster.apply(workload_obj("web", namespace, kind="Service", count=2))
        web = cluster.wait_for(
            namespace, "web", lambda w: observed(w) and w["status"].get("placed") == 2
        )
        # The release before: orca's entry lists every field it wrote.
        owned = status_owners(cluster, namespace, "web")
        assert list(owned) == [MANAGER], owned
        fields = owned[MANAGER]["f:status"]
        assert {"f:phase", "f:placements", "f:conditions", "f:placed"} <= set(fields), fields

        install(cluster, shipped)
        served_as(cluster, probes, atomic=True)
        # A change orca decides and writes: one replica more.
        cluster.run("scale", CRD_NAME, "web", "-n", namespace, "--replicas=3")
        web = cluster.wait_for(
            namespace, "web", lambda w: observed(w) and w["status"].get("placed") == 3
        )
        assert sorted(p["node"] for p in web["status"]["placements"]) == ["a", "b", "c"]
        assert status_owners(cluster, namespace, "web") == {MANAGER: {"f:status": {}}}
        # And a Workload placed under this CRD from the start.
        cluster.apply(workload_obj("job", namespace, kind="Job", resources={"cpu": "1"}))
        job = cluster.wait_for(namespace, "job", lambda w: observed(w) and w["status"]["placed"])
        assert job["status"]["phase"] == "Scheduled"
        assert status_owners(cluster, namespace, "job") == {MANAGER: {"f:status": {}}}
    finally:
        install(cluster, shipped)
        cluster.run("delete", CRD_NAME, "--all", "-n", probes, "--wait=false")
