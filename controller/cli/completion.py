"""Shell completion: ``orca completion bash|zsh|fish`` prints the script a shell loads, and
``kubectl orca`` completes as kubectl's plugins do.

Both ask the ``orca`` argument parser itself, at the moment of the TAB (argcomplete: the
script runs the program with ``_ARGCOMPLETE`` set, and ``controller.cli.main`` answers with
the words that fit there: commands, a flag's choices, files, and flags once a ``-`` is typed,
as kubectl offers them), so a command or flag added
to the parser completes without a script to regenerate, as kubectl's own ``__complete`` does.

kubectl completes a plugin's arguments by running ``kubectl_complete-<plugin>`` from ``$PATH``
with the words after the plugin's name and the word being completed last, and reads Cobra's
``__complete`` answer: one completion a line (``value<TAB>description``), then
``:<directive>`` (``k8s.io/kubectl/pkg/cmd/plugin/plugin_completion.go``: ``pluginCompletion``,
``getPluginCompletions``).
``kubectl_complete-orca`` (an entry point of this package) gives that answer from the same
parser.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import sys
from collections.abc import Sequence

#: The names a shell completes: the program, and the same program as a kubectl plugin.
PROGRAMS = ("orca", "kubectl-orca")
SHELLS = ("bash", "zsh", "fish")
#: Cobra's ``ShellCompDirectiveDefault``: take these completions, or the shell's file
#: completion when there are none.
DIRECTIVE_DEFAULT = 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``completion`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description="Print the script that makes SHELL complete orca's (and kubectl-orca's) "
        "commands, flags and their values from orca's own parser. "
        "bash: source <(orca completion bash), or write it to "
        '/etc/bash_completion.d/orca; zsh: orca completion zsh > "${fpath[1]}/_orca"; '
        "fish: orca completion fish > ~/.config/fish/completions/orca.fish. "
        "`kubectl orca` completes through kubectl_complete-orca, installed beside orca.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to print the script for")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(list(PROGRAMS), shell=args.shell))
    return 0


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request (``_ARGCOMPLETE`` in the environment, set by the shell's
    script) from ``parser`` and exit; return at once otherwise."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser, always_complete_options=False)


class _Answered(Exception):
    """argcomplete finished writing its answer (its ``exit_method``)."""


def kubectl_complete(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-orca WORD... TO_COMPLETE``: Cobra's ``__complete`` answer for
    ``kubectl orca WORD... TO_COMPLETE``."""
    from controller.cli import build_parser

    words = list(sys.argv[1:] if argv is None else argv) or [""]
    *before, current = words
    line = " ".join(["kubectl-orca", *(shlex.quote(w) for w in before), current])
    os.environ.update(
        {
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_SHELL": "fish",  # no shell escaping: kubectl's shell script does it
            "_ARGCOMPLETE_IFS": "\n",
            "_ARGCOMPLETE_DFS": "\t",  # value<TAB>description, as Cobra writes them
            "_ARGCOMPLETE_SUPPRESS_SPACE": "1",
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
        }
    )
    import argcomplete

    answer = io.StringIO()

    def answered(_code: int = 0) -> None:
        raise _Answered

    with contextlib.suppress(_Answered):
        argcomplete.autocomplete(
            build_parser("kubectl orca"),
            always_complete_options=False,
            exit_method=answered,
            output_stream=answer,
        )
    lines = [line for line in answer.getvalue().split("\n") if line.strip()]
    sys.stdout.write("".join(f"{line.rstrip(chr(9))}\n" for line in lines))
    sys.stdout.write(f":{DIRECTIVE_DEFAULT}\n")
    return 0


def kubectl_complete_main() -> None:
    """The ``kubectl_complete-orca`` entry point."""
    sys.exit(kubectl_complete())
