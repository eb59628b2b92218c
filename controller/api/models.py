"""The Workload API (``orca.cloudinit.dev/v1alpha1``).

These pydantic models are the single source of truth for the API: the CRD in ``crds/`` is
generated from them (``controller.api.crd``) and a test fails when the two drift. Models are
pure (no I/O) and share one config: frozen, camelCase on the wire, unknown fields refused
(``kubectl apply`` validates strictly too, so ``orca plan`` rejects what the API server would).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Protocol, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from controller.api import resources as names
from controller.api.quantity import parse_quantity
from controller.api.resources import RESOURCE_NAME_MESSAGE, Scalars
from controller.api.rules import Rule, broken, frozen, validations

GROUP = "orca.cloudinit.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "Workload"
PLURAL = "workloads"
SINGULAR = "workload"
#: Where a Workload without a namespace is (as kubectl and the API server have it).
DEFAULT_NAMESPACE = "default"

# ``orcawl``: Kubernetes has its own ``scheduling.k8s.io`` Workload (and Kueue used ``wl``, now
# ``kwl``), so a bare ``workloads`` or ``wl`` may name another API's resource; ``orca`` is the
# category (``kubectl get orca``).
SHORT_NAMES = ("orcawl",)
CATEGORIES = ("orca",)


def workload_key(namespace: str, name: str) -> str:
    """``<namespace>/<name>``: how orca names a Workload in logs, the ledger, the queue and
    plans; the one place it is built (``Workload.key``, ``key_of``)."""
    return f"{namespace}/{name}"


def key_of(obj: Mapping[str, Any]) -> str:
    """The key of a Workload object as listed or watched, parseable or not: an object without
    a namespace is in ``default``, as ``ObjectMeta`` reads it."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    return workload_key(
        str(metadata.get("namespace") or DEFAULT_NAMESPACE), str(metadata.get("name"))
    )


def workload_path(
    namespace: str | None = None, name: str | None = None, status: bool = False
) -> str:
    """The REST path of the Workloads (all namespaces), a namespace's, one Workload, or its
    status subresource: the one place the operator and the commands build it."""
    path = f"/apis/{GROUP}/{VERSION}"
    if namespace is not None:
        path += f"/namespaces/{namespace}"
    path += f"/{PLURAL}"
    if name is not None:
        path += f"/{name}" + ("/status" if status else "")
    return path


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
MAX_TOPOLOGY_SPREAD = 4
MAX_SKEW = 1000
MAX_MIN_DOMAINS = 1000
MIN_WEIGHT, MAX_WEIGHT = -100, 100

# Names as the API server validates them (apimachinery's validation package): a namespace is
# a DNS-1123 label, a Node or a Workload name a DNS-1123 subdomain.
MAX_NAMESPACE_LENGTH = 63
MAX_NAME_LENGTH = 253
DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = re.compile(DNS1123_LABEL_PATTERN)
# ``<namespace>/<name>-<index>``, with room for any index a replica can have.
MAX_ALLOC_ID_LENGTH = MAX_NAMESPACE_LENGTH + 1 + MAX_NAME_LENGTH + 1 + 10
# The largest cpu (millicores) or memory (bytes) orca accepts anywhere: exact as a float64 (the
# scores divide by it) and 1,024 times below int64's limit, so the node table's int64 sums of
# bookings stay exact. 2^53 bytes is 8 PiB; 2^53 millicores are 9 trillion cores.
MAX_SCALED_QUANTITY = 2**53
RUNTIME_NAME_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
# Kubernetes resource.Quantity, non-negative (the apimachinery regex without the sign).
QUANTITY_PATTERN = (
    r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_SIGNED_QUANTITY_RE = re.compile(r"[+-]?" + QUANTITY_PATTERN.removeprefix("^").removesuffix("$"))


#: The one model config (the API's, and the scheduler's value types built on it): frozen
#: values, camelCase aliases, unknown fields are an error.
MODEL_CONFIG = ConfigDict(
    frozen=True,
    alias_generator=to_camel,
    populate_by_name=True,
    extra="forbid",
    use_enum_values=False,
)


#: The distinct sets of fields given, shared by every model given the same (``Compact``);
#: past this many, a model keeps its own set.
MAX_SHARED_FIELD_SETS = 4096
_FIELD_SETS: dict[frozenset[str], set[str]] = {}


class Compact(BaseModel):
    """A model that shares its record of which fields were given with every other model given
    the same fields.

    pydantic keeps that record (``model_fields_set``) as a set per instance: 216 bytes for a
    few fields, 728 for five or more. The operator holds a Workload, its status and a
    NodeInfo per object; shared, a placed Job's status went from 4.4 to 2.0 KB, 10,000
    parsed Workloads from 30 to 17 MB, 5,000 NodeInfos from 8.0 to 4.5 MB (traced by
    ``tracemalloc``), and parsing a Workload got faster (fewer objects for the collector),
    for a record that only says which of a handful of combinations of fields was given.

    Sharing one set is safe because nothing mutates it in place: the models are frozen
    (pydantic's ``__setattr__``, which adds to the set, refuses), and ``model_copy``
    copies the set before it adds the updated fields (``BaseModel.__copy__``).
    """

    def model_post_init(self, context: Any, /) -> None:
        given = self.__pydantic_fields_set__
        key = frozenset(given)
        shared = _FIELD_SETS.get(key)
        if shared is None:
            if len(_FIELD_SETS) >= MAX_SHARED_FIELD_SETS:
                return
            shared = _FIELD_SETS.setdefault(key, given)
        object.__setattr__(self, "__pydantic_fields_set__", shared)


class _Model(Compact):
    """Shared config: frozen values, camelCase aliases, unknown fields are an error."""

    model_config = MODEL_CONFIG


class _Ruled(_Model):
    """A model with cross-field rules (``controller.api.rules``): listed once in ``RULES``, they
    are both the CRD's ``x-kubernetes-validations`` (the class passes
    ``json_schema_extra=validations(*RULES)``) and orca's own check, the same CEL evaluated
    here, with the same message."""

    RULES: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _rules_hold(self) -> Self:
        names = _api_names(type(self))
        fields = _read_together(type(self))
        # One key for every rule, of the fields they read together: each field frozen once
        # (a Workload's five spec rules read its kind five times; a spec's validation took
        # 8.4 us with a key per rule, 7.0 with one).
        key = tuple(frozen(getattr(self, names[field])) for field in fields)
        rule = broken(self.RULES, lambda _: key, self._as_api_json)
        if rule is not None:
            raise ValueError(rule.message)
        return self

    def _as_api_json(self) -> Any:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


@functools.cache
def _api_names(cls: type[BaseModel]) -> dict[str, str]:
    """A model's field names by their names in the API (camelCase)."""
    return {(f.alias or name): name for name, f in cls.model_fields.items()}


@functools.cache
def _read_together(cls: type[_Ruled]) -> tuple[str, ...]:
    """The API names of the fields any of ``cls``'s rules reads (``Rule.reads``), in the
    order first read; every field when one rule reads ``self`` as a whole. A rule's verdict
    depends on its own fields only: under a key of more fields it is the same verdict,
    remembered for fewer specs at a time (each rule's memo is bounded: ``MAX_MEMO``)."""
    if any(rule.reads is None for rule in cls.RULES):
        return tuple(_api_names(cls))
    return tuple(dict.fromkeys(field for rule in cls.RULES for field in rule.reads or ()))


def _list_rule(rule: Rule) -> AfterValidator:
    """A rule on a list field (``self`` is the list): checked as the API server checks it.
    The check is a module function bound to its rule, not a closure made here: this runs
    once, when the models are defined, and the check at every validation."""
    return AfterValidator(functools.partial(_check_list, rule))


def _check_list(rule: Rule, items: list[Any]) -> list[Any]:
    def as_json() -> Any:
        return [i.model_dump(by_alias=True, mode="json", exclude_none=True) for i in items]

    if broken((rule,), lambda _: tuple(items), as_json) is not None:
        raise ValueError(rule.message)
    return items


_QUANTITY_SCHEMA: JsonDict = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
}


