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

How: the values are built straight from the events of the libyaml C parser (when installed;
the pure-Python one otherwise) in one non-recursive pass that counts depth, nodes and the
expanded size of each anchor as it goes (``_Builder``), so the first event over a budget
stops the load before more is built, and no node graph or recursive constructor is involved.
A plain scalar is resolved and built once per distinct text in the file. A 5,000-Node
``kubectl get nodes -o yaml`` file (14 MB) loads in a quarter of the CPU time of PyYAML's
own C loader with no budgets, and under a tenth of ``yaml.safe_load_all``'s
(``bench/bench_manifests.py`` prints the figures). Only JSON's types are built: null,
booleans, integers, floats, strings, lists and maps (plus ``<<`` merge keys). Timestamps stay
strings, as they do for kubectl (``created: 2024-01-01`` is the string ``"2024-01-01"``), and
other tags (``!!binary``, ``!!set``, ``!!timestamp``, ``!custom``) are refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, cast

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.error import Mark
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


_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_COLLECTION_TAGS: dict[type, tuple[str | None, ...]] = {
    yaml.MappingStartEvent: (None, "!", "tag:yaml.org,2002:map"),
    yaml.SequenceStartEvent: (None, "!", "tag:yaml.org,2002:seq"),
}


class _MergeKey:
    """The ``<<`` key of a mapping (a merge key), applied when the mapping ends."""


_MERGE_KEY = _MergeKey()
_UNSEEN = object()


class _Open:
    """A collection being built: its value, its anchor, and (for a mapping) the key waiting
    for its value and the mappings merged into it."""

    __slots__ = ("anchor", "event", "key", "merges", "start", "value")

    def __init__(self, event: yaml.CollectionStartEvent, start: int) -> None:
        self.event = event
        self.anchor: str | None = event.anchor
        self.start = start  # expanded node count when it opened
        self.value: dict[Any, Any] | list[Any] = (
            {} if isinstance(event, yaml.MappingStartEvent) else []
        )
        self.key: tuple[Any] | None = None
        self.merges: list[dict[Any, Any]] = []


