"""cel-python's parser from Lark's cache (``controller.scheduler.celcache``): the same trees as
cel-python's own parser, and a cache file read only where no one else could have written it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from celpy import celparser

from controller.scheduler.celcache import build_cel_parser, cache_path, ship

EXPRESSIONS = [
    '"ssd" in node.tags',
    '!("gpu" in node.tags) && node.cpu >= 8000',
    'node.labels["topology.kubernetes.io/zone"].startsWith("eu-")',
    'node.labels["node.kubernetes.io/instance-type"] in ["m5.xlarge", "m5.2xlarge"]',
    "size(node.runtimes) >= 2 || node.freeMemory > 1024 * 1024",
    'node.tags.exists(t, t == "edge") ? 1.5 : -2u == 3u',
    "node.labels.all(k, k.size() < 64) && has(node.labels.zone)",
    "b'bytes' == b\"\\x00\" || r'raw' != 'x' || [1, 2][0] == {'a': 1}['a']",
]


def test_the_cached_cel_parser_parses_as_cel_pythons_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cel-python's own parser, built the usual way (whatever this process installed before)
    monkeypatch.setattr(celparser.CELParser, "CEL_PARSER", None)
    celparser.CELParser()
    own = celparser.CELParser.CEL_PARSER
    assert own is not None
    cache = tmp_path / "cel.cache"
    cold = build_cel_parser(cache)  # builds and writes the cache
    assert cache.stat().st_size > 0
    warm = build_cel_parser(cache)  # loads it
    for source in EXPRESSIONS:
        expected = own.parse(source)
        assert cold.parse(source) == expected, source
        assert warm.parse(source) == expected, source


def test_an_unwritable_cache_is_no_cache(tmp_path: Path) -> None:
    parser = build_cel_parser(tmp_path / "missing-dir" / "cel.cache")
    assert parser.parse(EXPRESSIONS[0]) is not None


def test_the_cache_is_used_only_where_no_one_else_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))  # an installation without one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = cache_path()
    assert path is not None and path.parent == tmp_path / "orca"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    path.write_bytes(b"")
    path.chmod(0o666)  # anyone could have put a pickle there
    assert cache_path() is None
    path.chmod(0o600)
    assert cache_path() == path
    path.parent.chmod(0o777)
    assert cache_path() is None


def test_an_installations_cache_comes_first_and_only_when_no_one_else_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    shipped = ship()
    assert shipped == tmp_path / "venv" / "share" / "orca" / shipped.name
    assert (shipped.stat().st_mode & 0o777, shipped.parent.stat().st_mode & 0o777) == (
        0o644,
        0o755,
    )
    assert cache_path() == shipped
    tree = build_cel_parser(shipped).parse('"a" in node.tags')
    assert tree == build_cel_parser(None).parse('"a" in node.tags')
    shipped.parent.chmod(0o775)  # a group could have swapped the pickle
    assert cache_path() == tmp_path / "home-cache" / "orca" / shipped.name
    shipped.parent.chmod(0o755)
    shipped.chmod(0o664)
    assert cache_path() == tmp_path / "home-cache" / "orca" / shipped.name
