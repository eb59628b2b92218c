"""``controller/api/rules.py``: what a rule reads of ``self`` (its memo key), and that a rule
is evaluated once per distinct value of it. (tests/integration/test_api_rules.py asks the
real API server the same questions as the models.)"""

from __future__ import annotations

from typing import Any

import pytest

from controller.api.rules import Rule, broken, frozen


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
