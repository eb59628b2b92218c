"""CEL over ``node``: compile once, evaluate once per distinct value of what an expression reads.

cel-python's interpreter costs a few hundred microseconds per evaluation, so evaluating every
constraint on every node (as the original scheduler did) caps a 5,000-node cluster at a few
workloads per second. But an expression reads only a few node fields, and its syntax tree says
which (``node.tags``, ``node.labels["zone"]``...). Nodes that agree on those fields get the
same answer, so:

1. ``compile_expression`` parses an expression once (memoised) and records its *dependencies*:
   ``(field, key)`` pairs, ``key`` set for ``node.labels["k"]`` / ``node.labels.k``.
2. ``CelEvaluator.evaluate`` groups a ``NodeTable``'s nodes by the values of those
   dependencies (once per table and dependency set), evaluates one representative per group,
   and broadcasts the outcome to a boolean mask with numpy.
3. Outcomes are memoised by *value* (expression, projected values), so they survive a new node
   table: after a node is added or relabelled only the values never seen before are evaluated.

Expressions that read ``freeCpu``/``freeMemory`` are the exception: free capacity changes with
every placement, so they are evaluated per candidate node on every call (still memoised by
value, which helps when many nodes have equal free capacity).

CEL is user input run inside the shared scheduling loop, so it is bounded twice, as the
Kubernetes API server bounds CRD validation rules: ``compile_expression`` refuses what
``celcheck`` finds wrong (unknown names, syntax, nesting, a static cost estimate over budget),
and every evaluation runs on ``_MeteredEvaluator``, which counts cost units (never time) and
stops at ``RUNTIME_COST_LIMIT``: that evaluation fails with ``cost limit exceeded``. On top,
each Workload's scheduling cycle has ``CYCLE_COST_BUDGET`` units for all its evaluations (the API
server's per-request budget, in orca's terms): memoising by value cannot help an expression
that reads something distinct on every node (``node.hostname``, a per-node label), and without
a cycle budget such a Workload could hold the one scheduling loop for tens of seconds. Nodes
left when the budget is spent are not evaluated (their outcome says so and is not memoised).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import celpy
import lark
import numpy as np
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator

from controller.api.models import MAX_EXPRESSION_LENGTH
from controller.scheduler import celcheck
from controller.scheduler.nodes import BoolArray, IntArray, NodeInfo, NodeTable

FREE_FIELDS: Final = frozenset({"freeCpu", "freeMemory"})
_MAP_FIELDS: Final = frozenset({"labels"})
# Memoised outcomes per expression; past this many distinct values the memo is reset, which
# bounds memory when an expression reads something unique per node (hostname, free capacity).
MAX_MEMO_PER_EXPRESSION: Final = 100_000
RUNTIME_COST_LIMIT: Final = 5 * celcheck.STATIC_COST_BUDGET
"""Cost units one evaluation may spend (units of ``celcheck``); past it the evaluation fails.
Five times the static budget, so a node beyond the declared sizes (more labels or tags than
``celcheck.MAX_LIST_ITEMS``) still evaluates, while nothing runs unbounded."""
COST_LIMIT_ERROR: Final = "cost limit exceeded"
CYCLE_COST_BUDGET: Final = 2 * RUNTIME_COST_LIMIT
"""Cost units all of one Workload's evaluations may spend in one scheduling cycle."""
CYCLE_BUDGET_ERROR: Final = "not evaluated: the Workload's CEL budget for this cycle is spent"

Dep = tuple[str, str | None]
"""What an expression reads of ``node``: a field, and for a map field maybe one key."""


@functools.cache
def _environment() -> celpy.Environment:
    """cel-python's Environment, built on first use: building it builds the CEL grammar's
    parser (~0.3 s), which a process that never compiles an expression should not pay, and
    which ``controller.scheduler.celcache`` can install from a cache before the first compile."""
    return celpy.Environment()


