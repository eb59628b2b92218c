"""``orca run``'s listener flags: where each port listens, checked as an address, and the local
runs (``make demo``, the dev-cluster command of docs/admission.md) serving nothing beyond
loopback."""

from __future__ import annotations

import argparse
import logging
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from controller.cli import build_parser
from controller.cli import run as run_flags
from controller.scheduler.rebalance import MAX_MOVES

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


# -- every bounded flag takes its documented range, ends included -------------------------------


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """``orca run``'s operator, not started: the arguments it would have been started with."""
    from controller.operator import app

    calls: list[argparse.Namespace] = []

    async def operate(args: argparse.Namespace) -> None:
        calls.append(args)

    monkeypatch.setattr(app, "operate", operate)
    monkeypatch.setattr(app, "configure_logging", lambda args: None)
    return calls


BOUNDS = [
    ("--max-in-flight", "max_in_flight", 1, run_flags.MAX_IN_FLIGHT),
    ("--resync-seconds", "resync_seconds", run_flags.MIN_RESYNC, run_flags.MAX_RESYNC),
    ("--rebalance-max-moves", "rebalance_max_moves", 0, MAX_MOVES),
    (
        "--default-not-ready-toleration-seconds",
        "default_not_ready_toleration_seconds",
        0,
        run_flags.MAX_SECONDS,
    ),
    (
        "--default-unreachable-toleration-seconds",
        "default_unreachable_toleration_seconds",
        0,
        run_flags.MAX_SECONDS,
    ),
]


@pytest.mark.parametrize(("flag", "attribute", "low", "high"), BOUNDS)
def test_a_bounded_flag_takes_both_ends_of_its_range(
    started: list[argparse.Namespace], flag: str, attribute: str, low: int, high: int
) -> None:
    for value in (low, high):
        assert run_flags.run(parse(f"{flag}={value}")) == 0
        assert getattr(started[-1], attribute) == value


@pytest.mark.parametrize(("flag", "attribute", "low", "high"), BOUNDS)
def test_a_bounded_flag_refuses_one_past_either_end_in_one_line(
    started: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
    flag: str,
    attribute: str,
    low: int,
    high: int,
) -> None:
    for value in (low - 1, high + 1):
        assert run_flags.run(parse(f"{flag}={value}")) == 2
        err = capsys.readouterr().err
        assert err == f"error: {flag}: {value} is out of range ({low}..{high})\n"
    assert started == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("24h", 86400.0), ("1000ms", 1.0), ("off", None)],
)
def test_the_rebalance_interval_takes_both_ends_of_its_range(
    started: list[argparse.Namespace], text: str, seconds: float | None
) -> None:
    assert run_flags.run(parse(f"--rebalance-interval={text}")) == 0
    assert started[-1].rebalance_every == seconds


@pytest.mark.parametrize("text", ["999ms", "86401s", "24h1s"])
def test_the_rebalance_interval_refuses_one_past_either_end(
    started: list[argparse.Namespace], capsys: pytest.CaptureFixture[str], text: str
) -> None:
    assert run_flags.run(parse(f"--rebalance-interval={text}")) == 2
    assert "is out of range (1s..24h, or off)" in capsys.readouterr().err
    assert started == []


@pytest.mark.parametrize(
    "flags",
    [
        ["--metrics-port=0"],
        ["--metrics-port=0", "--webhook-port=0"],
        ["--metrics-port=0", "--webhook-port=9443", "--webhook-host=127.0.0.1"],
        ["--webhook-port=9443", "--webhook-service=ns/svc", "--tls-cert-dir=/etc/orca/tls"],
    ],
    ids=["no-metrics-no-webhook", "both-zero", "webhook-only", "in-cluster-cert-manager"],
)
def test_flags_that_work_together_start_the_operator(
    started: list[argparse.Namespace], flags: list[str]
) -> None:
    """Ports of 0 are switched off, not equal to each other: only two ports actually served
    must differ."""
    assert run_flags.run(parse(*flags)) == 0
    assert len(started) == 1


@pytest.mark.parametrize("flag", ["--tls-secret", "--webhook-service"])
@pytest.mark.parametrize("value", ["ns/a/b", "ns/", "/name", "name", "//"])
def test_a_namespaced_name_is_exactly_namespace_slash_name(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(f"{flag}={value}")
    assert exited.value.code == 2
    assert f"{flag}: {value!r} is not NAMESPACE/NAME" in capsys.readouterr().err


def test_a_namespaced_name_is_read_as_a_pair() -> None:
    args = parse("--tls-secret=orca-system/orca-controller-tls", "--webhook-service=ns/svc")
    assert args.tls_secret == ("orca-system", "orca-controller-tls")
    assert args.webhook_service == ("ns", "svc")


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [
        ("config", 2, "error: metrics port 9090 on 0.0.0.0: Address already in use\n"),
        ("bug", 1, "error: RuntimeError: the informers died\n"),
    ],
)
def test_what_stops_the_operator_is_one_line_and_its_exit_code(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    raised: str,
    code: int,
    said: str,
) -> None:
    """A flag the operator cannot start with is exit 2 (as a bad flag), anything else that
    ends it exit 1; one line each, never a traceback."""
    from controller.operator import app

    async def operate(args: argparse.Namespace) -> None:
        if raised == "config":
            raise app.ConfigError("metrics port 9090 on 0.0.0.0: Address already in use")
        raise RuntimeError("the informers died")

    monkeypatch.setattr(app, "operate", operate)
    monkeypatch.setattr(app, "configure_logging", lambda args: None)
    assert run_flags.run(parse()) == code
    assert capsys.readouterr().err == said


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ten", "--n: 'ten' is not a whole number"),
        ("0x10", "--n: '0x10' is not a whole number"),  # base 10 only
        ("1.5", "--n: '1.5' is not a whole number"),
        ("x" * 60, "--n: " + repr("x" * 40) + " is not a whole number"),  # cut at 40
        ("-1", "--n: -1 is out of range (0..10)"),
        ("11", "--n: 11 is out of range (0..10)"),
    ],
)
def test_a_whole_number_flag_says_what_is_wrong_in_one_line(text: str, message: str) -> None:
    from controller.cli.flags import whole_number

    with pytest.raises(ValueError) as refused:
        whole_number("--n", text, 0, 10)
    assert str(refused.value) == message


