"""``orca run``: flags and process-level wiring for the operator (``controller.operator.app``
holds the rest, imported only when the command runs, so ``orca --help`` stays fast)."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import re
import sys
from collections.abc import Callable

from controller.cli.flags import add_credential_flags, whole_number
from controller.scheduler.nodes import label_key_problem
from controller.scheduler.plugins.taints import DEFAULT_TOLERATION_SECONDS
from controller.scheduler.rebalance import DEFAULT_MAX_MOVES, MAX_MOVES
from controller.scheduler.resilience import ZONE_KEY as DEFAULT_RESILIENCE_KEY

logger = logging.getLogger("orca")

EXIT_CONFIG = 2


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``run`` on the ``orca`` command line."""
    p = subparsers.add_parser(
        "run",
        help="run the operator (watch Nodes and Workloads, write placements into status)",
        description="Run orca's operator against the cluster of --kubeconfig, $KUBECONFIG, the "
        "Pod it runs in, or ~/.kube/config (the first of these there is).",
    )
    add_credential_flags(p)
    p.add_argument(
        "-n",
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="place Workloads only in namespace NS (repeatable); default: all namespaces",
    )
    p.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="liveness endpoint URL, or 'none' (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=9090,
        help="/metrics and the probes /healthz /livez /readyz, over HTTPS; /metrics only for "
        "a bearer token allowed to get it (TokenReview + SubjectAccessReview, the "
        "metrics-reader ClusterRole); 0 disables (default: 9090)",
    )
    p.add_argument(
        "--metrics-bind-address",
        metavar="IP",
        default="0.0.0.0",
        type=_ip_address("--metrics-bind-address"),
        help="the address /metrics and the probes listen on: in a Pod, all of them (the "
        "kubelet probes the Pod's IP); on a laptop, 127.0.0.1 (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-insecure",
        action="store_true",
        help="serve /metrics over plain HTTP to anyone (local use only; logs a warning)",
    )
    p.add_argument(
        "--node-metrics",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the five orca_node_*{node} gauges per Node (placements, allocatable and free cpu "
        "and memory); --no-node-metrics drops them, the cluster-wide series stay (default: "
        "on; docs/metrics.md)",
    )
    p.add_argument(
        "--tls-cert-dir",
        metavar="DIR",
        help="serving certificate for the metrics and webhook ports: DIR/tls.crt, DIR/tls.key "
        "and DIR/ca.crt (as in a cert-manager Secret), read again when they change; "
        "default: --tls-secret, else generated at start",
    )
    p.add_argument(
        "--tls-secret",
        metavar="NAMESPACE/NAME",
        type=_namespaced("--tls-secret"),
        help="keep the serving certificate in this Secret (created when absent, renewed "
        "before it expires), shared by every replica",
    )
    p.add_argument(
        "--tls-san",
        action="append",
        default=[],
        metavar="HOST",
        help="one more name or IP for a generated certificate (repeatable)",
    )
    p.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="serve the Workload validating admission webhook (HTTPS) on this port; "
        "0: no webhook (default)",
    )
    p.add_argument(
        "--webhook-bind-address",
        metavar="IP",
        default="0.0.0.0",
        type=_ip_address("--webhook-bind-address"),
        help="the address the webhook listens on: in a Pod, all of them (the API server "
        "calls the Pod's IP); against the dev cluster, 127.0.0.1 (default: %(default)s)",
    )
    p.add_argument(
        "--webhook-host",
        metavar="HOST",
        help="register the webhook with the API server by URL https://HOST:PORT (the dev "
        "cluster: 127.0.0.1); writes the whole --webhook-configuration",
    )
    p.add_argument(
        "--webhook-service",
        metavar="NAMESPACE/NAME",
        type=_namespaced("--webhook-service"),
        help="in the cluster: the Service the shipped webhook configuration calls; the "
        "operator keeps that webhook's caBundle equal to its certificate's CA",
    )
    p.add_argument(
        "--webhook-configuration",
        default="orca-controller",
        metavar="NAME",
        help="the ValidatingWebhookConfiguration to register in (default: %(default)s)",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default: %(default)s",
    )
    p.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="json: one object per line, for a log pipeline (default: %(default)s)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold a Lease so only one replica decides (default: on)",
    )
    p.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the leader Lease (default: $POD_NAMESPACE or 'default')",
    )
    p.add_argument(
        "--lease-name",
        metavar="NAME",
        default="orca-controller",
        help="the leader Lease (default: %(default)s)",
    )
    p.add_argument(
        "--resync-seconds",
        default="300",
        metavar="SECONDS",
        help=f"list every watched kind again this often ({MIN_RESYNC}..{MAX_RESYNC}; "
        "default: %(default)s)",
    )
    p.add_argument(
        "--max-in-flight",
        default="32",
        metavar="N",
        help=f"concurrent status writes (the scheduling loop's workers; 1..{MAX_IN_FLIGHT}; "
        "default: %(default)s)",
    )
    p.add_argument(
        "--rebalance-interval",
        metavar="DURATION",
        default="off",
        help="plan and make rebalancing moves every DURATION (e.g. 30s, 5m, 1h30m; "
        f"{MIN_REBALANCE_INTERVAL:g}s..{MAX_REBALANCE_INTERVAL // 3600:g}h), for Workloads with "
        "rebalance: Allowed; default: off",
    )
    p.add_argument(
        "--rebalance-max-moves",
        default=str(DEFAULT_MAX_MOVES),
        metavar="N",
        help=f"at most N moves per rebalancing pass (0..{MAX_MOVES}, as orca rebalance "
        "--max-moves; default: %(default)s)",
    )
    p.add_argument(
        "--node-lifecycle",
        choices=["auto", "taints", "ready"],
        default="auto",
        help="what moves replicas off a node that is not Ready: taints: only the NoExecute "
        "taints kube-controller-manager's node lifecycle controller sets, as for Pods; ready: "
        "the Ready condition itself, for a cluster without that controller; auto: taints when "
        "kube-controller-manager holds its Lease kube-system/kube-controller-manager, else "
        "ready (default: %(default)s)",
    )
    for key in ("not-ready", "unreachable"):
        p.add_argument(
            f"--default-{key}-toleration-seconds",
            default=str(DEFAULT_TOLERATION_SECONDS),
            metavar="SECONDS",
            help=f"how long Jobs and Services without their own toleration for "
            f"node.kubernetes.io/{key} stay on such a node before they move (0..{MAX_SECONDS}; "
            "kube-apiserver's flag of the same name; default: %(default)s)",
        )
    _add_resilience_flags(p)
    p.set_defaults(func=run)


