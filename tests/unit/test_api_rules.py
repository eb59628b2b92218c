"""``controller/api/rules.py``: what a rule reads of ``self`` (its memo key), and that a rule
is evaluated once per distinct value of it. (tests/integration/test_api_rules.py asks the
real API server the same questions as the models.)"""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import rules as rules_module
from controller.api.rules import Rule, broken, frozen, validations


@pytest.mark.parametrize(
    ("rule", "reads"),
    [
        ("self.kind == 'Service' || !has(self.count)", ("kind", "count")),
        ("self.target.matches('^a$') || self.target == 'b'", ("target",)),
        ("size(self.topologySpread) == 0", ("topologySpread",)),
        ("self.all(a, self.exists_one(b, b.k == a.k))", None),  # iterates: the whole value
        ("self in ['a', 'b']", None),
    ],
)
def test_what_a_rule_reads(rule: str, reads: tuple[str, ...] | None) -> None:
    assert Rule(rule, "m").reads == reads


def test_a_rule_is_evaluated_once_per_value_of_what_it_reads() -> None:
    rule = Rule("self.kind == 'Service' || !has(self.count)", "count only on a Service")
    asked: list[dict[str, Any]] = []

    def judge(obj: dict[str, Any]) -> Rule | None:
        def as_json() -> dict[str, Any]:
            asked.append(obj)
            return obj

        return broken((rule,), lambda r: tuple(frozen(obj.get(f)) for f in r.reads or ()), as_json)

    assert judge({"kind": "Job", "count": 2}) is rule
    assert judge({"kind": "Job", "count": 2, "other": "ignored"}) is rule  # remembered
    assert judge({"kind": "Service", "count": 2}) is None
    assert judge({"kind": "Job"}) is None
    assert len(asked) == 3


def judge_all(rules: tuple[Rule, ...], obj: dict[str, Any]) -> Rule | None:
    return broken(rules, lambda r: frozen(obj), lambda: obj)


def test_the_rule_named_is_the_first_that_is_broken_in_the_models_order() -> None:
    """As the API server, which reports the rules of one schema node in their order, the first
    broken one is the one the message names."""
    kind = Rule("self.kind in ['Job', 'Service']", "kind must be Job or Service", ".kind")
    count = Rule("self.kind == 'Service' || !has(self.count)", "count only on a Service")
    replicas = Rule("!has(self.count) || self.count > 0", "count must be positive", ".count")
    rules = (kind, count, replicas)
    assert judge_all(rules, {"kind": "Pod", "count": 0}) is kind
    assert judge_all(rules, {"kind": "Job", "count": 0}) is count
    assert judge_all(rules, {"kind": "Service", "count": 0}) is replicas
    assert judge_all(rules, {"kind": "Service", "count": 3}) is None


def test_a_rule_that_cannot_be_evaluated_is_broken() -> None:
    """The API server refuses an object whose rule fails to evaluate (a field that is not
    there, a type it cannot compare), and so does orca."""
    rule = Rule("self.count > 1", "count above one")
    assert judge_all((rule,), {}) is rule
    assert judge_all((rule,), {"count": "three"}) is rule
    assert judge_all((rule,), {"count": 3}) is None


@pytest.mark.parametrize(
    ("rule", "holds"),
    [("true", True), ("false", False), ("1 == 1", True), ("'a' == 'b'", False)],
)
def test_a_rule_holds_exactly_when_it_evaluates_to_true(rule: str, holds: bool) -> None:
    assert (judge_all((Rule(rule, "m"),), {}) is None) is holds


def test_the_schema_entry_carries_the_field_path_only_when_there_is_one() -> None:
    assert Rule("self.a", "msg").schema() == {"rule": "self.a", "message": "msg"}
    assert Rule("self.a", "msg", ".a").schema() == {
        "rule": "self.a",
        "message": "msg",
        "fieldPath": ".a",
    }
    assert validations(Rule("self.a", "m"), Rule("self.b", "n", ".b")) == {
        "x-kubernetes-validations": [
            {"rule": "self.a", "message": "m"},
            {"rule": "self.b", "message": "n", "fieldPath": ".b"},
        ]
    }


def test_the_memo_is_bounded_and_starts_over_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules_module, "MAX_MEMO", 3)
    rule = Rule("self.n >= 0", "n is not negative")
    evaluated: list[int] = []

    def holds(n: int) -> bool:
        def as_json() -> dict[str, int]:
            evaluated.append(n)
            return {"n": n}

        return rule.holds(n, as_json)

    assert all(holds(n) for n in (1, 2, 3))
    assert holds(1) and evaluated == [1, 2, 3]  # remembered
    assert holds(4)  # a fourth: the memo starts over, holding 4 alone
    assert holds(1) and evaluated == [1, 2, 3, 4, 1]


def test_a_memo_key_is_the_value_with_lists_and_maps_made_hashable() -> None:
    value = {"b": [1, {"c": [2, 3]}], "a": "x"}
    key = frozen(value)
    assert key == (("a", "x"), ("b", (1, (("c", (2, 3)),))))
    assert hash(key) == hash(frozen({"a": "x", "b": [1, {"c": [2, 3]}]}))  # order of keys
    assert frozen([1, [2]]) != frozen([1, 2])
    assert frozen("s") == "s" and frozen(None) is None


def test_a_models_rules_are_remembered_by_every_field_any_of_them_reads() -> None:
    """The spec's rules share one memo key, of the fields they read together: a verdict
    remembered for one spec is never taken for a spec that differs in a field one rule reads
    (a Service's count, under ``gang.minCount <= count``), nor for another kind."""
    from pydantic import ValidationError

    from controller.api.models import WorkloadSpec, _read_together

    read = {field for rule in WorkloadSpec.RULES for field in rule.reads or ()}
    assert (
        set(_read_together(WorkloadSpec))
        == read
        == {
            "kind",
            "count",
            "schedule",
            "topologySpread",
            "gang",
        }
    )
    fits = {"kind": "Service", "count": 5, "gang": {"minCount": 3}}
    assert WorkloadSpec.model_validate(fits).gang is not None
    for broken_spec, message in (
        ({**fits, "count": 2}, "gang.minCount must not be more than count"),
        ({**fits, "kind": "Job"}, "count is only allowed when kind is Service"),
    ):
        with pytest.raises(ValidationError, match=message):
            WorkloadSpec.model_validate(broken_spec)
    assert WorkloadSpec.model_validate(fits).gang is not None  # and remembered as it was
