"""The Workload API (``orca.cloudinit.dev/v1alpha1``) and the scheduler's value types.

These pydantic models are the single source of truth for the API: the CRD in ``crds/`` is
generated from them (``controller.api.crd``) and a test fails when the two drift. Models are
pure (no I/O) and share one config: frozen, camelCase on the wire, unknown fields refused
(``kubectl apply`` validates strictly too, so ``orca plan`` rejects what the API server would).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from kubernetes.utils.quantity import parse_quantity
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

GROUP = "orca.cloudinit.dev"
VERSION = "v1alpha1"
KIND = "Workload"
PLURAL = "workloads"
SINGULAR = "workload"
SHORT_NAMES = ("wl",)

# Bounds that keep a user's expressions cheap to compile and evaluate; the CRD carries them too
# so the API server refuses an oversized spec at ``kubectl apply`` time.
MAX_EXPRESSION_LENGTH = 1024
MAX_CONSTRAINTS = 16
MAX_AFFINITY_RULES = 16
MAX_RUNTIMES = 8
MAX_RUNTIME_NAME = 63
MAX_COUNT = 1000
MAX_TOLERATIONS = 32
MAX_TAINTS = 64
MIN_WEIGHT, MAX_WEIGHT = -100, 100

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RUNTIME_NAME_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
# Kubernetes resource.Quantity, non-negative (the apimachinery regex without the sign).
QUANTITY_PATTERN = (
    r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)


class _Model(BaseModel):
    """Shared config: frozen values, camelCase aliases, unknown fields are an error."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=False,
    )


def _check_quantity(value: str | int) -> str | int:
    if isinstance(value, bool):
        raise ValueError("must be a Kubernetes quantity such as 500m or 256Mi")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must not be negative")
        return value
    if not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (examples: 500m, 2, 256Mi)")
    return value


