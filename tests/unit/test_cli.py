"""The ``orca`` command line as a kubectl plugin: it says how it was called, and names the
Workload resource the way that cannot collide (``orcawl``, ``workloads.orca.cloudinit.dev``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main


@pytest.mark.parametrize(
    ("argv0", "usage"),
    [
        ("/usr/local/bin/kubectl-orca", "usage: kubectl orca "),
        ("/usr/local/bin/orca", "usage: orca "),
    ],
)
def test_help_names_the_command_as_called_and_the_resource(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv0: str, usage: str
) -> None:
    monkeypatch.setattr("sys.argv", [argv0])
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(usage)
    assert "kubectl get orcawl -A" in out
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert out.startswith(usage + "explain")
    assert "kubectl get orcawl -n NS" in out


def test_the_command_line_reference_is_generated_from_the_parser() -> None:
    """docs/reference/cli.md is what ``make docs`` writes: every command and option, with the
    help ``--help`` prints (an option added to a command is documented by being added)."""
    from controller.cli.reference import cli_reference

    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
    assert page.read_text() == cli_reference(), (
        "docs/reference/cli.md drifted from the commands: run `make docs`"
    )
    assert "| option | what it does |" in page.read_text()
    assert "|  |" not in page.read_text(), "every option says what it does"
