"""The ``orca`` command line: one entry point, one sub-command per module.

Each sub-command lives beside the code it drives and registers itself here through an
``add_parser`` function, so this module only wires; heavy imports happen inside handlers so
``orca --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from controller.devcluster.cli import add_parser as add_devcluster
from controller.explain import add_parser as add_explain
from controller.operator.main import add_parser as add_run
from controller.plan import add_parser as add_plan
from controller.rebalance import add_parser as add_rebalance
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
    add_plan(sub)
    add_explain(sub)
    add_rebalance(sub)
    crd = sub.add_parser("crd", help="print the Workload CRD generated from the API models")
    crd.set_defaults(func=_print_crd)
    board = sub.add_parser(
        "dashboard",
        help="print the Grafana dashboard (manifests/monitoring/grafana-dashboard.json)",
        description="Print the operator's Grafana dashboard, generated from controller/"
        "dashboard.py (needs the dev extra: pip install -e '.[dev]').",
    )
    board.set_defaults(func=_print_dashboard)
    add_run(sub)
    add_devcluster(sub)
    ver = sub.add_parser("version", help="print orca's version")
    ver.set_defaults(func=_print_version)
    return parser


def _print_version(_args: argparse.Namespace) -> int:
    print(version_line())
    return 0


def _print_crd(_args: argparse.Namespace) -> int:
    from controller.api.crd import workload_crd_yaml

    sys.stdout.write(workload_crd_yaml())
    return 0


def _print_dashboard(_args: argparse.Namespace) -> int:
    try:
        from controller.dashboard import dashboard_json
    except ImportError as exc:  # grafana-foundation-sdk is a dev dependency
        print(
            f"error: orca dashboard needs the dev extra ({exc.name}): pip install -e '.[dev]'",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(dashboard_json())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``orca`` command; returns the process exit code."""
    # Installed as kubectl-orca too: `kubectl orca ...` then says so in its usage lines.
    called = Path(sys.argv[0]).name
    parser = build_parser("kubectl orca" if called == "kubectl-orca" else "orca")
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `orca plan ... | head`: the reader left, nothing to report
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
