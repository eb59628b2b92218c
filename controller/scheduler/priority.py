"""PriorityClasses (``scheduling.k8s.io/v1``) and a Workload's priority, as Pod admission
resolves them.

Kubernetes' priority admission plugin gives a Pod the value of the class it names; a Pod that
names none gets the ``globalDefault`` class (the lowest-valued one, should a race have left
several), else priority 0 with ``preemptionPolicy: PreemptLowerPriority``; a name with no class
is refused: ``no PriorityClass with name high was found``. orca resolves a Workload the same
way, at every decision rather than once at admission, so a class created after its Workload
lets it run: the Workload is ``Invalid`` until then, with that message.

Pure: the operator keeps the classes it watches in a ``PriorityClasses`` value, ``orca plan``
builds one from the documents it reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from controller.api.models import DNS1123_SUBDOMAIN_PATTERN

API_GROUP: Final = "scheduling.k8s.io"
API_VERSION: Final = f"{API_GROUP}/v1"
KIND: Final = "PriorityClass"
PLURAL: Final = "priorityclasses"
#: Where the PriorityClass objects this module reads are listed.
LIST_PATH: Final = f"/apis/{API_GROUP}/v1/{PLURAL}"

#: Kubernetes' bound: the highest system class (user classes go up to 1e9, below it).
HIGHEST_PRIORITY: Final = 2_000_001_000
DEFAULT_PRIORITY: Final = 0


class PreemptionPolicy(StrEnum):
    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


class PriorityClassError(ValueError):
    """A PriorityClass document orca cannot read (the message names the field)."""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """The parts of a PriorityClass the scheduler reads."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY


@dataclass(frozen=True, slots=True)
class Priority:
    """A Workload's resolved priority: the value, whether it may preempt, and the class it
    came from (None: no class, the default 0). ``error`` set: the class it names is missing."""

    value: int = DEFAULT_PRIORITY
    preempts: bool = True
    class_name: str | None = None
    error: str | None = None


NO_PRIORITY: Final = Priority()

_NAME = re.compile(DNS1123_SUBDOMAIN_PATTERN)


def priority_class_from_object(obj: Mapping[str, Any]) -> PriorityClass:
    """A PriorityClass from its API object (or a YAML document), checked as the API server
    would; raises ``PriorityClassError`` with one line naming the field."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or len(name) > 253 or not _NAME.fullmatch(name):
        raise PriorityClassError(f"PriorityClass metadata.name {str(name)[:60]!r} is not valid")
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise PriorityClassError(f"PriorityClass {name}: value must be an integer")
    if not -(2**31) <= value <= HIGHEST_PRIORITY:
        raise PriorityClassError(
            f"PriorityClass {name}: value {value} is out of range (at most {HIGHEST_PRIORITY})"
        )
    default = obj.get("globalDefault", False)
    if not isinstance(default, bool):
        raise PriorityClassError(f"PriorityClass {name}: globalDefault must be true or false")
    policy = obj.get("preemptionPolicy") or PreemptionPolicy.PREEMPT_LOWER_PRIORITY.value
    try:
        preemption = PreemptionPolicy(policy)
    except ValueError:
        allowed = ", ".join(p.value for p in PreemptionPolicy)
        raise PriorityClassError(
            f"PriorityClass {name}: preemptionPolicy {str(policy)[:40]!r} is not one of {allowed}"
        ) from None
    return PriorityClass(name, value, default, preemption)


@dataclass(frozen=True)
class PriorityClasses:
    """The cluster's PriorityClasses by name, with the globalDefault one found once."""

    by_name: Mapping[str, PriorityClass]
    default: PriorityClass | None

    @classmethod
    def of(cls, classes: Iterable[PriorityClass]) -> PriorityClasses:
        by_name = {c.name: c for c in classes}
        defaults = [c for c in by_name.values() if c.global_default]
        # Admission's rule when a race left several defaults: the lowest value wins.
        default = min(defaults, key=lambda c: (c.value, c.name)) if defaults else None
        return cls(by_name, default)

    @property
    def lowest(self) -> int:
        """No Workload's priority is below this (every class's value, and 0: a Workload
        without a class and no default, or naming a missing one). A Workload at or below it
        has nothing to preempt, which spares clusters without PriorityClasses the search."""
        return min([DEFAULT_PRIORITY, *(c.value for c in self.by_name.values())])

    def resolve(self, class_name: str | None) -> Priority:
        """The priority a Workload naming ``class_name`` (or none) gets."""
        if class_name is None:
            chosen = self.default
            if chosen is None:
                return NO_PRIORITY
        else:
            found = self.by_name.get(class_name)
            if found is None:
                return Priority(
                    class_name=class_name,
                    error=f"spec.priorityClassName: no PriorityClass with name {class_name} "
                    "was found",
                )
            chosen = found
        return Priority(
            value=chosen.value,
            preempts=chosen.preemption_policy is PreemptionPolicy.PREEMPT_LOWER_PRIORITY,
            class_name=chosen.name,
        )


NO_CLASSES: Final = PriorityClasses({}, None)