Expression = Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_LENGTH)]
"""A CEL expression over ``node``; compiled by ``controller.scheduler.celexpr``."""

RuntimeName = Annotated[
    str, Field(min_length=1, max_length=MAX_RUNTIME_NAME, pattern=RUNTIME_NAME_PATTERN)
]


def quantity_to_int(value: object, scale: int = 1, unit: str | None = None) -> int:
    """``value * scale`` rounded up (cpu: scale 1000 = millicores), parsed by the kubernetes
    client after the apimachinery syntax check (whole string: ``"1\\n"`` is not a quantity).

    Raises ``ValueError`` (one line, in the user's terms) for anything that is not a
    non-negative quantity of at most ``MAX_SCALED_QUANTITY`` after scaling.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(
            f"must be a Kubernetes quantity such as 500m or 256Mi, not {type(value).__name__}"
        )
    return _quantity_to_int(value, scale, unit)


@functools.lru_cache(maxsize=4096)
def _quantity_to_int(value: str | int | float, scale: int, unit: str | None) -> int:
    shown = _shown_value(value)
    if isinstance(value, str) and not _SIGNED_QUANTITY_RE.fullmatch(value):
        raise ValueError(f"{shown} is not a Kubernetes quantity (examples: 500m, 2, 256Mi)")
    try:
        q: Decimal = parse_quantity(value) * scale
    except ArithmeticError:  # decimal.Overflow for 1e999999999
        q = Decimal("Infinity")
    except ValueError as exc:
        raise ValueError(f"{shown} is not a Kubernetes quantity: {exc}") from None
    if q.is_nan():
        raise ValueError(f"{shown} is not a Kubernetes quantity")
    if q < 0:
        raise ValueError(f"{shown} must not be negative")
    if q > MAX_SCALED_QUANTITY:
        unit = unit or {1000: "millicores", 1: "bytes"}.get(scale, f"units of 1/{scale}")
        raise ValueError(f"{shown} is more than the maximum, {MAX_SCALED_QUANTITY} {unit} (2^53)")
    return int(q.to_integral_value(rounding=ROUND_CEILING))


class WorkloadKind(StrEnum):
    JOB = "Job"
    SERVICE = "Service"
    DAEMONSET = "DaemonSet"


class ScheduleMode(StrEnum):
    """Which nodes a DaemonSet is placed on (CamelCase, as every enum of the API)."""

    EVERY_NODE = "EveryNode"  # every eligible node; constraints ignored
    MATCHING = "Matching"  # the nodes that pass the constraints
    MANDATORY = "Mandatory"  # Matching, and a matching node that cannot take it is missing


#: The spellings of the first releases (the seed's), refused with the new one named.
RENAMED_MODES = {"every-node": "EveryNode", "matching": "Matching", "mandatory": "Mandatory"}
MAX_MODE_LENGTH = 32


def _renamed_mode(old: str) -> str:
    return f"'{old}' is now spelled '{RENAMED_MODES[old]}'"


def _check_mode(value: object) -> object:
    """The old kebab-case spellings: one line naming the new one (the API server says the same,
    from the CRD's rule)."""
    if isinstance(value, str) and value in RENAMED_MODES:
        raise ValueError(_renamed_mode(value))
    return value


_MODES_CEL = "[" + ", ".join(f"'{m.value}'" for m in ScheduleMode) + "]"
_RENAMED_CEL = "{" + ", ".join(f"'{o}': '{n}'" for o, n in RENAMED_MODES.items()) + "}"
ModeField = Annotated[
    ScheduleMode,
    BeforeValidator(_check_mode),
    # No ``enum``: the API server checks an enum before the CRD's rules and then skips them
    # (apiextensions-apiserver, customresource/strategy.go, ``hasBlockingErr``), so the rule
    # below, with its message naming the new spelling, would never be reached.
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": MAX_MODE_LENGTH,
            "x-kubernetes-validations": [
                {
                    "rule": f"self in {_MODES_CEL}",
                    "messageExpression": f'self in {_RENAMED_CEL} ? "\'" + self + '
                    f'"\' is now spelled \'" + {_RENAMED_CEL}[self] + "\'" : '
                    f'"must be one of {", ".join(m.value for m in ScheduleMode)}"',
                }
            ],
        }
    ),
]


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


