"""``-o yaml`` wherever ``-o json`` is accepted, with the same content (``controller.cli.output``):
every command offering one offers the other, and each command's YAML loads to its JSON,
sections of a what-if answer included. ``orca explain``'s is in tests/integration/test_explain.py
(it reads a live cluster)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli import build_parser
from controller.cli.output import write_document
from tests.support.cli import Orca, write
from tests.support.factories import node_object

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NODES, WORKLOADS = EXAMPLES / "nodes.yaml", EXAMPLES / "workloads.yaml"


def _output_choices(parser: argparse.ArgumentParser, name: str = "orca") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                found.update(_output_choices(child, f"{name} {sub}"))
        elif "--output" in action.option_strings and action.choices:
            found[name] = list(action.choices)
    return found


def test_every_command_that_prints_json_prints_yaml() -> None:
    choices = _output_choices(build_parser())
    with_json = {name for name, formats in choices.items() if "json" in formats}
    assert with_json >= {"orca plan", "orca explain", "orca rebalance"}
    for name in with_json:
        assert "yaml" in choices[name], name


def _both(orca: Orca, *args: Any) -> tuple[int, Any, Any]:
    code, as_json, err = orca(*args, "-o", "json")
    code_yaml, as_yaml, err_yaml = orca(*args, "-o", "yaml")
    assert (code_yaml, err_yaml) == (code, err)
    assert not as_yaml.lstrip().startswith("{")  # block style, as kubectl writes it
    return code, json.loads(as_json), yaml.safe_load(as_yaml)


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param((), id="plan"),
        pytest.param(("--drain", "topology.kubernetes.io/zone=eu-1a"), id="drain"),
        pytest.param(("--add-nodes", "{spare}:auto"), id="add-nodes"),
    ],
)
def test_plan_yaml_is_its_json(orca: Orca, extra: tuple[str, ...]) -> None:
    extra = tuple(a.format(spare=EXAMPLES / "spare-node.yaml") for a in extra)
    code, as_json, as_yaml = _both(
        orca, "plan", "--nodes", NODES, "--workloads", WORKLOADS, "--now", "2026-12-01T10:00:00Z",
        *extra,
    )  # fmt: skip
    assert code in (0, 1)
    assert as_yaml == as_json
    assert as_json["results"]  # something to compare
    if extra:
        assert set(as_json) > {"results"}  # the what-if's sections went through too


def test_rebalance_yaml_is_its_json(tmp_path: Path, orca: Orca) -> None:
    size = {"cpu": "1", "memory": "1Gi"}
    busy = [f"old-{i}" for i in range(2)]
    service = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"kind": "Service", "count": 4, "resources": size, "rebalance": "Allowed"},
        "status": {
            "placements": [
                {"node": busy[i % 2], "allocId": f"shop/web-{i}", "score": 50} for i in range(4)
            ],
            "resources": size,
        },
    }
    nodes = write(tmp_path, "n.yaml", [node_object(n) for n in [*busy, "new-0", "new-1"]])
    workloads = write(tmp_path, "w.yaml", [service])
    code, as_json, as_yaml = _both(orca, "rebalance", "--nodes", nodes, "--workloads", workloads)
    assert code == 0
    assert as_json["moves"]
    assert as_yaml == as_json


def test_strings_that_look_like_other_types_stay_strings() -> None:
    """A label value ``"yes"``, a version ``"1.10"``, ``"null"``, a time, non-ASCII: YAML
    that reads back as something else would not be the same content."""
    document = {
        "results": [
            {"workload": "a/b", "labels": {"x": "yes", "v": "1.10", "n": "null", "o": "0o17"}},
            {"when": "2026-12-01T10:00:00Z", "note": "zone é: 3 replicas # not a comment"},
        ],
        "count": 3,
        "ratio": 0.5,
        "empty": [],
    }
    out = io.StringIO()
    write_document(document, "yaml", out)
    assert yaml.safe_load(out.getvalue()) == document
    as_json = io.StringIO()
    write_document(document, "json", as_json)
    assert json.loads(as_json.getvalue()) == document
