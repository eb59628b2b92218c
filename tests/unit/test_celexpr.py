"""CEL compilation, static checks and budgets, dependency analysis and memoised evaluation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.scheduler import celcheck, celexpr
from controller.scheduler.celexpr import (
    COST_LIMIT_ERROR,
    MAX_ERROR_LENGTH,
    RUNTIME_COST_LIMIT,
    CelCompileError,
    CelEvaluator,
    Outcome,
    _Meter,
    _MeteredEvaluator,
    _one_line,
    compile_expression,
)
from controller.scheduler.nodes import NodeTable
from tests.support.cel import refusal
from tests.support.factories import node
from tests.support.properties import examples

ROOT = Path(__file__).resolve().parents[2]
DIGITS = "[0,1,2,3,4,5,6,7,8,9]"
# The hostile constraints: nested comprehensions over literal lists of ten.
DEPTH3 = f'{DIGITS}.all(a, {DIGITS}.all(b, {DIGITS}.all(c, node.hostname != "")))'
DEPTH4 = f'{DIGITS}.all(a, {DIGITS}.all(b, {DIGITS}.all(c, {DIGITS}.all(d, node.hostname != ""))))'


@pytest.mark.parametrize(
    ("source", "deps"),
    [
        ('"ssd" in node.tags', (("tags", None),)),
        ('node.labels["zone"] == "a"', (("labels", "zone"),)),
        ("node.labels.zone == 'a'", (("labels", "zone"),)),
        ('has(node.labels.zone) && node.kind == "linux"', (("kind", None), ("labels", "zone"))),
        ('node.labels.exists(k, k == "x")', (("labels", None),)),
        ("node.freeCpu > 100", (("freeCpu", None),)),
        ("size(node.runtimes) > 1", (("runtimes", None),)),
        ("1 + 1 == 2", ()),
        ("node == node", None),
        ('node["cpu"] >= 2000', None),  # indexing node itself: not a field read the walk knows
        ('node.labels["a\\"b"] == "x"', (("labels", None),)),  # an escaped key is not decoded
        ("node.labels['''zone'''] == 'x'", (("labels", None),)),  # nor a triple-quoted one
        ('node.labels[""] == "x"', (("labels", ""),)),  # the empty key is a key like any other
        # one key and the whole map: both kept, the whole map (no key) first
        (
            'node.labels["App"] == "a" && size(node.labels) > 1',
            (("labels", None), ("labels", "App")),
        ),
        ('node.labels[r"zone"] == "x"', (("labels", None),)),  # nor a raw one
        ('node.labels[node.kind] == "x"', (("kind", None), ("labels", None))),
        ("size(node.labels) > 1", (("labels", None),)),
        ('node.labels.zone.startsWith("a")', (("labels", "zone"),)),
        # .node is node named from the root scope (cel-spec: a leading dot): the same reads
        (".node.cpu > 1", (("cpu", None),)),
        ('.node.labels["zone"] == "a" && .node == node', None),
    ],
    ids=[
        "tags",
        "label-index",
        "label-dot",
        "two",
        "whole-map",
        "free",
        "size",
        "none",
        "whole",
        "node-indexed",
        "escaped-key",
        "triple-quoted-key",
        "empty-key",
        "key-and-whole-map",
        "raw-key",
        "computed-key",
        "map-as-argument",
        "label-method",
        "root-scoped",
        "root-scoped-whole",
    ],
)
def test_dependencies(source: str, deps: tuple[tuple[str, str | None], ...] | None) -> None:
    assert compile_expression(source).deps == deps


FIELDS = "fields: hostname, runtimes, tags, labels, kind, cpu, memory, freeCpu, freeMemory"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            'nodes.kind == "linux"',
            "undeclared reference to 'nodes' at column 1 (did you mean 'node'? "
            "the only variable is 'node')",
        ),
        ("foo", "undeclared reference to 'foo' at column 1 (the only variable is 'node')"),
        (
            '"ssd" in node.tag',
            f"node has no field 'tag' at column 15 (did you mean 'tags'? {FIELDS})",
        ),
        ("node.tagz == 1", f"node has no field 'tagz' at column 6 (did you mean 'tags'? {FIELDS})"),
        ('node["hostnam"] == "a"', "node has no field 'hostnam' at column 6"),
        ('node.hostname.first == "a"', "a value of type string has no field 'first' at column 15"),
        (
            'node.tags.exists(t, x == "a")',
            "undeclared reference to 'x' at column 21 (the only variable is 'node'; "
            "in scope here: t)",
        ),
        (
            'node.tags.exists(t, t == "a") && t == "b"',
            "undeclared reference to 't' at column 34",
        ),
        ("node.hostname.lenght() > 3", "unknown function 'lenght' at column 1"),
        ("sise(node.tags) > 3", "unknown function 'sise' at column 1 (did you mean 'size'?"),
        ("node.tags.reduce(r, t, 0, r + 1) > 0", "reduce() is not a CEL macro"),
        ("node.tags.exists(1, true)", "exists() takes a variable name and an expression"),
        ("node.tags.all(k, v, true)", "all() takes a variable name and an expression"),
        ("has(node)", "has() takes one field selection"),
        ("node.cpu.exists(c, c > 1)", "exists() needs a list or a map, not a value of type int"),
        ("node.cpu[0] == 1", "a value of type int cannot be indexed"),
    ],
    ids=[
        "nodes",
        "foo",
        "node.tag",
        "node.tagz",
        "index-unknown-field",
        "field-of-string",
        "unbound-variable",
        "variable-out-of-scope",
        "unknown-method",
        "unknown-function",
        "reduce-extension",
        "macro-variable-not-a-name",
        "macro-two-variables",
        "has-not-a-selection",
        "macro-over-int",
        "index-int",
    ],
)
def test_unknown_identifiers_and_fields_are_compile_errors(source: str, message: str) -> None:
    assert message in refusal(source)


@pytest.mark.parametrize(
    "source",
    [
        'node.tags.exists(x, x == "a")',
        'node.labels.all(k, k.startsWith("a") || node.labels[k] != "")',
        'node.runtimes.map(r, r + "-x").exists(r, r == "docker-x")',
        'node.tags.filter(t, t.endsWith("1")).size() == 0',
        "node.tags.exists_one(t, t == 'a') || true",
        "[1, 2, 3].exists(n, [n].all(m, m == n))",
        'type(node.cpu) == int && string(node.cpu) != ""',
        'int(node.labels["x"]) > 3 || double(node.memory) > 1.5',
        'node.hostname.matches("^n[0-9]+$") && size(node.hostname) < 64',
        'dyn(node.tags).exists(t, t == "a")',
        '{"a": 1}["a"] == 1 && node.kind in ["linux", "proxmox"]',
        "node.cpu > 2 ? node.freeCpu > 1000 : node.freeMemory > 0",
        "-node.cpu < 0 && !(node.memory == 0) && node.cpu % 2 == 0",
        "b'x' != b'y' && null == null && 1u < 2u",
    ],
)
def test_valid_expressions_compile(source: str) -> None:
    compile_expression(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("node.tags.(", "syntax error at column 11: unexpected '(', expected a name"),
        ("node.hostname == )", "syntax error at column 18: unexpected ')', expected a value"),
        ('"ssd" in node.tags &&', "syntax error at column 22: unexpected end of expression"),
        ('node.kind == "linux', "syntax error at column 14: unterminated string"),
        ("node.cpu ## 2", "syntax error at column 10: unexpected character '#'"),
        ('node.kind == "a" node.cpu', "syntax error at column 18: unexpected 'node'"),
        ("f(,)", "syntax error at column 3: unexpected ','"),
        ("node.cpu > 1 &&\n  node.cpu <", "syntax error at column 13: unexpected end"),
        ("node.cpu > 1 &&\n  ) ", "syntax error at line 2, column 3: unexpected ')'"),
        ("   ", "syntax error at column 1: empty expression"),
        ("(node.cpu > 1", "syntax error at column 14: unexpected end of expression, expected ')'"),
        ("node.tags[0", "syntax error at column 12: unexpected end of expression, expected ']'"),
        ("{1: 2", "syntax error at column 6: unexpected end of expression, expected ',' or '}'"),
    ],
    ids=[
        "dot-paren",
        "missing-operand",
        "trailing-operator",
        "unterminated-string",
        "bad-character",
        "two-expressions",
        "empty-argument",
        "end-on-line-2",
        "line-2",
        "blank",
        "unclosed-paren",
        "unclosed-index",
        "unclosed-map",
    ],
)
def test_syntax_errors_say_what_and_where(source: str, message: str) -> None:
    assert refusal(source).startswith(message)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("(" * 55 + "true" + ")" * 55, "nesting deeper than 32 levels at column 33"),
        ("[" * 33 + "1" + "]" * 33 + " != []", "nesting deeper than 32 levels"),
        ("(" * 1000, "nesting deeper than 32 levels"),
        ("1" + " + 1" * 250 + " > 0", "expression nested too deeply: syntax tree height"),
        ("!" * 500 + "true", "expression nested too deeply"),
        ("x" * 1025, "expression is 1025 characters long, at most 1024"),
        # closing brackets first do not buy deeper nesting later: the 33rd ( is column 35
        ("))" + "(" * 33 + "true" + ")" * 33, "nesting deeper than 32 levels at column 35"),
    ],
    ids=["55-parens", "33-lists", "1000-open", "chain-of-250", "500-nots", "too-long", "closers"],
)
def test_nesting_and_length_limits(source: str, message: str) -> None:
    assert message in refusal(source)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    compile_expression('node.hostname != "' + "(" * 100 + '"')
    # an escaped quote does not end the string: the brackets after it are still inside it
    compile_expression('node.hostname != "\\"' + "(" * 100 + '"')
    # nor does a single quote inside a triple-quoted string
    compile_expression("node.hostname != '''it's " + "(" * 40 + "'''")


@pytest.mark.parametrize(
    "source",
    [
        "(" * 32 + "true" + ")" * 32,
        "[" * 32 + "1" + "]" * 32 + " != []",
        "".join(f"[1].all(v{i}, " for i in range(32)) + "true" + ")" * 32,
        "1" + " + 1" * 190 + " > 0",
    ],
    ids=["32-parens", "32-lists", "32-macros", "chain-of-190"],
)
def test_deepest_accepted_expressions_evaluate(source: str) -> None:
    table = NodeTable([node("a")])
    cel = CelEvaluator()
    true, failed, _ = cel.truth(compile_expression(source), table, *_free(table))
    assert true.tolist() == [True]
    assert not failed.any()
    assert cel.errors == 0


@pytest.mark.parametrize(
    "source",
    [
        DEPTH3,
        DEPTH4,
        "node.tags.exists(a, node.tags.exists(b, a == b))",
        "node.labels.all(k, node.labels.all(j, node.labels[k] != node.labels[j] || k == j))",
        "[node.hostname]"
        + "".join(f".map(a{i}, a{i} + a{i})" for i in range(16))
        + ".exists(s, s.size() > 0)",
        "node.tags.map(t, node.runtimes.map(r, t + r)).exists(l, l.exists(s, s == 'x'))",
    ],
    ids=["depth3", "depth4", "tags-squared", "labels-squared", "string-doubling", "product"],
)
def test_over_the_static_budget_is_arefusal(source: str) -> None:
    message = refusal(source)
    assert re.fullmatch(
        rf"estimated cost (\d+) exceeds the budget {celcheck.STATIC_COST_BUDGET} \(.*\)", message
    ), message


def test_depth3_estimate_multiplies_the_nested_comprehensions() -> None:
    depth2 = compile_expression(f'{DIGITS}.all(a, {DIGITS}.all(b, node.hostname != ""))').cost
    depth1 = compile_expression(f'{DIGITS}.all(a, node.hostname != "")').cost
    assert depth2 > 9 * depth1  # ten times the inner cost, plus the inner list literals
    with pytest.raises(CelCompileError, match=r"estimated cost (\d+) exceeds"):
        compile_expression(DEPTH3)


def _repo_expressions() -> list[str]:
    """Every CEL expression in the examples and the docs (constraints and CEL targets)."""
    found: list[str] = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            items = doc.get("items", [doc]) if isinstance(doc, dict) else []
            for item in items:
                spec = item.get("spec") or {} if item.get("kind") == "Workload" else {}
                found.extend(spec.get("constraints") or [])
                found.extend(
                    a["target"]
                    for a in spec.get("affinity") or []
                    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", a["target"])
                )
    # Lines that show what is refused (``Invalid``: ..., an ill-typed row of admission.md's
    # table) quote bad expressions on purpose.
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    refused = ("Invalid", "ill-typed")
    readme = "\n".join(
        line
        for page in pages
        for line in page.read_text().splitlines()
        if not any(word in line for word in refused)
    )
    field = "|".join(celcheck.NODE_FIELDS)
    uses_node = rf"[^'`\n]*\bnode\.(?:{field})\b[^'`\n]*"
    quoted = re.findall(rf"'({uses_node})'", readme) + re.findall(rf"`({uses_node})`", readme)
    bare = re.compile(rf"node\.(?:{field})(?:\[[^\]]*\])?")  # a field named, not a condition
    found.extend(q for q in quoted if "..." not in q and "<" not in q and not bare.fullmatch(q))
    return list(dict.fromkeys(found))


REASONABLE = [
    '"ssd" in node.tags && node.labels["zone"] != "x"',
    'node.tags.exists(t, t.startsWith("gpu"))',
    'node.labels.exists(k, k.startsWith("x") && node.labels[k] == "y")',
    'node.labels["topology.kubernetes.io/zone"] in ["eu-1a", "eu-1b"] && node.cpu >= 4000',
    'node.runtimes.exists(r, r in ["wasm", "wasmtime"]) && !("gpu" in node.tags)',
    'node.tags.all(t, t.size() < 20) && node.labels.all(k, node.labels[k] != "")',
    "node.freeCpu * 2 > node.cpu && node.freeMemory > 1073741824",
    f'{DIGITS}.all(a, {DIGITS}.all(b, node.hostname != ""))',
    'string(node.tags) + string(node.labels) + string(node.cpu) != ""',
]


def test_the_repo_has_expressions_to_check() -> None:
    assert len(_repo_expressions()) >= 5


@pytest.mark.parametrize("source", REASONABLE + _repo_expressions())
def test_reasonable_expressions_pass_the_static_budget(source: str) -> None:
    assert compile_expression(source).cost <= celcheck.STATIC_COST_BUDGET


LABEL_KEYS = ["zone", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type", "x"]


def _largest_node() -> dict[str, Any]:
    """A node at every declared maximum: the static estimate must bound its runtime cost."""
    n = celcheck.MAX_LIST_ITEMS
    return {
        "hostname": "h" * celcheck.MAX_HOSTNAME,
        "runtimes": [f"r{i}".ljust(celcheck.MAX_NAME, "r") for i in range(n)],
        "tags": [f"gpu{i}".ljust(celcheck.MAX_NAME, "t") for i in range(n)],
        "labels": {
            key: "v" * celcheck.MAX_LABEL_VALUE
            for key in [
                *LABEL_KEYS,
                *(f"k{i}".ljust(celcheck.MAX_LABEL_KEY, "k") for i in range(n)),
            ][:n]
        },
        "kind": "k" * celcheck.MAX_NAME,
        "cpu": 64000,
        "memory": 1 << 40,
        "freeCpu": 1000,
        "freeMemory": 1 << 30,
    }


@pytest.mark.parametrize("source", REASONABLE + _repo_expressions())
def test_static_estimate_bounds_the_runtime_cost_within_declared_sizes(source: str) -> None:
    from celpy.adapter import json_to_cel

    expr = compile_expression(source)
    meter = _Meter(10**9)
    evaluator = _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter)
    metered = evaluator.evaluate({"node": json_to_cel(_largest_node())})
    assert 0 < meter.cost <= expr.cost
    # Metering changes nothing about the result.
    assert metered == expr.program.evaluate({"node": json_to_cel(_largest_node())})


TIGHT = [
    "true",
    "node.cpu > 1",
    "node.cpu > 1 && node.memory < 2",
    "!(node.cpu > 1) || -node.cpu < 0",
    "node.cpu % 2 == 0 ? true : false",
    "node.cpu * 2 - 1 > node.freeCpu / 2",
    "(node.cpu) > 1",
    "[1, 2, 3][0] == 1",
    "{1: 2}[1] == 2",
    "has(node.labels.zone)",
    '"ssd" in node.tags',
    'node.labels.zone == "a"',
    'node["cpu"] > 1',
    'node.hostname + "x" != ""',
    'int("1") == 1',
    "dyn(1) == 1",
    "double(node.cpu) > 1.5",
    "type(node.cpu) == int",
    "node.tags.exists(t, true)",
    "node.tags.exists_one(t, true)",
    "node.tags.map(t, 1).size() > 0",
    "node.tags.filter(t, true).size() > 0",
]


@pytest.mark.parametrize("source", TIGHT)
def test_static_estimate_is_tight_where_sizes_do_not_count(source: str) -> None:
    """The estimate counts what the meter counts: on the largest node it is an upper bound of
    the metered cost and, where no string or list operation is charged by its declared size
    rather than its actual one, within a few units of it, so an expression is not refused
    for costs it never has."""
    from celpy.adapter import json_to_cel

    expr = compile_expression(source)
    meter = _Meter(10**9)
    evaluator = _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter)
    evaluator.evaluate({"node": json_to_cel(_largest_node())})
    assert meter.cost <= expr.cost <= meter.cost + 10


def _free(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
    return table.cpu.copy(), table.memory.copy()


def fails_once(source: str, error: str) -> None:
    """``source`` on one plain node (kind linux, no "zone" label) fails it with ``error``,
    counted once among the evaluator's errors."""
    table = NodeTable([node("a")])
    cel = CelEvaluator()
    outcomes, _ = cel.outcomes(compile_expression(source), table, *_free(table))
    assert outcomes == [Outcome(error=error)]
    assert cel.errors == 1


