"""The chart's values.schema.json and README.md, both from one source: values.yaml and its
comments (``make chart`` runs this; tests/packaging/test_chart.py fails when either file
differs from what this writes, as the docs/reference pages do).

The convention, helm-docs' with a schema line added:

    # -- What the value does (continued on the next ``#`` lines).
    # @schema {"enum": ["a", "b"]}        JSON Schema merged over what the default implies
    key: default

A described mapping whose keys are described too is a *block*: its schema lists them and
refuses any other key (``additionalProperties: false``), as does the top level, so
``helm template --set replicas=3`` fails naming ``replicas``. Every key of a block must be
described (this fails otherwise, naming it). Any other value is a *leaf*: its type follows its
default (a string, a whole number, true/false, a list, a mapping: free-form unless its
``@schema`` says more), ``@schema`` adding bounds, enums and item shapes.

    python hack/chart_values.py [--check]       # write both, or exit 1 when either differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "orca-controller"
VALUES, SCHEMA, README = CHART / "values.yaml", CHART / "values.schema.json", CHART / "README.md"

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):(?: |$)")
_DOC = "# -- "
_SCHEMA = "# @schema "


class ValuesError(ValueError):
    """values.yaml breaks the convention (the message names the line or key)."""


@dataclass
class Doc:
    """One described key: its dotted path, description and ``@schema`` additions."""

    path: tuple[str, ...]
    description: str
    schema: dict[str, Any]
    children: list[Doc] = field(default_factory=list)


def parse(text: str) -> list[Doc]:
    """The described keys of ``text`` as a tree (top-level first, in file order)."""
    roots: list[Doc] = []
    stack: list[tuple[int, Doc]] = []  # (indent, doc) of the described keys enclosing a line
    comments: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
            continue
        if not stripped:
            comments = []
            continue
        match = _KEY.match(line)
        block, comments = comments, []
        if match is None or not any(c.startswith(_DOC) for c in block):
            continue  # part of a value (a list item, a nested mapping), or a free comment
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        start = next(i for i, c in enumerate(block) if c.startswith(_DOC))
        words, schema = [], {}
        for comment in block[start:]:
            if comment.startswith(_SCHEMA):
                try:
                    schema.update(json.loads(comment.removeprefix(_SCHEMA)))
                except json.JSONDecodeError as exc:
                    raise ValuesError(f"values.yaml:{number}: @schema: {exc}") from None
            else:
                words.append(comment.removeprefix(_DOC.strip()).removeprefix("#").strip())
        parent = stack[-1][1].path if stack else ()
        doc = Doc((*parent, match["key"]), " ".join(w for w in words if w), schema)
        (stack[-1][1].children if stack else roots).append(doc)
        stack.append((indent, doc))
    return roots


def _value(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = values
    for key in path:
        value = value[key]
    return value


_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def _implied(default: Any) -> dict[str, Any]:
    if isinstance(default, dict):
        return {"type": "object"}
    if isinstance(default, list):
        return {"type": "array"}
    for kind, name in _TYPES:
        if isinstance(default, kind):
            return {"type": name}
    return {}


def _schema(doc: Doc, values: dict[str, Any]) -> dict[str, Any]:
    default = _value(values, doc.path)
    name = ".".join(doc.path)
    if doc.children:
        if not isinstance(default, dict):
            raise ValuesError(f"{name}: described keys under a value that is not a mapping")
        described = [c.path[-1] for c in doc.children]
        missing = [key for key in default if key not in described]
        if missing:
            raise ValuesError(f"{name}.{missing[0]}: not described (a `# --` comment above it)")
        return {
            "description": doc.description,
            "type": "object",
            "properties": {c.path[-1]: _schema(c, values) for c in doc.children},
            "additionalProperties": False,
        }
    return {"description": doc.description, **_implied(default), **doc.schema}


def schema(text: str) -> dict[str, Any]:
    """values.schema.json for the values.yaml ``text``."""
    values = yaml.safe_load(text)
    roots = parse(text)
    missing = [key for key in values if key not in {d.path[0] for d in roots}]
    if missing:
        raise ValuesError(f"{missing[0]}: not described (a `# --` comment above it)")
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "orca-controller chart values",
        "type": "object",
        "properties": {d.path[0]: _schema(d, values) for d in roots},
        "additionalProperties": False,
    }


def _rows(docs: list[Doc], values: dict[str, Any], node: dict[str, Any]) -> list[str]:
    rows = []
    for doc in docs:
        entry = node["properties"][doc.path[-1]]
        kind = entry.get("type", "")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        if "enum" in entry:
            kind = " \\| ".join(f"`{v}`" for v in entry["enum"])
        default = "" if doc.children else f"`{json.dumps(_value(values, doc.path))}`"
        text = doc.description.replace("|", "\\|")
        rows.append(f"| `{'.'.join(doc.path)}` | {kind} | {default} | {text} |")
        rows += _rows(doc.children, values, entry)
    return rows


HEADER = """\
<!-- Generated by `make chart` (hack/chart_values.py) from values.yaml: do not edit -->
# orca-controller

Runtime-aware workload placement for Kubernetes: the operator that places `Workload`s
(`workloads.orca.cloudinit.dev`) on Nodes, its CRD, RBAC, admission webhook and monitoring.
The defaults render the same objects as `kubectl apply -k manifests/default`; the repository's
[docs/install.md](../../docs/install.md) describes both ways in, and the image to push first.

```sh
kubectl create namespace orca-system
kubectl label namespace orca-system pod-security.kubernetes.io/enforce=restricted
helm install orca charts/orca-controller -n orca-system \\
  --set image.repository=REGISTRY/orca-controller --set image.digest=sha256:...
```

`helm upgrade` updates the CRD too (it is rendered from `templates/`, kept on uninstall:
`crds.keep`). Every value is typed in `values.schema.json`, which refuses a key it does not
know, at the top level and in each block: `--set replicas=3` fails and names `replicas`.

## Values

| value | type | default | what it does |
|---|---|---|---|
"""


def readme(text: str) -> str:
    """The chart's README.md for the values.yaml ``text``."""
    values = yaml.safe_load(text)
    return HEADER + "\n".join(_rows(parse(text), values, schema(text))) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python hack/chart_values.py")
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs")
    args = parser.parse_args(argv)
    text = VALUES.read_text()
    try:
        want = {SCHEMA: json.dumps(schema(text), indent=2) + "\n", README: readme(text)}
    except ValuesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = [
        path for path, content in want.items() if not path.exists() or path.read_text() != content
    ]
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(CHART.parents[1])} differs from values.yaml: run `make chart`"
            )
        return 1 if stale else 0
    for path in stale:
        path.write_text(want[path])
    return 0


if __name__ == "__main__":
    sys.exit(main())
