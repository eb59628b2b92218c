"""CEL compilation, dependency analysis and memoised evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from controller.core.celexpr import CelCompileError, CelEvaluator, compile_expression
from controller.core.nodes import NodeTable
from tests.factories import node


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
    ],
    ids=["tags", "label-index", "label-dot", "two", "whole-map", "free", "size", "none", "whole"],
)
def test_dependencies(source: str, deps: tuple[tuple[str, str | None], ...] | None) -> None:
    assert compile_expression(source).deps == deps


@pytest.mark.parametrize(
    ("source", "message"),
    [("node.tags.(", "node.tags.("), ("node.tagz == 1", "no field 'tagz'")],
    ids=["syntax", "unknown-field"],
)
def test_compile_errors_are_one_line(source: str, message: str) -> None:
    with pytest.raises(CelCompileError) as info:
        compile_expression(source)
    assert "\n" not in str(info.value)
    assert message in str(info.value) or "node" in str(info.value)


def test_compile_is_cached() -> None:
    assert compile_expression('"a" in node.tags') is compile_expression('"a" in node.tags')


def _free(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
    return table.cpu.copy(), table.memory.copy()


def test_one_evaluation_per_distinct_value() -> None:
    nodes = [node(f"n{i:03d}", tags=("ssd",) if i % 2 else ()) for i in range(100)]
    table = NodeTable(nodes)
    cel = CelEvaluator()
    expr = compile_expression('"ssd" in node.tags')
    true, failed = cel.truth(expr, table, *_free(table))
    assert cel.evaluations == 2  # two distinct tag sets, not 100 nodes
    assert true.tolist() == [i % 2 == 1 for i in range(100)]
    assert not failed.any()
    # A new table with one more node: only unseen values are evaluated.
    table2 = NodeTable([*nodes, node("z", tags=("ssd", "gpu"))])
    true2, _ = cel.truth(expr, table2, *_free(table2))
    assert cel.evaluations == 3
    assert bool(true2[table2.index["z"]])


def test_errors_and_non_bool_results_fail_the_node() -> None:
    table = NodeTable([node("a", labels={"zone": "x"}), node("b")])
    cel = CelEvaluator()
    true, failed = cel.truth(compile_expression('node.labels["zone"] == "x"'), table, *_free(table))
    assert true.tolist() == [True, False]
    assert failed.tolist() == [False, True]  # no such key on b
    true, failed = cel.truth(compile_expression("node.cpu"), table, *_free(table))
    assert failed.tolist() == [True, True]  # an int is not a verdict
    assert cel.errors >= 1


def test_free_capacity_is_read_at_call_time() -> None:
    table = NodeTable([node("a", cpu="4"), node("b", cpu="4")])
    cel = CelEvaluator()
    expr = compile_expression("node.freeCpu >= 2000")
    free_cpu, free_memory = _free(table)
    assert cel.truth(expr, table, free_cpu, free_memory)[0].tolist() == [True, True]
    free_cpu[0] = 1000
    assert cel.truth(expr, table, free_cpu, free_memory)[0].tolist() == [False, True]