def test_runtime_limit_is_a_multiple_of_the_static_budget() -> None:
    assert RUNTIME_COST_LIMIT >= 2 * celcheck.STATIC_COST_BUDGET
    assert CelEvaluator().cost_limit == RUNTIME_COST_LIMIT


@pytest.mark.parametrize(
    ("source", "small", "big", "lowered"),
    [
        (
            # Passes the static estimate (64 tags declared) but the node has 2,000 tags; the
            # limit is lowered so the test runs in milliseconds (same mechanism).
            'node.tags.exists(t, t.startsWith("gpu") && t.endsWith("x"))',
            {"tags": ("a",)},
            {"tags": tuple(f"t{i}" for i in range(2000))},
            True,
        ),
        (
            # A string made of 30,000 labels (64 declared): over a megabyte, so over the default
            # limit in a handful of visits (the size of what a call produces is paid for).
            "size(string(node.labels)) > 0",
            {"labels": {"a": "b"}},
            {"labels": {f"k{i}": "v" for i in range(30_000)}},
            False,
        ),
    ],
    ids=["more-tags-than-declared", "more-labels-than-declared"],
)
def test_runtime_cost_limit_fails_the_evaluation(
    source: str, small: dict[str, Any], big: dict[str, Any], lowered: bool
) -> None:
    expr = compile_expression(source)
    assert expr.cost <= celcheck.STATIC_COST_BUDGET
    cel = CelEvaluator(cost_limit=2 * expr.cost) if lowered else CelEvaluator()
    table = NodeTable([node("small", **small), node("big", **big)])
    results, group_ids = cel.outcomes(expr, table, *_free(table))
    by_node = {n.hostname: results[g] for n, g in zip(table.nodes, group_ids, strict=True)}
    assert by_node["small"].error is None
    assert by_node["big"].error == (
        f"{COST_LIMIT_ERROR}: more than {cel.cost_limit} cost units in one evaluation"
    )
    _, failed, _ = cel.truth(expr, table, *_free(table))
    assert failed[table.index["big"]] and not failed[table.index["small"]]
    assert (cel.evaluations, cel.errors, cel.cost_limit_hits) == (2, 1, 1)


