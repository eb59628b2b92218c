"""The ``orca`` command line (``orca``, ``kubectl orca``): one entry point, one module per
sub-command (``run``, ``plan``, ``explain``, ``rebalance``, ``crd``, ``dashboard``, ``version``,
``dev_cluster``, ``completion``), each registering itself through an ``add_parser`` function,
so this module only wires. Heavy imports happen inside the commands so ``orca --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from controller.cli import (
    completion,
    crd,
    dashboard,
    dev_cluster,
    explain,
    plan,
    rebalance,
    run,
)
from controller.cli import version as version_command
from controller.version import version_line


def build_parser(prog: str = "orca") -> argparse.ArgumentParser:
    """The full ``orca`` argument parser (``prog``: how the user called it, for usage lines)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="orca-controller: workload placement for Kubernetes. Workloads are "
        "workloads.orca.cloudinit.dev (short name orcawl): kubectl get orcawl -A.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (
        plan,
        explain,
        rebalance,
        crd,
        dashboard,
        run,
        dev_cluster,
        completion,
        version_command,
    ):
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``orca`` command; returns the process exit code."""
    # Installed as kubectl-orca too: `kubectl orca ...` then says so in its usage lines.
    called = Path(sys.argv[0]).name
    parser = build_parser("kubectl orca" if called == "kubectl-orca" else "orca")
    completion.complete(parser)  # a shell's TAB (``orca completion``): answered, then exit
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `orca plan ... | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    return code
