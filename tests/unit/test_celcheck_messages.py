"""What a user reads when a CEL constraint is refused: the whole line, its column, and the cost
estimate an over-budget expression reports (issue 27).

Every expected message is written out in full (the other CEL tests match a part of it), so a
changed word, a lost or wrong column, or a changed estimate fails. Columns are 1-based and
point where the offending expression starts (cel-python's lark parser, which keeps no position
for ``true`` and ``false``: an operator whose first operand is one of them is reported without
a column). Estimates are worked out by hand from the cost rules in ``celcheck``'s docstrings
(one unit per syntax-tree node, ``ITERATION_COST`` per comprehension step, one unit per
``SIZE_UNIT`` characters of what a primary or a call produces); see ``_nested_cost``.
"""

from __future__ import annotations

import lark
import pytest
from celpy.celparser import CELParseError

from controller.scheduler import celexpr
from controller.scheduler.celcheck import STATIC_COST_BUDGET
from controller.scheduler.celexpr import compile_expression
from tests.support.cel import refusal

MESSAGES = [
    # -- columns --------------------------------------------------------------------------
    # ``.name`` names a variable from the root scope: the reference starts at its dot, and a
    # comprehension's variable is not in that scope
    (
        ".nodes == 1",
        "undeclared reference to 'nodes' at column 1 (did you mean 'node'? the only variable "
        "is 'node')",
    ),
    (
        'node.tags.exists(t, .t == "a")',
        "undeclared reference to 't' at column 21 (the only variable is 'node')",
    ),
    # cel-python's parser keeps no position for true and false: no column rather than a wrong
    # one; an operator after them has its own
    ("true == 1", "found no matching overload for '_==_' applied to '(bool, int)'"),
    (
        "false || 1 > 0 && 1",
        "found no matching overload for '_&&_' applied to '(bool, int)' at column 10",
    ),
    # calls and methods: the column of the call, for each of their messages
    (
        "node.cpu > 1 && has(node)",
        "has() takes one field selection, e.g. has(node.labels.zone) (column 17)",
    ),
    ("now() > 1", "unknown function 'now' at column 1 (see the CEL standard functions)"),
    ("size(node.cpu) > 1", "found no matching overload for 'size' applied to '(int)' at column 1"),
    (
        'node.kind == "a" || node.hostname.startsWith(1)',
        "found no matching overload for 'startsWith' applied to 'string.(int)' at column 21",
    ),
    (
        "node.cpu > 0 && node.tags.reduce(r, t, 0, r + 1) > 0",
        "reduce() is not a CEL macro (column 17)",
    ),
    (
        "node.tags.exists(1, true)",
        'exists() takes a variable name and an expression, e.g. node.tags.exists(t, t == "ssd") '
        "(column 1)",
    ),
    (
        "size(node.tags) > 1 && node.cpu.all(c, c > 1)",
        "all() needs a list or a map, not a value of type int (column 24)",
    ),
    ("node.tags.exists(t, t)", "exists() needs a condition of type bool, not string (column 1)"),
    # the variables in scope, in the order they were bound
    (
        "node.tags.exists(a, node.tags.exists(b, c == a))",
        "undeclared reference to 'c' at column 41 (the only variable is 'node'; in scope "
        "here: a, b)",
    ),
    # operators: the column where their first operand starts
    (
        'node.cpu > 1 && node.cpu + "m" == "1m"',
        "found no matching overload for '_+_' applied to '(int, string)' at column 17",
    ),
    (
        "node.cpu > 1 && node.cpu % 2.0 == 0.0",
        "found no matching overload for '_%_' applied to '(int, double)' at column 17",
    ),
    (
        'node.cpu > 1 && -node.kind == "x"',
        "found no matching overload for '-_' applied to '(string)' at column 17",
    ),
    # a leading-dot call (a function named from the root scope) is not supported
    (
        "node.cpu > 1 && .size(node.tags) > 1",
        "unsupported syntax 'dot_ident_arg' at column 17",
    ),
    # -- types the message names ----------------------------------------------------------
    # a map literal's key and value types
    (
        '{"a": 1, "b": 2} == 1',
        "found no matching overload for '_==_' applied to '(map(string, int), int)' at column 1",
    ),
    # a literal's type: uint, bytes, a triple-quoted string
    ("1u == 1", "found no matching overload for '_==_' applied to '(uint, int)' at column 1"),
    ('b"a" == 1', "found no matching overload for '_==_' applied to '(bytes, int)' at column 1"),
    (
        "'''a''' == 1",
        "found no matching overload for '_==_' applied to '(string, int)' at column 1",
    ),
    # a label read as a field is a string; an index of the wrong type, with its column
    (
        "node.labels.zone == 1",
        "found no matching overload for '_==_' applied to '(string, int)' at column 1",
    ),
    (
        'node.cpu > 1 && node.tags["a"] == "b"',
        "found no matching overload for '_[_]' applied to '(list(string), string)' at column 17",
    ),
    (
        'node.cpu > 1 && node.labels[1] == "b"',
        "found no matching overload for '_[_]' applied to '(map(string, string), int)' at "
        "column 17",
    ),
    # the depth is the brackets open at that point: 20, 10 closed, then 23 more reach 33 at
    # column 20 + 4 + 10 + 4 + 23 = 61
    (
        "(" * 20 + "true" + ")" * 10 + " && " + "(" * 23 + "true" + ")" * 33,
        "nesting deeper than 32 levels at column 61 (parentheses, brackets and braces)",
    ),
    # -- syntax errors --------------------------------------------------------------------
    ("node.#cpu", "syntax error at column 6: unexpected character '#', expected a name"),
    ("node.cpu == #", "syntax error at column 13: unexpected character '#', expected a value"),
    # the parser expects nothing in particular here: no "expected" clause, not an empty one
    ("node.cpu > 1 )", "syntax error at column 14: unexpected ')'"),
    # expected ':' or '||': not only brackets and names, so not listed
    ("node.cpu > 1 ? true", "syntax error at column 20: unexpected end of expression"),
    # the arguments of a call and the items of a list share the parser's states (LALR), so
    # lark expects either closer after an unclosed one
    (
        "node.cpu in [1000, 2000",
        "syntax error at column 24: unexpected end of expression, expected ',' or ')' or ']'",
    ),
    # cel-python's parser keeps no position for true and false: an unexpected one is named
    # without a column rather than at column 1
    ("node.cpu > 1 true", "syntax error: unexpected 'true'"),
    ("node.true == 1", "syntax error: unexpected 'true', expected a name"),
    ("true false", "syntax error: unexpected 'false'"),
]