def _add_resilience_flags(p: argparse.ArgumentParser) -> None:
    """The failure domains' what-if the operator keeps current (``--resilience-*``)."""
    group = p.add_argument_group("failure domains")
    group.add_argument(
        "--resilience-key",
        default=DEFAULT_RESILIENCE_KEY,
        metavar="KEY",
        help="the node label whose values are the failure domains: every interval, the "
        "what-if of losing each one (orca plan --resilience KEY), exported as "
        "orca_failure_domain_unplaceable_replicas and orca_failure_domain_displaced_replicas "
        "(default: %(default)s)",
    )
    group.add_argument(
        "--resilience-interval",
        default="60s",
        metavar="DURATION",
        help="how often (e.g. 60s, 5m; "
        f"{MIN_RESILIENCE_INTERVAL:g}s..{MAX_RESILIENCE_INTERVAL // 3600:g}h), and no more "
        "often than the cluster changes, on the leader, within a tenth of a core; 0 or off: "
        "never (default: %(default)s)",
    )


def resilience_flags(args: argparse.Namespace) -> None:
    """``--resilience-key`` checked, ``--resilience-interval`` as ``args.resilience_every``
    (seconds, None: off); ``ValueError`` of one line."""
    problem = label_key_problem(args.resilience_key)
    if problem is not None:
        raise ValueError(f"--resilience-key {args.resilience_key[:80]!r} {problem}")
    args.resilience_every = parse_duration(
        args.resilience_interval,
        "--resilience-interval",
        MIN_RESILIENCE_INTERVAL,
        MAX_RESILIENCE_INTERVAL,
    )


def _namespaced(flag: str) -> Callable[[str], tuple[str, str]]:
    """``NAMESPACE/NAME`` as a pair; argparse turns the ValueError into one line."""

    def parse(text: str) -> tuple[str, str]:
        namespace, _, name = text.partition("/")
        if not namespace or not name or "/" in name:
            raise argparse.ArgumentTypeError(f"{flag}: {text[:60]!r} is not NAMESPACE/NAME")
        return namespace, name

    return parse


