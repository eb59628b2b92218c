"""``controller.inputs.safeyaml``: JSON-shaped values, and the budgets at their edges."""

from __future__ import annotations

import random

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.inputs import safeyaml
from controller.inputs.safeyaml import YAMLLimitError, load_all
from tests.support.properties import examples


def aliased(copies: int) -> bytes:
    """An anchor of 100 nodes (a list of 99 strings) aliased ``copies`` times: 100 x copies
    nodes added by aliases, in a file of 104 nodes."""
    anchor = "a: &a [" + ", ".join(["x"] * 99) + "]\n"
    return (anchor + "b: [" + ", ".join(["*a"] * copies) + "]\n").encode()


def test_alias_expansion_up_to_the_budget_loads_and_past_it_is_refused() -> None:
    assert safeyaml.MIN_ALIAS_BUDGET == 10_000
    (doc,) = load_all(aliased(100))  # exactly 10,000 nodes added
    assert len(doc["b"]) == 100 and doc["b"][0] is doc["a"]  # aliases share, as in PyYAML
    with pytest.raises(YAMLLimitError, match="aliases expand to more than 10000 nodes"):
        load_all(aliased(101))


def test_depth_up_to_the_budget_loads_and_past_it_is_refused() -> None:
    def nested(depth: int) -> bytes:
        return ("[" * depth + "]" * depth).encode()

    load_all(nested(safeyaml.MAX_DEPTH))
    with pytest.raises(YAMLLimitError, match="nested more than 100 levels deep"):
        load_all(nested(safeyaml.MAX_DEPTH + 1))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: 2024-01-01", {"a": "2024-01-01"}),  # kubectl keeps timestamps as strings
        ("a: 2024-01-01T10:00:00Z", {"a": "2024-01-01T10:00:00Z"}),
        ("a: 0x10", {"a": 16}),
        ("a: [yes, no, ~, 1.5]", {"a": [True, False, None, 1.5]}),
        ("x: &b {k: 1}\ny: {<<: *b, j: 2}", {"x": {"k": 1}, "y": {"k": 1, "j": 2}}),
        (  # an earlier source wins over a later one, the mapping's own keys over both
            "a: &a {k: 1, j: 1}\nb: {<<: [*a, {k: 2, q: 2}], j: 3}",
            {"a": {"k": 1, "j": 1}, "b": {"k": 1, "q": 2, "j": 3}},
        ),
        ("a: ! 12\nb: !!str 12\nc: '12'\nd: !!int '12'", {"a": 12, "b": "12", "c": "12", "d": 12}),
        ("--- \n", None),
    ],
    ids=["date", "datetime", "hex", "yaml-1.1-scalars", "merge-key", "merge-list", "tags", "empty"],
)
def test_values_are_json_shaped(text: str, value: object) -> None:
    assert load_all(text.encode()) == [value]


def test_a_kubectl_node_list_loads_as_pyyaml_loads_it() -> None:
    """The one-pass builder against PyYAML's own (libyaml) loader on what users feed orca
    plan: a ``kubectl get nodes -o yaml`` List, every scalar type in it."""
    from bench.bench_manifests import node_object

    rng = random.Random(3)
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        node_object(i, rng) for i in range(20)
    ]}).encode()  # fmt: skip
    assert load_all(text) == list(yaml.load_all(text, Loader=yaml.CSafeLoader))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: !!binary aGk=", "could not determine a constructor"),
        ("a: !!set {x}", "could not determine a constructor"),
        ("a: .nan", "not a finite number"),
        ("a: !!float x", "'x' is not a valid number"),
        ("a: &r [*r]", "(a cycle)"),
        ("a: *nowhere", "found undefined alias 'nowhere'"),
        ("{[a]: 1}", "found unhashable key"),
        ("a: {<<: 1}", "expected a mapping or list of mappings for merging"),
        ("- <<", "could not determine a constructor for the tag 'tag:yaml.org,2002:merge'"),
    ],
    ids=[
        "binary",
        "set",
        "nan",
        "bad-float",
        "cycle",
        "undefined-alias",
        "unhashable-key",
        "merge-scalar",
        "merge-outside-a-mapping",
    ],
)
def test_what_json_cannot_hold_is_refused(text: str, problem: str) -> None:
    with pytest.raises((yaml.YAMLError, YAMLLimitError), match=problem):
        load_all(text.encode())


def test_size_is_checked_before_anything_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(safeyaml, "MAX_FILE_BYTES", 1 << 20)
    with pytest.raises(YAMLLimitError, match="larger than 1 MiB"):
        load_all(b"[" * ((1 << 20) + 1))  # a YAML error, were it parsed


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["<<", "yes", "~", "0o17", "1_000", ".5", "true", "null", "-", "!", "&a"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=examples(300), deadline=None)
@given(docs=st.lists(_JSON, min_size=1, max_size=3), flow=st.sampled_from([None, True, False]))
def test_documents_load_as_pyyaml_loads_them(docs: list[object], flow: bool | None) -> None:
    """The inline fast path of the builder (plain scalars seen before) and the spelled-out one
    build what PyYAML's own safe loader builds, in any style the dumper writes."""
    text = yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=True)
    assert safeyaml.load_all(text.encode()) == list(yaml.safe_load_all(text))


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {x: 1, y: 2}\nuse: {<<: *b, y: 3}\nagain: [*b, *b]\n",
        "- &s text\n- *s\n- {<<: [{a: 1}, {a: 2, b: 2}], c: *s}\n",
        "a: !!str 12\nb: ! 12\nc: '12'\nd: 12\ne: [12, '12', !!str 12]\n",
        "k: &k key\n*k : value\n<<: {m: 1}\n",
    ],
)
def test_anchors_merges_and_tags_load_as_pyyaml_loads_them(text: str) -> None:
    assert safeyaml.load_all(text.encode()) == list(yaml.safe_load_all(text))