def test_cost_limit_stops_a_comprehension_that_swallows_errors() -> None:
    """``exists`` turns CEL errors of one element into values and goes on; the cost limit must
    stop the whole evaluation instead (it is not a CEL error)."""
    table = NodeTable([node("a", tags=tuple(f"t{i}" for i in range(500)))])
    cel = CelEvaluator(cost_limit=500)
    expr = compile_expression("node.tags.exists(t, int(t) > 0)")
    _, failed, _ = cel.truth(expr, table, *_free(table))
    assert failed.tolist() == [True]
    assert cel.cost_limit_hits == 1


@pytest.mark.parametrize(
    ("source", "verdict"),
    [
        ("node.tags.all(t, int(t) > 0)", None),
        ("node.tags.exists(t, int(t) > 0)", None),
        ('node.tags.exists(t, t == "t40" || int(t) > 0)', True),
        ('node.tags.all(t, t != "t40" && int(t) > 0)', False),
        (" && ".join(f'node.labels["l{i}"] == "x"' for i in range(30)), None),
        (" || ".join(f'node.labels["l{i}"] == "x"' for i in range(30)), None),
        (" && ".join(f'node.labels["l{i}"] == "x"' for i in range(29)) + " && false", False),
    ],
    ids=["all", "exists", "exists-decided", "all-decided", "and-chain", "or-chain", "and-false"],
)
def test_errors_combine_without_growing(source: str, verdict: bool | None) -> None:
    """Each element or term errs (not a number, no such label). cel-python wraps two errors in
    a new one quoting both, doubling the message per element: 30 such tags or terms took the
    process out of memory. Now one error is kept, and a decisive value still wins."""
    table = NodeTable([node("a", tags=tuple(f"t{i}" for i in range(64)))])
    cel = CelEvaluator()
    results, _ = cel.outcomes(compile_expression(source), table, *_free(table))
    if verdict is None:
        assert results[0].error is not None and len(results[0].error) < 200
    else:
        assert results[0] == Outcome(value=verdict)