Quantity = Annotated[
    str | int,
    AfterValidator(_check_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A non-negative Kubernetes quantity, kept as written so status and round trips are stable."""

Expression = Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_LENGTH)]
"""A CEL expression over ``node``; compiled by ``controller.core.celexpr``."""

RuntimeName = Annotated[
    str, Field(min_length=1, max_length=MAX_RUNTIME_NAME, pattern=RUNTIME_NAME_PATTERN)
]


@functools.lru_cache(maxsize=4096)
def quantity_to_int(value: str | int, scale: int = 1) -> int:
    """``value * scale`` rounded up, parsed by the kubernetes client (cpu: scale 1000 = milli)."""
    q: Decimal = parse_quantity(value) * scale  # type: ignore[no-untyped-call]
    return int(q.to_integral_value(rounding="ROUND_CEILING"))


class WorkloadKind(StrEnum):
    JOB = "Job"
    SERVICE = "Service"
    DAEMONSET = "DaemonSet"


class ScheduleMode(StrEnum):
    EVERY_NODE = "every-node"
    MATCHING = "matching"
    MANDATORY = "mandatory"


class Strategy(StrEnum):
    SPREAD = "Spread"
    BINPACK = "BinPack"


class TaintEffect(StrEnum):
    """What a node taint does to Workloads that do not tolerate it (Kubernetes semantics)."""

    NO_SCHEDULE = "NoSchedule"  # nothing new lands; what is there stays
    PREFER_NO_SCHEDULE = "PreferNoSchedule"  # a lower score, not a filter
    NO_EXECUTE = "NoExecute"  # nothing new lands, and what is there moves


class TolerationOperator(StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


class Phase(StrEnum):
    PENDING = "Pending"
    SCHEDULED = "Scheduled"
    PARTIALLY_SCHEDULED = "PartiallyScheduled"
    UNSCHEDULABLE = "Unschedulable"
    INVALID = "Invalid"


class RuntimeSpec(_Model):
    one_of: list[RuntimeName] = Field(
        default_factory=list,
        max_length=MAX_RUNTIMES,
        description="Acceptable runtimes; empty means any runtime.",
    )


class Resources(_Model):
    cpu: Quantity | None = Field(default=None, description="CPU request, e.g. 500m.")
    memory: Quantity | None = Field(default=None, description="Memory request, e.g. 256Mi.")

    @property
    def cpu_millis(self) -> int:
        return 0 if self.cpu is None else quantity_to_int(self.cpu, 1000)

    @property
    def memory_bytes(self) -> int:
        return 0 if self.memory is None else quantity_to_int(self.memory)


class AffinityRule(_Model):
    target: Expression = Field(
        description="A Workload name in the same namespace (a DNS-1123 label), "
        "otherwise a CEL expression over node."
    )
    weight: int = Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, description="-100..100; negative avoids.")

    @property
    def is_workload_name(self) -> bool:
        """The deterministic rule of DESIGN.md 2: a DNS-1123 label names a Workload."""
        return DNS1123_LABEL.match(self.target) is not None


class Toleration(
    _Model,
    json_schema_extra={
        "x-kubernetes-validations": [
            {
                "rule": "self.operator != 'Exists' || !has(self.value) || self.value == ''",
                "message": "value must be empty when operator is Exists",
            },
            {
                "rule": "(has(self.key) && self.key != '') || self.operator == 'Exists'",
                "message": "operator must be Exists when key is empty",
            },
        ]
    },
):
    """A Kubernetes Toleration (core/v1): which node taints a Workload accepts.

    ``tolerationSeconds`` is accepted so tolerations copied from Pod specs apply unchanged,
    but a placement is a decision, not a process: nothing is evicted on a timer.
    """

    key: str | None = Field(default=None, max_length=316)
    operator: TolerationOperator = Field(default=TolerationOperator.EQUAL)
    value: str | None = Field(default=None, max_length=63)
    effect: TaintEffect | None = Field(default=None, description="Empty matches every effect.")
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _operator_rules(self) -> Toleration:
        if self.operator is TolerationOperator.EXISTS and self.value:
            raise ValueError("value must be empty when operator is Exists")
        if not self.key and self.operator is not TolerationOperator.EXISTS:
            raise ValueError("operator must be Exists when key is empty")
        return self

    def tolerates(self, taint: Taint) -> bool:
        """``ToleratesTaint`` of k8s.io/api/core/v1: effect, key, then operator."""
        if self.effect is not None and self.effect is not taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator is TolerationOperator.EXISTS:
            return True
        return (self.value or "") == taint.value


class DaemonSchedule(_Model):
    mode: ScheduleMode = Field(default=ScheduleMode.EVERY_NODE)


class WorkloadSpec(
    _Model,
    json_schema_extra={
        "x-kubernetes-validations": [
            {
                "rule": "self.kind == 'Service' || !has(self.count)",
                "message": "count is only allowed when kind is Service",
                "fieldPath": ".count",
            },
            {
                "rule": "self.kind == 'DaemonSet' || !has(self.schedule)",
                "message": "schedule is only allowed when kind is DaemonSet",
                "fieldPath": ".schedule",
            },
        ]
    },
):
    kind: WorkloadKind = Field(description="Job, Service or DaemonSet.")
    count: int | None = Field(
        default=None, ge=1, le=MAX_COUNT, description="Replicas; Service only (default 1)."
    )
    runtime: RuntimeSpec | None = None
    resources: Resources | None = None
    constraints: list[Expression] = Field(
        default_factory=list,
        max_length=MAX_CONSTRAINTS,
        description="CEL expressions over node; all must be true.",
    )
    affinity: list[AffinityRule] = Field(default_factory=list, max_length=MAX_AFFINITY_RULES)
    schedule: DaemonSchedule | None = None
    strategy: Strategy = Field(default=Strategy.SPREAD)
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=MAX_TOLERATIONS,
        description="Node taints this Workload accepts (Kubernetes Toleration semantics).",
    )

    @model_validator(mode="after")
    def _cross_field(self) -> WorkloadSpec:
        if self.count is not None and self.kind is not WorkloadKind.SERVICE:
            raise ValueError("count is only allowed when kind is Service")
        if self.schedule is not None and self.kind is not WorkloadKind.DAEMONSET:
            raise ValueError("schedule is only allowed when kind is DaemonSet")
        return self

    @property
    def replicas(self) -> int:
        """Replicas wanted for Job and Service (a DaemonSet's count comes from the nodes)."""
        if self.kind is WorkloadKind.SERVICE:
            return self.count or 1
        return 1

    @property
    def mode(self) -> ScheduleMode:
        return self.schedule.mode if self.schedule else ScheduleMode.EVERY_NODE

    @property
    def runtimes(self) -> tuple[str, ...]:
        return tuple(self.runtime.one_of) if self.runtime else ()

    @property
    def cpu_millis(self) -> int:
        return self.resources.cpu_millis if self.resources else 0

    @property
    def memory_bytes(self) -> int:
        return self.resources.memory_bytes if self.resources else 0


class Placement(_Model):
    """One replica's decision: where it runs, its stable id and the score that won the node."""

    node: str
    alloc_id: str
    score: int


class Condition(_Model):
    """A condition as the Kubernetes API conventions define it."""

    type: str
    status: str = Field(json_schema_extra={"enum": ["True", "False", "Unknown"]})
    reason: str
    message: str = ""
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"})
    observed_generation: int | None = None


class RejectionReason(_Model):
    """Why nodes were rejected: a reason, how many nodes, and a few of their names."""

    reason: str
    count: int
    nodes: list[str] = Field(default_factory=list)


class WorkloadStatus(_Model):
    observed_generation: int | None = None
    phase: Phase | None = None
    desired: int | None = None
    placed: int | None = None
    placements: list[Placement] = Field(default_factory=list)
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    message: str | None = None
    unschedulable: list[RejectionReason] = Field(default_factory=list)
    nodes: str | None = Field(
        default=None,
        description="The placements' nodes, for kubectl's wide output (a summary; "
        "placements is the record).",
    )
    resources: Resources | None = Field(
        default=None,
        description="The resources each placement holds on its node (the spec's at the time "
        "of the decision), so a resize is told apart from a capacity change.",
    )


class ObjectMeta(BaseModel):
    """The parts of ``metadata`` orca reads; the rest is the API server's business."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    name: str = Field(min_length=1)
    namespace: str = "default"
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    uid: str | None = None


class Workload(BaseModel):
    """A Workload object as read from YAML or the API server."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    spec: WorkloadSpec
    status: WorkloadStatus | None = None

    @property
    def key(self) -> str:
        """``<namespace>/<name>``: how orca names a Workload in logs, the ledger and plans."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


class Taint(_Model):
    """A node taint (``spec.taints`` of a Node; ``timeAdded`` and other fields are ignored)."""

    model_config = ConfigDict(**{**_Model.model_config, "extra": "ignore"})

    key: str
    value: str = ""
    effect: TaintEffect

    def __str__(self) -> str:
        """kube-scheduler's rendering in its reasons: ``{key: value}``."""
        return f"{{{self.key}: {self.value}}}"


class NodeInfo(_Model):
    """The scheduler's view of a Node (DESIGN.md 3); free capacity lives in the ledger.

    ``runtimes`` and ``tags`` are sorted and lower-cased so two Nodes with the same labels give
    equal NodeInfos whatever order the API server listed their labels in.
    """

    hostname: str
    runtimes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    kind: str = "linux"
    cpu: int = 0
    memory: int = 0
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()

    @property
    def eligible(self) -> bool:
        """Takes new placements: Ready and not cordoned."""
        return self.ready and not self.unschedulable

    def cel_view(self, free_cpu: int, free_memory: int) -> dict[str, Any]:
        """The ``node`` variable as CEL expressions see it (camelCase field names)."""
        return {
            "hostname": self.hostname,
            "runtimes": list(self.runtimes),
            "tags": list(self.tags),
            "labels": dict(self.labels),
            "kind": self.kind,
            "cpu": self.cpu,
            "memory": self.memory,
            "freeCpu": free_cpu,
            "freeMemory": free_memory,
        }
