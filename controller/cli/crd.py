"""``orca crd``: the Workload CRD generated from the API models (``crds/`` holds its output)."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``crd`` on the ``orca`` command line."""
    crd = subparsers.add_parser("crd", help="print the Workload CRD generated from the API models")
    crd.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    from controller.api.crd import workload_crd_yaml

    sys.stdout.write(workload_crd_yaml())
    return 0
