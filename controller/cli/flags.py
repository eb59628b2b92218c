"""Flag values every command reads the same way, with one wording for what is wrong."""

from __future__ import annotations

import argparse


def whole_number(flag: str, text: str, low: int, high: int) -> int:
    """``text`` as a whole number ``low..high``, or a ``ValueError`` of one line:
    ``--flag: 'ten' is not a whole number`` or ``--flag: 100000 is out of range (0..10000)``."""
    try:
        value = int(text, 10)
    except ValueError:
        raise ValueError(f"{flag}: {text[:40]!r} is not a whole number") from None
    if not low <= value <= high:
        raise ValueError(f"{flag}: {value} is out of range ({low}..{high})")
    return value


def add_credential_flags(parser: argparse.ArgumentParser, when: str = "") -> None:
    """``--kubeconfig`` and ``--context``, read in the ecosystem's order
    (``controller.operator.kube.credentials``) by every command that talks to a cluster."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{when}kubeconfig file; default: $KUBECONFIG, else in-cluster (in a Pod), "
        "else ~/.kube/config",
    )
    parser.add_argument(
        "--context",
        metavar="NAME",
        help=f"{when}the kubeconfig context to use (default: its current-context)",
    )
