"""Label selectors as kubectl takes them: apimachinery's own test tables
(``k8s.io/apimachinery/pkg/labels/selector_test.go``, v0.36.3: ``TestSelectorParse``,
``TestSelectorMatches``), ported case for case, plus the set forms ``kubectl -l`` documents."""

from __future__ import annotations

import pytest

from controller.inputs.selector import Op, SelectorError, parse_selector

# TestSelectorParse's testGoodStrings and testBadStrings.
GOOD = ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]
BAD = ["x=a||y=b", "x==a==b", "!x=a", "x<a"]

# TestSelectorMatches: (selector, labels, matches).
MATCHES = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),  # in and notin in exactMatch
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
    ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
    ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    # The set forms (kubectl's documentation of -l), worked out from Requirement.Matches:
    # in needs the key; notin is satisfied by a missing key.
    ("zone in (a,b)", {"zone": "b"}, True),
    ("zone in (a,b)", {}, False),
    ("zone notin (a,b)", {}, True),
    ("zone notin (a,b)", {"zone": "a"}, False),
    (
        "topology.kubernetes.io/zone=eu-1a,!node-role.kubernetes.io/control-plane",
        {"topology.kubernetes.io/zone": "eu-1a"},
        True,
    ),
    ("x>1", {"x": "two"}, False),  # not an integer: no match
]


@pytest.mark.parametrize("text", GOOD)
def test_apimachinery_good_selectors_parse(text: str) -> None:
    parse_selector(text)


@pytest.mark.parametrize("text", BAD)
def test_apimachinery_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_apimachinery_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("x in (a,)", {"a", ""}),
        ("x in (,a)", {"a", ""}),
        ("x in ()", {""}),
        ("x in (a,,b)", {"a", "b", ""}),
    ],
)
def test_empty_items_in_a_set_are_the_empty_value(text: str, values: set[str]) -> None:
    [requirement] = parse_selector(text).requirements
    assert requirement.values == values


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Bad Key=1", "found 'Key', expected: in, notin, =, ==, !=, gt, lt"),
        ("x=a b", "found 'b', expected: ',' or 'end of string'"),
        ("x=$", "'$' is not a valid label value"),
        ("-x=1", "key '-x' is not a valid label key"),
        ("x>a", "for 'Gt', 'Lt' operators, the value must be an integer: x"),
        ("x in a", "found 'a' expected: '('"),
        ("x=1,", "found '', expected: identifier after ','"),
    ],
)
def test_mistakes_are_one_line(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_selector(text)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        # Gt and Lt are strict (Requirement.Matches: `lsValue > rValue`): `--drain 'gpus>4'`
        # drains Nodes with 5 GPUs and more, never those with 4.
        ("gpus>4", {"gpus": "4"}, False),
        ("gpus>4", {"gpus": "5"}, True),
        ("gpus<4", {"gpus": "4"}, False),
        ("gpus<4", {"gpus": "3"}, True),
        ("gpus>4", {}, False),  # a missing label is not a number
        ("gpus<4", {}, False),
        ("gpus>4", {"gpus": "04"}, False),  # the label's value in base 10: 4
        ("gpus>0", {"gpus": "1"}, True),
        ("gpus<1", {"gpus": "-1"}, True),  # a label's value parsed as kube parses it
        ("gpus>4", {"gpus": "4.5"}, False),  # not an integer: no match
        ("gpus>9", {"gpus": "a"}, False),  # a letter is no digit in base 10
        ("gpus>10", {"gpus": "10"}, False),  # ten, in base 10, on both sides
        ("gpus<10", {"gpus": "10"}, False),
        ("x==y", {"x": "y"}, True),
        ("x==y", {"x": "z"}, False),
        ("x==y", {}, False),
        ("x!=y", {}, True),  # a missing key satisfies !=
        ("x in (a,b)", {"x": "c"}, False),
        ("x notin (a,b)", {"x": "c"}, True),
        ("x", {"x": ""}, True),  # exists, empty value
        ("!x", {"x": ""}, False),
        ("x=", {"x": ""}, True),
        ("x=", {}, False),
    ],
)
def test_each_operator_at_its_boundaries(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


# Each of kube's parse errors (k8s.io/apimachinery/pkg/labels/selector.go, Parser.parse,
# parseRequirement, parseKeyAndInferOperator, parseOperator, parseValues,
# parseIdentifiersList, parseExactValue), in its words, with the token it found.
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (",", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("x=a,,", "found ',', expected: identifier after ','"),
        ("x=a=", "found '=', expected: ',' or 'end of string'"),
        ("x in (a) y", "found 'y', expected: ',' or 'end of string'"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        ("! =", "found '=', expected: identifier"),
        ("x(", "found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("x!", "found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("x in", "found '' expected: '('"),
        ("x in (=)", "found '=', expected: ',', ')' or identifier"),
        ("x in (a", "found '', expected: ',' or ')'"),
        ("x in (a b)", "found 'b', expected: ',' or ')'"),
        ("x in (a,=)", "found '=', expected: ',', or identifier"),
        ("x in (,=", "found '=', expected: ',', or identifier"),
        ("x=(a)", "found '(', expected: identifier"),
        ("x >= 1", "found '=', expected: identifier"),
        ("x>", "for 'Gt', 'Lt' operators, the value must be an integer: x"),
        ("a" * 4097, "is longer than 4096 characters"),
    ],
)
def test_each_parse_error_names_what_it_found(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_selector(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        ("x=y", [("x", Op.EQUALS, {"y"})]),
        ("x==y", [("x", Op.DOUBLE_EQUALS, {"y"})]),
        ("x!=y", [("x", Op.NOT_EQUALS, {"y"})]),
        ("x!=", [("x", Op.NOT_EQUALS, {""})]),
        ("x>1", [("x", Op.GREATER_THAN, {"1"})]),
        ("x<1", [("x", Op.LESS_THAN, {"1"})]),
        ("x", [("x", Op.EXISTS, set())]),
        ("!x,y", [("x", Op.DOES_NOT_EXIST, set()), ("y", Op.EXISTS, set())]),
        # in and notin are keywords only where an operator is due: as keys and values they
        # are names (kube's lexer reads them as identifiers there).
        ("x notin (in,notin)", [("x", Op.NOT_IN, {"in", "notin"})]),
        ("in in (in)", [("in", Op.IN, {"in"})]),
        ("x=in", [("x", Op.EQUALS, {"in"})]),
        ("x in (a,,)", [("x", Op.IN, {"a", ""})]),
        # Whitespace is a space, a tab, a carriage return or a newline, anywhere between.
        ("\tx\n=\ry ", [("x", Op.EQUALS, {"y"})]),
        ("a" * 63 + "=b", [("a" * 63, Op.EQUALS, {"b"})]),
    ],
)
def test_what_each_form_parses_to(text: str, requirements: list[tuple[str, Op, set[str]]]) -> None:
    parsed = parse_selector(text).requirements
    assert [(r.key, r.op, set(r.values)) for r in parsed] == requirements


def test_a_selector_of_the_longest_length_parses() -> None:
    text = ",".join(f"k{i:03d}=v" for i in range(700))[:4096].rsplit(",", 1)[0]
    assert len(parse_selector(text).requirements) == text.count(",") + 1
    assert len(parse_selector("x=" + "a" * 63 + " " * (4096 - 65)).requirements) == 1
