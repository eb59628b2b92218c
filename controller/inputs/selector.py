"""Label selectors as ``kubectl -l`` takes them, for ``orca plan --drain``.

A port of apimachinery's parser (``k8s.io/apimachinery/pkg/labels/selector.go``, v0.36.3:
``Lexer``, ``Parser.parse``, ``Requirement.Matches``), so a selector means here what it means to
kubectl: requirements separated by commas, all of which must hold::

    key=value  key==value  key!=value    (a missing key satisfies !=)
    key in (a,b)  key notin (a,b)        (a missing key satisfies notin)
    key  !key                            (exists, does not exist)
    key>3  key<3                         (the label's value as a base-10 integer)

Keys and values are checked as label keys and values are (``nodes.label_key_problem``); a
mistake is a ``SelectorError`` with one line saying where.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from controller.scheduler.nodes import label_key_problem, valid_label_value

MAX_SELECTOR_LENGTH: Final = 4096
_SPECIAL: Final = frozenset("=!(),><")
_WHITESPACE: Final = frozenset(" \t\r\n")


class SelectorError(ValueError):
    """A selector that does not parse: one line, in kubectl's words where it has them."""


class Op(Enum):
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = ">"
    LESS_THAN = "<"


_OPERATORS: Final = {
    "=": Op.EQUALS,
    "==": Op.DOUBLE_EQUALS,
    "!=": Op.NOT_EQUALS,
    "in": Op.IN,
    "notin": Op.NOT_IN,
    ">": Op.GREATER_THAN,
    "<": Op.LESS_THAN,
}
_SYMBOLS: Final = frozenset({"=", "==", "!=", "!", "(", ")", ",", ">", "<"})
_KEYWORDS: Final = frozenset({"in", "notin"})
_END: Final = ""  # the end-of-string token's literal


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: Op
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """apimachinery's ``Requirement.Matches``."""
        value = labels.get(self.key)
        if self.op in (Op.IN, Op.EQUALS, Op.DOUBLE_EQUALS):
            return value is not None and value in self.values
        if self.op in (Op.NOT_IN, Op.NOT_EQUALS):
            return value is None or value not in self.values
        if self.op is Op.EXISTS:
            return value is not None
        if self.op is Op.DOES_NOT_EXIST:
            return value is None
        if value is None:
            return False
        try:
            have, bound = int(value, 10), int(next(iter(self.values)), 10)
        except ValueError:
            return False
        return have > bound if self.op is Op.GREATER_THAN else have < bound