DEEP = "(" * 33 + "true" + ")" * 33

# Brackets inside string literals do not count: the scan skips each literal whole, whatever
# it holds (brackets, an escaped quote or backslash, quotes of the other kind, three quotes),
# and counts again after it: the 33rd bracket is refused where it stands.
NESTING = [
    (f'node.kind != "(((" && {DEEP}', 22),
    (rf'node.kind != "\\" && {DEEP}', 21),  # one backslash, escaped
    (rf'node.kind != "a\"(" && {DEEP}', 23),  # an escaped quote does not end it
    (f'node.kind != "it\'s" && {DEEP}', 23),
    (f"'''a''' == node.kind && {DEEP}", 24),
    (f'node.labels.rackX == "a" && {DEEP}', 28),  # X is a name here, no quote
]


@pytest.mark.parametrize(("source", "before"), NESTING, ids=[s[:24] for s, _ in NESTING])
def test_brackets_in_strings_do_not_count_towards_nesting(source: str, before: int) -> None:
    assert source[before : before + 33] == "(" * 33  # the characters before the brackets
    assert refusal(source) == (
        f"nesting deeper than 32 levels at column {before + 33} (parentheses, brackets and braces)"
    )


@pytest.mark.parametrize(("source", "message"), MESSAGES, ids=[s for s, _ in MESSAGES])
def test_a_refused_expression_reads_exactly(source: str, message: str) -> None:
    assert refusal(source) == message


