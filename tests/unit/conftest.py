"""Fixtures the unit tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from tests.support.cli import Orca


@pytest.fixture
def orca(capsys: pytest.CaptureFixture[str]) -> Orca:
    """The ``orca`` command run in-process as a user runs it: ``orca("plan", "--nodes", path)``
    returns (exit code, stdout, stderr); arguments are passed as strings, paths included."""

    def run(*args: str | Path) -> tuple[int, str, str]:
        code = main([str(arg) for arg in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run
