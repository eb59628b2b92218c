"""``orca version`` (and ``orca --version``): the installed version, ``controller.version``."""

from __future__ import annotations

import argparse

from controller.version import version_line


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``version`` on the ``orca`` command line."""
    ver = subparsers.add_parser("version", help="print orca's version")
    ver.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    print(version_line())
    return 0