def test_error_texts_are_one_short_line() -> None:
    """Outcome errors are memoised per distinct value: one quoting a large value (a Python
    error's text may) is cut to one line of ``MAX_ERROR_LENGTH`` characters."""
    text = _one_line("TypeError: can't use\n" + "x" * 1_000_000)
    assert "\n" not in text and len(text) == MAX_ERROR_LENGTH and text.endswith("...")
    assert _one_line("no such key:\n  'zone'") == "no such key: 'zone'"
    # exactly at the limit: kept whole; only the first 4 x the limit is read (a message may
    # quote a huge value), so what comes after that much blank is not reached
    assert _one_line("x" * MAX_ERROR_LENGTH) == "x" * MAX_ERROR_LENGTH
    assert _one_line(" " * (4 * MAX_ERROR_LENGTH) + "late") == ""


def test_ordinary_expressions_are_unaffected_by_the_limit() -> None:
    zones = {f"n{i}": f"z{i % 3}" for i in range(6)}
    ssd = {f"n{i}" for i in range(6) if i % 2}
    nodes = [
        node(name, tags=("ssd",) if name in ssd else (), labels={"zone": zone})
        for name, zone in zones.items()
    ]
    table = NodeTable(nodes)
    cel = CelEvaluator()
    for source in REASONABLE:
        cel.truth(compile_expression(source), table, *_free(table))
    expr = compile_expression('"ssd" in node.tags && node.labels["zone"] != "z0"')
    true, failed, _ = cel.truth(expr, table, *_free(table))
    expected = [n.hostname in ssd and zones[n.hostname] != "z0" for n in table.nodes]
    assert true.tolist() == expected
    assert not failed.any()
    assert cel.cost_limit_hits == 0


