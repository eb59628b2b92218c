"""Static checks of a CEL expression before it may run inside the scheduling loop.

CEL in a Workload is user input evaluated inside one shared loop, so, like the Kubernetes API
server for CRD validation rules (``k8s.io/apiserver/pkg/cel``, cel-go's ``checker/cost.go``),
an expression must pass these checks when it is compiled, and a Workload whose expression
fails one is ``Invalid`` with the message raised here:

1. ``check_nesting``: brackets nested deeper than ``MAX_NESTING``, refused by a scan of the
   text *before* the parser or the (recursive) interpreter can recurse deeply.
2. ``syntax_message``: a parse error as one line that says what and where.
3. ``check``: a walk of the parse tree that (a) type-checks identifiers and fields: the only
   variable is ``node`` with the fields of ``NODE_TYPE``, comprehension variables are in scope
   inside their macro, functions must exist; (b) type-checks operators and the standard
   functions against CEL's overloads, as cel-go's checker does (``TYPE RULES`` below), and
   requires the whole expression to be a ``bool``; (c) refuses syntax trees taller than the
   interpreter can evaluate; (d) estimates the worst-case cost of one evaluation over the
   declared maximum sizes of ``node``'s fields (``MAX_*`` below), nested comprehensions
   multiplying, and refuses an estimate over ``STATIC_COST_BUDGET``.

TYPE RULES (CEL's language definition, cel-spec ``doc/langdef.md``, "Gradual Type Checking" and
"List of Standard Definitions"; the messages are cel-go's, ``checker/errors.go``): ``_==_`` and
``_!=_`` are ``(A, A) -> bool``; ``_<_``, ``_<=_``, ``_>_``, ``_>=_`` take two values of one of
``bool``, ``int``, ``uint``, ``double``, ``string``, ``bytes``; ``@in`` is ``(A, list(A))`` or
``(A, map(A, B))``; ``_&&_``, ``_||_`` and ``!_`` take ``bool``; ``-_`` takes ``int`` or
``double``; ``_+_`` is one of ``int``, ``uint``, ``double``, ``string``, ``bytes``,
``list(A)`` twice, ``_-_``, ``_*_``, ``_/_`` one numeric type twice, ``_%_`` ``int`` or
``uint`` twice; ``_?_:_`` is ``(bool, A, A) -> A``; ``_[_]`` is ``(list(A), int) -> A`` or
``(map(A, B), A) -> B``; ``size`` takes a string, bytes, list or map; ``contains``,
``startsWith``, ``endsWith`` and ``matches`` a string and a string; the conversions (``int``,
``string``, ``dyn``...) one value; a comprehension's condition is a ``bool``. ``dyn`` (an
unknown type, e.g. ``dyn(x)`` or a heterogeneous list's element)
matches anything, as in CEL's gradual typing. Mixed numeric comparisons (``node.cpu > 1.5``)
are refused: cel-go accepts them only with its ``CrossTypeNumericComparisons`` option (the
Kubernetes API server sets it), and cel-python, which evaluates orca's expressions, fails on
them at run time; write ``node.cpu > 1500`` or ``double(node.cpu) > 1.5``. An expression whose
type is not ``bool`` is refused as the API server refuses a CRD validation rule
(``cel expression must evaluate to a bool``).

Cost units are those the runtime meter (``controller.scheduler.celexpr``) counts, so the estimate is
an upper bound of the measured cost for any node within the declared sizes: one unit per
syntax-tree node the interpreter visits, ``ITERATION_COST`` per comprehension step (cel-python
builds a nested activation per element, which costs far more than a node visit) and one unit
per ``SIZE_UNIT`` characters or elements of every value a concatenation, call or literal
produces (cel-go's 0.1 per character). A node beyond the declared sizes (say 200 labels) can
cost more than the estimate: the runtime limit, five times the budget, bounds that case.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import lark
from celpy.evaluation import base_functions
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from controller.api.models import MAX_EXPRESSION_LENGTH

# -- declared limits (docs/workloads.md, "CEL budgets") --------------------------------------
MAX_NESTING: Final = 32
"""Parentheses, brackets and braces nested deeper than this are refused before parsing."""
MAX_TREE_HEIGHT: Final = 420
"""Parse-tree height the interpreter evaluates safely under cel-python's recursion limit
(2,500 frames): measured, trees of height 420 (31 nested macros plus an operator chain)
evaluate with 200 caller frames to spare, a chain of height 610 fails. Reached only by long
operator chains such as ``1 + 1 + ... + 1`` (about 200 terms): ``MAX_NESTING`` brackets alone
stay below 380."""
MAX_LIST_ITEMS: Final = 64
"""Declared maximum of ``node.runtimes``, ``node.tags`` and ``node.labels`` entries."""
MAX_HOSTNAME: Final = 253
"""A Node name is a DNS subdomain."""
MAX_LABEL_KEY: Final = 317
"""A label key: a DNS-subdomain prefix (253), ``/`` and a name (63)."""
MAX_LABEL_VALUE: Final = 63
MAX_NAME: Final = 63
"""A tag, a runtime or a kind: a label name or value."""
UNKNOWN_SIZE: Final = MAX_EXPRESSION_LENGTH
"""Size assumed for a string or list whose bound the checker cannot see (e.g. ``string(x)``)."""
ITERATION_COST: Final = 20
"""Units per activation (each comprehension step and the evaluation itself): cel-python spends
about as long setting up a step as visiting twenty syntax-tree nodes."""
SIZE_UNIT: Final = 10
"""Characters or items of a produced string or list per unit (cel-go's 0.1 per character)."""
STATIC_COST_BUDGET: Final = 20_000
"""Worst-case cost units per evaluation (~4 us each on the development VM). Estimates:
``node.tags.exists(t, t.startsWith("gpu"))`` ~3,600; ``node.labels.exists(k, k.startsWith("x")
&& node.labels[k] == "y")`` ~10,700; two nested comprehensions over ten-item literals ~5,500;
three ~55,000 (refused)."""
MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
_UNSUPPORTED_MACROS: Final = frozenset({"reduce", "min"})
_TYPE_NAMES: Final = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"}
)
_FUNCTIONS: Final = frozenset(
    name for name in base_functions if not name.startswith("_") and not name.endswith("_")
)


