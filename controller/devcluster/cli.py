"""``orca dev-cluster start|stop|status``: placeholder until the control plane lands."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dev-cluster`` on the ``orca`` command line."""
    p = subparsers.add_parser("dev-cluster", help="run a local kube-apiserver + etcd")
    p.set_defaults(func=lambda _args: 2)