def test_compile_is_cached() -> None:
    assert compile_expression('"a" in node.tags') is compile_expression('"a" in node.tags')


def test_one_evaluation_per_distinct_value() -> None:
    nodes = [node(f"n{i:03d}", tags=("ssd",) if i % 2 else ()) for i in range(100)]
    table = NodeTable(nodes)
    cel = CelEvaluator()
    expr = compile_expression('"ssd" in node.tags')
    true, failed, _ = cel.truth(expr, table, *_free(table))
    assert cel.evaluations == 2  # two distinct tag sets, not 100 nodes
    assert true.tolist() == [i % 2 == 1 for i in range(100)]
    assert not failed.any()
    # A new table with one more node: only unseen values are evaluated.
    table2 = NodeTable([*nodes, node("z", tags=("ssd", "gpu"))])
    true2, _, _ = cel.truth(expr, table2, *_free(table2))
    assert cel.evaluations == 3
    assert bool(true2[table2.index["z"]])


def test_nodes_are_grouped_again_only_when_what_cel_reads_changed() -> None:
    """Grouping the nodes by what an expression reads is a pass over the whole table: a
    table whose shape is the same (a node went NotReady) reuses the groups, a relabel does
    not, and either way the answer is the new table's."""
    nodes = [node(f"n{i}", tags=("ssd",) if i % 2 else ()) for i in range(6)]
    table = NodeTable(nodes)
    cel = CelEvaluator()
    expr = compile_expression('"ssd" in node.tags')
    cel.truth(expr, table, *_free(table))
    assert cel.groupings == 1
    flapped = table.replaced([node("n1", tags=("ssd",), ready=False)])
    true, _, _ = cel.truth(expr, flapped, *_free(flapped))
    assert cel.groupings == 1
    assert true.tolist() == [i % 2 == 1 for i in range(6)]
    retagged = flapped.replaced([node("n0", tags=("ssd",))])
    true, _, _ = cel.truth(expr, retagged, *_free(retagged))
    assert cel.groupings == 2
    assert true.tolist() == [i == 0 or i % 2 == 1 for i in range(6)]
    assert cel.evaluations == 2  # both values were seen before: memoised by value


def test_errors_and_non_bool_results_fail_the_node() -> None:
    table = NodeTable([node("a", labels={"zone": "x"}), node("b")])
    cel = CelEvaluator()
    true, failed, _ = cel.truth(
        compile_expression('node.labels["zone"] == "x"'), table, *_free(table)
    )
    assert true.tolist() == [True, False]
    assert failed.tolist() == [False, True]  # no such key on b
    assert (cel.errors, cel.cost_limit_hits) == (1, 0)
    # ``node.cpu`` alone is refused when compiled (not a bool); behind dyn() the checker
    # cannot tell, and the int it evaluates to is not a verdict
    true, failed, _ = cel.truth(compile_expression("dyn(node.cpu)"), table, *_free(table))
    assert failed.tolist() == [True, True]


def test_free_capacity_is_read_at_call_time() -> None:
    table = NodeTable([node("a", cpu="4"), node("b", cpu="4")])
    cel = CelEvaluator()
    expr = compile_expression("node.freeCpu >= 2000")
    free_cpu, free_memory = _free(table)
    assert cel.truth(expr, table, free_cpu, free_memory)[0].tolist() == [True, True]
    free_cpu[0] = 1000
    assert cel.truth(expr, table, free_cpu, free_memory)[0].tolist() == [False, True]


# -- property: the static estimate bounds the metered cost of any expression it accepts ------


def _expressions() -> st.SearchStrategy[str]:
    """Random well-typed expressions over ``node``: strings, lists of strings, ints and bools,
    with comprehensions (whose variables are then in scope) nested up to three deep."""

    def strings(names: tuple[str, ...], depth: int) -> st.SearchStrategy[str]:
        atoms = st.sampled_from(
            ["node.hostname", "node.kind", 'node.labels["zone"]', '"gpu"', "'a'", *names]
        )
        if depth == 0:
            return atoms
        sub = strings(names, depth - 1)
        return st.one_of(
            atoms,
            st.builds(lambda a, b: f"({a} + {b})", sub, sub),
            st.builds(lambda a: f"string(size({a}))", sub),
        )

    def lists(names: tuple[str, ...], depth: int) -> st.SearchStrategy[str]:
        atoms = st.sampled_from(["node.tags", "node.runtimes", '["a", "b", "c"]'])
        if depth == 0:
            return atoms
        var = f"v{depth}"
        return st.one_of(
            atoms,
            st.builds(
                lambda src, body: f"{src}.map({var}, {body})",
                lists(names, depth - 1),
                strings((*names, var), depth - 1),
            ),
            st.builds(
                lambda src, body: f"{src}.filter({var}, {body})",
                lists(names, depth - 1),
                bools((*names, var), depth - 1),
            ),
        )

    def bools(names: tuple[str, ...], depth: int) -> st.SearchStrategy[str]:
        s, li = strings(names, depth), lists(names, depth)
        atoms = st.one_of(
            st.builds(lambda a, b: f"{a} == {b}", s, s),
            st.builds(lambda a, b: f"{a}.startsWith({b})", s, s),
            st.builds(lambda a, b: f"{a} in {b}", s, li),
            st.builds(lambda a: f"size({a}) > node.cpu % 7", li),
            st.just("has(node.labels.zone)"),
        )
        if depth == 0:
            return atoms
        var = f"v{depth}"
        sub = bools(names, depth - 1)
        return st.one_of(
            atoms,
            st.builds(lambda a, b: f"({a} && {b})", sub, sub),
            st.builds(lambda a, b: f"({a} || !({b}))", sub, sub),  # ! binds tighter than >
            st.builds(
                lambda src, macro, body: f"{src}.{macro}({var}, {body})",
                lists(names, depth - 1),
                st.sampled_from(["all", "exists", "exists_one"]),
                bools((*names, var), depth - 1),
            ),
        )

    return bools((), 3)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_expressions())