class CelCheckError(ValueError):
    """An expression refused before it runs; the message is one line a user can act on."""


# -- types --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CelType:
    """What the checker knows of a value: its kind, its maximum size (characters of a string,
    elements of a list or map) and, for containers, the element (list), key and value (map)
    types. ``dyn`` is "unknown": accepted everywhere, never an error."""

    kind: str
    size: int = 0
    elem: CelType | None = None
    value: CelType | None = None
    fields: dict[str, CelType] | None = field(default=None, compare=False)

    def __str__(self) -> str:
        """cel-go's notation (``checker/format.go``): ``list(string)``, ``map(string, int)``."""
        if self.kind == "list":
            return f"list({self.elem or DYN})"
        if self.kind == "map":
            return f"map({self.elem or DYN}, {self.value or DYN})"
        if self.kind == "null_type":
            return "null"
        return self.kind


DYN: Final = CelType("dyn", UNKNOWN_SIZE)
BOOL: Final = CelType("bool")
INT: Final = CelType("int")
TYPE: Final = CelType("type")
_NAME: Final = CelType("string", MAX_NAME)


@dataclass(frozen=True, slots=True)
class NodeField:
    """One field of the ``node`` variable CEL expressions see: its type (and the bound on its
    size, for the cost estimate), and where its value comes from: a ``NodeInfo`` attribute
    (``attribute``), or this cycle's free capacity (``free``: ``cpu`` or ``memory``), which
    changes as replicas are placed (an expression reading it cannot be memoised per table)."""

    type: CelType
    attribute: str | None = None
    free: str | None = None


