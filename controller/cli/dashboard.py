"""``orca dashboard``: the Grafana dashboard generated from the operator's metrics
(``manifests/monitoring/grafana-dashboard.json`` holds its output)."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dashboard`` on the ``orca`` command line."""
    board = subparsers.add_parser(
        "dashboard",
        help="print the Grafana dashboard (manifests/monitoring/grafana-dashboard.json)",
        description="Print the operator's Grafana dashboard, generated from controller/"
        "operator/telemetry/dashboard.py (needs the dev extra: pip install -e '.[dev]').",
    )
    board.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    try:
        from controller.operator.telemetry.dashboard import dashboard_json
    except ImportError as exc:  # grafana-foundation-sdk is a dev dependency
        print(
            f"error: orca dashboard needs the dev extra ({exc.name}): pip install -e '.[dev]'",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(dashboard_json())
    return 0
