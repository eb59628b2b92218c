"""``orca crd``: the Workload CRD generated from the API models (``crds/`` holds its output),
or with ``--markdown`` the API reference generated from it (``docs/reference/api.md``)."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``crd`` on the ``orca`` command line."""
    crd = subparsers.add_parser("crd", help="print the Workload CRD generated from the API models")
    crd.add_argument(
        "--markdown",
        action="store_true",
        help="print the API reference generated from the CRD instead (docs/reference/api.md)",
    )
    crd.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.api.crd import workload_crd, workload_crd_yaml

    if args.markdown:
        from controller.api.reference import api_reference

        sys.stdout.write(api_reference(workload_crd()))
    else:
        sys.stdout.write(workload_crd_yaml())
    return 0
