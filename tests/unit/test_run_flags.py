"""``orca run``'s listener flags: where each port listens, checked as an address, and the local
runs (``make demo``, the dev-cluster command of docs/admission.md) serving nothing beyond
loopback."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from controller.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def parse(*flags: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *flags])


def test_both_ports_listen_everywhere_by_default_as_a_pod_needs() -> None:
    args = parse()
    assert (args.metrics_bind_address, args.webhook_bind_address) == ("0.0.0.0", "0.0.0.0")


@pytest.mark.parametrize(
    ("given", "listens"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::", "::"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("10.0.0.7", "10.0.0.7"),
    ],
)
def test_a_bind_address_is_an_ip_address(given: str, listens: str) -> None:
    args = parse(f"--metrics-bind-address={given}", f"--webhook-bind-address={given}")
    assert (args.metrics_bind_address, args.webhook_bind_address) == (listens, listens)


@pytest.mark.parametrize("flag", ["--metrics-bind-address", "--webhook-bind-address"])
@pytest.mark.parametrize("value", ["localhost", "127.0.0.1:9090", "", "999.1.1.1"])
def test_anything_else_is_one_line_and_exit_2(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(f"{flag}={value}")
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{flag}: {value!r} is not an IP address" in last


def orca_run_of(text: str) -> list[str]:
    """The arguments of the ``orca run`` command in a shell script or a doc's code block."""
    joined = text.replace("\\\n", " ")
    line = next(
        line for line in joined.splitlines() if re.search(r"(\"\$ORCA\"|^orca) run ", line.strip())
    )
    words = shlex.split(line.split(">", 1)[0])
    return words[words.index("run") + 1 :]


@pytest.mark.parametrize(
    "source", ["hack/demo.sh", "docs/admission.md"], ids=["make demo", "dev-cluster doc"]
)
def test_local_runs_serve_nothing_beyond_loopback(source: str) -> None:
    args = build_parser().parse_args(["run", *orca_run_of((REPO / source).read_text())])
    assert args.webhook_port  # the webhook is served, and where it listens is said
    assert args.metrics_bind_address == "127.0.0.1"
    assert args.webhook_bind_address == "127.0.0.1"
    assert urlsplit(args.liveness).hostname == "127.0.0.1"