def test_static_estimate_bounds_the_metered_cost_of_random_expressions(source: str) -> None:
    from celpy.adapter import json_to_cel

    try:
        expr = compile_expression(source)
    except CelCompileError as exc:
        assert "estimated cost" in str(exc), (source, str(exc))  # well-typed: only the budget
        return

    def metered(view: dict[str, Any], meter: _Meter) -> Any:
        evaluator = _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter)
        try:
            return evaluator.evaluate({"node": json_to_cel(view)})
        except Exception as exc:  # a CEL error must be one on both sides
            return type(exc)

    meter = _Meter(10**9)
    metered(_largest_node(), meter)
    assert meter.cost <= expr.cost, (source, meter.cost, expr.cost)
    # Same result as cel-python's own evaluator, on a small node: on a large one, cel-python's
    # all()/exists() over erring elements grows its error message exponentially.
    small = {**_largest_node(), "tags": ["gpu1", "a"], "runtimes": ["r"]}
    try:
        plain: Any = expr.program.evaluate({"node": json_to_cel(small)})
    except Exception as exc:
        plain = type(exc)
    assert metered(small, _Meter(10**9)) == plain


def test_expressions_reading_the_same_fields_share_one_grouping() -> None:
    """Grouping the nodes is a pass over the whole table, kept per set of fields read: a
    second expression reading only ``node.tags`` reuses the first one's groups (and
    evaluates once per distinct value again, as it is a new expression); one reading
    another field groups anew."""
    table = NodeTable([node(f"n{i}", tags=("ssd",) if i % 2 else ("gpu",)) for i in range(6)])
    cel = CelEvaluator()
    ssd, _, _ = cel.truth(compile_expression('"ssd" in node.tags'), table, *_free(table))
    assert (cel.groupings, cel.evaluations) == (1, 2)
    gpu, _, _ = cel.truth(compile_expression('"gpu" in node.tags'), table, *_free(table))
    assert (cel.groupings, cel.evaluations) == (1, 4)
    assert (ssd.tolist(), gpu.tolist()) == (
        [i % 2 == 1 for i in range(6)],
        [i % 2 == 0 for i in range(6)],
    )
    cel.truth(compile_expression('node.kind == "linux"'), table, *_free(table))
    assert (cel.groupings, cel.evaluations) == (2, 5)


def test_an_expression_reading_the_whole_node_is_evaluated_per_distinct_node() -> None:
    """``node["cpu"]`` reads node as a whole (the walk does not follow an index of ``node``):
    every field is the memo key, free capacity included, so it is grouped anew on every call
    and evaluated again only for a node never seen."""
    table = NodeTable([node("a", cpu="1"), node("b", cpu="2"), node("c", cpu="4")])
    cel = CelEvaluator()
    expr = compile_expression('node["cpu"] >= 2000')
    true, failed, skipped = cel.truth(expr, table, *_free(table))
    assert (true.tolist(), failed.tolist(), skipped.tolist()) == (
        [False, True, True],
        [False] * 3,
        [False] * 3,
    )
    assert (cel.evaluations, cel.groupings) == (3, 1)
    free_cpu, free_memory = _free(table)
    assert cel.truth(expr, table, free_cpu, free_memory)[0].tolist() == [False, True, True]
    assert (cel.evaluations, cel.groupings) == (3, 2)  # grouped again, nothing new to evaluate
    free_cpu[2] = 0  # c's free cpu changed: a node not seen before
    assert cel.truth(expr, table, free_cpu, free_memory)[0].tolist() == [False, True, True]
    assert (cel.evaluations, cel.groupings) == (4, 3)


def test_an_empty_table_has_empty_verdicts() -> None:
    empty = NodeTable([])
    verdicts = CelEvaluator().truth(compile_expression('"a" in node.tags'), empty, *_free(empty))
    assert [(v.dtype, v.shape) for v in verdicts] == [(np.dtype(np.bool_), (0,))] * 3


