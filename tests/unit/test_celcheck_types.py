"""The CEL type check: constraints and affinity targets are refused when ill-typed (issue 23).

Expected verdicts come from CEL's language definition (cel-spec ``doc/langdef.md``, "List of
Standard Definitions": each operator's overloads) and cel-go's checker, whose messages orca
uses (``checker/errors.go``: ``found no matching overload for '<fn>' applied to '<args>'``);
the bool requirement is the Kubernetes API server's for CRD validation rules
(``apiextensions-apiserver/pkg/apiserver/schema/cel/compilation.go``: "cel expression must
evaluate to a bool"). ``node``'s field types are orca's declaration (docs/design.md 3). Then: the
same refusal through the scheduler (``Invalid``), the operator, ``orca plan`` (exit 2) and an
affinity target that is a name with whitespace around it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import ValidationError

from controller.api.models import AffinityRule, Phase
from controller.cli import main
from controller.operator.app import Operator
from controller.operator.kube import KubeApi
from controller.operator.state import ClusterState
from controller.scheduler import celcheck
from controller.scheduler.celexpr import CelCompileError, compile_expression
from controller.scheduler.scheduler import Scheduler
from tests.support.cel import refusal
from tests.support.factories import (
    NOW,
    ledger_for,
    node,
    node_object,
    stored_workload,
    workload,
    workload_obj,
)

ILL_TYPED = [
    # _==_ : (A, A) -> bool
    ('node.cpu == "x"', "found no matching overload for '_==_' applied to '(int, string)'"),
    ('node.labels["zone"] != 1', "'_!=_' applied to '(string, int)'"),
    ("node.cpu == 1.0", "'_==_' applied to '(int, double)'"),
    # _<_ etc.: (bool, bool) (int, int) (uint, uint) (double, double) (string, string) (bytes,
    # bytes); no mixed numerics without cel-go's CrossTypeNumericComparisons
    ("node.cpu > 1.5", "'_>_' applied to '(int, double)'"),
    ("node.hostname < 3", "'_<_' applied to '(string, int)'"),
    ("node.tags <= node.runtimes", "'_<=_' applied to '(list(string), list(string))'"),
    # in : (A, list(A)) or (A, map(A, B))
    ("1 in node.tags", "'@in' applied to '(int, list(string))'"),
    ("1 in node.labels", "'@in' applied to '(int, map(string, string))'"),
    ('"x" in node.hostname', "'@in' applied to '(string, string)'"),
    # _&&_, _||_ : (bool, bool); !_ : (bool)
    ("node.cpu > 1 && node.hostname", "'_&&_' applied to '(bool, string)'"),
    ("node.cpu || true", "'_||_' applied to '(int, bool)'"),
    ("!node.cpu", "'!_' applied to '(int)'"),
    # -_ : (int) (double)
    ('-node.kind == "x"', "'-_' applied to '(string)'"),
    # _+_ : same numeric, string, bytes or list(A) twice; _-_ _*_ _/_ numeric; _%_ int, uint
    ('node.cpu + "m" == "1m"', "'_+_' applied to '(int, string)'"),
    ('node.hostname - "a" == ""', "'_-_' applied to '(string, string)'"),
    ("node.cpu % 2.0 == 0.0", "'_%_' applied to '(int, double)'"),
    # ... and not on doubles, even two (cel-go's stdlib declares modulo_int64 and
    # modulo_uint64 only: evaluating it would fail on every node)
    ("double(node.cpu) % 2.0 == 0.0", "'_%_' applied to '(double, double)'"),
    # _?_:_ : (bool, A, A) -> A
    ('(node.cpu > 1 ? 1 : "a") == 1', "'_?_:_' applied to '(bool, int, string)'"),
    ("(node.cpu ? true : false)", "'_?_:_' applied to '(int, bool, bool)'"),
    # _[_] : (list(A), int) -> A ; (map(A, B), A) -> B
    ('node.tags["a"] == "b"', "'_[_]' applied to '(list(string), string)'"),
    ('node.labels[1] == "b"', "'_[_]' applied to '(map(string, string), int)'"),
    # size, contains, startsWith, endsWith, matches
    ("size(node.cpu) > 1", "'size' applied to '(int)'"),
    ("node.hostname.startsWith(1)", "'startsWith' applied to 'string.(int)'"),
    ('node.cpu.contains("1")', "'contains' applied to 'int.(string)'"),
    # ... and as many arguments as one of their overloads takes (cel-python has no other: it
    # would fail with "no such overload" on every node)
    ('string() == ""', "found no matching overload for 'string' applied to '()'"),
    ("dyn() == 1", "'dyn' applied to '()'"),
    ("double(1, 2) == 1.0", "'double' applied to '(int, int)'"),
    ('size("a", "b") == 1', "'size' applied to '(string, string)'"),
    ("node.hostname.size(1) == 1", "'size' applied to 'string.(int)'"),
    ("node.hostname.startsWith()", "'startsWith' applied to 'string.()'"),
    ('node.hostname.contains("a", "b")', "'contains' applied to 'string.(string, string)'"),
    ("int() == 1", "'int' applied to '()'"),
    ("uint(1, 2) == 1u", "'uint' applied to '(int, int)'"),
    ('bytes() == b""', "'bytes' applied to '()'"),
    ("bool() == true", "'bool' applied to '()'"),
    ("type() == int", "'type' applied to '()'"),
    ('node.hostname.endsWith("a", "b")', "'endsWith' applied to 'string.(string, string)'"),
    ('matches("a")', "'matches' applied to '(string)'"),
    # a comprehension's condition is a bool
    ("node.tags.exists(t, t)", "exists() needs a condition of type bool, not string"),
    ("node.tags.all(t, size(t))", "all() needs a condition of type bool, not int"),
    # the whole expression: a bool (the API server's "cel expression must evaluate to a bool")
    ("node.cpu", "expression must evaluate to a bool, not int"),
    ("node.kind", "expression must evaluate to a bool, not string"),
    ('node.labels["zone"]', "expression must evaluate to a bool, not string"),
    ("node.tags", "expression must evaluate to a bool, not list(string)"),
    ("node.tags.map(t, t == 'a')", "expression must evaluate to a bool, not list(bool)"),
    # cel-go's names of types in messages: null, list(A)
    ("null == 1", "'_==_' applied to '(null, int)'"),
    ('[1] + ["a"] == []', "'_+_' applied to '(list(int), list(string))'"),
    # dyn matches any overload, yet the other operand still has to
    ("dyn(1) % 1.0 == 0", "'_%_' applied to '(dyn, double)'"),
    # an element of a list has the list's element type; node["name"] is the field
    ("node.tags[0] == 1", "'_==_' applied to '(string, int)'"),
    ('node["cpu"] == "x"', "'_==_' applied to '(int, string)'"),
    ('"abc"[0] == "a"', "a value of type string cannot be indexed at column 1"),
    ("Foo{a: 1} == 1", "message construction is not supported (column 1)"),
    ("exists(node.tags, t, true)", "exists() is a method: write list.exists(x, ...)"),
    # the type of a conditional is its branches' joined, of a literal its elements' joined
    # (elements of different types: dyn); cel-go's notation in the message
    ('(node.cpu > 1 ? 1 : 2) == "a"', "'_==_' applied to '(int, string)'"),
    ('(true ? node.tags : ["a"]) == 1', "'_==_' applied to '(list(string), int)'"),
    ('(true ? node.labels : {"a": "b"}) == 1', "'_==_' applied to '(map(string, string), int)'"),
    ('[[1], ["a"]] == 1', "'_==_' applied to '(list(list(dyn)), int)'"),
    ('{"a": 1, "b": "c"} == 1', "'_==_' applied to '(map(string, dyn), int)'"),
    ('{"a": 1} == 1', "'_==_' applied to '(map(string, int), int)'"),
    ("{} == 1", "'_==_' applied to '(map(dyn, dyn), int)'"),
    ("[] == 1", "'_==_' applied to '(list(dyn), int)'"),
    # a macro's result: map and filter make lists (a map's comprehension ranges over its
    # keys), the others a bool; the variable has the element's type
    ("node.tags.filter(t, true) == 1", "'_==_' applied to '(list(string), int)'"),
    ("node.labels.map(k, k) == 1", "'_==_' applied to '(list(string), int)'"),
    ("dyn(node.tags).map(t, t) == 1", "'_==_' applied to '(list(dyn), int)'"),
    ("node.tags.exists_one(t, true) == 1", "'_==_' applied to '(bool, int)'"),
    ("node.labels.all(k, node.labels[k] == 1)", "'_==_' applied to '(string, int)' at column 20"),
    # what the standard functions return (cel-spec's List of Standard Definitions)
    ('size(node.tags) == "a"', "'_==_' applied to '(int, string)'"),
    ('node.hostname.contains("a") == 1', "'_==_' applied to '(bool, int)'"),
    ('int("1") == "a"', "'_==_' applied to '(int, string)'"),
    ("uint(node.cpu) == 1", "'_==_' applied to '(uint, int)'"),  # 1u: see WELL_TYPED
    ("type(1) == 1", "'_==_' applied to '(type, int)'"),
    ("string(1) == 1", "'_==_' applied to '(string, int)'"),
    ('bytes("a") == 1', "'_==_' applied to '(bytes, int)'"),
    ("double(1) == 1", "'_==_' applied to '(double, int)'"),
    ('bool("true") == 1', "'_==_' applied to '(bool, int)'"),
    (
        'timestamp("2026-01-01T00:00:00Z").getFullYear() == "a"',
        "'_==_' applied to '(int, string)'",
    ),
    # the column is where the operator's first operand starts (cel-go points at the operator;
    # either finds the place in a long expression)
    (
        'true && (node.cpu > 1 ? 1 : "a") == 1',
        "'_?_:_' applied to '(bool, int, string)' at column 10",
    ),
    ("true &&  1 in 1", "'@in' applied to '(int, int)' at column 10"),
    ("true && !1", "'!_' applied to '(int)' at column 9"),
    ('true && {1: 2}["a"] == 2', "'_[_]' applied to '(map(int, int), string)' at column 9"),
    ("true && dyn(1) % 1.0 == 0", "'_%_' applied to '(dyn, double)' at column 9"),
    ("true && node.cpu % 2.0 == 0.0", "'_%_' applied to '(int, double)' at column 9"),
    ('true && [1] + ["a"] == []', "'_+_' applied to '(list(int), list(string))' at column 9"),
    ("true && size(node.cpu) > 1", "'size' applied to '(int)' at column 9"),
    ("true && node.hostname.endsWith(1)", "'endsWith' applied to 'string.(int)' at column 9"),
    # dyn on the right of an operator that takes neither operand's type
    ("1.0 % dyn(1) == 0", "'_%_' applied to '(double, dyn)'"),
    # the string functions return a bool, not something the checker cannot see
    ('node.hostname.startsWith("a") == 1', "'_==_' applied to '(bool, int)'"),
    ('node.hostname.endsWith("a") == 1', "'_==_' applied to '(bool, int)'"),
    ('node.hostname.matches("a") == 1', "'_==_' applied to '(bool, int)'"),
    # containers unify element by element: a list's elements, a map's keys and values
    ("node.tags == [1]", "'_==_' applied to '(list(string), list(int))'"),
    ('node.labels == {"a": 1}', "'_==_' applied to '(map(string, string), map(string, int))'"),
    # the concatenation of two lists keeps their element type
    ("node.tags + node.tags == 1", "'_==_' applied to '(list(string), int)'"),
]

WELL_TYPED = [
    '"ssd" in node.tags',
    'node.labels["zone"] == "eu-1a"',
    'has(node.labels.zone) && node.labels.zone != ""',
    "node.cpu >= 2000 || node.memory > 1073741824",
    "node.freeCpu * 2 > node.cpu",
    "node.cpu % 2 == 0",
    "double(node.cpu) > 1.5",  # an explicit conversion
    "dyn(node.cpu) == 1.5",  # dyn opts out (gradual typing)
    'node.tags.exists(t, t.startsWith("gpu"))',
    "node.tags.map(t, size(t)).exists(n, n > 3)",
    'node.labels.exists(k, k.startsWith("x") && node.labels[k] == "y")',
    '[1, "a"].exists(x, x == 1)',  # a heterogeneous list is list(dyn)
    'node.cpu > 1 ? node.kind == "linux" : false',
    'node.hostname.matches("^gpu-") && size(node.tags) >= 2',
    "type(node.cpu) == int",
    'int(node.labels["slots"]) > 3',
    'node.runtimes + node.tags == ["a"]',
    "node.cpu in [1000, 2000]",
    'node.tags[0] == "a"',
    "uint(node.cpu) == 1u",  # uint() returns a uint
    "uint(node.cpu) + 1u > 2u",
    # what the checker cannot see is dyn, decided when it runs
    'dyn(node.labels).zone == "a"',
    "dyn(node.tags)[0] == 1",
    "dyn(node.cpu) + 1 == 2.5",
    'node["cp" + "u"] == "x"',  # a computed name
    'node[r"cpu"] == "x"',  # a raw string is not decoded
    "node['''cpu'''] == 'x'",  # nor a triple-quoted one
    "node.cpu + dyn(1) == 2",  # dyn on either side of an operator
    "dyn(node.cpu) > 1.5",
    '"a" in dyn(node.tags)',
    "node.tags != []",  # _!=_ is (A, A) -> bool, like _==_, for any type
    "(node.cpu > 1 ? node : node).cpu > 1",  # a conditional of two nodes is a node
]


@pytest.mark.parametrize(("source", "message"), ILL_TYPED, ids=[s for s, _ in ILL_TYPED])
def test_ill_typed_expressions_are_refused_with_the_checkers_message(
    source: str, message: str
) -> None:
    with pytest.raises(CelCompileError, match=None) as refused:
        compile_expression(source)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("source", WELL_TYPED)
def test_well_typed_conditions_compile(source: str) -> None:
    compile_expression(source)


# -- through the scheduler, the operator and orca plan ----------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"constraints": ['node.cpu == "x"']},
            "spec.constraints[0] 'node.cpu == \"x\"': found no matching overload for '_==_' "
            "applied to '(int, string)' at column 1",
        ),
        (
            {"affinity": [{"target": "node.cpu", "weight": 10}]},
            "spec.affinity[0].target 'node.cpu': expression must evaluate to a bool, not int",
        ),
        (
            {"affinity": [{"target": 'node.cpu == "x"', "weight": 10}]},
            "spec.affinity[0].target 'node.cpu == \"x\"': found no matching overload",
        ),
    ],
    ids=["constraint", "affinity-not-bool", "affinity-mismatch"],
)
def test_the_scheduler_marks_ill_typed_cel_invalid(spec: dict[str, Any], message: str) -> None:
    decision = Scheduler().schedule(workload(kind="Job", **spec), ledger_for(node("a")), now=NOW)
    assert decision.phase is Phase.INVALID
    assert message in decision.message


def test_the_operator_writes_invalid_with_the_checkers_message() -> None:
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="4"))
    spec = {"kind": "Job", "affinity": [{"target": 'node.cpu == "x"', "weight": 10}]}
    state.upsert_workload(stored_workload("typo", "3", spec))
    patches: list[dict[str, Any]] = []

    class Api:
        async def write_workload_status(self, *args: Any) -> dict[str, Any]:
            patches.append(args[2])
            return {"metadata": {"resourceVersion": "4"}}

        async def create_event(self, *_: Any) -> dict[str, Any]:
            return {}

    operator = Operator.wire(cast(KubeApi, Api()), state, now=lambda: "2026-01-01T00:00:00Z")

    async def decide() -> None:
        assert await operator.loop.process("ns/typo")

    asyncio.run(decide())
    (written,) = patches
    assert written["phase"] == "Invalid"
    assert "found no matching overload for '_==_' applied to '(int, string)'" in written["message"]


def _files(tmp_path: Path, spec: dict[str, Any]) -> tuple[str, str]:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(json.dumps(node_object("a")))
    workloads = tmp_path / "w.yaml"
    workloads.write_text(json.dumps(workload_obj("x", **{"kind": "Job", **spec})))
    return str(nodes), str(workloads)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"constraints": ["node.cpu"]},
            "Workload shop/x: spec.constraints[0] 'node.cpu': expression must evaluate to a "
            "bool, not int",
        ),
        (
            {"affinity": [{"target": 'node.cpu == "x"', "weight": 1}]},
            "Workload shop/x: spec.affinity[0].target 'node.cpu == \"x\"': found no matching "
            "overload for '_==_' applied to '(int, string)'",
        ),
        (
            {"constraints": ["node.tag == 1"]},
            "Workload shop/x: spec.constraints[0] 'node.tag == 1': node has no field 'tag'",
        ),
        (
            {"affinity": [{"target": "web\n", "weight": 1}]},
            "Workload shop/x: spec.affinity[0]: target: a Workload name must not have "
            "whitespace or a newline around it",
        ),
    ],
    ids=["constraint-not-bool", "affinity-mismatch", "unknown-field", "padded-name"],
)
def test_orca_plan_refuses_ill_typed_cel_as_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], message: str
) -> None:
    nodes, workloads = _files(tmp_path, spec)
    code = main(["plan", "--nodes", nodes, "--workloads", workloads])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {workloads}: document 1: ") and err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize("target", ["web\n", " web", "web ", "\tweb", "web\r\n"])
def test_a_padded_workload_name_is_refused_not_trimmed(target: str) -> None:
    with pytest.raises(ValidationError, match="must not have whitespace or a newline"):
        AffinityRule(target=target, weight=1)


@pytest.mark.parametrize(
    ("target", "is_name"),
    [("web", True), ("web-1", True), (" node.cpu > 1 ", False), ("node.kind == 'web'", False)],
)
def test_a_target_is_a_name_only_when_it_is_exactly_a_label(target: str, is_name: bool) -> None:
    assert AffinityRule(target=target, weight=1).is_workload_name is is_name


# -- the cost estimate of what a value's size decides ---------------------------------------
#
# Worked out by hand from the rules in celcheck's docstring: ITERATION_COST (20) for the
# evaluation, one unit per syntax-tree node (``true`` alone is a chain of ten: expr,
# conditionalor, conditionaland, relation, addition, multiplication, unary, member, primary,
# literal), one unit per SIZE_UNIT (10) characters or items of every value a primary, a
# concatenation or a call produces or is given. A literal's size is its token's length, quotes
# included; a field's its declared maximum (hostname 253, tags 64 of 63, labels 64 of 317 and
# 63). ``L == R`` costs 20 + 14 nodes + L's and R's primaries; ``A + B == C`` 20 + 19 nodes
# + the three primaries + the sum's size / 10. ``string(x)`` charges x's expression (``1``: 10,
# ``node.tags``: 12), x's size / 10 and the longest text it can make / 10: cel-python writes a
# scalar in at most 48 characters and a container as its Python repr, at most 16 characters
# plus 24 per element (plus its text) or 48 per entry (plus the key's and the value's text).
TEXT_COSTS = [
    # 39 + x's expression + x's size / 10 + text / 10
    ("string(1)", 39 + 10 + 0 + 4),
    ("string(1u)", 39 + 10 + 0 + 4),
    ("string(1.5)", 39 + 10 + 0 + 4),
    ("string(true)", 39 + 10 + 0 + 4),
    ("string(null)", 39 + 10 + 0 + 4),
    ("string(node.hostname)", 39 + 12 + 25 + 25),
    ('string(b"abc")', 39 + 10 + 0 + 0),  # 6 characters
    ('string(["abcdefg"])', 39 + 21 + 0 + 4),  # 16 + (9 + 24) = 49
    ('string({"abcd": "abcdefg"})', 39 + 31 + 0 + 7),  # 16 + (6 + 9 + 48) = 79
    ('string({"abcde": 1})', 39 + 31 + 0 + 11),  # 16 + (7 + 48 + 48) = 119
    ("string(node.tags)", 39 + 12 + 6 + 558),  # 16 + 64 * (63 + 24) = 5,584
    ("string(node.labels)", 39 + 12 + 6 + 2740),  # 16 + 64 * (317 + 63 + 48) = 27,408
    ("string(dyn(1))", 39 + 21 + 0 + 102),  # unknown: the longest expression, 1,024
]


@pytest.mark.parametrize(("call", "cost"), TEXT_COSTS, ids=[c for c, _ in TEXT_COSTS])
def test_a_string_conversion_costs_the_longest_text_it_can_make(call: str, cost: int) -> None:
    assert compile_expression(f'{call} == ""').cost == cost


SIZED_COSTS = [
    # a concatenation produces both sizes: 128 tags (A = B = 4 nodes, [] = 3)
    ("node.tags + node.tags == []", 39 + 4 + 4 + 3 + 12),
    # bytes too: 11 + 11 characters
    ('b"abcdefgh" + b"abcdefgh" == b""', 39 + 3 + 3 + 2 + 2),
    # with dyn, the checker still knows the size: 253 + 5 characters (dyn(x) = 65: its call
    # 3, x's expression 12, x's size 25 and its own 25)
    ('dyn(node.hostname) + "abc" == ""', 39 + 65 + 2 + 2 + 25),
    # a conditional is as large as its larger branch, 64 tags: the parenthesis 2 + 6 for
    # the size, the conditional 1 + true 9 + the dearer branch ["a"] 21; [] 3
    ('(true ? node.tags : ["a"]) == []', 34 + (2 + 1 + 9 + 21 + 6) + 3),
    # a heterogeneous list's element is as large as its largest (13 characters): the
    # comprehension 1 + the list 25 + 2 steps of 20 + the body (14 nodes + x 2 + 1 + 1 2)
    ('[1, "abcdefghijk"].exists(x, x == 1)', 20 + 8 + 1 + 25 + 2 * (20 + 14 + 3 + 2)),
]


@pytest.mark.parametrize(("source", "cost"), SIZED_COSTS, ids=[s for s, _ in SIZED_COSTS])
def test_the_estimate_charges_the_size_of_what_an_operator_produces(source: str, cost: int) -> None:
    assert compile_expression(source).cost == cost


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "node.cpu",
            "expression must evaluate to a bool, not int (a constraint or an affinity target "
            "is a condition, e.g. node.cpu >= 2000)",
        ),
        (
            'node.tags.map(t, t + "x")',
            "expression must evaluate to a bool, not list(string) (a constraint or an affinity "
            "target is a condition, e.g. node.cpu >= 2000)",
        ),
    ],
)
def test_a_condition_that_is_not_a_bool_is_refused_with_an_example(
    source: str, message: str
) -> None:
    assert refusal(source) == message


# -- the limits: tree height and the cost budget, at the limit and one past it --------------
#
# ``1 + 1 + ... + 1 > 0`` with n terms is a tree of height 2n + 10: expr, conditionalor,
# conditionaland, relation, relation_gt, relation, then the left-recursive additions (addition,
# addition_add: two levels per further term) down to the first term's multiplication, unary,
# member, primary, literal. ``-node.cpu`` as the first term is three levels deeper (a second
# unary, member_dot and its member): 2n + 13.
AT_HEIGHT = "1" + " + 1" * 204 + " > 0"  # 205 terms: height 420
PAST_HEIGHT = "-node.cpu" + " + 1" * 203 + " > 0"  # 204 terms: height 421


def test_a_syntax_tree_as_tall_as_the_limit_compiles() -> None:
    assert celcheck.MAX_TREE_HEIGHT == 420
    compile_expression(AT_HEIGHT)


def test_a_syntax_tree_one_level_taller_is_refused_before_it_is_walked() -> None:
    assert refusal(PAST_HEIGHT) == (
        "expression nested too deeply: syntax tree height 421 exceeds 420 (split long chains "
        "such as 'a + b + c + ...' or use 'x in [...]')"
    )


# ``R1 && ... && Rk`` costs 20 + 2 (expr, conditionalor) + for each term its conditionaland
# (1) and its relation; ``S != ""`` is 13 nodes and S's primary: 14 + P per term. P by
# TEXT_COSTS: string(node.labels) 2,761, string(node.tags) 579, string(node.hostname) 65,
# string(1) 17, a literal of up to 9 characters 2, of 10 characters 3. So 22 + 6 * 2,775 +
# 5 * 593 + 4 * 79 + 31 + 16 = 20,000, the budget; one more character in the last literal
# makes 20,001.
_DEAR = (
    ['string(node.labels) != ""'] * 6
    + ['string(node.tags) != ""'] * 5
    + ['string(node.hostname) != ""'] * 4
    + ['string(1) != ""']
)
AT_BUDGET = " && ".join([*_DEAR, '"abcdefg" != ""'])
PAST_BUDGET = " && ".join([*_DEAR, '"abcdefgh" != ""'])


def test_a_condition_that_costs_the_budget_compiles_one_unit_more_does_not() -> None:
    assert celcheck.STATIC_COST_BUDGET == 20_000
    assert compile_expression(AT_BUDGET).cost == 20_000
    assert refusal(PAST_BUDGET) == (
        "estimated cost 20001 exceeds the budget 20000 (worst case over node's declared sizes: "
        "64 tags, runtimes or labels; nested comprehensions multiply, strings and lists cost "
        "by length)"
    )