#: The ``node`` variable, declared once: the checker types expressions with it, the evaluator
#: builds each node's value (``celexpr.cel_view``) and its memo keys (the fields an
#: expression reads) from it. camelCase, as the user writes it (docs/design.md 3).
NODE: Final[dict[str, NodeField]] = {
    "hostname": NodeField(CelType("string", MAX_HOSTNAME), attribute="hostname"),
    "runtimes": NodeField(CelType("list", MAX_LIST_ITEMS, elem=_NAME), attribute="runtimes"),
    "tags": NodeField(CelType("list", MAX_LIST_ITEMS, elem=_NAME), attribute="tags"),
    "labels": NodeField(
        CelType(
            "map",
            MAX_LIST_ITEMS,
            elem=CelType("string", MAX_LABEL_KEY),
            value=CelType("string", MAX_LABEL_VALUE),
        ),
        attribute="labels",
    ),
    "kind": NodeField(_NAME, attribute="kind"),
    "cpu": NodeField(INT, attribute="cpu"),
    "memory": NodeField(INT, attribute="memory"),
    "freeCpu": NodeField(INT, free="cpu"),
    "freeMemory": NodeField(INT, free="memory"),
}
NODE_FIELDS: Final[dict[str, CelType]] = {name: f.type for name, f in NODE.items()}
NODE_TYPE: Final = CelType("node", len(NODE_FIELDS), fields=NODE_FIELDS)
_SIZED: Final = frozenset({"string", "bytes", "list", "map", "dyn"})


def _join(a: CelType, b: CelType) -> CelType:
    """The type of a value that is either ``a`` or ``b`` (the larger size)."""
    if a.kind != b.kind:
        return CelType("dyn", max(a.size, b.size))
    elem = _join(a.elem, b.elem) if a.elem is not None and b.elem is not None else None
    value = _join(a.value, b.value) if a.value is not None and b.value is not None else None
    return CelType(a.kind, max(a.size, b.size), elem=elem, value=value, fields=a.fields)


def _size_cost(t: CelType) -> int:
    return t.size // SIZE_UNIT if t.kind in _SIZED else 0


# -- type rules (see TYPE RULES in the module docstring) ------------------------------------------

_ORDERED: Final = frozenset({"bool", "int", "uint", "double", "string", "bytes"})
_NUMERIC: Final = frozenset({"int", "uint", "double"})
_ADDABLE: Final = frozenset({"int", "uint", "double", "string", "bytes", "list"})
_ARITHMETIC: Final = {
    "addition_add": ("_+_", _ADDABLE),
    "addition_sub": ("_-_", _NUMERIC),
    "multiplication_mul": ("_*_", _NUMERIC),
    "multiplication_div": ("_/_", _NUMERIC),
    "multiplication_mod": ("_%_", frozenset({"int", "uint"})),
}
_RELATIONS: Final = {
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_in": "@in",
}
_STRING_METHODS: Final = frozenset({"contains", "startsWith", "endsWith", "matches"})
_ARITY: Final = {
    **dict.fromkeys(("size", "int", "uint", "double", "string", "bytes", "bool", "type", "dyn"), 1),
    **dict.fromkeys(_STRING_METHODS, 2),
}
"""How many values (a method's receiver included) each standard function of a single arity
takes: any other count matches none of its overloads, and cel-python would fail with "no such
overload" on every node."""
_SIZE_ARGS: Final = frozenset({"string", "bytes", "list", "map"})


def assignable(a: CelType | None, b: CelType | None) -> bool:
    """Whether values of types ``a`` and ``b`` unify (CEL's type parameter ``A`` can be both):
    the same kind, containers with assignable element types, ``dyn`` (or unknown) anywhere."""
    if a is None or b is None or a.kind == "dyn" or b.kind == "dyn":
        return True
    if a.kind != b.kind:
        return False
    return assignable(a.elem, b.elem) and assignable(a.value, b.value)


def _no_overload(name: str, args: list[CelType], where: Any, receiver: bool = False) -> NoReturn:
    """cel-go's ``noMatchingOverload`` message, with the column of the expression."""
    shown = ", ".join(str(t) for t in (args[1:] if receiver else args))
    signature = f"{args[0]}.({shown})" if receiver else f"({shown})"
    column = _column(where)  # 0: unknown (cel-python keeps no position for some literals)
    raise CelCheckError(
        f"found no matching overload for '{name}' applied to '{signature}'"
        + (f" at column {column}" if column else "")
    )


