"""The Workload CustomResourceDefinition, generated from the pydantic models.

pydantic emits JSON Schema (``$ref``/``$defs``, ``anyOf`` with ``null`` for optional fields,
titles); Kubernetes wants a *structural* OpenAPI v3 schema (everything inline, one type per
node, no nulls). ``structural`` converts one into the other; ``workload_crd`` wraps it with
the names, printer columns and subresources. ``orca crd`` prints it; ``crds/`` holds it checked
in, and a test fails when the two drift.

Descriptions are what ``kubectl explain`` shows, so they come from the fields' ``description``
only, written for users; the models' class docstrings (written for developers, with RST markup
and references to files of this repository) are dropped where pydantic would copy them in.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from controller.api.models import (
    CATEGORIES,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    WorkloadSpec,
    WorkloadStatus,
)

CRD_NAME = f"{PLURAL}.{GROUP}"

_DROP = frozenset({"title", "$defs"})

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Kind", "type": "string", "jsonPath": ".spec.kind"},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desired"},
    {"name": "Placed", "type": "integer", "jsonPath": ".status.placed"},
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    },
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Nodes", "type": "string", "jsonPath": ".status.nodes", "priority": 1},
    # What each replica asks, every resource (kubectl prints the map as map[cpu:1 ...]).
    {"name": "Resources", "type": "string", "jsonPath": ".spec.resources", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
]


#: ``kubectl scale orcawl web --replicas=8`` and a HorizontalPodAutoscaler: the scale's
#: replicas are ``spec.count``, its status the replicas placed, its selector the label of the
#: replicas (``workload_selector``). Only a Service has a count: the schema's rule "count is
#: only allowed when kind is Service" refuses a scale of a Job or a DaemonSet (422).
SCALE: dict[str, str] = {
    "specReplicasPath": ".spec.count",
    "statusReplicasPath": ".status.placed",
    "labelSelectorPath": ".status.selector",
}


# The standard texts of every Kubernetes object's first fields (as controller-gen writes them).
_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
_API_VERSION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject "
    f"unrecognized values. More info: {_CONVENTIONS}#resources"
)
_KIND = (
    "Kind is a string value representing the REST resource this object represents. Servers "
    "may infer this from the endpoint the client submits requests to. Cannot be updated. In "
    f"CamelCase. More info: {_CONVENTIONS}#types-kinds"
)


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``s and turn pydantic's JSON Schema into a structural OpenAPI schema."""
    defs: dict[str, Any] = schema.get("$defs", {})

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        ref = node.pop("$ref", None)
        if ref is not None:
            target = convert(defs[ref.rsplit("/", 1)[-1]])
            target.pop("description", None)  # a class docstring: for developers
            node = {**target, **node}
        any_of = None if "x-kubernetes-int-or-string" in node else node.pop("anyOf", None)
        if any_of is not None:
            options = [o for o in any_of if o != {"type": "null"}]
            if len(options) != 1:
                raise ValueError(f"cannot express anyOf {any_of!r} structurally")
            node = {**convert(options[0]), **node}
        if node.get("default", ...) is None:  # an optional field's: absent, not null
            del node["default"]
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP:
                continue
            if key == "properties":
                out[key] = {name: convert(sub) for name, sub in value.items()}
            elif key == "additionalProperties":
                if isinstance(value, dict):  # a map's values; ``false`` is extra="forbid"'s
                    out[key] = convert(value)
            elif key == "items":
                out[key] = convert(value)
            else:  # a copy: an enum used twice must not come out as a YAML anchor and alias
                out[key] = copy.deepcopy(value)
        if "properties" in out:
            out.setdefault("type", "object")
        return out

    result: dict[str, Any] = convert(schema)
    return result


def workload_crd() -> dict[str, Any]:
    """The Workload CRD as a dict, ready for YAML."""
    spec = structural(WorkloadSpec.model_json_schema(by_alias=True, mode="validation"))
    status = structural(WorkloadStatus.model_json_schema(by_alias=True, mode="serialization"))
    spec["description"] = "What to place, and where it may go."
    status["description"] = "Where orca placed it, and why not when it could not."
    # Before orca's first decision the status reads generation 0, behind metadata.generation,
    # so kstatus (Flux, cli-utils) and Argo CD see a Workload nobody has decided yet as in
    # progress: kstatus reads a Workload without status (or without observedGeneration) as
    # Current. The API server fills the default in on every read (structural defaulting); the
    # status sent with a create is dropped, not this default. Nothing else: consumers that wait
    # for ``status.phase`` to appear keep working.
    status["default"] = {"observedGeneration": 0}
    # One atomic map: the API server's field manager then records one managedFields path for
    # the whole status (``f:status``) instead of one per field, on every status write, and
    # the smaller managedFields are stored, watched (the garbage collector's metadata watch
    # decodes them at every write) and answered again. orca is the status's only writer and
    # replaces it whole (a PUT of /status), so per-field ownership buys nothing here. An
    # object written under the granular schema is collapsed to the one path at its next
    # write (structured-merge-diff reconciles managed fields with schema changes). In
    # bench_server_cost.py (its ``status atomic (CRD)`` lever, recorded in docs/benchmarks.md)
    # it cut kube-apiserver's CPU per status write by 19 % on the write orca made before
    # issue 31.
    status["x-kubernetes-map-type"] = "atomic"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": list(CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}, "scale": SCALE},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    # kubectl get orcawl -A --field-selector status.phase=Unschedulable
                    "selectableFields": [{"jsonPath": ".status.phase"}],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A workload for orca to place onto nodes.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string", "description": _API_VERSION},
                                "kind": {"type": "string", "description": _KIND},
                                # Nothing but the type: the API server refuses more here
                                # (even a description); kubectl explain shows ObjectMeta's.
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def workload_crd_yaml() -> str:
    """The CRD as the YAML checked in under ``crds/``."""
    header = "# Generated by `orca crd` from controller/api/models.py. Do not edit.\n"
    return header + yaml.safe_dump(workload_crd(), sort_keys=False, width=100)