class CelCompileError(ValueError):
    """An expression refused at compile time: it does not parse, nests too deeply, names
    something ``node`` does not have, or its estimated cost is over the budget."""


@dataclass(frozen=True, eq=False)
class CompiledExpression:
    """A parsed expression with its program and what it reads of ``node``.

    ``deps`` is None when the expression uses ``node`` as a whole (then every field counts).
    ``cost`` is the static estimate of one evaluation's worst case (``celcheck`` units).
    """

    source: str
    program: Any
    deps: tuple[Dep, ...] | None
    cost: int = 0

    @functools.cached_property
    def reads_free(self) -> bool:
        """Whether it reads free capacity (then it is evaluated per cycle, never memoised)."""
        return self.deps is None or any(field in FREE_FIELDS for field, _ in self.deps)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluation: a CEL value converted to Python, or the error text."""

    value: Any = None
    error: str | None = None
    unbudgeted: bool = False  # not evaluated for lack of cycle budget: never memoised


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> CompiledExpression:
    """Parse and check ``source`` once; raise ``CelCompileError`` with a one-line message.

    The order matters: length and bracket nesting are checked on the text, before the parser
    and the checker (both cheap, neither recursing deeply) and long before anything runs.
    """
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(
            f"expression is {len(source)} characters long, at most {MAX_EXPRESSION_LENGTH}"
        )
    try:
        celcheck.check_nesting(source)
        tree = _parse(source)
        cost = celcheck.check(tree)
    except celcheck.CelCheckError as exc:
        raise CelCompileError(str(exc)) from None
    return CompiledExpression(
        source=source,
        program=_environment().program(tree, functions=_LOGIC),
        deps=_dependencies(tree),
        cost=cost,
    )


def _parse(source: str) -> lark.Tree[Any]:
    try:
        tree: lark.Tree[Any] = _environment().compile(source)
    except CELParseError as exc:
        raise celcheck.CelCheckError(celcheck.syntax_message(exc.__context__, source)) from None
    except RecursionError:  # unreachable after check_nesting, kept as a backstop
        raise celcheck.CelCheckError(f"nesting deeper than {celcheck.MAX_NESTING} levels") from None
    except Exception as exc:  # the parser's own errors are not all CELParseError
        raise celcheck.CelCheckError(f"syntax error: {_one_line(str(exc))}") from None
    return tree


MAX_ERROR_LENGTH: Final = 300


def _one_line(message: str) -> str:
    """One line of at most ``MAX_ERROR_LENGTH`` characters (an error may quote a large value)."""
    short = " ".join(message[: 4 * MAX_ERROR_LENGTH].split())
    return short if len(short) <= MAX_ERROR_LENGTH else short[: MAX_ERROR_LENGTH - 3] + "..."


def _walk(tree: lark.Tree[Any], parent: lark.Tree[Any] | None) -> Iterator[tuple[Any, Any]]:
    stack: list[tuple[lark.Tree[Any], lark.Tree[Any] | None]] = [(tree, parent)]
    while stack:
        node, up = stack.pop()
        yield node, up
        stack.extend((c, node) for c in node.children if isinstance(c, lark.Tree))


def _dependencies(tree: lark.Tree[Any]) -> tuple[Dep, ...] | None:
    """The ``(field, key)`` pairs an expression reads of ``node``, or None for all of it.

    The parse tree for ``node.labels["zone"]`` is
    ``member_index(member(member_dot(member(primary(ident node)), labels)), expr("zone"))``;
    anything that uses ``node`` other than through a field access makes the expression depend
    on the whole node. Over-approximating is always safe; under-approximating never happens
    because every name ``node`` is accounted for: ``ident node`` and ``dot_ident node``
    (``.node``, the same variable named from the root scope, in the same place in the tree).
    """
    parents: dict[int, lark.Tree[Any] | None] = {}
    idents: list[lark.Tree[Any]] = []
    for node, up in _walk(tree, None):
        parents[id(node)] = up
        named = node.data in ("ident", "dot_ident") and node.children
        if named and str(node.children[0]) == "node":
            idents.append(node)
    deps: set[Dep] = set()
    for ident in idents:
        primary = parents.get(id(ident))
        member = parents.get(id(primary)) if primary is not None else None
        access = parents.get(id(member)) if member is not None else None
        if (
            primary is None
            or primary.data != "primary"
            or member is None
            or member.data != "member"
            or access is None
            or access.data != "member_dot"
            or access.children[0] is not member
        ):
            return None
        field = str(access.children[1])
        deps.add((field, _map_key(access, parents) if field in _MAP_FIELDS else None))
    return tuple(sorted(deps, key=lambda d: (d[0], d[1] or "")))


def _map_key(access: lark.Tree[Any], parents: dict[int, lark.Tree[Any] | None]) -> str | None:
    """The literal key in ``node.labels["k"]`` or ``node.labels.k``, else None (whole map)."""
    member = parents.get(id(access))
    outer = parents.get(id(member)) if member is not None else None
    if outer is None or outer.children[0] is not member:
        return None
    if outer.data == "member_dot":
        return str(outer.children[1])
    if outer.data == "member_index":
        return _string_literal(outer.children[1])
    return None


def _string_literal(expr: Any) -> str | None:
    """The value of an index expression that is nothing but a plain string literal."""
    node = expr
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        node = node.children[0]
    if not isinstance(node, lark.Token) or node.type != "STRING_LIT":
        return None
    text = str(node)
    if len(text) < 2 or text[0] not in "\"'" or text[-1] != text[0] or "\\" in text:
        return None
    if text.startswith(text[0] * 3):
        return None
    return text[1:-1]


_MISSING: Final = ("<missing>",)


def _project(dep: Dep, table: NodeTable, free_cpu: IntArray, free_memory: IntArray) -> list[Any]:
    """The value of one dependency on every node of the table, hashable (a map field read at
    one key: that key's value only)."""
    field, key = dep
    declared = celcheck.NODE.get(field)
    if declared is None:
        return [_MISSING] * len(table)
    if declared.free is not None:
        return list((free_cpu if declared.free == "cpu" else free_memory).tolist())
    assert declared.attribute is not None
    values = [getattr(n, declared.attribute) for n in table.nodes]
    if declared.type.kind == "map":
        if key is not None:
            return [v.get(key, _MISSING) for v in values]
        return [tuple(sorted(v.items())) for v in values]
    return values


def _whole_node(table: NodeTable, free_cpu: IntArray, free_memory: IntArray) -> list[Hashable]:
    """Every field of ``node`` on every node, hashable: the memo key of an expression whose
    reads are not known."""
    columns = [_project((field, None), table, free_cpu, free_memory) for field in celcheck.NODE]
    return list(zip(*columns, strict=True)) if columns else []


def cel_view(node: NodeInfo, free_cpu: int, free_memory: int) -> dict[str, Any]:
    """The ``node`` variable as CEL expressions see it on one node (``celcheck.NODE``)."""
    view: dict[str, Any] = {}
    for field, declared in celcheck.NODE.items():
        if declared.free is not None:
            view[field] = free_cpu if declared.free == "cpu" else free_memory
            continue
        assert declared.attribute is not None
        value = getattr(node, declared.attribute)
        kind = declared.type.kind
        view[field] = list(value) if kind == "list" else dict(value) if kind == "map" else value
    return view


def _to_python(value: Any) -> Any:
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    return value


class CelEvaluator:
    """Evaluates compiled expressions over a node table as numpy masks, memoised by value.

    One evaluator serves a whole planning run or the operator's lifetime; it is not
    thread-safe (the operator's single scheduling loop owns it).
    """

    def __init__(
        self, cost_limit: int = RUNTIME_COST_LIMIT, cycle_budget: int = CYCLE_COST_BUDGET
    ) -> None:
        self.cycle_budget = cycle_budget
        self._cycle_spent = 0
        self._cycle_cut = False
        self.cost_limit = cost_limit
        self._memo: dict[str, dict[Hashable, Outcome]] = {}
        self._table_shape = -1
        self._groups: dict[tuple[Dep, ...], tuple[np.ndarray[Any, Any], list[Hashable], list[int]]]
        self._groups = {}
        self._outcomes: dict[str, tuple[list[Outcome], np.ndarray[Any, Any]]] = {}
        self.evaluations = 0  # real interpreter runs, for benchmarks and tests
        self.groupings = 0  # nodes grouped by what an expression reads (a pass over the table)
        self.errors = 0  # evaluations that raised (the operator exports this as a metric)
        self.cost_limit_hits = 0  # evaluations stopped at ``cost_limit`` (also in ``errors``)
        self.cycle_budget_hits = 0  # cycles that spent their budget before every node was seen

    def start_cycle(self) -> None:
        """A new Workload's scheduling cycle: its CEL budget starts full."""
        self._cycle_spent = 0
        self._cycle_cut = False

    def _unbudgeted(self) -> Outcome:
        if not self._cycle_cut:
            self._cycle_cut = True
            self.cycle_budget_hits += 1
        return Outcome(error=CYCLE_BUDGET_ERROR, unbudgeted=True)

    def outcomes(
        self,
        expr: CompiledExpression,
        table: NodeTable,
        free_cpu: IntArray,
        free_memory: IntArray,
    ) -> tuple[list[Outcome], np.ndarray[Any, Any]]:
        """Distinct outcomes and, per node, the index of its outcome in that list."""
        if table.shape != self._table_shape:  # what CEL reads of the nodes changed
            self._table_shape = table.shape
            self._groups.clear()
            self._outcomes.clear()
        if not expr.reads_free:
            cached = self._outcomes.get(expr.source)
            if cached is not None:
                return cached
        if expr.deps is None:
            keys = _whole_node(table, free_cpu, free_memory)
            group_ids, uniques, reps = _group(keys)
            self.groupings += 1
        else:
            deps = expr.deps
            grouped = None if expr.reads_free else self._groups.get(deps)
            if grouped is None:
                self.groupings += 1
                columns = [_project(d, table, free_cpu, free_memory) for d in deps]
                keys = list(zip(*columns, strict=True)) if columns else [()] * len(table)
                grouped = _group(keys)
                if not expr.reads_free:
                    self._groups[deps] = grouped
            group_ids, uniques, reps = grouped
        memo = self._memo.setdefault(expr.source, {})
        if len(memo) > MAX_MEMO_PER_EXPRESSION:
            memo.clear()
        results: list[Outcome] = []
        complete = True
        for key, rep in zip(uniques, reps, strict=True):
            outcome = memo.get(key)
            if outcome is None:
                outcome = self._run(expr, table, rep, free_cpu, free_memory)
                if outcome.unbudgeted:
                    complete = False
                else:
                    memo[key] = outcome
            results.append(outcome)
        result = (results, group_ids)
        if not expr.reads_free and complete:
            self._outcomes[expr.source] = result
        return result

    def truth(
        self,
        expr: CompiledExpression,
        table: NodeTable,
        free_cpu: IntArray,
        free_memory: IntArray,
    ) -> tuple[BoolArray, BoolArray, BoolArray]:
        """Per node: (expression is true, it failed to evaluate or is not a bool, it was not
        evaluated because the cycle's budget is spent; such nodes are also failed)."""
        results, group_ids = self.outcomes(expr, table, free_cpu, free_memory)
        if len(group_ids) == 0:
            empty = np.zeros(0, dtype=np.bool_)
            return empty, empty, empty
        true = np.array([r.value is True for r in results], dtype=np.bool_)
        failed = np.array(
            [r.error is not None or not isinstance(r.value, bool) for r in results],
            dtype=np.bool_,
        )
        skipped = np.array([r.unbudgeted for r in results], dtype=np.bool_)
        return true[group_ids], failed[group_ids], skipped[group_ids]

    def _run(
        self,
        expr: CompiledExpression,
        table: NodeTable,
        index: int,
        free_cpu: IntArray,
        free_memory: IntArray,
    ) -> Outcome:
        remaining = self.cycle_budget - self._cycle_spent
        if remaining <= 0:
            return self._unbudgeted()
        self.evaluations += 1
        node = table.nodes[index]
        activation = {
            "node": json_to_cel(cel_view(node, int(free_cpu[index]), int(free_memory[index])))
        }
        meter = _Meter(min(self.cost_limit, remaining))
        try:
            evaluator = _MeteredEvaluator(expr.program.ast, expr.program.new_activation(), meter)
            return Outcome(value=_to_python(evaluator.evaluate(activation)))
        except CostLimitExceeded:
            if meter.limit < self.cost_limit:  # the cycle's budget ran out, not this evaluation's
                return self._unbudgeted()
            self.errors += 1
            self.cost_limit_hits += 1
            limit = self.cost_limit
            return Outcome(
                error=f"{COST_LIMIT_ERROR}: more than {limit} cost units in one evaluation"
            )
        except CELEvalError as exc:
            self.errors += 1
            return Outcome(error=_one_line(str(exc.args[0] if exc.args else exc)))
        except Exception as exc:  # cel-python raises plain Python errors on some type mixes
            self.errors += 1
            return Outcome(error=_one_line(f"{type(exc).__name__}: {exc}"))
        finally:
            self._cycle_spent += meter.cost


def _cel_and(x: Any, y: Any) -> Any:
    """CEL's commutative ``&&``: false wins over an error, an error over true.

    Replaces cel-python's ``logical_and``, which raises a TypeError quoting both operands when
    neither is a bool; the evaluator turns that into an error whose message quotes both errors,
    so a chain of erring terms (``node.labels["a"] == "x" && node.labels["b"] == "y" && ...``
    on a node without those labels) doubles the message per term, out of memory at ~30 terms.
    Here the left error is kept as is.
    """
    x_bool, y_bool = isinstance(x, celtypes.BoolType), isinstance(y, celtypes.BoolType)
    if x_bool and y_bool:
        return celtypes.BoolType(x and y)
    if x_bool:
        return y if x else x
    if y_bool:
        return x if y else y
    return _first_error(x, y, "&&")


def _cel_or(x: Any, y: Any) -> Any:
    """CEL's commutative ``||``: true wins over an error, an error over false (see ``_cel_and``)."""
    x_bool, y_bool = isinstance(x, celtypes.BoolType), isinstance(y, celtypes.BoolType)
    if x_bool and y_bool:
        return celtypes.BoolType(x or y)
    if x_bool:
        return x if x else y
    if y_bool:
        return y if y else x
    return _first_error(x, y, "||")


def _first_error(x: Any, y: Any, operator: str) -> Any:
    for value in (x, y):
        if isinstance(value, CELEvalError):
            return value
    # Neither a bool nor an error (say an int): no such overload, named by type only.
    raise TypeError(f"{type(x).__name__} {operator} {type(y).__name__}")


_LOGIC: Final = {"_&&_": _cel_and, "_||_": _cel_or}


class CostLimitExceeded(Exception):
    """Raised inside an evaluation that spent its cost limit.

    Deliberately not a ``CELEvalError``, ``ValueError`` or ``TypeError``: cel-python's macros
    and operators turn those into CEL error values and carry on (``exists`` over the rest of a
    list), while this must unwind the whole evaluation at once.
    """


class _Meter:
    """The cost one evaluation has spent, shared by the evaluator and its sub-evaluators."""

    __slots__ = ("cost", "limit")

    def __init__(self, limit: int) -> None:
        self.cost = 0
        self.limit = limit

    def charge(self, units: int) -> None:
        self.cost += units
        if self.cost > self.limit:
            raise CostLimitExceeded


class _MeteredEvaluator(Evaluator):
    """cel-python's interpreter, counting cost units (``celcheck``) deterministically.

    One unit per syntax-tree node visited (lark's ``_visit_tree``, which every visit goes
    through), ``ITERATION_COST`` per activation (each comprehension step evaluates its body
    through ``evaluate`` on a sub-evaluator that shares this meter), and the size of every value
    a concatenation, a call or a primary produces, so a string or list that grows by
    concatenation is paid for. No wall clock: the same expression on the same node costs the
    same on any machine under any load.
    """

    def __init__(self, ast: lark.Tree[Any], activation: Any, meter: _Meter) -> None:
        super().__init__(ast, activation)
        self.meter = meter

    def sub_evaluator(self, ast: lark.Tree[Any]) -> _MeteredEvaluator:
        return _MeteredEvaluator(ast, self.activation, self.meter)

    def evaluate(self, context: Any = None) -> Any:
        self.meter.charge(celcheck.ITERATION_COST)
        return super().evaluate(context)

    def _visit_tree(self, tree: lark.Tree[Any]) -> Any:
        # lark's Interpreter._visit_tree without its visit_wrapper lookup (celpy sets none),
        # so metering adds no stack frame: the recursion limit budget stays as measured.
        meter = self.meter
        meter.cost += 1
        if meter.cost > meter.limit:
            raise CostLimitExceeded
        return getattr(self, tree.data)(tree)

    def _sized(self, value: Any) -> Any:
        if isinstance(value, str | bytes | list | dict):
            self.meter.charge(len(value) // celcheck.SIZE_UNIT)
        return value

    def addition(self, tree: lark.Tree[Any]) -> Any:
        value = super().addition(tree)
        return self._sized(value) if len(tree.children) > 1 else value

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        method = str(tree.children[1])
        if method in ("all", "exists"):
            return self._sized(self._quantifier(tree, exists=method == "exists"))
        return self._sized(super().member_dot_arg(tree))

    def _quantifier(self, tree: lark.Tree[Any], exists: bool) -> Any:
        """``all``/``exists`` as cel-python evaluates them (every element; an element's error
        is a value that a decisive element outweighs), but folded with ``_cel_and`` /
        ``_cel_or``: cel-python's fold wraps two errors in a new one quoting both, so the
        message doubles per element (30 erring tags: gigabytes)."""
        members = self.visit(tree.children[0])
        if isinstance(members, CELEvalError):
            return members
        body = self.build_ss_macro_eval(tree)
        combine = _cel_or if exists else _cel_and
        result: Any = celtypes.BoolType(not exists)
        for value in members:
            try:
                result = combine(result, body(value))
            except TypeError as exc:
                result = CELEvalError("no such overload", TypeError, exc.args)
        return result

    def primary(self, tree: lark.Tree[Any]) -> Any:
        return self._sized(super().primary(tree))

    def mapinits(self, tree: lark.Tree[Any]) -> Any:
        """A map literal with an erring key or value is that error, as a list literal's is
        (cel-python's ``exprlist``) and as CEL's errors propagate. cel-python stores the error
        as a value instead, and its errors compare equal by their arguments, so
        ``{"z": node.labels["zone"]} == {"z": node.labels["zone"]}`` was true, and a negated
        comparison admitted, a node without the label."""
        keys_values: list[Any] = self.visit_children(tree)
        for item in keys_values:
            if isinstance(item, CELEvalError):
                return item
        # MapType refuses a duplicate key itself, with cel-python's own message.
        return celtypes.MapType(list(zip(keys_values[0::2], keys_values[1::2], strict=True)))


def _group(keys: list[Hashable]) -> tuple[np.ndarray[Any, Any], list[Hashable], list[int]]:
    """Group ids per node, the distinct keys, and the first node index of each group."""
    ids: dict[Hashable, int] = {}
    reps: list[int] = []
    group_ids = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        gid = ids.get(key)
        if gid is None:
            gid = ids[key] = len(reps)
            reps.append(i)
        group_ids[i] = gid
    return group_ids, list(ids), reps