class WhenUnsatisfiable(StrEnum):
    """What a topology spread constraint does when placing a replica would exceed maxSkew."""

    DO_NOT_SCHEDULE = "DoNotSchedule"  # a filter
    SCHEDULE_ANYWAY = "ScheduleAnyway"  # a score that prefers the least-loaded domain


class NodeInclusionPolicy(StrEnum):
    """Whether a topology spread constraint counts only the nodes that pass a filter of the
    Workload (core/v1 ``NodeInclusionPolicy``)."""

    HONOR = "Honor"  # only nodes that pass it count
    IGNORE = "Ignore"  # every node counts


class RebalancePolicy(StrEnum):
    NEVER = "Never"
    ALLOWED = "Allowed"


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
        description="Acceptable runtimes, any one of them; empty means any runtime. Matched "
        "without regard to case: wasm and wasmtime are one runtime, and pve-vm, pve-ct and "
        "proxmox match the nodes of kind proxmox.",
    )


#: The longest quantity a Workload may write (``123456789012345678901234567890Gi`` is 32): a
#: bound the API server's CEL cost estimate needs, and far above any real amount.
MAX_QUANTITY_LENGTH = 64


def _amount(name: str, value: object) -> int:
    """An amount of resource ``name`` as the scheduler counts it (``controller.api.resources``):
    a quantity, rounded up to millicores for cpu, to whole units otherwise, and for an
    extended resource or huge pages a whole number of units or pages. ``ValueError`` in the
    user's terms otherwise. Remembered per (name, value) of the usual types: a batch of
    Workloads repeats a few requests, each checked once and read once more for its amounts."""
    if type(value) is str or type(value) is int:
        return _known_amount(name, value)
    return _parse_amount(name, value)


@functools.lru_cache(maxsize=4096)
def _known_amount(name: str, value: str | int) -> int:
    return _parse_amount(name, value)


def _parse_amount(name: str, value: object) -> int:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        value = int(value)  # a body built in Python; what pydantic's int would have taken
    if isinstance(value, bool) or not isinstance(value, str | int):
        # As the API server's int-or-string: 0.5 is neither (write "500m").
        raise ValueError(
            f"must be a Kubernetes quantity such as 500m or 256Mi, not {type(value).__name__}"
        )
    if isinstance(value, str) and len(value) > MAX_QUANTITY_LENGTH:
        raise ValueError(f"{_shown_value(value)} is longer than {MAX_QUANTITY_LENGTH} characters")
    amount = quantity_to_int(value, names.scale_of(name), names.unit_of(name))
    if not names.is_extended(name) and not names.is_hugepages(name):
        return amount
    problem = names.whole_number_problem(name, parse_quantity(value))
    if problem is not None:
        raise ValueError(problem)
    return amount


def _shown_value(value: object) -> str:
    """A value as an error line repeats it: whole up to 40 characters, else its first 37 and
    "...", so a long value does not come back whole in the one line that refuses it."""
    return (
        repr(value) if not isinstance(value, str) or len(value) <= 40 else repr(value[:37] + "...")
    )


_RESOURCE_NAME_CEL = (
    "(k in ['cpu', 'memory', 'ephemeral-storage'] || "
    f"k.matches('{names.HUGEPAGES_PATTERN}') || "
    f"(size(k) <= {names.MAX_RESOURCE_NAME_LENGTH} && !k.contains('kubernetes.io/') && "
    "!k.startsWith('requests.') && "
    "k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')))"
)
_RESOURCES_SCHEMA: JsonDict = {
    "type": "object",
    "maxProperties": names.MAX_RESOURCES,
    "additionalProperties": {**_QUANTITY_SCHEMA, "maxLength": MAX_QUANTITY_LENGTH},
    "x-kubernetes-validations": [
        {
            "rule": f"self.all(k, {_RESOURCE_NAME_CEL})",
            "messageExpression": '"resource \'" + self.filter(k, !'
            + _RESOURCE_NAME_CEL
            + ")[0] + \"' "
            + RESOURCE_NAME_MESSAGE
            + '"',
        },
        {
            # ``quantity()`` is the API server's CEL quantity library (Kubernetes 1.29+).
            "rule": "self.all(k, !k.contains('/') || type(self[k]) == int || "
            "quantity(string(self[k])).isInteger())",
            "messageExpression": "\"resource '\" + self.filter(k, k.contains('/') && "
            "type(self[k]) != int && !quantity(string(self[k])).isInteger())[0] + "
            '"\' must be a whole number: an extended resource is counted in units"',
        },
    ],
}


def _check_resources(asked: dict[str, Any]) -> dict[str, Any]:
    """Every name a resource a replica may ask for, every amount one of it, at most
    ``MAX_RESOURCES`` of them (``controller.api.resources``)."""
    if len(asked) > names.MAX_RESOURCES:
        raise ValueError(
            f"asks for {len(asked)} resources; at most {names.MAX_RESOURCES} are allowed"
        )
    for name, value in asked.items():
        problem = names.name_problem(name)
        if problem is not None:
            raise ValueError(f"resource {_shown_value(name)} {problem}")
        try:
            _amount(name, value)
        except ValueError as exc:
            raise ValueError(f"[{name}]: {exc}") from None
    return asked