def _ip_address(flag: str) -> Callable[[str], str]:
    """An IPv4 or IPv6 address to listen on, as written (``0.0.0.0`` or ``::`` for all)."""

    def parse(text: str) -> str:
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag}: {text[:60]!r} is not an IP address (e.g. 127.0.0.1, 0.0.0.0, ::)"
            ) from None

    return parse


MAX_SECONDS = 10 * 365 * 24 * 3600  # ten years: "forever" is a toleration without seconds
#: kube-apiserver's ``--max-mutating-requests-inflight`` default: status writes beyond it
#: would only be answered 429 (each worker holds one write in flight).
MAX_IN_FLIGHT = 200
#: A full LIST of every Node and Workload at most this often; a day at least.
MIN_RESYNC, MAX_RESYNC = 10, 24 * 3600
MIN_REBALANCE_INTERVAL = 1.0
MAX_REBALANCE_INTERVAL = 24 * 3600.0
MIN_RESILIENCE_INTERVAL = 10.0
MAX_RESILIENCE_INTERVAL = 24 * 3600.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(
    text: str,
    flag: str = "--rebalance-interval",
    low: float = MIN_REBALANCE_INTERVAL,
    high: float = MAX_REBALANCE_INTERVAL,
) -> float | None:
    """An interval flag (``--rebalance-interval``): seconds, or None for ``off``/``0``. Go's
    duration syntax (``30s``, ``5m``, ``1h30m``, ``1.5h``), as kubectl and Kubernetes flags
    write it; a ``ValueError`` with one line for anything else or outside ``low..high``."""
    value = text.strip()
    if value in ("off", "0"):
        return None
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(
            f"{flag}: {text[:40]!r} is not a duration (examples: 30s, 5m, 1h30m; or off)"
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not low <= seconds <= high:
        raise ValueError(
            f"{flag}: {text[:40]!r} is out of range ({low:g}s..{high // 3600:g}h, or off)"
        )
    return seconds


def _webhook_problem(args: argparse.Namespace) -> str | None:
    """Webhook and certificate flags that cannot work together, in one line."""
    if args.webhook_port and args.webhook_port == args.metrics_port:
        return "--webhook-port and --metrics-port must differ"
    if args.webhook_host and args.webhook_service:
        return "--webhook-host and --webhook-service exclude each other"
    if (args.webhook_host or args.webhook_service) and not args.webhook_port:
        return "--webhook-host and --webhook-service need --webhook-port"
    if args.webhook_service and not (args.tls_secret or args.tls_cert_dir):
        # Each replica would generate a CA of its own and set it as the caBundle in turn.
        return (
            "--webhook-service needs --tls-secret or --tls-cert-dir: every replica behind "
            "the Service must serve the certificate the caBundle names"
        )
    if args.tls_secret and args.tls_cert_dir:
        return "--tls-secret and --tls-cert-dir exclude each other"
    return None


def run(args: argparse.Namespace) -> int:
    """The ``orca run`` command."""
    from prometheus_client import disable_created_metrics

    from controller.operator.app import ConfigError, configure_logging, operate

    try:
        args.max_in_flight = whole_number("--max-in-flight", args.max_in_flight, 1, MAX_IN_FLIGHT)
        args.resync_seconds = whole_number(
            "--resync-seconds", args.resync_seconds, MIN_RESYNC, MAX_RESYNC
        )
        args.rebalance_every = parse_duration(args.rebalance_interval)
        args.rebalance_max_moves = whole_number(
            "--rebalance-max-moves", args.rebalance_max_moves, 0, MAX_MOVES
        )
        for key in ("not_ready", "unreachable"):
            name = f"default_{key}_toleration_seconds"
            flag = "--" + name.replace("_", "-")
            setattr(args, name, whole_number(flag, getattr(args, name), 0, MAX_SECONDS))
        resilience_flags(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(args)
    disable_created_metrics()  # type: ignore[no-untyped-call]  # no `*_created` series
    problem = _webhook_problem(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        # asyncio's own loop, not uvloop (measured faster by ~12% of the samples): uvloop
        # queues socket writes until the end of the loop iteration, which widens the window
        # between the write fence's check and the bytes leaving; with it, the chaos
        # split-brain scenario once saw a frozen old leader's status write land after thaw.
        asyncio.run(operate(args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except Exception as exc:  # configuration problems: one line, not a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        logger.debug("operator failed", exc_info=True)
        return 1
    return 0
