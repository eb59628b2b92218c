"""YAML from files a user hands to ``orca plan``: bounded, JSON-shaped, one error line.

``yaml.safe_load`` is safe from code execution but not from exhaustion: a ~700-byte
"billion laughs" file (aliases of aliases) expands to a billion nodes as soon as anything walks
it, a file nested a few thousand levels deep overflows the recursion limit, and some tags raise
plain ``ValueError``/``KeyError`` (``!!int abc``, ``!!bool maybe``). Kubernetes reads YAML as
JSON (sigs.k8s.io/yaml), so this loader keeps to that: it refuses what the API server could not
store and bounds what a file may cost before building a single object.

Budgets (each breach is a ``YAMLLimitError`` naming the limit):

- the file is at most ``MAX_FILE_BYTES`` (64 MiB) and must be UTF-8;
- collections nest at most ``MAX_DEPTH`` (100) deep — a Node from ``kubectl get -o yaml`` is
  under 10;
- aliases may add at most as many nodes as the file itself holds (or ``MIN_ALIAS_BUDGET``,
  whichever is more), counting an alias as the size of what it expands to, and never refer to
  a collection that contains them (a cycle). kubectl bounds alias expansion the same way
  (go-yaml's alias ratio), rather than refusing aliases.

How: the events of the libyaml C parser (when installed; the pure-Python one otherwise) are
counted in one non-recursive pass — depth, nodes, and the expanded size of each anchor — and
only a file within budget is then loaded by the C loader (a 5,000-Node list: about a third
of the CPU time of ``yaml.safe_load_all``, the budget pass included; libyaml itself also stops
at 1,000 levels, so its recursive composer cannot exhaust the C stack;
``bench/bench_manifests.py`` prints the figures). Only JSON's types are built: null,
booleans, integers, floats, strings, lists and maps (plus ``<<`` merge keys). Timestamps stay
strings, as they do for kubectl (``created: 2024-01-01`` is the string ``"2024-01-01"``), and
other tags (``!!binary``, ``!!set``, ``!!timestamp``, ``!custom``) are refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

MAX_FILE_BYTES = 64 << 20
MAX_DEPTH = 100
MIN_ALIAS_BUDGET = 10_000
MAX_NUMBER_CHARS = 100  # int64 needs 20; anything longer is not a number Kubernetes stores

try:
    from yaml._yaml import CParser as _CParser

    HAVE_LIBYAML = True
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    HAVE_LIBYAML = False


class YAMLLimitError(ValueError):
    """The file is over one of the budgets above (the message names the budget)."""


class _JSONResolver(Resolver):
    """YAML 1.1's implicit types minus timestamps (kubectl keeps those as strings)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }


def _scalar(
    build: Callable[[SafeConstructor, ScalarNode], Any], what: str
) -> Callable[[SafeConstructor, ScalarNode], Any]:
    """A scalar constructor whose bad values are a ``ConstructorError`` with the node's place
    (PyYAML lets ``int('abc')``'s ValueError and ``!!bool maybe``'s KeyError escape)."""

    def construct(loader: SafeConstructor, node: ScalarNode) -> Any:
        value = str(node.value)
        shown = value if len(value) <= 40 else value[:37] + "..."
        if len(value) > MAX_NUMBER_CHARS:
            problem = f"{shown!r}: a {what} of {len(value)} characters is too long"
            raise ConstructorError(None, None, problem, node.start_mark)
        try:
            result = build(loader, node)
        except (ValueError, LookupError, OverflowError):  # IndexError: !!int ""
            raise ConstructorError(
                None, None, f"{shown!r} is not a valid {what}", node.start_mark
            ) from None
        if isinstance(result, float) and not math.isfinite(result):
            problem = f"{shown!r} is not a finite number (JSON, and so Kubernetes, has none)"
            raise ConstructorError(None, None, problem, node.start_mark)
        return result

    return construct


