"""The PriorityClasses the operator watches, and who to decide again when one changes.

Fed by the PriorityClass informer (``handlers.PriorityClassEvents``; nothing is decided before
it has listed once, so a Workload naming a class is never briefly Invalid at start-up).
Resolution itself is pure (``controller.scheduler.priority``); this keeps the current
``PriorityClasses`` value and answers the queue's "how important is this key" and the
handlers' "who cares about this class".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controller.operator.state import ClusterState, is_newer
from controller.scheduler.priority import (
    NO_CLASSES,
    NO_PRIORITY,
    Priority,
    PriorityClass,
    PriorityClassError,
    PriorityClasses,
    priority_class_from_object,
)

logger = logging.getLogger("orca.priorities")


class PriorityIndex:
    """PriorityClasses by name (as last seen), and the resolver built from them."""

    def __init__(self) -> None:
        self._classes: dict[str, PriorityClass] = {}
        self._versions: dict[str, str | None] = {}
        self._refused: dict[str, str | None] = {}  # name -> resourceVersion logged
        self.classes: PriorityClasses = NO_CLASSES

    def resolve(self, state: ClusterState, key: str) -> Priority:
        """The priority of Workload ``key`` now (0 for one whose spec does not parse)."""
        record = state.records.get(key)
        if record is None or record.workload is None:
            return NO_PRIORITY
        return self.classes.resolve(record.workload.spec.priority_class_name)

    def upsert(self, obj: Mapping[str, Any]) -> set[str | None] | None:
        """Record a PriorityClass; returns the class names whose Workloads may resolve
        differently now (None in the set: those naming no class, when the default changed),
        or None if nothing the scheduler reads changed."""
        metadata = obj.get("metadata") or {}
        name, version = metadata.get("name"), metadata.get("resourceVersion")
        if not isinstance(name, str) or not is_newer(version, self._versions.get(name)):
            return None
        self._versions[name] = version
        try:
            parsed: PriorityClass | None = priority_class_from_object(obj)
        except PriorityClassError as exc:  # the API server checks these; be safe anyway
            if self._refused.get(name) != version:
                self._refused[name] = version
                logger.warning("PriorityClass %s cannot be read, treated as absent: %s", name, exc)
            parsed = None
        if self._classes.get(name) == parsed:
            return None
        return self._set(name, parsed)

    def delete(self, name: str) -> set[str | None] | None:
        self._versions.pop(name, None)
        if name not in self._classes:
            return None
        return self._set(name, None)

    def _set(self, name: str, parsed: PriorityClass | None) -> set[str | None]:
        before = self.classes.default
        if parsed is None:
            self._classes.pop(name, None)
        else:
            self._classes[name] = parsed
        self.classes = PriorityClasses.of(self._classes.values())
        touched: set[str | None] = {name}
        if before != self.classes.default:
            touched.add(None)
        return touched

    @staticmethod
    def keys_naming(state: ClusterState, names: set[str | None]) -> set[str]:
        """Workloads whose ``priorityClassName`` is one of ``names`` (None: names none)."""
        return {
            key
            for key, record in state.records.items()
            if record.workload is not None and record.workload.spec.priority_class_name in names
        }