class Resources(RootModel[dict[str, Any]]):
    """What each replica takes from its node's allocatable, by Kubernetes resource name, each
    amount a quantity kept as written (``controller.api.resources`` says which names and
    amounts are accepted, after the API server's rules for a container's requests)."""

    model_config = ConfigDict(frozen=True)

    # A field validator, not a model validator: pydantic runs a model's "after" validators
    # again on an instance handed to another model (every status built from a decision), a
    # field's only when the value is parsed.
    root: Annotated[
        dict[str, Any], AfterValidator(_check_resources), WithJsonSchema(_RESOURCES_SCHEMA)
    ] = Field(default_factory=dict)

    @functools.cached_property
    def amounts(self) -> tuple[int, int, Scalars]:
        """(cpu millicores, memory bytes, every other resource's amount by name): what one
        replica holds; zero amounts are left out of the scalars."""
        cpu = memory = 0
        scalars: list[tuple[str, int]] = []
        for name, value in self.root.items():
            amount = _amount(name, value)
            if name == names.CPU:
                cpu = amount
            elif name == names.MEMORY:
                memory = amount
            elif amount:
                scalars.append((name, amount))
        return cpu, memory, tuple(sorted(scalars))

    @property
    def cpu_millis(self) -> int:
        return self.amounts[0]

    @property
    def memory_bytes(self) -> int:
        return self.amounts[1]

    @property
    def scalars(self) -> Scalars:
        """The amounts of every resource but cpu and memory, by name (``Scalars``)."""
        return self.amounts[2]

    def given(self, name: str) -> bool:
        """Whether ``name`` is one of the resources listed (an amount of 0 included)."""
        return name in self.root


# Whitespace, spelled out: RE2's [[:space:]] (the API server's) is not Python's re (orca's
# evaluation of the same rule); these six are what both call space, and str.strip's.
_SPACE = " \t\n\r\f\v"
_SPACE_CLASS = "[ \\t\\n\\r\\f\\v]"
_AFFINITY_RULES = (
    Rule(
        f"!self.target.matches('^{_SPACE_CLASS}*[a-z0-9]([-a-z0-9]*[a-z0-9])?{_SPACE_CLASS}*$')"
        f" || self.target.matches({DNS1123_LABEL_PATTERN!r})",
        "target: a Workload name must not have whitespace or a newline around it",
        ".target",
    ),
)


class AffinityRule(_Ruled, json_schema_extra=validations(*_AFFINITY_RULES)):
    target: Expression = Field(
        description="What to prefer. A Workload name in the same namespace (anything that is "
        "a DNS-1123 label, e.g. redis): weight points per replica of it already on the node. "
        'Otherwise a CEL expression over node (e.g. node.kind == "linux"): weight points '
        "where it is true."
    )
    weight: int = Field(
        ge=MIN_WEIGHT,
        le=MAX_WEIGHT,
        description="Points added to the node's score, from -100 to 100; negative avoids.",
    )

    #: ``"web\n"`` is refused, never trimmed into the name ``web`` nor read as CEL.
    RULES = _AFFINITY_RULES

    @property
    def is_workload_name(self) -> bool:
        """The deterministic rule of docs/design.md 2: a DNS-1123 label, the whole string,
        names a Workload."""
        return DNS1123_LABEL.fullmatch(self.target) is not None


class TaintLike(Protocol):
    """A node taint as a toleration reads it (the scheduler's ``Taint``, from a Node)."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def effect(self) -> TaintEffect: ...


_TOLERATION_RULES = (
    Rule(
        "self.operator != 'Exists' || !has(self.value) || self.value == ''",
        "value must be empty when operator is Exists",
    ),
    Rule(
        "(has(self.key) && self.key != '') || self.operator == 'Exists'",
        "operator must be Exists when key is empty",
    ),
)


class Toleration(_Ruled, json_schema_extra=validations(*_TOLERATION_RULES)):
    """A Kubernetes Toleration (core/v1): which node taints a Workload accepts, and for a
    NoExecute taint for how long (``tolerationSeconds``, counted from the taint's
    ``timeAdded``, as kube's taint-eviction controller does for Pods)."""

    key: str | None = Field(
        default=None,
        max_length=316,
        description="The taint key it tolerates; empty (with operator Exists) tolerates every "
        "taint.",
    )
    operator: TolerationOperator = Field(
        default=TolerationOperator.EQUAL,
        description="Equal (default): the taint's value must be value. Exists: any value.",
    )
    value: str | None = Field(
        default=None,
        max_length=63,
        description="The taint value it tolerates, with operator Equal; empty with Exists.",
    )
    effect: TaintEffect | None = Field(
        default=None,
        description="The taint effect it tolerates: NoSchedule, PreferNoSchedule or NoExecute; "
        "empty tolerates every effect.",
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=-(10**15),
        le=10**15,  # 31 million years: exact as a float, so a JSON Schema bound
        description="For a NoExecute taint: how long a replica already on the node stays "
        "after the taint was added (timeAdded) before it moves; unset: forever; 0 or less: "
        "at once. Jobs and Services tolerate node.kubernetes.io/not-ready and "
        "node.kubernetes.io/unreachable for 300 s unless they list their own toleration for "
        "that key; DaemonSets tolerate both forever.",
    )

    RULES = _TOLERATION_RULES

    def tolerates(self, taint: TaintLike) -> bool:
        """``ToleratesTaint`` of k8s.io/api/core/v1: effect, key, then operator."""
        if self.effect is not None and self.effect is not taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator is TolerationOperator.EXISTS:
            return True
        return (self.value or "") == taint.value


# A label key as the API server validates it (a qualified name): an optional DNS-1123
# subdomain prefix and '/', then a name of at most 63 characters.
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MAX_LABEL_KEY_LENGTH = 253 + 1 + 63
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
_LABEL_KEY_FORM = (
    "an optional DNS subdomain prefix and '/', then a name of at most 63 letters, digits, "
    "'-', '_' or '.' that starts and ends with a letter or digit (e.g. topology.kubernetes.io/zone)"
)


def _check_label_key(value: str) -> str:
    """The pattern's verdict in words (pydantic would quote the regex at the user)."""
    if not _LABEL_KEY.fullmatch(value):
        raise ValueError(f"{_shown_value(value)} is not a valid label key: {_LABEL_KEY_FORM}")
    return value


LabelKey = Annotated[
    str,
    AfterValidator(_check_label_key),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_LABEL_KEY_LENGTH,
            # A rule rather than ``pattern``, so the API server's message is words too.
            "x-kubernetes-validations": [
                {
                    "rule": f"self.matches({LABEL_KEY_PATTERN!r})",
                    "message": f"must be a valid label key: {_LABEL_KEY_FORM}",
                }
            ],
        }
    ),
]
"""A Kubernetes label key (a qualified name), as the API server validates it."""