@dataclass(frozen=True, slots=True)
class Selector:
    """Requirements that must all hold (an empty selector matches everything, as kube's)."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


# -- the lexer -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "id", a symbol (``=``, ``(``...), a keyword (``in``, ``notin``), or _END
    text: str


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append(_Token(_END, _END))
            return tokens
        if text[i] in _SPECIAL:
            # The longest run of special characters that is a symbol (``!=``, ``==``...).
            j, found = i, ""
            while j < n and text[j] in _SPECIAL:
                if text[i : j + 1] in _SYMBOLS:
                    found = text[i : j + 1]
                elif found:
                    break
                j += 1
            if not found:
                raise SelectorError(f"error expected: keyword found '{text[i:j]}'")
            tokens.append(_Token(found, found))
            i += len(found)
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
            j += 1
        word = text[i:j]
        tokens.append(_Token(word if word in _KEYWORDS else "id", word))
        i = j


# -- the parser ----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.at = 0

    def peek(self, values: bool = True) -> _Token:
        return self._as(self.tokens[self.at], values)

    def take(self, values: bool = True) -> _Token:
        token = self.peek(values)
        self.at += 1
        return token

    @staticmethod
    def _as(token: _Token, values: bool) -> _Token:
        """In a values context ``in`` and ``notin`` are identifiers (kube's ``Values``)."""
        if values and token.kind in _KEYWORDS:
            return _Token("id", token.text)
        return token

    def parse(self) -> Selector:
        requirements: list[Requirement] = []
        while True:
            token = self.peek()
            if token.kind == _END:
                return Selector(tuple(requirements))
            if token.kind not in ("id", "!"):
                raise SelectorError(
                    f"found '{token.text}', expected: !, identifier, or 'end of string'"
                )
            requirements.append(self.requirement())
            after = self.take()
            if after.kind == _END:
                return Selector(tuple(requirements))
            if after.kind != ",":
                raise SelectorError(f"found '{after.text}', expected: ',' or 'end of string'")
            if self.peek().kind not in ("id", "!"):
                raise SelectorError(f"found '{self.peek().text}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = self.peek().kind == "!"
        if negated:
            self.take()
        key = self.take()
        if key.kind != "id":
            raise SelectorError(f"found '{key.text}', expected: identifier")
        problem = label_key_problem(key.text)
        if problem is not None:
            raise SelectorError(f"key {key.text!r} {problem}")
        if self.peek().kind in (_END, ","):
            return Requirement(key.text, Op.DOES_NOT_EXIST if negated else Op.EXISTS)
        if negated:
            raise SelectorError(f"found '{self.peek().text}', expected: ',' or 'end of string'")
        operator = self.take(values=False)
        op = _OPERATORS.get(operator.kind)
        if op is None:
            raise SelectorError(f"found '{operator.text}', expected: in, notin, =, ==, !=, gt, lt")
        values = self.values() if op in (Op.IN, Op.NOT_IN) else self.exact()
        for value in values:
            if not valid_label_value(value):
                raise SelectorError(f"{value!r} is not a valid label value")
        if op in (Op.GREATER_THAN, Op.LESS_THAN):
            try:
                int(next(iter(values)), 10)
            except ValueError:
                raise SelectorError(
                    f"for 'Gt', 'Lt' operators, the value must be an integer: {key.text}"
                ) from None
        return Requirement(key.text, op, frozenset(values))

    def exact(self) -> set[str]:
        if self.peek().kind in (_END, ","):
            return {""}
        token = self.take()
        if token.kind != "id":
            raise SelectorError(f"found '{token.text}', expected: identifier")
        return {token.text}

    def values(self) -> set[str]:
        """``(a,b)``: kube's ``parseValues``; ``()`` is the empty value."""
        opening = self.take()
        if opening.kind != "(":
            raise SelectorError(f"found '{opening.text}' expected: '('")
        nxt = self.peek()
        if nxt.kind == ")":
            self.take()
            return {""}
        if nxt.kind not in ("id", ","):
            raise SelectorError(f"found '{nxt.text}', expected: ',', ')' or identifier")
        found = self.identifiers()
        closing = self.take()
        if closing.kind != ")":
            raise SelectorError(f"found '{closing.text}', expected: ')'")
        return found

    def identifiers(self) -> set[str]:
        """kube's ``parseIdentifiersList``: empty items (``(a,)``, ``(,a)``, ``(a,,b)``) are
        the empty value; the closing parenthesis is left to ``values``."""
        found: set[str] = set()
        while True:
            token = self.take()
            if token.kind == "id":
                found.add(token.text)
                nxt = self.peek()
                if nxt.kind == ",":
                    continue
                if nxt.kind == ")":
                    return found
                raise SelectorError(f"found '{nxt.text}', expected: ',' or ')'")
            if token.kind != ",":
                raise SelectorError(f"found '{token.text}', expected: ',', or identifier")
            if not found:
                found.add("")
            nxt = self.peek()
            if nxt.kind == ")":
                found.add("")
                return found
            if nxt.kind == ",":
                found.add("")


def parse_selector(text: str) -> Selector:
    """A label selector in ``kubectl -l``'s syntax; ``SelectorError`` if it does not parse."""
    if len(text) > MAX_SELECTOR_LENGTH:
        raise SelectorError(f"is longer than {MAX_SELECTOR_LENGTH} characters")
    return _Parser(text).parse()
