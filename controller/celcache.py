"""The CEL grammar's parser from a cache file, so ``orca plan`` does not rebuild it every run.

cel-python builds one Lark LALR parser per process from its grammar (``celpy/cel.lark``) the
first time an Environment is made: ~0.3 s of grammar analysis, a third of ``orca plan``'s
start-up budget, for the same tables every time. Lark can save the analysed parser and load
it back (its ``cache`` option; ~0.02 s to load). This module builds cel-python's parser with
exactly cel-python's options plus that cache, and installs it where cel-python keeps its one
parser (``CELParser.CEL_PARSER``, which it reuses when set), before the first expression is
compiled.

The cache file lives in the user's cache directory (``$XDG_CACHE_HOME/orca``, else
``~/.cache/orca``), readable and writable only by that user, like pip's or Python's own
bytecode caches. Lark names the file's content by a hash of the grammar, the options, Lark's
version and Python's, and rebuilds (and rewrites) it when any of them differ or the file does
not load; a directory that cannot be written just means no cache (Lark's logger is silent by
default). The parser is the same either way: the tests compare their trees.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import lark
from celpy import celparser

CACHE_DIR_ENV = "XDG_CACHE_HOME"


def cache_path() -> Path | None:
    """The cache file's path (its directory created, private), or None if there is no safe
    one: Lark unpickles the file, so it is used only where no one else could have written it
    (directory and file owned by this user, not writable by group or others)."""
    try:
        base = os.environ.get(CACHE_DIR_ENV) or str(Path.home() / ".cache")
        directory = Path(base) / "orca"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / f"cel-parser-lark-{lark.__version__}.cache"
        if not all(_private(p) for p in (directory, path) if p.exists()):
            return None
    except (OSError, RuntimeError):  # RuntimeError: no home directory to be found
        return None
    return path


def _private(path: Path) -> bool:
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def install_cel_parser(path: Path | None) -> None:
    """Install cel-python's parser built through Lark's cache at ``path`` (None: no cache),
    unless cel-python already has one."""
    if celparser.CELParser.CEL_PARSER is None:
        celparser.CELParser.CEL_PARSER = build_cel_parser(path)


def build_cel_parser(path: Path | None) -> lark.Lark:
    """cel-python's parser, with its options (``celpy.celparser.CELParser.__init__``), loaded
    from or saved to Lark's cache at ``path``."""
    grammar = (Path(celparser.__file__).parent / "cel.lark").read_text()
    return lark.Lark(
        grammar,
        parser="lalr",
        start="expr",
        debug=True,
        g_regex_flags=re.M,
        lexer_callbacks={"IDENT": celparser.CELParser.ambiguous_literals},
        propagate_positions=True,
        maybe_placeholders=False,
        priority="invert",
        tree_class=lark.Tree,
        cache=str(path) if path is not None else False,
    )