def test_the_memo_of_an_expression_is_reset_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outcomes are memoised per value; an expression reading a value unique per node
    (``node.hostname``) would grow its memo without end: past the bound it starts afresh."""
    monkeypatch.setattr(celexpr, "MAX_MEMO_PER_EXPRESSION", 2)
    cel = CelEvaluator()
    expr = compile_expression('node.hostname != "b"')
    three = NodeTable([node("a"), node("b"), node("c")])
    assert cel.truth(expr, three, *_free(three))[0].tolist() == [True, False, True]
    assert cel.evaluations == 3
    four = NodeTable([*three.nodes, node("d")])  # another table: the memo has 3 > 2 entries
    assert cel.truth(expr, four, *_free(four))[0].tolist() == [True, False, True, True]
    assert cel.evaluations == 3 + 4  # every value evaluated again


@pytest.mark.parametrize(
    ("source", "error"),
    [
        # a comprehension over an error is that error, not an evaluation of its body
        ('dyn(node.labels["nope"]).exists(x, true)', "no such key"),
        # a body that is neither a bool nor an error, twice: no such overload for || and &&
        ("[1, 2].exists(t, dyn(t))", "no such overload"),
        ("[1, 2].all(t, dyn(t))", "no such overload"),
    ],
    ids=["range-is-an-error", "exists-of-ints", "all-of-ints"],
)
def test_a_comprehension_that_cannot_decide_fails_the_node(source: str, error: str) -> None:
    fails_once(source, error)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        # neither side a bool: an error on either side is the result, as it is
        ('dyn(node.labels["zone"] == "x") && dyn(1)', "no such key"),
        ('dyn(1) && dyn(node.labels["zone"] == "x")', "no such key"),
        ('dyn(node.labels["zone"] == "x") || dyn(1)', "no such key"),
        ('dyn(1) || dyn(node.labels["zone"] == "x")', "no such key"),
        # an error on both sides: the left one is kept
        ('dyn(node.labels["zone"] == "x") && dyn(1 / 0 == 1)', "no such key"),
        ('dyn(node.labels["zone"] == "x") || dyn(1 / 0 == 1)', "no such key"),
    ],
    ids=["and-error-int", "and-int-error", "or-error-int", "or-int-error", "and-two", "or-two"],
)
def test_a_logical_operator_without_a_bool_keeps_the_first_error(source: str, error: str) -> None:
    """``&&``/``||`` with no bool to decide (``_cel_and``): an operand's error is the
    result, the left one when both err, never a "no matching overload" that hides it."""
    fails_once(source, error)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{"z": node.labels["zone"]} == {"z": node.labels["zone"]}', Outcome(error="no such key")),
        ('!({"z": node.labels["zone"]} == {"z": "a"})', Outcome(error="no such key")),
        ('size({"z": node.labels["zone"]}) == 1', Outcome(error="no such key")),
        ('size({node.labels["zone"]: 1}) == 1', Outcome(error="no such key")),
        # without an error a map literal is a map; CEL's map equality ignores the order
        ('{"z": node.kind, "h": node.hostname} == {"h": "a", "z": "linux"}', Outcome(True)),
        # each key holds its own value: "z" is linux, and linux is no key
        ('{"z": node.kind}["z"] == "linux" && !("linux" in {"z": node.kind})', Outcome(True)),
    ],
    ids=["equal-values", "negated", "size", "key", "no-error", "key-to-value"],
)
def test_a_map_literal_holding_an_error_is_that_error(source: str, expected: Outcome) -> None:
    """CEL's errors propagate through a map literal as through a list literal: a node
    without the label fails such an expression, it does not pass it."""
    table = NodeTable([node("a")])  # kind linux, no "zone" label
    cel = CelEvaluator()
    outcomes, _ = cel.outcomes(compile_expression(source), table, *_free(table))
    assert outcomes == [expected]
    true, failed, _ = cel.truth(compile_expression(source), table, *_free(table))
    verdict = ([expected.value is True], [expected.error is not None])
    assert (true.tolist(), failed.tolist()) == verdict


def test_a_cost_limit_below_one_activation_stops_at_once() -> None:
    limit = celcheck.ITERATION_COST - 1
    table = NodeTable([node("a")])
    cel = CelEvaluator(cost_limit=limit)
    (outcome,), _ = cel.outcomes(compile_expression("true"), table, *_free(table))
    error = f"{COST_LIMIT_ERROR}: more than {limit} cost units in one evaluation"
    assert outcome == Outcome(error=error)
    assert (cel.errors, cel.cost_limit_hits) == (1, 1)


def test_a_plain_python_error_while_evaluating_fails_the_node_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cel-python raises plain Python errors on some type mixes; whatever it raises becomes
    that node's one-line error, and is counted."""

    def broken(value: Any) -> Any:
        raise ZeroDivisionError("cannot\n  divide")

    monkeypatch.setattr(celexpr, "_to_python", broken)
    table = NodeTable([node("a")])
    cel = CelEvaluator()
    (outcome,), _ = cel.outcomes(compile_expression("true"), table, *_free(table))
    assert outcome == Outcome(error="ZeroDivisionError: cannot divide")
    assert (cel.errors, cel.cost_limit_hits) == (1, 0)


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (RecursionError(), "nesting deeper than 32 levels"),
        (ValueError("an error\n  of lark's own"), "syntax error: an error of lark's own"),
    ],
    ids=["recursion", "other"],
)
def test_a_parser_failing_otherwise_is_one_line(
    monkeypatch: pytest.MonkeyPatch, raised: Exception, message: str
) -> None:
    """Backstops: check_nesting keeps the parser from recursing too deep, and lark's own errors
    are CELParseError; should either slip through, the Workload still gets one line."""

    def failing(source: str) -> Any:
        raise raised

    monkeypatch.setattr(celexpr._environment(), "compile", failing)
    with pytest.raises(CelCompileError, match=f"^{re.escape(message)}$"):
        compile_expression.__wrapped__("node.cpu > 1")


@pytest.mark.parametrize(
    "source",
    [
        "true",  # the last unit spent is a syntax-tree node's
        '"abcdefghij" == "abcdefghij"',  # the last unit spent is the size of the string literal
    ],
    ids=["visit-last", "size-last"],
)
def test_an_evaluation_may_spend_exactly_its_limit(source: str) -> None:
    from celpy.adapter import json_to_cel

    expr = compile_expression(source)
    meter = _Meter(10**9)
    _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter).evaluate(
        {"node": json_to_cel(_largest_node())}
    )
    table = NodeTable([node("a")])
    exact = CelEvaluator(cost_limit=meter.cost)
    assert exact.outcomes(expr, table, *_free(table))[0] == [Outcome(value=True)]
    under = CelEvaluator(cost_limit=meter.cost - 1)
    (outcome,), _ = under.outcomes(expr, table, *_free(table))
    assert outcome.error is not None and outcome.error.startswith(COST_LIMIT_ERROR)


def test_a_cycle_budget_spent_to_the_unit_leaves_the_next_node_unevaluated() -> None:
    """One evaluation's cost is the whole cycle's budget: the first node is evaluated, the
    second is not even started (no interpreter run, not memoised), and the cycle counts once.
    A new evaluator starts with its first cycle's budget full, as after ``start_cycle``."""
    from celpy.adapter import json_to_cel

    expr = compile_expression('node.hostname != "x"')
    table = NodeTable([node("a"), node("b")])
    meter = _Meter(10**9)
    activation = {"node": json_to_cel(celexpr.cel_view(table.nodes[0], 0, 0))}
    _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter).evaluate(activation)
    cel = CelEvaluator(cycle_budget=meter.cost)  # a new evaluator's first cycle has begun
    outcomes, _ = cel.outcomes(expr, table, *_free(table))
    assert outcomes == [
        Outcome(value=True),
        Outcome(error=celexpr.CYCLE_BUDGET_ERROR, unbudgeted=True),
    ]
    assert (cel.evaluations, cel.cycle_budget_hits, cel.errors) == (1, 1, 0)
    cel.start_cycle()  # the next cycle: b's outcome was not memoised, a's was
    outcomes, _ = cel.outcomes(expr, table, *_free(table))
    assert outcomes == [Outcome(value=True), Outcome(value=True)]
    assert (cel.evaluations, cel.cycle_budget_hits) == (2, 1)