def test_a_parse_error_without_a_position_is_still_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cel-python turns lark errors other than unexpected tokens and characters (a ``LexError``
    or ``ParseError`` of its own) into ``CELParseError`` too; they carry no line, column or
    expected terminals, so the message says what it knows and no made-up column."""

    def failing(source: str) -> lark.Tree[object]:
        try:
            raise lark.exceptions.LexError("lark's own words")
        except lark.exceptions.LexError as exc:
            raise CELParseError("lark's own words", *exc.args) from exc

    monkeypatch.setattr(celexpr._environment(), "compile", failing)
    assert refusal("node.cpu > 1") == "syntax error: invalid expression"


@pytest.mark.parametrize(
    "source",
    [
        # an escaped string is not decoded by the check: the field is looked up when it runs
        # ("host\x6eame" is "hostname")
        r'node["host\x6eame"] == "a"',
        r"node['c\u0070u'] > 1",
        # an index that is a call or a root-scope name is not a field name: decided at run time
        "node[string(1)] == 1",
        "node[.node] == 1",
    ],
)
def test_an_index_the_check_cannot_read_is_left_to_run_time(source: str) -> None:
    compile_expression.__wrapped__(source)


@pytest.mark.parametrize(
    "source",
    [
        '{"zone": node.labels.zone}["zone"] == "a"',
        "node.tags.exists(t, {t: 1}[t] == 1)",  # a comprehension's variable
        "[node.kind, node.hostname][0] == 'a'",
    ],
)
def test_the_entries_of_a_literal_are_read_in_scope(source: str) -> None:
    compile_expression.__wrapped__(source)


@pytest.mark.parametrize(
    "source",
    [
        # -_ takes an int or a double (cel-spec's standard definitions); -1.5 is a literal
        "-double(node.cpu) < 0.0",
        "-node.cpu < 0",
    ],
)
def test_negation_of_a_number_compiles(source: str) -> None:
    compile_expression.__wrapped__(source)


# -- the cost estimate an over-budget expression reports ----------------------------------------

OVER_BUDGET = (
    "estimated cost {} exceeds the budget 20000 (worst case over node's declared sizes: 64 "
    "tags, runtimes or labels; nested comprehensions multiply, strings and lists cost by length)"
)


def _nested_cost(relation_cost: int) -> int:
    """The estimate of ``node.tags.all(a, node.tags.all(b, X))`` whose body X costs
    ``relation_cost`` as a relation (the level of ``_==_``), worked out from the rules:

    - a member-level value x (a name, a call, a field) under the wrappers expr,
      conditionalor, conditionaland, relation, addition, multiplication, unary and member
      costs 8 + c(x); as a relation 5 + c(x); ``x == y`` as a relation 11 + c(x) + c(y)
      (the relation, its operator's wrapper, the left relation and the right addition);
    - ``node.tags`` (a field of a name) is 4, the range of a comprehension 5 (its member);
    - a comprehension over node.tags (64 steps) costs 1 + 5 + 64 * (20 + body);
    - the inner body is 3 + X (expr, conditionalor, conditionaland over the relation), the
      outer body is 8 + inner, the whole expression 20 (its activation) + 8 + outer.

    So 20 + 8 + 6 + 64 * (20 + 8 + 6 + 64 * (20 + 3 + X)) = 96418 + 4096 * X.
    """
    inner = 1 + 5 + 64 * (20 + 3 + relation_cost)
    outer = 1 + 5 + 64 * (20 + 8 + inner)
    return 20 + 8 + outer


# Inside the comprehensions ``a`` and ``b`` are strings of at most 63 characters (a tag): a
# name costs 2 + 63 // 10 = 8, as an argument (expr level) 16; "x" costs 2.
NESTED_COSTS = [
    # true: a literal, 2; as a relation 7
    ("true", 5 + 2),
    # has(node.labels.zone): 3 + its argument (8 + node.labels.zone: 1 + member(1 + 4) = 6);
    # a bool adds no size
    ("has(node.labels.zone)", 5 + (3 + (8 + 6))),
    # dyn(b) == "x": dyn is 3 + its argument (16) + the argument's size (6), and as a primary
    # the size of what it produces: a dyn as large as b (6)
    ('dyn(b) == "x"', 11 + (3 + 16 + 6 + 6) + 2),
    # string(node.cpu) == b: 3 + node.cpu (8 + 4) + an int's size (0); the string of an int is
    # at most 48 characters (4)
    ("string(node.cpu) == b", 11 + (3 + 12 + 0 + 4) + 8),
    # b.startsWith(a): the receiver (its member: 1 + 8) + 2 + the argument (16) + the
    # receiver's size (6); a bool adds none
    ("b.startsWith(a)", 5 + (9 + 2 + 16 + 6)),
    # b.string() == a: the receiver 9 + 2 + its size 6, and the string it makes, as long as b (6)
    ("b.string() == a", 11 + (9 + 2 + 6 + 6) + 8),
    # b == "0123456789": a literal's size counts its quotes, 12 characters (1)
    ('b == "0123456789"', 11 + 8 + (2 + 1)),
    # [1234567890, "a"].exists(x, x == b): the list is 3 + its items (8 + 2 each) and adds
    # no size (2 items); its range 1 + 23; x is a dyn as large as the larger item ("a", 3
    # characters: an int has no size), 2; the body 3 + (11 + 2 + 8); 2 steps
    ('[1234567890, "a"].exists(x, x == b)', 5 + (1 + (1 + 23) + 2 * (20 + 3 + 11 + 2 + 8))),
    # bytes(b) == b"0123456789": bytes is 3 + its argument (16) + its size (6) and makes bytes
    # as long as b (6); the literal has 13 characters (1)
    ('bytes(b) == b"0123456789"', 11 + (3 + 16 + 6 + 6) + (2 + 1)),
    # dyn(1) + 1 + ... + 1 (nine additions) == 10: dyn(1) is 3 + its argument (8 + 2) + an
    # int's size (none); the first term as an addition 1 + 3 + 13; each addition 1 + its
    # operator's wrapper (1) + the term before + the next term (3 + 2), and the size of what it
    # makes: a dyn as large as its operands, none here (an int literal has no size); so
    # 17 + 9 * 7; as the left operand of == 1 + that, and == 1 + 1 + left + the right (4 + 2)
    ("dyn(1) + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 == 10", 1 + 1 + (1 + (17 + 9 * 7)) + (4 + 2)),
    # (true ? a : b) == a: the conditional is 1 + its condition (7 + 2) + the dearer branch (the
    # expr b, 16, over the conditionalor a, 7 + 8); in parentheses 2 + that, and as a primary
    # the size of the string it makes (6)
    ("(true ? a : b) == a", 11 + (2 + (1 + 9 + 16) + 6) + 8),
    # {"a": 1, "b": 2}.exists(k, k == b): the map is 3 + its four entries (8 + 2 each) and adds
    # no size (2 entries); its range 1 + 43; k is a key, "a" or "b" (3 characters, 2); 2 steps
    ('{"a": 1, "b": 2}.exists(k, k == b)', 5 + (1 + (1 + 43) + 2 * (20 + 3 + 11 + 2 + 8))),
    # node.labels[b] == a: 1 + the map's member (1 + 4) + the index (16); a value is a string
    # (the member-level index adds no size)
    ("node.labels[b] == a", 11 + (1 + 5 + 16) + 8),
]


@pytest.mark.parametrize(("body", "relation_cost"), NESTED_COSTS, ids=[b for b, _ in NESTED_COSTS])
def test_an_over_budget_expression_reports_its_estimate(body: str, relation_cost: int) -> None:
    source = f"node.tags.all(a, node.tags.all(b, {body}))"
    expected = _nested_cost(relation_cost)
    assert expected > STATIC_COST_BUDGET
    assert refusal(source) == OVER_BUDGET.format(expected)
