"""The Workload API's cross-field rules, each written once, as the CEL the API server checks.

A ``Rule`` is one entry of a CRD's ``x-kubernetes-validations`` (the CEL ``rule``, with
``self`` the object or list it sits on, its ``message`` and ``fieldPath``). The models list
their rules once; from that list come both the CRD's validations (``validations``) and orca's
own check of the same rule (``check``), which evaluates the very same CEL with cel-python, so
``orca plan``, the admission webhook and the ``Invalid`` backstop refuse exactly what
``kubectl apply`` refuses, with the same message. (Before, each rule was written twice, in CEL
and in Python, with its message copied; a mismatch only showed against a real API server.)

Evaluating CEL for every object validated would cost: a rule's verdict is memoised per value
of what it reads of ``self`` (the fields it names, or the whole value when it iterates over
it), so a batch of Workloads that look alike, or the same Workload decided again, costs a
dictionary lookup. The CEL is compiled on first use (the grammar is built, or loaded from
``controller.scheduler.celcache``'s cache, only then).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic.config import JsonDict

MAX_MEMO: Final = 4096
"""Distinct values remembered per rule; the memo starts over past it."""

_FIELD = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")
_WHOLE = re.compile(r"\bself\b(?!\.[A-Za-z_][A-Za-z0-9_]*\b(?!\s*\())")


@dataclass(frozen=True)
class Rule:
    """One rule: ``rule`` (CEL) must hold, else ``message``; ``field_path`` is where the API
    server reports it (``.count``), relative to the object it sits on."""

    rule: str
    message: str
    field_path: str | None = None
    reads: tuple[str, ...] | None = field(init=False, compare=False, repr=False)
    """The fields of ``self`` the rule names (``self.kind``, ``has(self.count)``), or None when
    it reads ``self`` as a whole (iterates over it, matches it...): what its memo is keyed on."""
    _program: list[Any] = field(default_factory=list, compare=False, repr=False)
    _memo: dict[Hashable, bool] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        whole = _WHOLE.search(self.rule) is not None
        reads = None if whole else tuple(dict.fromkeys(_FIELD.findall(self.rule)))
        object.__setattr__(self, "reads", reads)

    def schema(self) -> dict[str, str]:
        """Its ``x-kubernetes-validations`` entry."""
        entry = {"rule": self.rule, "message": self.message}
        if self.field_path is not None:
            entry["fieldPath"] = self.field_path
        return entry

    def holds(self, key: Hashable, value: Callable[[], Any]) -> bool:
        """Whether the rule holds for ``self`` = ``value()`` (its JSON form, asked only when
        the verdict for ``key``, what the rule reads of it, is not remembered)."""
        verdict = self._memo.get(key)
        if verdict is None:
            verdict = self._evaluate(value())
            if len(self._memo) >= MAX_MEMO:
                self._memo.clear()
            self._memo[key] = verdict
        return verdict

    def _evaluate(self, value: Any) -> bool:
        import celpy
        from celpy.adapter import json_to_cel
        from celpy.evaluation import CELEvalError

        if not self._program:
            environment = celpy.Environment()
            self._program.append(environment.program(environment.compile(self.rule)))
        try:
            result = self._program[0].evaluate({"self": json_to_cel(value)})
        except CELEvalError:
            return False  # the API server refuses an object whose rule fails to evaluate
        return result is True or (not isinstance(result, Exception) and bool(result) is True)


def validations(*rules: Rule) -> JsonDict:
    """The ``json_schema_extra`` that puts ``rules`` in the CRD."""
    return {"x-kubernetes-validations": [dict(r.schema()) for r in rules]}


def broken(
    rules: tuple[Rule, ...],
    key_of: Callable[[Rule], Hashable],
    as_json: Callable[[], Any],
) -> Rule | None:
    """The first of ``rules`` that ``self`` breaks, or None. ``key_of(rule)`` is what the rule
    reads of ``self`` (hashable: ``frozen``); ``as_json()`` the whole of ``self`` as the API
    server sees it, asked only when a rule's verdict for that key is not remembered."""
    for rule in rules:
        if not rule.holds(key_of(rule), as_json):
            return rule
    return None


def frozen(value: Any) -> Hashable:
    """``value`` as a memo key: lists as tuples (models are frozen, hence hashable)."""
    if type(value) is list:
        return tuple(frozen(v) for v in value)
    if type(value) is dict:
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    return value  # type: ignore[no-any-return]
