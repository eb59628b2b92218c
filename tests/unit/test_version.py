"""``orca version`` / ``orca --version``, and ``orca dev-cluster`` without the dev extra."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from controller import version as version_module
from controller.cli import main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def project_version() -> str:
    version: str = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    return version


def test_version_command_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"orca {project_version()}\n"


def test_version_flag_prints_the_same_line_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"orca {project_version()}\n"


def test_a_source_tree_that_was_never_installed_says_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(version_module, "DISTRIBUTION", "orca-controller-not-installed")
    assert version_module.version_line() == "orca 0+unknown"


def test_dev_cluster_without_cryptography_is_one_line(tmp_path: Path) -> None:
    """As if cryptography were not installed (a fresh interpreter where importing it fails).
    ``--bin-dir`` points at nothing, so even a regression here cannot start a cluster."""
    script = (
        "import sys; sys.modules['cryptography'] = None; "
        "from controller.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    empty = tmp_path / "no-binaries"
    empty.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "dev-cluster",
            "start",
            "--dir",
            str(tmp_path / "dc"),
            "--bin-dir",
            str(empty),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "orca dev-cluster: needs the development extra (Python module 'cryptography' is not "
        "installed): pip install 'orca-controller[dev]'\n"
    )