def test_a_whole_number_flag_reads_base_10_within_its_range() -> None:
    from controller.cli.flags import whole_number

    assert [whole_number("--n", t, 0, 10) for t in ("0", "10", "007", " 3 ")] == [0, 10, 7, 3]


def test_every_command_that_talks_to_a_cluster_takes_kubeconfig_and_context() -> None:
    for command in (["run"], ["plan", "--from-cluster"], ["explain", "-n", "a", "w"]):
        args = build_parser().parse_args([*command, "--kubeconfig", "/k", "--context", "staging"])
        assert (args.kubeconfig, args.context) == ("/k", "staging"), command
    assert (parse().kubeconfig, parse().context) == (None, None)


def test_every_flag_defaults_to_what_its_help_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    args = parse()
    assert (args.namespaces, args.liveness) == (None, "http://0.0.0.0:8080/healthz")
    assert (args.metrics_port, args.metrics_insecure, args.metrics_bind_address) == (
        9090,
        False,
        "0.0.0.0",
    )
    assert (args.tls_cert_dir, args.tls_secret, args.tls_san) == (None, None, [])
    assert (args.webhook_port, args.webhook_host, args.webhook_service) == (0, None, None)
    assert (args.webhook_configuration, args.webhook_bind_address) == ("orca-controller", "0.0.0.0")
    assert (args.log_level, args.log_format) == ("INFO", "text")
    assert (args.leader_elect, args.lease_namespace, args.lease_name) == (
        True,
        "default",
        "orca-controller",
    )
    assert (args.resync_seconds, args.max_in_flight) == ("300", "32")
    assert (args.rebalance_interval, args.rebalance_max_moves) == ("off", "10")
    assert args.node_lifecycle == "auto"
    monkeypatch.setenv("POD_NAMESPACE", "orca-system")  # in a Pod: its own namespace
    assert parse().lease_namespace == "orca-system"


def test_repeatable_flags_collect_every_value() -> None:
    args = parse("-n", "a", "--namespace", "b", "--tls-san", "x", "--tls-san", "y")
    assert (args.namespaces, args.tls_san) == (["a", "b"], ["x", "y"])
    assert parse("--no-leader-elect").leader_elect is False
    assert parse("--metrics-insecure").metrics_insecure is True


def test_orca_run_is_dispatched_to_the_operator(started: list[argparse.Namespace]) -> None:
    from controller.cli import main

    assert main(["run", "--metrics-port=0"]) == 0
    assert started[-1].metrics_port == 0


def test_orca_help_names_run_for_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "run the operator (watch Nodes and Workloads, write placements into status)" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--webhook-port=9090", "--metrics-port=9090"],
            "--webhook-port and --metrics-port must differ",
        ),
        (
            ["--webhook-port=1", "--webhook-host=h", "--webhook-service=n/s", "--tls-secret=n/t"],
            "--webhook-host and --webhook-service exclude each other",
        ),
        (["--webhook-host=h"], "--webhook-host and --webhook-service need --webhook-port"),
        (
            ["--webhook-port=1", "--webhook-service=n/s"],
            "--webhook-service needs --tls-secret or --tls-cert-dir: every replica behind the "
            "Service must serve the certificate the caBundle names",
        ),
        (
            ["--tls-secret=n/t", "--tls-cert-dir=/d"],
            "--tls-secret and --tls-cert-dir exclude each other",
        ),
    ],
)
def test_flags_that_cannot_work_together_are_said_exactly(
    started: list[argparse.Namespace],
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    assert run_flags.run(parse(*flags)) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert started == []


def test_long_values_are_cut_in_what_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    long = "x" * 100
    for flag, said in (
        ("--tls-secret", f"--tls-secret: {'x' * 60!r} is not NAMESPACE/NAME"),
        ("--metrics-bind-address", f"--metrics-bind-address: {'x' * 60!r} is not an IP address"),
    ):
        with pytest.raises(SystemExit):
            parse(f"{flag}={long}")
        assert said in capsys.readouterr().err
    for text, said in (
        (
            long,
            f"--rebalance-interval: {'x' * 40!r} is not a duration "
            "(examples: 30s, 5m, 1h30m; or off)",
        ),
        (
            "9" * 60 + "h",
            f"--rebalance-interval: {('9' * 60 + 'h')[:40]!r} is out of range (1s..24h, or off)",
        ),
    ):
        with pytest.raises(ValueError) as refused:
            run_flags.parse_duration(text)
        assert str(refused.value) == said


def test_a_failure_is_logged_with_its_traceback_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from controller.operator import app

    async def operate(args: argparse.Namespace) -> None:
        raise RuntimeError("the informers died")

    monkeypatch.setattr(app, "operate", operate)
    monkeypatch.setattr(app, "configure_logging", lambda args: None)
    with caplog.at_level(logging.DEBUG, logger="orca"):
        assert run_flags.run(parse()) == 1
    (record,) = [r for r in caplog.records if r.name == "orca"]
    assert (record.levelno, record.getMessage()) == (logging.DEBUG, "operator failed")
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
