"""The command line as a user runs it: the input files a user writes, and the type of the
``orca`` fixture (``tests/unit/conftest.py``: ``controller.cli.main`` called in-process, with
what it printed)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

#: ``orca("plan", "--nodes", path, ...)`` -> (exit code, stdout, stderr).
Orca = Callable[..., tuple[int, str, str]]


def write(tmp_path: Path, name: str, docs: Sequence[Mapping[str, Any]] | str) -> Path:
    """``docs`` as a YAML stream (a string as it is) in ``tmp_path / name``."""
    path = tmp_path / name
    path.write_text(docs if isinstance(docs, str) else yaml.safe_dump_all(docs))
    return path
