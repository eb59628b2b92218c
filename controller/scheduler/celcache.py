"""The CEL grammar's parser from a cache file, so ``orca plan`` and ``orca run`` do not
rebuild it at every start.

cel-python builds one Lark LALR parser per process from its grammar (``celpy/cel.lark``) the
first time an Environment is made: ~0.3 s of grammar analysis, a third of ``orca plan``'s
start-up budget, for the same tables every time. Lark can save the analysed parser and load
it back (its ``cache`` option; ~0.02 s to load). This module builds cel-python's parser with
exactly cel-python's options plus that cache, and installs it where cel-python keeps its one
parser (``CELParser.CEL_PARSER``, which it reuses when set), before the first expression is
compiled.

Two places hold the file:

- the installation's own, ``<sys.prefix>/share/orca``, written once when the image is built
  (``python -m controller.scheduler.celcache``, a ``RUN`` line in the Dockerfile) and
  read-only after: the operator's pod has no writable home, so without it every start of the
  pod would pay the 0.3 s again, before its first decision;
- the user's cache directory (``$XDG_CACHE_HOME/orca``, else ``~/.cache/orca``), readable and
  writable only by that user, like pip's or Python's own bytecode caches.

The first is used when present. Lark names the file's content by a hash of the grammar, the
options, Lark's version and Python's, and rebuilds (and rewrites) it when any of them differ or
the file does not load; a file or directory that cannot be written just means no cache (Lark's
logger is silent by default). The parser is the same either way: the tests compare their
trees.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import lark
from celpy import celparser

CACHE_DIR_ENV = "XDG_CACHE_HOME"


def cache_path() -> Path | None:
    """The cache file's path, or None if there is no safe one: the installation's file if it
    is there, else the user's (its directory created, private). Lark unpickles the file, so it
    is used only where no one else could have written it (directory and file owned by this
    user or by root, not writable by group or others)."""
    shipped = shipped_cache_path()
    try:
        if shipped.exists() and all(_trusted(p) for p in (shipped.parent, shipped)):
            return shipped
        base = os.environ.get(CACHE_DIR_ENV) or str(Path.home() / ".cache")
        directory = Path(base) / "orca"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / _file_name()
        if not all(_trusted(p) for p in (directory, path) if p.exists()):
            return None
    except (OSError, RuntimeError):  # RuntimeError: no home directory to be found
        return None
    return path


def shipped_cache_path() -> Path:
    """Where an installation (the image) keeps the parser it built: beside the interpreter's
    environment, so it moves with the virtualenv and needs no home directory."""
    return Path(sys.prefix) / "share" / "orca" / _file_name()


def _file_name() -> str:
    return f"cel-parser-lark-{lark.__version__}.cache"


def _trusted(path: Path) -> bool:
    info = path.stat()
    return info.st_uid in (os.getuid(), 0) and not info.st_mode & 0o022


def ship() -> Path:
    """Build the parser into the installation's cache (the image's build step), readable by
    every user and writable by none but its owner."""
    path = shipped_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)  # whatever the umask: the image's user reads it, as root owns it
    path.unlink(missing_ok=True)  # built afresh, whatever was there
    build_cel_parser(path)
    if not path.exists():  # Lark only logs (at a level no one sees) a cache it could not write
        raise OSError(f"Lark wrote no cache at {path}")
    path.chmod(0o644)
    return path


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


if __name__ == "__main__":
    print(f"built cel-python's parser into {ship()}")
