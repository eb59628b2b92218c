"""The CRD is generated from the models, structural, and checked in without drift."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from controller.api.crd import CRD_NAME, workload_crd, workload_crd_yaml
from controller.api.messages import validation_message
from controller.api.models import RENAMED_MODES, DaemonSchedule, ScheduleMode
from tests.support.cli import Orca

CHECKED_IN = Path(__file__).resolve().parents[2] / "crds" / f"{CRD_NAME}.yaml"


def test_checked_in_crd_matches_the_models(orca: Orca) -> None:
    """``make crd`` writes crds/ from ``orca crd``: what is checked in is its output."""
    code, out, err = orca("crd")
    assert (code, err) == (0, "")
    assert out == workload_crd_yaml()
    assert CHECKED_IN.read_text() == out, (
        "crds/ drifted from controller/api/models.py: run `make crd` (it writes crds/ and "
        "the Helm chart's copy)"
    )


def _walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for name, sub in schema.get("properties", {}).items():
        out += _walk(sub, f"{path}.{name}")
    if "items" in schema:
        out += _walk(schema["items"], f"{path}[]")
    return out


def test_schema_is_structural() -> None:
    version = workload_crd()["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    for path, node in _walk(root):
        assert "$ref" not in node and "title" not in node, path
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        assert node.get("default", "") is not None, path


def test_api_surface() -> None:
    crd = workload_crd()
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("orca.cloudinit.dev", "Namespaced")
    # Not ``wl`` (Kueue's old one) nor ``workload``'s plural alone: Kubernetes has its own
    # scheduling.k8s.io Workload. ``orcawl`` is orca's own.
    assert spec["names"]["shortNames"] == ["orcawl"]
    assert spec["names"]["categories"] == ["orca"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1"
    # kubectl scale and HPAs: replicas are spec.count, placed ones the status, and the
    # selector a string field of the status (the API requires a string path for HPA).
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.count",
            "statusReplicasPath": ".status.placed",
            "labelSelectorPath": ".status.selector",
        },
    }
    status_props = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status_props["selector"]["type"] == "string"
    columns = {c["name"]: c.get("priority", 0) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Kind": 0,
        "Desired": 0,
        "Placed": 0,
        "Ready": 0,
        "Phase": 0,
        "Age": 0,
        "Nodes": 1,
        "Resources": 1,
        "Message": 1,
    }
    workload_spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [v["rule"] for v in workload_spec["x-kubernetes-validations"]]
    assert "self.kind == 'Service' || !has(self.count)" in rules
    assert "self.kind == 'DaemonSet' || !has(self.schedule)" in rules
    assert workload_spec["properties"]["kind"]["enum"] == ["Job", "Service", "DaemonSet"]
    weight = workload_spec["properties"]["affinity"]["items"]["properties"]["weight"]
    assert (weight["minimum"], weight["maximum"]) == (-100, 100)
    assert workload_spec["properties"]["constraints"]["maxItems"] == 16
    assert workload_spec["properties"]["constraints"]["items"]["maxLength"] == 1024
    assert version["selectableFields"] == [{"jsonPath": ".status.phase"}]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["default"] == {"observedGeneration": 0}


# -- an API that explains itself (kubectl explain) ----------------------------------------------

# RST/Sphinx markup: double backticks, roles (:ref:`x`, :class:`x`), directives, link targets.
RST = re.compile(r"``|:[a-z]+:`|^\.\. |`_", re.MULTILINE)
# A file of this repository: the CRD ships alone, so a description cannot send users to one.
URL = re.compile(r"https?://\S+")  # a link is fine: it works wherever the CRD is read
REPO_FILE = re.compile(r"\b[\w./-]+\.(?:md|py|go|rst|txt|lua|ya?ml|json|toml)\b|\bDESIGN\b|README")


def _properties(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every property of the schema (array items are walked into, not counted)."""
    out = []
    for name, sub in schema.get("properties", {}).items():
        out.append((f"{path}.{name}", sub))
        out += _properties(sub, f"{path}.{name}")
    if "items" in schema:
        out += _properties(schema["items"], f"{path}[]")
    return out


def _descriptions(node: Any) -> list[str]:
    if isinstance(node, list):
        return [d for item in node for d in _descriptions(item)]
    if not isinstance(node, dict):
        return []
    own = [node["description"]] if isinstance(node.get("description"), str) else []
    return own + [d for value in node.values() for d in _descriptions(value)]


def test_every_property_has_a_description() -> None:
    root = workload_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    properties = _properties(root)
    # ``metadata`` may carry nothing but its type (the API server refuses even a description;
    # kubectl explain shows ObjectMeta's own).
    missing = [
        path
        for path, node in properties
        if not node.get("description", "").strip() and path != ".metadata"
    ]
    assert len(properties) >= 56
    assert missing == [], f"{len(missing)} of {len(properties)} properties lack a description"


def test_descriptions_are_written_for_users() -> None:
    """No RST markup (kubectl explain prints it raw), no file of the repository."""
    texts = _descriptions(workload_crd())
    assert texts
    assert [t for t in texts if RST.search(t)] == []
    assert [t for t in texts if REPO_FILE.search(URL.sub("", t))] == []


@pytest.mark.parametrize(
    ("text", "caught"),
    [
        ("A Toleration; ``tolerationSeconds`` is ignored.", "rst"),
        ("See :ref:`taints`.", "rst"),
        ("As in docs/design.md 4.", "file"),
        ("See controller/core/status.py.", "file"),
        ("The label runtime.orca.cloudinit.dev/<name>, e.g. topology.kubernetes.io/zone.", None),
        ("More info: https://git.k8s.io/community/api-conventions.md#metadata", None),
    ],
)
def test_the_description_checks_can_fail(text: str, caught: str | None) -> None:
    """The two patterns above catch what they are for, and not a label key or a domain."""
    found = "rst" if RST.search(text) else "file" if REPO_FILE.search(URL.sub("", text)) else None
    assert found == caught


def test_schedule_mode_is_camel_case_and_the_old_spelling_names_the_new() -> None:
    version = workload_crd()["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    mode = spec["properties"]["schedule"]["properties"]["mode"]
    assert mode["default"] == "EveryNode"
    # No enum: the API server would report it and skip the rule that names the new spelling.
    assert "enum" not in mode
    assert [m.value for m in ScheduleMode] == ["EveryNode", "Matching", "Mandatory"]
    for old, new in RENAMED_MODES.items():
        with pytest.raises(ValidationError) as caught:
            DaemonSchedule.model_validate({"mode": old})
        assert validation_message(caught.value) == f"mode: '{old}' is now spelled '{new}'"


def test_yaml_round_trips() -> None:
    text = workload_crd_yaml()
    assert yaml.safe_load(text) == workload_crd()


def test_the_api_reference_is_generated_from_the_crd(orca: Orca) -> None:
    """docs/reference/api.md is ``orca crd --markdown``'s output, and every property of spec
    and status is on it with its description (a property added to the models shows up;
    apiVersion, kind and metadata are Kubernetes' own)."""
    from controller.api.reference import api_reference

    code, out, err = orca("crd", "--markdown")
    assert (code, err) == (0, "")
    assert out == api_reference(workload_crd())
    page = CHECKED_IN.parents[1] / "docs" / "reference" / "api.md"
    assert page.read_text() == out, (
        f"docs/reference/api.md drifted from the CRD: run `orca crd --markdown > {page}`"
    )
    text = page.read_text()
    root = workload_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for description in _descriptions([root["properties"]["spec"], root["properties"]["status"]]):
        assert " ".join(description.split()).replace("|", "\\|") in text
