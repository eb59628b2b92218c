"""One rule set, two judges: the API server (the CRD's ``x-kubernetes-validations``) and orca's
models (the same CEL, evaluated by cel-python: ``controller/api/rules.py``) give the same
verdict, with the same message, on the same object.

Each cross-field rule is asked both ways (an object that breaks it and one that keeps it),
and the padded-name rule with every whitespace character the two regex engines must agree
on. ``kubectl apply --dry-run=server`` asks the API server without storing anything.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import Workload
from tests.support.factories import workload_obj
from tests.support.harness import Cluster

pytestmark = pytest.mark.controlplane

SPREAD = {"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1}
HARD = {**SPREAD, "whenUnsatisfiable": "DoNotSchedule"}
SOFT = {**SPREAD, "whenUnsatisfiable": "ScheduleAnyway"}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("count-on-job", {"kind": "Job", "count": 2}),
    ("count-on-service", {"kind": "Service", "count": 2}),
    ("schedule-on-service", {"kind": "Service", "schedule": {"mode": "Matching"}}),
    ("schedule-on-daemonset", {"kind": "DaemonSet", "schedule": {"mode": "Matching"}}),
    ("spread-on-job", {"kind": "Job", "topologySpread": [HARD]}),
    ("empty-spread-on-job", {"kind": "Job", "topologySpread": []}),
    ("spread-on-service", {"kind": "Service", "topologySpread": [HARD, SOFT]}),
    ("duplicate-spread", {"kind": "Service", "topologySpread": [HARD, {**HARD, "maxSkew": 2}]}),
    ("min-domains-soft", {"kind": "Service", "topologySpread": [{**SOFT, "minDomains": 2}]}),
    ("min-domains-hard", {"kind": "Service", "topologySpread": [{**HARD, "minDomains": 2}]}),
    ("exists-with-value", {"kind": "Job", "tolerations": [{"operator": "Exists", "value": "x"}]}),
    ("exists-alone", {"kind": "Job", "tolerations": [{"operator": "Exists"}]}),
    ("equal-without-key", {"kind": "Job", "tolerations": [{"value": "x"}]}),
    ("equal-with-key", {"kind": "Job", "tolerations": [{"key": "k", "value": "x"}]}),
    ("resources-gpu", {"kind": "Job", "resources": {"cpu": "1", "nvidia.com/gpu": 2}}),
    ("resources-gpu-string", {"kind": "Job", "resources": {"nvidia.com/gpu": "2"}}),
    ("resources-gpu-milli", {"kind": "Job", "resources": {"nvidia.com/gpu": "500m"}}),
    ("resources-gpu-fraction", {"kind": "Job", "resources": {"example.com/foo": "1.5"}}),
    ("resources-bare-name", {"kind": "Job", "resources": {"gpu": "1"}}),
    ("resources-hugepages", {"kind": "Job", "resources": {"hugepages-2Mi": "4Mi"}}),
    ("resources-storage", {"kind": "Job", "resources": {"ephemeral-storage": "10Gi"}}),
    ("resources-bad-domain", {"kind": "Job", "resources": {"-x.com/y": "1"}}),
    ("resources-requests-prefix", {"kind": "Job", "resources": {"requests.x.com/y": "1"}}),
    ("gang-on-service", {"kind": "Service", "count": 4, "gang": {"minCount": 3}}),
    ("gang-all-or-nothing", {"kind": "Service", "count": 4, "gang": {"minCount": 4}}),
    ("gang-over-count", {"kind": "Service", "count": 4, "gang": {"minCount": 5}}),
    ("gang-over-default-count", {"kind": "Service", "gang": {"minCount": 2}}),
    ("gang-on-job", {"kind": "Job", "gang": {"minCount": 1}}),
    ("budget-min", {"kind": "Service", "count": 3, "disruption": {"minAvailable": 2}}),
    ("budget-percent", {"kind": "Service", "disruption": {"maxUnavailable": "50%"}}),
    ("budget-100-percent", {"kind": "Service", "disruption": {"minAvailable": "100%"}}),
    ("budget-both", {"kind": "Job", "disruption": {"minAvailable": 1, "maxUnavailable": 1}}),
    ("budget-none", {"kind": "Job", "disruption": {}}),
    ("budget-150-percent", {"kind": "Job", "disruption": {"minAvailable": "150%"}}),
    ("budget-minus-percent", {"kind": "Job", "disruption": {"maxUnavailable": "-1%"}}),
    ("budget-negative", {"kind": "Job", "disruption": {"maxUnavailable": -1}}),
    ("budget-bare-string", {"kind": "Job", "disruption": {"minAvailable": "3"}}),
    *[
        (f"target-{label}", {"kind": "Job", "affinity": [{"target": target, "weight": 1}]})
        for label, target in [
            ("name", "web"),
            ("newline", "web\n"),
            ("leading-space", " web"),
            ("tab", "web\t"),
            ("vertical-tab", "web\v"),
            ("form-feed", "\fweb"),
            ("carriage-return", "web\r"),
            ("cel-with-space", 'node.kind == "linux" '),
            ("two-words", "a b"),
        ]
    ],
]


def orca_verdict(spec: dict[str, Any]) -> str | None:
    """None when the models take it, else the message of the rule (after the field)."""
    try:
        Workload.model_validate(workload_obj("x", "ns", **spec))
    except ValidationError as exc:
        return validation_message(exc).split(": ", 1)[1]
    return None


@pytest.mark.parametrize(("case", "spec"), CASES, ids=[c for c, _ in CASES])
def test_the_api_server_and_orca_judge_alike(
    cluster: Cluster, namespace: str, case: str, spec: dict[str, Any]
) -> None:
    expected = orca_verdict(spec)
    obj = workload_obj(case, namespace, **spec)
    result = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
    )
    if expected is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0, f"the API server took what orca refuses: {expected}"
        assert expected in " ".join(result.stderr.split()), (expected, result.stderr)
