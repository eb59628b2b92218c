"""The ``orca`` command line as a kubectl plugin: it says how it was called, and names the
Workload resource the way that cannot collide (``orcawl``, ``workloads.orca.cloudinit.dev``)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from controller.cli import main


def exit_of(args: list[str]) -> int | str | None:
    """How ``orca ARGS`` ends when argparse ends it (``--help``, ``--version``, bad usage):
    the code of its ``SystemExit``."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    return exited.value.code


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
    assert exit_of(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(usage)
    assert "kubectl get orcawl -A" in out
    assert exit_of(["explain", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(usage + "explain")
    assert "kubectl get orcawl -n NS" in out


def test_help_says_what_orca_is_and_each_command_in_a_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/orca"])
    assert exit_of(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps at the terminal's width
    assert out.startswith("usage: orca [-h] [--version] COMMAND ...")
    assert (
        "orca-controller: workload placement for Kubernetes. Workloads are "
        "workloads.orca.cloudinit.dev (short name orcawl): kubectl get orcawl -A."
    ) in out
    assert "crd print the Workload CRD generated from the API models" in out
    assert (
        "explain why a Workload is where it is, or why it is not placed (live cluster, read-only)"
    ) in out
    assert (
        "rebalance the rebalancer's plan: replica moves that would even out or pack the "
        "cluster (dry run)"
    ) in out
    assert "--version show program's version number and exit" in out


def test_version_and_a_missing_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.version import version_line

    monkeypatch.setattr("sys.argv", ["/usr/local/bin/orca"])
    assert exit_of(["--version"]) == 0
    assert capsys.readouterr().out == version_line() + "\n"
    assert exit_of([]) == 2
    err = capsys.readouterr().err
    assert err.endswith("error: the following arguments are required: COMMAND\n"), err


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


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-in-flight", "0"], "--max-in-flight: 0 is out of range (1..200)"),
        (["--max-in-flight", "201"], "--max-in-flight: 201 is out of range (1..200)"),
        (["--max-in-flight", "lots"], "--max-in-flight: 'lots' is not a whole number"),
        (["--resync-seconds", "0"], "--resync-seconds: 0 is out of range (10..86400)"),
        (["--resync-seconds", "-5"], "--resync-seconds: -5 is out of range (10..86400)"),
        (["--resync-seconds", "nan"], "--resync-seconds: 'nan' is not a whole number"),
        (["--resync-seconds", "1e9"], "--resync-seconds: '1e9' is not a whole number"),
    ],
)
def test_orca_run_refuses_a_worker_count_or_resync_that_cannot_work_in_one_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No workers would leave every Workload pending without a word; more status writes in
    flight than kube-apiserver admits at once (--max-mutating-requests-inflight, 200) are
    answered 429; a resync of 0 or less would LIST every Node and Workload without pause, and
    nan would never resync. Each is refused before the operator starts (exit 2)."""
    from controller.cli import build_parser
    from controller.cli.run import run

    args = build_parser().parse_args(["run", "--metrics-port", "0", *flags])
    assert run(args) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


@pytest.mark.parametrize(
    ("raised", "code"),
    [(BrokenPipeError(), 0), (KeyboardInterrupt(), 130)],
    ids=["reader-left", "ctrl-c"],
)
def test_a_reader_that_leaves_is_exit_0_and_ctrl_c_is_130(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException, code: int
) -> None:
    """``orca plan ... | head`` ends the pipe early: nothing to report (exit 0, stderr
    closed so Python says nothing at exit); Ctrl-C is the shell's 128 + SIGINT."""
    from controller.cli import version as version_command

    def interrupted(args: object) -> int:
        raise raised

    closed: list[bool] = []
    monkeypatch.setattr(version_command, "run", interrupted)
    monkeypatch.setattr(
        "sys.stderr", type("Err", (), {"close": lambda self: closed.append(True)})()
    )
    assert main(["version"]) == code
    assert closed == ([True] if code == 0 else [])


def test_the_exit_code_is_the_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.cli import version as version_command

    monkeypatch.setattr(version_command, "run", lambda args: 7)
    assert main(["version"]) == 7


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells: split at the pipes that are not escaped, unescaped."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_the_reference_says_what_help_says_one_cell_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command's line and each option's help as argparse prints them (``%(prog)s`` and
    ``%(default)s`` filled in as ``--help`` fills them), a ``|`` in them kept in its cell, and
    an option without help an empty cell, on a parser made for it."""
    from controller.cli import reference

    made: list[argparse.ArgumentParser] = []

    def build_parser() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="orca")
        sub = parser.add_subparsers(metavar="COMMAND")
        tool = sub.add_parser("tool", help="what %(prog)s's tool | does")
        tool.add_argument("--level", default=3, help="of %(prog)s: %(default)s | or off")
        tool.add_argument("--quiet", action="store_true")
        made[:] = [parser, tool]
        return parser

    monkeypatch.setattr(reference, "build_parser", build_parser)
    page = reference.cli_reference().splitlines()
    parser, tool = made
    # what `orca --help` and `orca tool --help` print, their wrapping undone
    top, own = (" ".join(p.format_help().split()) for p in (parser, tool))
    rows = [_cells(line) for line in page if line.startswith("| ")]
    (command,) = [r for r in rows if r[0] == "[`orca tool`](#orca-tool)"]
    assert command[1] == "what orca's tool | does" and command[1] in top
    (level,) = [r for r in rows if r[0] == "`--level LEVEL`"]
    assert level[1] == "of orca tool: 3 | or off" and level[1] in own
    (quiet,) = [r for r in rows if r[0] == "`--quiet`"]
    assert quiet[1] == ""
    assert all(len(r) == 2 for r in rows), rows


def test_each_command_in_the_references_index_links_to_its_section() -> None:
    """The links of the commands' table lead to their headings as GitHub and mkdocs name a
    heading's anchor: lower case, the punctuation but ``-`` and ``_`` dropped, each blank a
    ``-``."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md").read_text()
    anchors = {
        re.sub(r"[^\w\- ]", "", line.removeprefix("## ").lower()).replace(" ", "-")
        for line in page.splitlines()
        if line.startswith("## ")
    }
    links = re.findall(r"^\| \[`[^`]+`\]\(#([^)]+)\) \|", page, flags=re.M)
    assert len(links) == len(anchors) > 10  # every command, once
    assert set(links) == anchors


def test_orca_run_help_puts_the_failure_domain_flags_under_their_own_heading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # orca run has some fifty flags; the --resilience-* ones are read together, under a
    # heading that says what they are about.
    assert exit_of(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "\nfailure domains:\n" in out
    section = out.split("\nfailure domains:\n", 1)[1].split("\n\n", 1)[0]
    flags = re.findall(r"^  (--[a-z-]+)", section, flags=re.M)
    assert flags == ["--resilience-key", "--resilience-interval"]
