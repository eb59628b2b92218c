"""``orca completion bash|zsh|fish`` and ``kubectl_complete-orca`` (``controller.cli.completion``):
the bash script parses, registers both programs, and a TAB in a real bash completes from the
parser (commands, a command's flags, a flag's choices); the kubectl plugin's answer is Cobra's
format. ``kubectl orca`` through the real kubectl: tests/packaging/test_kubectl_plugin.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Orca

BIN = Path(sys.executable).parent  # the virtualenv's: orca, kubectl-orca, kubectl_complete-orca


def _bash(script: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash, "bash is needed"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    return subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    done = subprocess.run(
        [str(BIN / "orca"), "completion", "bash"], capture_output=True, text=True, check=True
    )
    path = tmp_path_factory.mktemp("completion") / "orca.bash"
    path.write_text(done.stdout)
    return path


def test_the_bash_script_parses_and_registers_both_programs(bash_script: Path) -> None:
    syntax = _bash(f"bash -n {bash_script}")
    assert syntax.returncode == 0, syntax.stderr
    done = _bash(f"source {bash_script} && complete -p orca && complete -p kubectl-orca")
    assert done.returncode == 0, done.stderr
    registered = done.stdout.splitlines()
    assert len(registered) == 2
    for line, program in zip(registered, ("orca", "kubectl-orca"), strict=True):
        assert line.startswith("complete ") and line.split()[-1] == program, line
        assert "-F _python_argcomplete" in line, line


def _tab(bash_script: Path, line: str) -> set[str]:
    """What bash offers at the end of ``line`` (COMPREPLY after the registered function ran,
    as bash's own completion calls it: the command, the word, the word before)."""
    words = line.split(" ")
    script = f"""
source {bash_script}
COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9
COMP_WORDS=({" ".join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}
_python_argcomplete {words[0]!r} {words[-1]!r} {words[-2]!r}
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = _bash(script)
    assert done.returncode == 0, done.stderr
    return {w.strip() for w in done.stdout.splitlines() if w.strip()}


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        pytest.param("orca pl", {"plan"}, id="a-command"),
        pytest.param("orca comp", {"completion"}, id="this-command"),
        pytest.param("orca completion ", {"bash", "zsh", "fish"}, id="a-positional-choice"),
        pytest.param("orca plan --from", {"--from-cluster"}, id="a-flag"),
        pytest.param("orca plan -o ", {"table", "json", "yaml"}, id="a-flag-choice"),
        pytest.param("orca run --node-lifecycle ", {"auto", "taints", "ready"}, id="run-flag"),
        pytest.param("kubectl-orca expl", {"explain"}, id="as-the-plugin"),
    ],
)
def test_a_tab_in_bash_completes_from_the_parser(
    bash_script: Path, line: str, offered: set[str]
) -> None:
    assert _tab(bash_script, line) == offered


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_both_programs(orca: Orca, shell: str) -> None:
    code, out, err = orca("completion", shell)
    assert (code, err) == (0, "")
    assert "orca" in out and "kubectl-orca" in out
    assert "_ARGCOMPLETE" in out  # they ask the program, as the bash script does


def test_an_unknown_shell_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [str(BIN / "orca"), "completion", "tcsh"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "argument shell: invalid choice: 'tcsh' (choose from 'bash', 'zsh', 'fish')"
    ), done.stderr


def _plugin(*words: str) -> list[str]:
    done = subprocess.run(
        [str(BIN / "kubectl_complete-orca"), *words],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_kubectl_complete_answers_in_cobras_format() -> None:
    """One completion a line, ``value<TAB>description``, the directive last (``:0``, Cobra's
    ShellCompDirectiveDefault: the shell's file completion when nothing fits)."""
    lines = _plugin("reb")
    assert lines[-1] == ":0"
    ((value, description),) = [line.split("\t") for line in lines[:-1]]
    assert value == "rebalance"
    assert description.startswith("the rebalancer's plan")
    assert [line.split("\t")[0] for line in _plugin("plan", "-o", "")[:-1]] == [
        "table",
        "json",
        "yaml",
    ]
    assert _plugin("zz") == [":0"]  # nothing starts so: no completion, the directive alone


def test_a_completion_request_is_answered_by_orca_itself_from_its_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the shell's script runs at a TAB (``orca`` with ``_ARGCOMPLETE`` and the line
    typed so far), in-process: the answer is the commands that fit, and no command runs.
    argcomplete's own exit and output (fd 8) are swapped for ones a test can read."""
    import functools
    import io

    import argcomplete

    from controller.cli import main

    class Answered(Exception):
        pass

    def answered(_code: int = 0) -> None:
        raise Answered

    answer = io.StringIO()
    monkeypatch.setattr(
        argcomplete,
        "autocomplete",
        functools.partial(argcomplete.autocomplete, exit_method=answered, output_stream=answer),
    )
    line = "orca re"
    for name, value in {
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/orca"])
    with pytest.raises(Answered):
        main(["version"])  # what a TAB never runs
    assert answer.getvalue().split() == ["rebalance"]
