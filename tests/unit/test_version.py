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


def test_dev_cluster_without_binaries_is_one_line(tmp_path: Path) -> None:
    """Where the control plane is not built (the operator image, a pip install), ``dev-cluster
    start`` says in one line where it looked and how to build them, and starts nothing."""
    empty = tmp_path / "no-binaries"
    empty.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
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
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"orca dev-cluster: control-plane binaries missing in {empty}")
    assert "kube-apiserver" in result.stderr and "hack/testcp/build.sh" in result.stderr
    assert not (tmp_path / "dc").exists()