class _Builder:
    """Builds the documents from the parser's events in one non-recursive pass, counting
    depth, nodes and alias expansion as it goes: the first event over a budget raises
    ``YAMLLimitError`` before anything more is built.

    This replaces a budget pass followed by PyYAML's loader (a second parse, a node graph,
    then a constructor), and resolves and builds a plain scalar once per distinct text in the
    file (a 5,000-Node file repeats most of its keys and values), not once per occurrence.
    """

    def __init__(self) -> None:
        self.resolver = _JSONResolver()
        self.constructor = _JSONConstructor()
        self.documents: list[Any] = []
        self.scalars: dict[tuple[str, bool], Any] = {}  # (text, plain) -> value, this file
        self.depth = 0
        self.nodes = 0  # nodes written in the file
        self.aliased = 0  # nodes that aliases add when expanded
        self.size: dict[str, int] = {}  # anchor -> expanded node count of what it names
        self.anchors: dict[str, Any] = {}  # anchor -> the value it names
        self.open: list[_Open] = []

    def build(self, next_event: Callable[[], yaml.Event | None]) -> None:
        """Feed every event ``next_event`` gives until it gives None (the parser is done).

        The hot loop of ``orca plan``'s start-up (a 5,000-Node file is ~2.5 million events):
        the usual event, a plain scalar without anchor or tag already seen in this file, put
        into a list or a mapping, is handled inline; everything else goes through ``feed``,
        which does the same with every check spelled out.
        """
        scalars = self.scalars
        open_ = self.open
        scalar_event = yaml.ScalarEvent
        while (event := next_event()) is not None:
            if type(event) is not scalar_event or event.anchor is not None:
                self.feed(event)
                continue
            tag = event.tag
            if tag is not None and tag != "!":
                self.feed(event)
                continue
            value = scalars.get((event.value, bool(event.implicit[0])), _UNSEEN)
            if value is _UNSEEN or value is _MERGE_KEY or not open_:
                self.feed(event)
                continue
            entry = open_[-1]
            pending = entry.key
            if pending is not None and pending[0] is _MERGE_KEY:
                self.feed(event)
                continue
            self.nodes += 1
            container = entry.value
            if type(container) is list:
                container.append(value)
            elif pending is None:
                entry.key = (value,)  # a scalar: always hashable
            else:
                container[pending[0]] = value
                entry.key = None

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.ScalarEvent):
            self.nodes += 1
            value = self._scalar(event)
            if event.anchor is not None:
                self.size[event.anchor] = 1
                self.anchors[event.anchor] = value
            self._add(value, event)
        elif isinstance(event, yaml.CollectionStartEvent):
            self._start(event)
        elif isinstance(event, yaml.CollectionEndEvent):
            self._end()
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)

    def _start(self, event: yaml.CollectionStartEvent) -> None:
        self.nodes += 1
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise YAMLLimitError(
                f"{_where(event)}nested more than {MAX_DEPTH} levels deep"
                " (a Kubernetes object needs far fewer)"
            )
        if event.tag not in _COLLECTION_TAGS[type(event)]:  # !!set, !!omap, !custom ...
            node = yaml.MappingNode(
                str(event.tag), [], _mark(event.start_mark), _mark(event.end_mark)
            )
            self.constructor.construct_undefined(node)  # raises, naming the tag and its place
        self.open.append(_Open(event, self.nodes + self.aliased - 1))
        if event.anchor is not None:
            self.size.pop(event.anchor, None)  # not complete yet: an alias to it is a cycle
            self.anchors.pop(event.anchor, None)

    def _end(self) -> None:
        self.depth -= 1
        done = self.open.pop()
        value = done.value
        if done.merges and isinstance(value, dict):
            merged: dict[Any, Any] = {}
            for source in reversed(done.merges):  # an earlier source wins over a later one
                merged.update(source)
            merged.update(value)  # and the mapping's own keys over every source
            value.clear()
            value.update(merged)
        if done.anchor is not None:
            self.size[done.anchor] = self.nodes + self.aliased - done.start
            self.anchors[done.anchor] = value
        self._add(value, done.event)

    def _alias(self, event: yaml.AliasEvent) -> None:
        anchor = event.anchor
        if anchor not in self.size:
            if any(entry.anchor == anchor for entry in self.open):
                raise YAMLLimitError(
                    f"{_where(event)}alias *{anchor} refers to a collection that "
                    "contains it (a cycle)"
                )
            raise ComposerError(
                None, None, f"found undefined alias {anchor!r}", _mark(event.start_mark)
            )
        self.aliased += self.size[anchor]
        if self.aliased > max(MIN_ALIAS_BUDGET, self.nodes):
            raise YAMLLimitError(
                f"{_where(event)}aliases expand to more than {max(MIN_ALIAS_BUDGET, self.nodes)}"
                " nodes (more than the file itself holds; a YAML bomb?)"
            )
        self._add(self.anchors[anchor], event)

    def _add(self, value: Any, event: yaml.Event) -> None:
        """Put a complete value where it belongs: a document, a list item, a key or a value."""
        if value is _MERGE_KEY and not (
            self.open and isinstance(self.open[-1].value, dict) and self.open[-1].key is None
        ):  # ``<<`` anywhere but in a key's place: refused, as PyYAML refuses it
            raise ConstructorError(
                None,
                None,
                f"could not determine a constructor for the tag {_MERGE!r}",
                _mark(event.start_mark),
            )
        if not self.open:
            self.documents.append(value)
            return
        entry = self.open[-1]
        container = entry.value
        if isinstance(container, list):
            container.append(value)
        elif entry.key is None:  # a key
            if isinstance(value, dict | list):
                raise ConstructorError(
                    "while constructing a mapping",
                    _mark(entry.event.start_mark),
                    "found unhashable key",
                    _mark(event.start_mark),
                )
            entry.key = (value,)
        else:
            (key,) = entry.key
            entry.key = None
            if key is _MERGE_KEY:
                entry.merges.extend(self._merge_sources(value, entry.event, event))
            else:
                container[key] = value

    @staticmethod
    def _merge_sources(value: Any, mapping: yaml.Event, event: yaml.Event) -> list[Any]:
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(source, dict) for source in sources):
            raise ConstructorError(
                "while constructing a mapping",
                _mark(mapping.start_mark),
                "expected a mapping or list of mappings for merging",
                _mark(event.start_mark),
            )
        return list(sources)

    def _scalar(self, event: yaml.ScalarEvent) -> Any:
        text, tag = event.value, event.tag
        if tag is not None and tag != "!":
            return self._construct(tag, event)
        plain = bool(event.implicit[0])  # as libyaml's composer: "! 12" is resolved too
        key = (text, plain)
        if key in self.scalars:
            return self.scalars[key]
        if plain:
            resolved: str = self.resolver.resolve(  # type: ignore[no-untyped-call]
                yaml.ScalarNode, text, (True, False)
            )
            value = self._construct(resolved, event)
        else:
            value = text
        self.scalars[key] = value
        return value

    def _construct(self, tag: str, event: yaml.ScalarEvent) -> Any:
        if tag == _STR:
            return event.value
        if tag == _MERGE:
            return _MERGE_KEY
        if tag == _NULL:
            return None
        node = ScalarNode(
            tag, event.value, _mark(event.start_mark), _mark(event.end_mark), event.style
        )
        return self.constructor.construct_object(node)


def _mark(mark: object) -> Mark | None:
    """A parser's mark for an error (libyaml's marks have the same fields as PyYAML's)."""
    return cast(Mark | None, mark)


def _where(event: yaml.Event) -> str:
    mark = _mark(event.start_mark)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def load_all(data: bytes) -> list[Any]:
    """Every document in ``data`` (UTF-8 YAML) as JSON-shaped Python values.

    Raises ``YAMLLimitError`` over a budget, ``UnicodeDecodeError`` for bytes that are not
    UTF-8, and ``yaml.YAMLError`` (with a mark) for YAML that does not parse or construct.
    """
    if len(data) > MAX_FILE_BYTES:
        raise YAMLLimitError(f"larger than {MAX_FILE_BYTES >> 20} MiB")
    data.decode("utf-8")  # strict: raises UnicodeDecodeError with the offset
    builder = _Builder()
    loader = _Loader(data)
    try:
        builder.build(loader.get_event)
    finally:
        loader.dispose()
    return builder.documents