_SPREAD_RULES = (
    Rule(
        "self.whenUnsatisfiable == 'DoNotSchedule' || !has(self.minDomains)",
        "minDomains is only allowed when whenUnsatisfiable is DoNotSchedule",
        ".minDomains",
    ),
)


class TopologySpreadConstraint(_Ruled, json_schema_extra=validations(*_SPREAD_RULES)):
    """How this Workload's replicas spread over the values of a node label, as
    kube-scheduler's topologySpreadConstraints do for a Pod: the skew is max - min replicas
    per domain, a domain being a value of topologyKey on the nodes that carry every
    topologyKey of the constraints with the same whenUnsatisfiable and that the node
    inclusion policies count.
    """

    topology_key: LabelKey = Field(
        min_length=1,
        max_length=MAX_LABEL_KEY_LENGTH,
        description="A node label key; its values are the domains, e.g. "
        "topology.kubernetes.io/zone.",
    )
    max_skew: int = Field(ge=1, le=MAX_SKEW, description="The largest allowed max - min.")
    when_unsatisfiable: WhenUnsatisfiable = Field(
        default=WhenUnsatisfiable.DO_NOT_SCHEDULE,
        description="DoNotSchedule filters nodes; ScheduleAnyway only scores.",
    )
    min_domains: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MIN_DOMAINS,
        description="DoNotSchedule only: when fewer domains than this count, the smallest "
        "domain's count is taken as 0, so each domain takes at most maxSkew replicas until "
        "enough domains exist (kube-scheduler's minDomains). Absent: 1.",
    )
    node_affinity_policy: NodeInclusionPolicy = Field(
        default=NodeInclusionPolicy.HONOR,
        description="Honor (default): only nodes that pass the Workload's runtime and "
        "constraints (its node affinity) count towards the domains and the skew; Ignore: "
        "every node with the key counts.",
    )
    node_taints_policy: NodeInclusionPolicy = Field(
        default=NodeInclusionPolicy.IGNORE,
        description="Ignore (default): nodes count whatever their taints; Honor: nodes with "
        "a NoSchedule or NoExecute taint the Workload does not tolerate (cordoned and "
        "NotReady nodes included, as Kubernetes taints them) do not count.",
    )

    RULES = _SPREAD_RULES

    @property
    def domains_needed(self) -> int:
        """``minDomains``, 1 when absent (kube's ``ptr.Deref(c.MinDomains, 1)``)."""
        return self.min_domains if self.min_domains is not None else 1


class DaemonSchedule(_Model):
    mode: ModeField = Field(
        default=ScheduleMode.EVERY_NODE,
        description="Which nodes get a replica. EveryNode (default): every eligible node, the "
        "constraints ignored. Matching: the nodes that pass the constraints. Mandatory: as "
        "Matching, and a matching node that cannot take it (runtime, capacity) leaves the "
        "Workload PartiallyScheduled, with those nodes named in the message.",
    )


#: KEP-4671's default: how long a placed gang may stay below its minCount before it lets go.
DEFAULT_GANG_TIMEOUT = 300
MAX_GANG_TIMEOUT = 7 * 24 * 3600


class Gang(_Model):
    """All or nothing: a Service whose replicas are useful only together (a distributed
    training job's workers). KEP-4671's gang scheduling (``minCount`` of a PodGroup),
    Volcano's and coscheduling's ``minAvailable``, Kueue's all-or-nothing admission."""

    min_count: int = Field(
        ge=1,
        le=MAX_COUNT,
        description="The fewest replicas worth placing, 1 to count: orca places none or at "
        "least this many, never in between; count gives the seed's all-or-nothing Service.",
    )
    timeout_seconds: int = Field(
        default=DEFAULT_GANG_TIMEOUT,
        ge=0,
        le=MAX_GANG_TIMEOUT,
        description="How long a placed gang that lost replicas (a node gone, a taint) and "
        "cannot place them again may hold fewer than minCount before every placement is "
        "released, so the capacity it holds serves others; it is placed whole again when room "
        "returns. Default 300 (KEP-4671's).",
    )


#: An int-or-string that is a count or a percentage, as a PodDisruptionBudget's fields.
PERCENT_PATTERN = r"^(100|[1-9]?[0-9])%$"
_PERCENT = re.compile(PERCENT_PATTERN)
MAX_BUDGET = 2**31 - 1  # int32, as the PodDisruptionBudget's fields