def _is(t: CelType, kinds: frozenset[str]) -> bool:
    return t.kind == "dyn" or t.kind in kinds


def _relation(op: str, left: CelType, right: CelType, where: Any) -> None:
    """Refuse ``left <op> right`` when no overload of ``op`` takes those types."""
    name = _RELATIONS[op]
    if op in ("relation_eq", "relation_ne"):
        ok = assignable(left, right)
    elif op == "relation_in":
        # a list's elements, a map's keys
        ok = assignable(left, right.elem) if right.kind in ("list", "map") else right.kind == "dyn"
    else:
        ok = (
            _is(left, _ORDERED)
            and _is(right, _ORDERED)
            and (left.kind == right.kind or "dyn" in (left.kind, right.kind))
        )
    if not ok:
        _no_overload(name, [left, right], where)


def _arithmetic(op: str, left: CelType, right: CelType, where: Any) -> CelType:
    """The type of ``left <op> right``; refuse it when no overload takes those types."""
    name, kinds = _ARITHMETIC[op]
    if left.kind == "dyn" or right.kind == "dyn":
        if not (_is(left, kinds) and _is(right, kinds)):
            _no_overload(name, [left, right], where)
        return CelType("dyn", left.size + right.size)
    if left.kind != right.kind or left.kind not in kinds:
        _no_overload(name, [left, right], where)
    if left.kind == "list":
        if not assignable(left.elem, right.elem):
            _no_overload(name, [left, right], where)
        elem = (
            _join(left.elem, right.elem)
            if left.elem is not None and right.elem is not None
            else None
        )
        return CelType("list", left.size + right.size, elem=elem)
    if left.kind in ("string", "bytes"):
        return CelType(left.kind, left.size + right.size)
    return left


def require_bool(t: CelType) -> None:
    """The whole expression must be a ``bool`` (or ``dyn``, decided when it runs)."""
    if t.kind not in ("bool", "dyn"):
        raise CelCheckError(
            f"expression must evaluate to a bool, not {t} (a constraint or an affinity target "
            "is a condition, e.g. node.cpu >= 2000)"
        )


# -- 1. nesting, before parsing -----------------------------------------------------------------

_OPEN: Final = frozenset("([{")
_CLOSE: Final = frozenset(")]}")


