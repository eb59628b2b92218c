"""The Workloads the docs show are ones the API server accepts: each fenced YAML block of the
README and ``docs/`` holding a Workload is applied with ``--dry-run=server`` (schema, CEL
rules, defaults; nothing stored) into a namespace of its own, as a reader would apply it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import KubectlRunner

pytestmark = pytest.mark.controlplane

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _documented_workloads() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for page in PAGES:
        for block in BLOCK.finditer(page.read_text()):
            line = page.read_text().count("\n", 0, block.start(1)) + 1
            for doc in yaml.safe_load_all(block.group(1)):
                if isinstance(doc, dict) and doc.get("kind") == "Workload":
                    found.append((f"{page.relative_to(ROOT)}:{line}", doc))
    return found


WORKLOADS = _documented_workloads()


def test_the_docs_show_a_workload() -> None:
    assert WORKLOADS, "no fenced YAML Workload found in the docs"


@pytest.mark.parametrize("where,workload", WORKLOADS, ids=[w for w, _ in WORKLOADS])
def test_a_documented_workload_applies(
    kubectl: KubectlRunner, installed: None, where: str, workload: dict[str, Any]
) -> None:
    namespace = f"docs-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", namespace, check=True)
    try:
        obj = {**workload, "metadata": {**workload["metadata"], "namespace": namespace}}
        manifest = yaml.safe_dump(obj)
        done = kubectl("apply", "--dry-run=server", "-o", "yaml", "-f", "-", input=manifest)
        assert done.returncode == 0, f"{where}: {done.stderr}"
        applied = yaml.safe_load(done.stdout)
        assert applied["spec"]["kind"] == workload["spec"]["kind"], where
        stored = kubectl("get", "workloads.orca.cloudinit.dev", "-n", namespace, "-o", "name")
        assert stored.stdout.strip() == "", f"{where}: a dry run stored {stored.stdout}"
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false")