COUNT_OR_PERCENT = "must be a non-negative integer or a percentage from 0% to 100%"


def _check_count_or_percent(value: object) -> object:
    """kube's ``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``: a
    non-negative integer, or a percentage from 0% to 100%."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= MAX_BUDGET:
            raise ValueError(COUNT_OR_PERCENT)
        return value
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        return value
    raise ValueError(COUNT_OR_PERCENT)


CountOrPercent = Annotated[
    int | str,
    BeforeValidator(_check_count_or_percent),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": [
                {
                    "rule": f"type(self) == int ? self >= 0 && self <= {MAX_BUDGET} : "
                    f"self.matches('{PERCENT_PATTERN}')",
                    "message": COUNT_OR_PERCENT,
                }
            ],
        }
    ),
]
"""A number of replicas or a percentage of them (PodDisruptionBudget's ``IntOrString``)."""


_DISRUPTION_RULES = (
    Rule(
        "has(self.minAvailable) != has(self.maxUnavailable)",
        "exactly one of minAvailable and maxUnavailable must be set",
    ),
)


class Disruption(_Ruled, json_schema_extra=validations(*_DISRUPTION_RULES)):
    """How many replicas must stay placed through orca's own voluntary moves (preemption,
    rebalancing) and a drain: a PodDisruptionBudget for this Workload, with its meaning and
    rounding (pkg/controller/disruption/disruption.go, ``getExpectedPodCount``)."""

    RULES = _DISRUPTION_RULES

    min_available: CountOrPercent | None = Field(
        default=None,
        description="Replicas that must stay placed: a number, or a percentage of the desired "
        "replicas (a DaemonSet's: the nodes it is for, whatever their room) rounded up. "
        "Exactly one of minAvailable and maxUnavailable.",
    )
    max_unavailable: CountOrPercent | None = Field(
        default=None,
        description="Replicas that may be missing: a number, or a percentage of the desired "
        "replicas (a DaemonSet's: the nodes it is for, whatever their room) rounded up. "
        "Exactly one of minAvailable and maxUnavailable.",
    )

    def desired_healthy(self, expected: int) -> int:
        """How many replicas must stay placed when ``expected`` are desired: kube's
        ``desiredHealthy`` (``GetScaledValueFromIntOrPercent`` rounding up)."""
        if self.max_unavailable is not None:
            return max(expected - _scaled(self.max_unavailable, expected), 0)
        if self.min_available is not None:
            return _scaled(self.min_available, expected)
        return 0

    def describe(self) -> str:
        """``minAvailable 3`` or ``maxUnavailable 20%``: the budget, as messages name it."""
        if self.min_available is not None:
            return f"minAvailable {self.min_available}"
        return f"maxUnavailable {self.max_unavailable}"


def _scaled(value: int | str, total: int) -> int:
    """apimachinery's ``GetScaledValueFromIntOrPercent(value, total, roundUp=true)``: an int as
    it is, a percentage of ``total`` rounded up (exactly, where kube rounds a float64)."""
    if isinstance(value, int):
        return value
    percent = int(value.removesuffix("%"))
    return -(-percent * total // 100)


_SPEC_RULES = (
    Rule(
        "self.kind == 'Service' || !has(self.count)",
        "count is only allowed when kind is Service",
        ".count",
    ),
    Rule(
        "self.kind == 'DaemonSet' || !has(self.schedule)",
        "schedule is only allowed when kind is DaemonSet",
        ".schedule",
    ),
    Rule(
        "self.kind == 'Service' || !has(self.topologySpread) || size(self.topologySpread) == 0",
        "topologySpread is only allowed when kind is Service",
        ".topologySpread",
    ),
    Rule(
        "self.kind == 'Service' || !has(self.gang)",
        "gang is only allowed when kind is Service",
        ".gang",
    ),
    Rule(
        "!has(self.gang) || self.gang.minCount <= (has(self.count) ? self.count : 1)",
        "gang.minCount must not be more than count",
        ".gang.minCount",
    ),
)
_UNIQUE_SPREAD = Rule(
    "self.all(a, self.exists_one(b, b.topologyKey == a.topologyKey"
    " && b.whenUnsatisfiable == a.whenUnsatisfiable))",
    "duplicate topologyKey and whenUnsatisfiable pair",
)


class WorkloadSpec(_Ruled, json_schema_extra=validations(*_SPEC_RULES)):
    RULES = _SPEC_RULES

    kind: WorkloadKind = Field(
        description="What to place. Job: one replica. Service: count replicas, on distinct "
        "nodes while there are enough. DaemonSet: one replica on each node it wants (see "
        "schedule)."
    )
    count: int | None = Field(
        default=None,
        ge=1,
        le=MAX_COUNT,
        description="Service only: how many replicas, 1 to 1000 (default 1). Scaling down "
        "removes the highest replica indexes.",
    )
    runtime: RuntimeSpec | None = Field(
        default=None,
        description="The runtimes it can run on; a node offers a runtime with the label "
        'runtime.orca.cloudinit.dev/<name>: "true". Absent: any node.',
    )
    resources: Resources | None = Field(
        default=None,
        description="What each replica takes from its node's allocatable, by resource name: "
        "cpu, memory, ephemeral-storage, hugepages-<size>, and extended resources such as "
        "nvidia.com/gpu (whole numbers), each a Kubernetes quantity. A node without that much "
        "free of each is not used; every replica also counts as one Pod against the node's "
        "allocatable pods. Absent: nothing but the Pod.",
    )
    constraints: list[Expression] = Field(
        default_factory=list,
        max_length=MAX_CONSTRAINTS,
        description="Hard filters: CEL expressions over node, all of which must be true on a "
        "node for it to take a replica, e.g. '\"ssd\" in node.tags'. node has hostname, labels, "
        "tags, runtimes, kind, cpu, memory, freeCpu and freeMemory (millicores, bytes).",
    )
    affinity: list[AffinityRule] = Field(
        default_factory=list,
        max_length=MAX_AFFINITY_RULES,
        description="Soft preferences: points added to (or, negative, taken from) the score of "
        "the nodes they match; the best score wins among the nodes that pass every filter.",
    )
    schedule: DaemonSchedule | None = Field(
        default=None, description="DaemonSet only: which nodes get a replica."
    )
    strategy: Strategy = Field(
        default=Strategy.SPREAD,
        description="How nodes are scored. Spread (default): the most capacity left free wins. "
        "BinPack: the least, so replicas fill nodes before they use others.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=MAX_TOLERATIONS,
        description="The node taints it tolerates, as a Pod's tolerations: a NoSchedule or "
        "NoExecute taint none of them tolerates keeps its replicas off the node (and moves "
        "them off, for NoExecute); an untolerated PreferNoSchedule taint lowers the score.",
    )
    topology_spread: Annotated[list[TopologySpreadConstraint], _list_rule(_UNIQUE_SPREAD)] = Field(
        default_factory=list,
        max_length=MAX_TOPOLOGY_SPREAD,
        description="Service only: spread the replicas over the values of node labels.",
        json_schema_extra=validations(_UNIQUE_SPREAD),
    )
    priority_class_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        description="A scheduling.k8s.io/v1 PriorityClass; absent: the globalDefault "
        "class, or priority 0.",
    )
    rebalance: RebalancePolicy = Field(
        default=RebalancePolicy.NEVER,
        description="Allowed: the rebalancer may move this Workload's replicas.",
    )
    gang: Gang | None = Field(
        default=None,
        description="Service only: place none or at least minCount replicas, never in "
        "between (all or nothing with minCount: count).",
    )
    disruption: Disruption | None = Field(
        default=None,
        description="A disruption budget: orca's preemption and rebalancing never take the "
        "Workload below it, and orca plan --drain reports a drain that would. A node lost by "
        "failure is not a voluntary disruption: its replicas are placed again regardless.",
    )

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

    @property
    def scalars(self) -> Scalars:
        """Per replica, every resource asked for but cpu and memory (``Resources.scalars``)."""
        return self.resources.scalars if self.resources else ()


class Placement(_Model):
    """One replica's decision: where it runs, its stable id and the score that won the node."""

    node: str = Field(
        min_length=1, max_length=MAX_NAME_LENGTH, description="The node the replica is on."
    )
    alloc_id: str = Field(
        min_length=1,
        max_length=MAX_ALLOC_ID_LENGTH,
        description="The replica's id, <namespace>/<name>-<index>, stable for its life.",
    )
    score: int = Field(ge=-(2**31), le=2**31 - 1, description="The score that won the node for it.")


class Condition(_Model):
    """A condition as the Kubernetes API conventions define it."""

    type: str = Field(
        description="Ready, Reconciling, Stalled, Scheduled, Preempted or MovePending (see "
        "conditions)."
    )
    status: str = Field(
        json_schema_extra={"enum": ["True", "False", "Unknown"]},
        description="True, False or Unknown.",
    )
    reason: str = Field(
        description="The situation in one CamelCase word: AllPlaced, PartiallyPlaced, "
        "Unschedulable, WaitingForCapacity, Unresolvable, InvalidSpec, Preempted, PlacedAgain, "
        "NodeUnreachable, NodeNotReady or NoExecuteTaint."
    )
    # None when empty: every status write costs the API server by its fields (the body, and
    # managedFields), and the conditions that are False say nothing more than their reason.
    # An empty message read back (older statuses, other writers) is None too, so the status
    # orca decides compares equal to the one it wrote.
    message: Annotated[str | None, BeforeValidator(lambda v: v or None)] = Field(
        default=None,
        description="For people. The diagnosis is in whichever of Reconciling and Stalled is "
        "True; Ready and Scheduled summarise and point there.",
    )
    last_transition_time: str = Field(
        json_schema_extra={"format": "date-time"},
        description="When the condition's status last changed.",
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation the condition was set for."
    )


class RejectionReason(_Model):
    """Why nodes were rejected: a reason, how many nodes, a few of their names, and the filter
    plugin that rejected them."""

    reason: str = Field(description="The reason, in the words of the filter that rejected.")
    count: int = Field(description="How many nodes were rejected for it.")
    nodes: list[str] = Field(default_factory=list, description="A few of those nodes.")
    plugin: str | None = Field(
        default=None,
        max_length=63,
        description="The filter plugin that rejected them (NodeEligibility, TaintToleration, "
        "Runtime, CelConstraints, TopologySpread, ResourcesFit): what orca explain names per "
        "node and orca_unschedulable_workloads counts by.",
    )


class WorkloadStatus(_Model):
    observed_generation: int | None = Field(
        default=None,
        description="The metadata.generation the status was decided for. Behind "
        "metadata.generation (0 before the first decision), orca has not decided the spec as "
        "it is now: kstatus, Flux and Argo CD then report the Workload as progressing.",
    )
    phase: Phase | None = Field(
        default=None,
        description="Absent until orca first decides (counted as Pending in its metrics). "
        "Scheduled (every replica placed), "
        "PartiallyScheduled (some), Unschedulable (none; message says why) or Invalid (the "
        "spec cannot run; message names the field). Selectable: kubectl get orcawl -A "
        "--field-selector status.phase=Unschedulable.",
    )
    desired: int | None = Field(
        default=None,
        description="How many replicas the decision wants (a DaemonSet: one per node it wants).",
    )
    placed: int | None = Field(default=None, description="How many replicas are placed.")
    placements: list[Placement] = Field(
        default_factory=list,
        description="Where each replica is placed: the record orca's capacity accounting is "
        "rebuilt from after a restart.",
    )
    # An atomic list, not a map keyed by type (the conventions' default for conditions): the
    # API server's field manager then records one path for the list instead of one per field
    # of each condition, and recomputes it on every status write. orca is the only writer of
    # this status and replaces it whole (a PUT), keeping other writers' conditions itself, so
    # a map's per-condition ownership buys nothing here; in bench_server_cost.py's
    # diagnostic run an atomic list cut the API server's CPU per status write by 22-28 %.
    # The whole status is one atomic map now (``crd.workload_crd``), which covers this list;
    # it stays atomic in its own right for a reader of the schema.
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
        description="Ready: every replica placed for the current generation (kubectl wait "
        "--for=condition=Ready). Reconciling: waiting for capacity, or to be placed again "
        "after a preemption. Stalled: nothing changes until the spec or the nodes do (an "
        "invalid spec, or only reasons freed capacity cannot cure). Scheduled: as Ready, kept "
        "for older clients. Preempted: the last preemption, who and where. MovePending "
        "(present only while it holds): a replica on a NotReady, unreachable or NoExecute-"
        "tainted node it tolerates for a while, and when it moves. kstatus (Flux, cli-utils) "
        "and Argo CD read Ready, Reconciling and Stalled.",
    )
    message: str | None = Field(
        default=None,
        description="How many replicas are placed or, when some are missing, why, in "
        "kube-scheduler's words: 0/5 nodes are available: 3 runtime wasm not offered, 2 "
        "Insufficient cpu.",
    )
    unschedulable: list[RejectionReason] = Field(
        default_factory=list,
        description="Why nodes were rejected when replicas are missing: one entry per reason "
        "(the first filter each node failed), with the count and a few node names.",
    )
    nodes: str | None = Field(
        default=None,
        description="The placements' nodes, for kubectl's wide output (a summary; "
        "placements is the record).",
    )
    # No rules in the schema: orca writes it, and every rule costs the API server CPU on
    # every status write (the spec's rules check what users write).
    resources: Annotated[
        Resources | None,
        WithJsonSchema({"type": "object", "additionalProperties": _QUANTITY_SCHEMA}),
    ] = Field(
        default=None,
        description="The resources each placement holds on its node, by name (the spec's at "
        "the time of the decision), so a resize is told apart from a capacity change.",
    )
    priority: int | None = Field(
        default=None,
        description="The priority the decision used, resolved from spec.priorityClassName.",
    )
    selector: str | None = Field(
        default=None,
        description="The label selector of this Workload's replicas, as the scale subresource "
        "reports it to a HorizontalPodAutoscaler: orca.cloudinit.dev/workload=<name> (the "
        "label the agents that run the replicas put on them). Absent for a name longer than "
        "a label value may be (63 characters).",
    )