def check_nesting(source: str) -> None:
    """Refuse brackets nested deeper than ``MAX_NESTING`` (outside string literals).

    A cheap scan, so 10,000 ``(`` never reach the parser or the recursive interpreter. Quotes
    are tracked only well enough to skip brackets inside strings; a miscount is harmless since
    ``MAX_TREE_HEIGHT`` bounds the parsed tree anyway.
    """
    depth = 0
    quote = ""
    i = 0
    n = len(source)
    while i < n:
        c = source[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if source.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif c in "\"'":
            quote = c * 3 if source.startswith(c * 3, i) else c
            i += len(quote)
            continue
        elif c in _OPEN:
            depth += 1
            if depth > MAX_NESTING:
                raise CelCheckError(
                    f"nesting deeper than {MAX_NESTING} levels at column {i + 1} "
                    "(parentheses, brackets and braces)"
                )
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        i += 1


# -- 2. syntax errors ---------------------------------------------------------------------------

_TERMINALS: Final = {
    "IDENT": "a name",
    "RPAR": "')'",
    "RSQB": "']'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "COLON": "':'",
    "LPAR": "'('",
}


def syntax_message(error: BaseException | None, source: str) -> str:
    """One line for a lark parse error: what is wrong and where (line only when > 1).

    Where is left out when lark does not know it rather than made up: cel-python's parser
    keeps no position for ``true`` and ``false`` (its lexer callback makes them new tokens),
    and its errors other than an unexpected token or character carry none."""
    line = getattr(error, "line", None) or 1
    column = getattr(error, "column", None)
    where = f" at column {column}" if line == 1 else f" at line {line}, column {column}"
    if column is None:
        where = ""
    expected = sorted(getattr(error, "expected", None) or getattr(error, "allowed", None) or ())
    if isinstance(error, UnexpectedToken) and error.token.type != "$END":
        what = f"unexpected {str(error.token)!r}"
    elif isinstance(error, UnexpectedCharacters):
        what = f"unexpected character {error.char!r}"
        if error.char in "\"'":
            what = "unterminated string"
    elif isinstance(error, UnexpectedToken | UnexpectedEOF):
        where = f" at column {len(source.splitlines()[-1]) + 1 if source.strip() else 1}"
        what = "unexpected end of expression" if source.strip() else "empty expression"
    else:
        what = "invalid expression"
    if {"IDENT", "INT_LIT"} <= set(expected):
        what += ", expected a value"
    elif expected and all(e in _TERMINALS for e in expected) and len(expected) <= 3:
        what += ", expected " + " or ".join(_TERMINALS[e] for e in expected)
    return f"syntax error{where}: {what}"


# -- 3. types, tree height and static cost -----------------------------------------------------


def check(tree: lark.Tree[Any]) -> int:
    """Type-check ``tree`` (a bool expression over ``node``) and return its estimated
    worst-case cost; raise ``CelCheckError``."""
    height = _height(tree)
    if height > MAX_TREE_HEIGHT:
        raise CelCheckError(
            f"expression nested too deeply: syntax tree height {height} exceeds "
            f"{MAX_TREE_HEIGHT} (split long chains such as 'a + b + c + ...' "
            "or use 'x in [...]')"
        )
    result, tree_cost = _Checker().visit(tree, {})
    require_bool(result)
    cost = ITERATION_COST + tree_cost  # the evaluation's own activation, then its tree
    if cost > STATIC_COST_BUDGET:
        raise CelCheckError(
            f"estimated cost {cost} exceeds the budget {STATIC_COST_BUDGET} (worst case over "
            f"node's declared sizes: {MAX_LIST_ITEMS} tags, runtimes or labels; nested "
            "comprehensions multiply, strings and lists cost by length)"
        )
    return cost


def _height(tree: lark.Tree[Any]) -> int:
    """Height of the parse tree, computed without recursion."""
    best = 0
    stack: list[tuple[lark.Tree[Any], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, lark.Tree))
    return best


Scope = dict[str, CelType]
Result = tuple[CelType, int]


def _hint(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


class _Checker:
    """Walks the lark parse tree of ``celpy.celparser`` (grammar in celpy's ``cel.lark``).

    Every method returns (type, cost); cost counts the node itself (1) plus what its
    evaluation costs, mirroring what ``celpy.evaluation.Evaluator`` does. Recursion depth is
    bounded by ``MAX_TREE_HEIGHT``, checked before.
    """

    def visit(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        method = getattr(self, f"_{tree.data}", None)
        if method is None:  # wrappers with one child: conditionalor, member, ...
            return self._operator(tree, scope)
        result: Result = method(tree, scope)
        return result

    def _subtrees(self, tree: lark.Tree[Any], scope: Scope) -> list[Result]:
        return [self.visit(c, scope) for c in tree.children if isinstance(c, lark.Tree)]

    def _operator(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        """Single-child wrappers pass their child's type; operators are type-checked."""
        parts = self._subtrees(tree, scope)
        cost = 1 + sum(c for _, c in parts)
        if len(parts) == 1:
            return parts[0][0], cost
        data = tree.data
        if data in ("conditionalor", "conditionaland") and len(parts) == 2:
            (left, _), (right, _) = parts
            if not (_is(left, _BOOLEAN) and _is(right, _BOOLEAN)):
                _no_overload("_||_" if data == "conditionalor" else "_&&_", [left, right], tree)
            return BOOL, cost
        if data == "relation" and len(parts) == 2:
            (left, _), (right, _) = parts
            _relation(_operator_name(tree), left, right, tree)
            return BOOL, cost
        if data == "multiplication" and len(parts) == 2:
            (left, _), (right, _) = parts
            return _arithmetic(_operator_name(tree), left, right, tree), cost
        if data == "unary" and len(parts) == 2:
            operand = parts[1][0]
            if _operator_name(tree) == "unary_not":
                if not _is(operand, _BOOLEAN):
                    _no_overload("!_", [operand], tree)
                return BOOL, cost
            if not _is(operand, frozenset({"int", "double"})):
                _no_overload("-_", [operand], tree)
            return operand, cost
        return DYN if not parts else parts[-1][0], cost

    def _expr(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        parts = self._subtrees(tree, scope)
        if len(parts) == 3:  # cond ? a : b: one branch runs
            (t0, c0), (t1, c1), (t2, c2) = parts
            if not _is(t0, _BOOLEAN) or not assignable(t1, t2):
                _no_overload("_?_:_", [t0, t1, t2], tree)
            return _join(t1, t2), 1 + c0 + max(c1, c2)
        return parts[0][0], 1 + parts[0][1]

    def _addition(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        parts = self._subtrees(tree, scope)
        if len(parts) == 1:
            return parts[0][0], 1 + parts[0][1]
        (left, c0), (right, c1) = parts
        out = _arithmetic(_operator_name(tree), left, right, tree)
        return out, 1 + c0 + c1 + _size_cost(out)

    def _member_dot(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        target, cost = self.visit(tree.children[0], scope)
        name = tree.children[1]
        return self._select(target, str(name), name), 1 + cost

    def _select(self, target: CelType, name: str, where: Any) -> CelType:
        if target.kind == "node":
            fields = target.fields or {}
            if name not in fields:
                raise CelCheckError(
                    f"node has no field {name!r} at column {_column(where)} "
                    f"({_hint(name, list(fields))}fields: {', '.join(fields)})"
                )
            return fields[name]
        if target.kind == "map":
            return target.value or DYN
        if target.kind == "dyn":
            return DYN
        raise CelCheckError(
            f"a value of type {target} has no field {name!r} at column {_column(where)}"
        )

    def _member_index(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        (target, c0), (index, c1) = self._subtrees(tree, scope)
        cost = 1 + c0 + c1
        if target.kind == "node":
            literal = _string_literal(tree.children[1])
            return (self._select(target, literal, tree.children[1]) if literal else DYN), cost
        if target.kind == "list":
            if not _is(index, frozenset({"int"})):
                _no_overload("_[_]", [target, index], tree)
            return target.elem or DYN, cost
        if target.kind == "map":
            if not assignable(target.elem, index):
                _no_overload("_[_]", [target, index], tree)
            return target.value or DYN, cost
        if target.kind == "dyn":
            return DYN, cost
        raise CelCheckError(f"a value of type {target} cannot be indexed at column {_column(tree)}")

    def _member_object(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        raise CelCheckError(f"message construction is not supported (column {_column(tree)})")

    def _member_dot_arg(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        name = str(tree.children[1])
        args = tree.children[2].children if len(tree.children) > 2 else []
        if name in MACROS:
            return self._macro(tree, name, args, scope)
        if name in _UNSUPPORTED_MACROS:
            raise CelCheckError(f"{name}() is not a CEL macro (column {_column(tree)})")
        self._function_exists(name, tree)
        target, cost = self.visit(tree.children[0], scope)
        arg_results = [self.visit(a, scope) for a in args]
        cost += 2 + sum(c for _, c in arg_results) + _size_cost(target)
        types = [target, *(t for t, _ in arg_results)]
        _check_call(name, types, tree, receiver=True)
        out = _result_type(name, types)
        return out, cost + _size_cost(out)

    def _macro(self, tree: lark.Tree[Any], name: str, args: list[Any], scope: Scope) -> Result:
        variable = _plain_ident(args[0]) if len(args) == 2 else None
        if variable is None:
            raise CelCheckError(
                f"{name}() takes a variable name and an expression, "
                f'e.g. node.tags.{name}(t, t == "ssd") (column {_column(tree)})'
            )
        target, range_cost = self.visit(tree.children[0], scope)
        if target.kind in ("list", "map"):  # a map's comprehension ranges over its keys
            element = target.elem or DYN
        elif target.kind == "dyn":
            element = DYN
        else:
            raise CelCheckError(
                f"{name}() needs a list or a map, not a value of type {target} "
                f"(column {_column(tree)})"
            )
        body, body_cost = self.visit(args[1], {**scope, variable: element})
        if name != "map" and not _is(body, _BOOLEAN):
            raise CelCheckError(
                f"{name}() needs a condition of type bool, not {body} (column {_column(tree)})"
            )
        steps = target.size
        cost = 1 + range_cost + steps * (ITERATION_COST + body_cost)
        if name == "map":
            out = CelType("list", steps, elem=body)
        elif name == "filter":
            out = CelType("list", steps, elem=element)
        else:
            out = BOOL
        return out, cost + _size_cost(out)

    def _function_exists(self, name: str, tree: lark.Tree[Any]) -> None:
        if name not in _FUNCTIONS:
            raise CelCheckError(
                f"unknown function {name!r} at column {_column(tree)} "
                f"({_hint(name, sorted(_FUNCTIONS | MACROS))}see the CEL standard functions)"
            )

    def _primary(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        """Literals, names, calls, parentheses, list and map literals; the interpreter charges
        the size of what a primary produces (a literal string, a comprehension variable...)."""
        out, cost = self._primary_value(tree.children[0], scope)
        return out, cost + _size_cost(out)

    def _primary_value(self, child: lark.Tree[Any], scope: Scope) -> Result:
        kind = child.data
        if kind == "literal":
            return _literal(child.children[0]), 2
        if kind in ("ident", "dot_ident"):
            return self._ident(str(child.children[0]), child, scope if kind == "ident" else {}), 2
        if kind == "ident_arg":
            return self._call(child, scope)
        if kind == "paren_expr":
            t, c = self.visit(child.children[0], scope)
            return t, 2 + c
        if kind == "list_lit":
            items = self._subtrees(child.children[0], scope) if child.children else []
            elem: CelType | None = None
            for t, _ in items:
                elem = t if elem is None else _join(elem, t)
            return CelType("list", len(items), elem=elem or DYN), 3 + sum(c for _, c in items)
        if kind == "map_lit":
            inits = [
                self.visit(c, scope)
                for c in (child.children[0].children if child.children else [])
                if isinstance(c, lark.Tree)
            ]
            keys, values = inits[0::2], inits[1::2]
            key = _join_all([t for t, _ in keys])
            value = _join_all([t for t, _ in values])
            return CelType("map", len(keys), elem=key, value=value), 3 + sum(c for _, c in inits)
        raise CelCheckError(f"unsupported syntax {str(kind)!r} at column {_column(child)}")

    def _ident(self, name: str, tree: lark.Tree[Any], scope: Scope) -> CelType:
        if name in scope:
            return scope[name]
        if name == "node":
            return NODE_TYPE
        if name in _TYPE_NAMES:
            return TYPE
        names = ["node", *scope]
        raise CelCheckError(
            f"undeclared reference to {name!r} at column {_column(tree)} "
            f"({_hint(name, names)}the only variable is 'node'"
            + (f"; in scope here: {', '.join(scope)}" if scope else "")
            + ")"
        )

    def _call(self, tree: lark.Tree[Any], scope: Scope) -> Result:
        name = str(tree.children[0])
        args = tree.children[1].children if len(tree.children) > 1 else []
        if name == "has":
            if len(args) != 1 or not _is_select(args[0]):
                raise CelCheckError(
                    "has() takes one field selection, e.g. has(node.labels.zone) "
                    f"(column {_column(tree)})"
                )
            _, cost = self.visit(args[0], scope)
            return BOOL, 3 + cost
        if name in MACROS or name in _UNSUPPORTED_MACROS:
            raise CelCheckError(f"{name}() is a method: write list.{name}(x, ...)")
        if name != "dyn":
            self._function_exists(name, tree)
        results = [self.visit(a, scope) for a in args]
        types = [t for t, _ in results]
        if name == "dyn" and len(types) == 1:
            return CelType("dyn", types[0].size), 3 + results[0][1] + _size_cost(types[0])
        _check_call(name, types, tree, receiver=False)
        out = _result_type(name, types)
        return out, 3 + sum(c for _, c in results) + sum(_size_cost(t) for t in types)


_BOOLEAN: Final = frozenset({"bool"})


def _operator_name(tree: lark.Tree[Any]) -> str:
    """The operator of a binary or unary node: its first child's rule (``relation_eq``...)."""
    first = tree.children[0]
    return str(first.data) if isinstance(first, lark.Tree) else ""


def _check_call(name: str, types: list[CelType], where: Any, receiver: bool) -> None:
    """The standard functions whose argument types the checker knows (TYPE RULES)."""
    string = frozenset({"string"})
    if (
        len(types) != _ARITY.get(name, len(types))
        or (name == "size" and not _is(types[0], _SIZE_ARGS))
        or (name in _STRING_METHODS and not (_is(types[0], string) and _is(types[1], string)))
    ):
        _no_overload(name, types, where, receiver)


def _join_all(types: list[CelType]) -> CelType:
    out: CelType | None = None
    for t in types:
        out = t if out is None else _join(out, t)
    return out or DYN


def _result_type(name: str, args: list[CelType]) -> CelType:
    """What a standard function returns: the type the checks compare (cel-spec's standard
    definitions) and the size the cost estimate charges."""
    if name in ("contains", "startsWith", "endsWith", "matches", "bool"):
        return BOOL
    if name in ("size", "int") or name.startswith("get"):
        return INT
    if name == "uint":
        return CelType("uint")
    if name == "type":
        return TYPE
    if name in ("string", "bytes"):
        return CelType(name, _text_size(args[0]))  # one argument: _check_call
    if name == "double":
        return CelType("double")
    return DYN


def _text_size(t: CelType) -> int:
    """The longest text ``string(x)`` can make of a value of type ``t``: cel-python writes
    containers as their Python repr, ``ListType([StringType('a'), ...])``."""
    if t.kind in ("string", "bytes"):
        return t.size
    if t.kind == "list":
        return 16 + t.size * (_text_size(t.elem or DYN) + 24)
    if t.kind == "map":
        return 16 + t.size * (_text_size(t.elem or DYN) + _text_size(t.value or DYN) + 48)
    if t.kind in ("int", "uint", "double", "bool", "null_type"):
        return 48
    return UNKNOWN_SIZE


def _literal(token: Any) -> CelType:
    kind = {
        "INT_LIT": "int",
        "UINT_LIT": "uint",
        "FLOAT_LIT": "double",
        "STRING_LIT": "string",
        "MLSTRING_LIT": "string",
        "BYTES_LIT": "bytes",
        "BOOL_LIT": "bool",
        "NULL_LIT": "null_type",
    }.get(token.type, "dyn")
    return CelType(kind, len(str(token)) if kind in ("string", "bytes") else 0)


def _unwrap(tree: Any) -> Any:
    """The innermost node of a chain of single-child wrappers."""
    node = tree
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        if node.data in ("ident", "member_dot", "literal"):
            return node
        node = node.children[0]
    return node


def _plain_ident(tree: Any) -> str | None:
    node = _unwrap(tree)
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def _is_select(tree: Any) -> bool:
    node = _unwrap(tree)
    return isinstance(node, lark.Tree) and node.data == "member_dot"


def _string_literal(tree: Any) -> str | None:
    node = _unwrap(tree)
    if not isinstance(node, lark.Tree) or node.data != "literal":
        return None
    token = node.children[0]
    text = str(token)
    if not isinstance(token, lark.Token) or token.type != "STRING_LIT" or len(text) < 2:
        return None
    if text[0] not in "\"'" or text[-1] != text[0] or "\\" in text or text.startswith(text[0] * 3):
        return None  # raw, triple-quoted or escaped: not worth decoding, checked at run time
    return text[1:-1]


def _column(where: lark.Token | lark.Tree[Any]) -> int:
    """The 1-based column of a token or a tree, 0 when unknown. cel-python's parser propagates
    positions, so lark gives every tree the column of its first token, filtered-out ones such
    as '(' included: None only when that token is a true or false, which cel-python's lexer
    keeps no position for."""
    if isinstance(where, lark.Token):
        return int(where.column or 0)
    return int(getattr(where.meta, "column", None) or 0)
