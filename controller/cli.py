"""The ``orca`` command line: one entry point, one sub-command per module.

Each sub-command lives beside the code it drives and registers itself here through an
``add_parser`` function, so this module only wires; heavy imports happen inside handlers so
``orca --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller.devcluster.cli import add_parser as add_devcluster


def build_parser() -> argparse.ArgumentParser:
    """The full ``orca`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="orca", description="orca-controller: workload placement for Kubernetes"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_devcluster(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``orca`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