#: The label on whatever runs a Workload's replicas; ``status.selector`` selects by it.
WORKLOAD_LABEL = f"{GROUP}/workload"
MAX_LABEL_VALUE = 63


def workload_selector(name: str) -> str | None:
    """``status.selector`` (the scale subresource's ``labelSelectorPath``) for Workload
    ``name``; None when the name cannot be a label value."""
    return f"{WORKLOAD_LABEL}={name}" if len(name) <= MAX_LABEL_VALUE else None


def status_body(status: WorkloadStatus) -> dict[str, Any]:
    """The status as orca writes it: the whole of it, since a write replaces what was there
    (``KubeApi.write_workload_status``), without the fields that say nothing (None, and
    ``unschedulable`` when nothing was rejected), which read back as the same model. Each field
    left out is bytes the API server does not decode, compare for ``managedFields``, validate,
    store and send to every watcher on every write."""
    body = status.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not body.get("unschedulable"):
        body.pop("unschedulable", None)
    return body


_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_PATTERN)


def _check_name(value: str) -> str:
    """A Workload's name as the API server checks it (a DNS-1123 subdomain)."""
    if not value or len(value) > MAX_NAME_LENGTH or not _DNS1123_SUBDOMAIN.fullmatch(value):
        raise ValueError(
            f"{value[:40]!r} is not a valid name (a DNS-1123 subdomain: lower-case letters, "
            f"digits, '-' and '.', at most {MAX_NAME_LENGTH} characters)"
        )
    return value