def test_the_estimate_of_a_literal_is_one_activation_and_its_ten_tree_nodes() -> None:
    """``true`` parses to a chain of ten nodes (expr, conditionalor, conditionaland, relation,
    addition, multiplication, unary, member, primary, literal): one activation plus one unit
    per node, exactly what the meter counts for it."""
    assert compile_expression("true").cost == celcheck.ITERATION_COST + 10
    expr = compile_expression("true")
    meter = _Meter(10**9)
    _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter).evaluate({})
    assert meter.cost == celcheck.ITERATION_COST + 10


@pytest.mark.parametrize(
    "template",
    [
        "{}.exists(t, true)",
        "{}.all(t, true)",
        "{}.map(t, true).size() > 0",
        "{}.filter(t, true).size() > 0",
    ],
)
def test_each_element_a_comprehension_ranges_over_costs_an_activation_and_its_body(
    template: str,
) -> None:
    """One more element of a literal list: its own ten tree nodes (``1``), and in a
    comprehension one more step, an activation plus the body's ten nodes (``true``)."""
    costs = [compile_expression(template.format([1] * n)).cost for n in (1, 2, 3)]
    step = celcheck.ITERATION_COST + 10 + 10
    assert [costs[1] - costs[0], costs[2] - costs[1]] == [step, step]
    literal = [compile_expression(f"{[1] * n} == []").cost for n in (1, 2)]
    assert literal[1] - literal[0] == 10


def test_every_failed_evaluation_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """``errors`` (a metric of the operator) and ``cost_limit_hits`` count evaluations, one per
    distinct value that failed, whatever made it fail."""
    three = NodeTable([node(n, labels={"slots": n}) for n in ("a", "b", "c")])
    cel = CelEvaluator()
    cel.truth(compile_expression('int(node.labels["slots"]) > 1'), three, *_free(three))
    assert (cel.errors, cel.cost_limit_hits) == (3, 0)  # "a", "b", "c" are not numbers
    limited = CelEvaluator(cost_limit=celcheck.ITERATION_COST - 1)
    limited.truth(compile_expression('node.hostname != ""'), three, *_free(three))
    assert (limited.errors, limited.cost_limit_hits) == (3, 3)

    def broken(value: Any) -> Any:
        raise ZeroDivisionError("cannot divide")

    monkeypatch.setattr(celexpr, "_to_python", broken)
    plain = CelEvaluator()
    plain.truth(compile_expression('node.hostname != ""'), three, *_free(three))
    assert (plain.errors, plain.cost_limit_hits) == (3, 0)


def test_each_cycle_that_runs_out_of_budget_is_counted_once() -> None:
    table = NodeTable([node("a"), node("b"), node("c")])
    cel = CelEvaluator(cycle_budget=1)  # less than one activation: nothing is evaluated
    for cycle in (1, 2):
        cel.start_cycle()
        outcomes, _ = cel.outcomes(compile_expression('node.hostname != ""'), table, *_free(table))
        assert all(o.unbudgeted for o in outcomes)
        assert cel.cycle_budget_hits == cycle  # three nodes cut, one cycle counted
    assert (cel.evaluations, cel.errors) == (2, 0)  # each cycle's first run started, was cut


ERR = 'node.labels["x"] == "y"'  # an error on a node without the label


@pytest.mark.parametrize(
    ("source", "verdict"),
    [
        (f"true || {ERR}", True),
        (f"{ERR} || true", True),
        (f"false || {ERR}", None),
        (f"{ERR} || false", None),
        (f"false && {ERR}", False),
        (f"{ERR} && false", False),
        (f"true && {ERR}", None),
        (f"{ERR} && true", None),
        ("false || true", True),
        ("true && false", False),
        ("false || false", False),
        ("true && true", True),
    ],
)
def test_and_and_or_are_commutative_over_errors(source: str, verdict: bool | None) -> None:
    """CEL's ``&&`` and ``||`` (cel-spec langdef, "Logical Operators"): a decisive operand
    (false for &&, true for ||) wins over an error on either side; otherwise the error is the
    result, the node fails."""
    table = NodeTable([node("a")])
    (outcome,), _ = CelEvaluator().outcomes(compile_expression(source), table, *_free(table))
    if verdict is None:
        assert outcome == Outcome(error="no such key")
    else:
        assert outcome == Outcome(value=verdict)


def test_free_memory_is_its_own_column() -> None:
    """freeCpu and freeMemory come from their own arrays: grouped by, and shown to the
    expression as, the one it names."""
    table = NodeTable([node("a"), node("b")])
    free_cpu = np.array([4000, 4000], dtype=np.int64)
    free_memory = np.array([1 << 30, 1 << 20], dtype=np.int64)
    cel = CelEvaluator()
    memory = compile_expression("node.freeMemory >= 1073741824")
    assert cel.truth(memory, table, free_cpu, free_memory)[0].tolist() == [True, False]
    cpu = compile_expression("node.freeCpu >= 4000 && node.freeMemory < 4000")
    assert cel.truth(cpu, table, free_cpu, free_memory)[0].tolist() == [False, False]
    both = compile_expression('node["freeCpu"] == 4000 && node["freeMemory"] == 1048576')
    assert cel.truth(both, table, free_cpu, free_memory)[0].tolist() == [False, True]


def test_node_named_from_the_root_scope_is_read_per_node() -> None:
    """``.node.cpu`` is ``node.cpu`` (cel-spec, "Name Resolution": a leading dot resolves the
    name in the root scope only): its answer differs from node to node like any read of node,
    never one answer broadcast to all."""
    table = NodeTable([node("a", cpu="1"), node("b", cpu="4")])
    cel = CelEvaluator()
    true, failed, _ = cel.truth(compile_expression(".node.cpu > 2000"), table, *_free(table))
    assert (true.tolist(), failed.tolist()) == ([False, True], [False, False])
