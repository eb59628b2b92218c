"""cel-python's parser from Lark's cache (``controller.scheduler.celcache``): the same trees as
cel-python's own parser, and a cache file read only where no one else could have written it."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from celpy import celparser

from controller.scheduler import celcache
from controller.scheduler.celcache import build_cel_parser, cache_path, install_cel_parser, ship

EXPRESSIONS = [
    '"ssd" in node.tags',
    '!("gpu" in node.tags) && node.cpu >= 8000',
    'node.labels["topology.kubernetes.io/zone"].startsWith("eu-")',
    'node.labels["node.kubernetes.io/instance-type"] in ["m5.xlarge", "m5.2xlarge"]',
    "size(node.runtimes) >= 2 || node.freeMemory > 1024 * 1024",
    'node.tags.exists(t, t == "edge") ? 1.5 : -2u == 3u',
    "node.labels.all(k, k.size() < 64) && has(node.labels.zone)",
    "b'bytes' == b\"\\x00\" || r'raw' != 'x' || [1, 2][0] == {'a': 1}['a']",
    "(node.cpu > 1) == true || false != null",  # true and false are literals, not names
    'node.cpu > 1 &&\n  node.kind == "linux"',  # positions on a second line
]


def positions(tree: Any) -> list[tuple[str, int | None, int | None]]:
    """Each subtree's rule and where it starts: what error messages point at."""
    return [
        (str(t.data), getattr(t.meta, "line", None), getattr(t.meta, "column", None))
        for t in tree.iter_subtrees_topdown()
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
        assert positions(warm.parse(source)) == positions(expected), source


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


def test_the_users_cache_directory_is_made_where_none_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh account: no ``~/.cache`` yet, no ``$XDG_CACHE_HOME``; ``~/.cache/orca`` is made,
    private, and made again without complaint on the next start."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = cache_path()
    assert path is not None and path.parent == tmp_path / "home" / ".cache" / "orca"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert cache_path() == path
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg" / "deeper"))  # nor this one
    assert cache_path() == tmp_path / "xdg" / "deeper" / "orca" / path.name


def test_shipping_again_replaces_what_was_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    first = ship()
    first.write_bytes(b"not a pickle")  # a broken or older file: the image build starts afresh
    assert ship() == first
    assert build_cel_parser(first).parse('"a" in node.tags') == build_cel_parser(None).parse(
        '"a" in node.tags'
    )
    assert first.read_bytes() != b"not a pickle"


def test_shipping_says_so_when_lark_wrote_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lark only logs a cache it could not write; the image's build step must fail instead."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(celcache, "build_cel_parser", lambda path: None)
    where = tmp_path / "venv" / "share" / "orca" / celcache.shipped_cache_path().name
    with pytest.raises(OSError, match=f"^Lark wrote no cache at {where}$"):
        ship()


def test_the_parser_is_installed_once_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(celparser.CELParser, "CEL_PARSER", None)
    cache = tmp_path / "cel.cache"
    install_cel_parser(cache)
    installed = celparser.CELParser.CEL_PARSER
    assert installed is not None and cache.stat().st_size > 0  # built through the cache
    assert installed.parse(EXPRESSIONS[0]) == build_cel_parser(None).parse(EXPRESSIONS[0])
    install_cel_parser(None)  # cel-python has one: it stays
    assert celparser.CELParser.CEL_PARSER is installed


def test_a_cache_root_owns_is_trusted_by_every_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """The image's cache is root's, read by the operator's unprivileged user: ``/`` (root's,
    0755 on every Linux) stands for it, seen by a user who is not root."""
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    assert celcache._trusted(Path("/"))


def test_no_cache_path_writes_no_cache_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None is "no cache": not Lark's cache=True (a file in the temporary directory), nor a
    # file named after None in the working directory.
    work, temporary = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    temporary.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    parser = build_cel_parser(None)
    assert parser.parse(EXPRESSIONS[0]) is not None
    assert list(work.iterdir()) == [] and list(temporary.iterdir()) == []


def test_orca_plan_builds_its_parser_through_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ``orca plan`` of a user without an installation's cache writes the parser to
    ``$XDG_CACHE_HOME/orca``, for the next ones to load instead of building it again."""
    from controller.cli import main

    monkeypatch.setattr(celparser.CELParser, "CEL_PARSER", None)  # a fresh process's state
    monkeypatch.setenv(celcache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(celcache, "shipped_cache_path", lambda: tmp_path / "none" / "x.cache")
    nodes, workloads = tmp_path / "nodes.yaml", tmp_path / "workloads.yaml"
    nodes.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    workloads.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(workloads)]) == 0
    (written,) = (tmp_path / "cache" / "orca").iterdir()
    assert written.stat().st_size > 0
    assert celparser.CELParser.CEL_PARSER is not None