def _check_namespace(value: str) -> str:
    """A namespace as the API server checks it (a DNS-1123 label)."""
    if len(value) > MAX_NAMESPACE_LENGTH or not DNS1123_LABEL.fullmatch(value):
        raise ValueError(
            f"{value[:40]!r} is not a valid namespace (a DNS-1123 label: lower-case letters, "
            f"digits and '-', at most {MAX_NAMESPACE_LENGTH} characters)"
        )
    return value


def _as_utc(value: datetime | None) -> datetime | None:
    """A time without a zone is UTC (the API server writes ``Z``; a hand-written file may not),
    so times always compare."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class ObjectMeta(Compact):
    """The parts of ``metadata`` orca reads; the rest is the API server's business."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    name: Annotated[str, AfterValidator(_check_name)]
    namespace: Annotated[str, AfterValidator(_check_namespace)] = DEFAULT_NAMESPACE
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    uid: str | None = None
    creation_timestamp: Annotated[datetime | None, AfterValidator(_as_utc)] = Field(
        default=None, alias="creationTimestamp"
    )
    """When the API server created the object: preemption's stand-in for the start time of
    the Workload's replicas (``controller.scheduler.preemption``)."""


class Workload(Compact):
    """A Workload object as read from YAML or the API server."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    spec: WorkloadSpec
    status: WorkloadStatus | None = None

    @property
    def key(self) -> str:
        """``<namespace>/<name>`` (``workload_key``)."""
        return workload_key(self.metadata.namespace, self.metadata.name)