class _JSONConstructor(SafeConstructor):
    """SafeConstructor restricted to JSON's types; every bad scalar is a ConstructorError."""

    yaml_constructors: ClassVar[dict[Any, Any]] = {
        "tag:yaml.org,2002:null": SafeConstructor.construct_yaml_null,
        "tag:yaml.org,2002:bool": _scalar(SafeConstructor.construct_yaml_bool, "boolean"),
        "tag:yaml.org,2002:int": _scalar(SafeConstructor.construct_yaml_int, "integer"),
        "tag:yaml.org,2002:float": _scalar(SafeConstructor.construct_yaml_float, "number"),
        "tag:yaml.org,2002:str": SafeConstructor.construct_yaml_str,
        "tag:yaml.org,2002:seq": SafeConstructor.construct_yaml_seq,
        "tag:yaml.org,2002:map": SafeConstructor.construct_yaml_map,
        None: SafeConstructor.construct_undefined,
    }


if HAVE_LIBYAML:

    class _Loader(_CParser, _JSONConstructor, _JSONResolver):
        def __init__(self, stream: bytes) -> None:
            _CParser.__init__(self, stream)
            _JSONConstructor.__init__(self)
            _JSONResolver.__init__(self)

else:  # pragma: no cover - libyaml is in the wheels of every platform we ship on

    class _Loader(  # type: ignore[no-redef]
        yaml.reader.Reader,
        yaml.scanner.Scanner,
        yaml.parser.Parser,
        yaml.composer.Composer,
        _JSONConstructor,
        _JSONResolver,
    ):
        def __init__(self, stream: bytes) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _JSONConstructor.__init__(self)
            _JSONResolver.__init__(self)


def _check_budgets(events: Iterable[yaml.Event]) -> None:
    """Count depth, nodes and alias expansion over the event stream (no recursion, no
    objects built); raise ``YAMLLimitError`` at the first event over a budget."""
    depth = 0
    nodes = 0  # nodes written in the file
    aliased = 0  # nodes that aliases add when expanded
    size: dict[str, int] = {}  # anchor -> expanded node count of what it names
    open_collections: list[tuple[str | None, int]] = []  # (anchor, expanded count at start)
    for event in events:
        if isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor is not None:
                size[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            nodes += 1
            depth += 1
            if depth > MAX_DEPTH:
                raise YAMLLimitError(
                    f"{_where(event)}nested more than {MAX_DEPTH} levels deep"
                    " (a Kubernetes object needs far fewer)"
                )
            open_collections.append((event.anchor, nodes + aliased - 1))
            if event.anchor is not None:
                size.pop(event.anchor, None)  # not complete yet: an alias to it is a cycle
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = open_collections.pop()
            if anchor is not None:
                size[anchor] = nodes + aliased - start
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in size:
                if any(anchor == event.anchor for anchor, _ in open_collections):
                    raise YAMLLimitError(
                        f"{_where(event)}alias *{event.anchor} refers to a collection that "
                        "contains it (a cycle)"
                    )
                continue  # an undefined alias: the loader reports it with its position
            aliased += size[event.anchor]
            if aliased > max(MIN_ALIAS_BUDGET, nodes):
                raise YAMLLimitError(
                    f"{_where(event)}aliases expand to more than {max(MIN_ALIAS_BUDGET, nodes)}"
                    " nodes (more than the file itself holds; a YAML bomb?)"
                )


def _where(event: yaml.Event) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def load_all(data: bytes) -> list[Any]:
    """Every document in ``data`` (UTF-8 YAML) as JSON-shaped Python values.

    Raises ``YAMLLimitError`` over a budget, ``UnicodeDecodeError`` for bytes that are not
    UTF-8, and ``yaml.YAMLError`` (with a mark) for YAML that does not parse or construct.
    """
    if len(data) > MAX_FILE_BYTES:
        raise YAMLLimitError(f"larger than {MAX_FILE_BYTES >> 20} MiB")
    data.decode("utf-8")  # strict: raises UnicodeDecodeError with the offset
    _check_budgets(_events(data))
    loader = _Loader(data)
    try:
        documents = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            documents.append(loader.get_data())
        return documents
    finally:
        loader.dispose()


def _events(data: bytes) -> Iterator[yaml.Event]:
    """The parser's events, one at a time (``yaml.parse`` with our loader class)."""
    loader = _Loader(data)
    try:
        while loader.check_event():
            event = loader.get_event()
            if event is not None:
                yield event
    finally:
        loader.dispose()
