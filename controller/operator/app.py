"""The operator process behind ``orca run``: logging, kopf settings, the informers and the
tasks around the reconciler (scheduling loop, Event poster, gauges, leader election)."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import kopf

from controller.api.models import GROUP, PLURAL, VERSION
from controller.operator.handlers import (
    NodeEvents,
    PriorityClassEvents,
    StartupGate,
    WorkloadEvents,
)
from controller.operator.kube import KubeApi, authorization, load_configuration
from controller.operator.kube.informer import Informer
from controller.operator.kube.leader import LeaderElector, default_identity
from controller.operator.priorities import LIST_PATH as PRIORITY_CLASSES_PATH
from controller.operator.priorities import PriorityIndex
from controller.operator.rebalancer import RebalanceLoop
from controller.operator.reconciler import Reconciler
from controller.operator.state import ClusterState
from controller.operator.telemetry import gauges, metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.celcache import cache_path, install_cel_parser
from controller.scheduler.scheduler import Scheduler
from controller.version import version

logger = logging.getLogger("orca")


def configure_kopf(settings: kopf.OperatorSettings) -> None:
    """kopf runs the process (login, start-up and clean-up, the liveness probe) and serves no
    resource: the informers list and watch every kind the operator reads, so kopf has no
    handler to feed and nothing to scan for (no CRD or namespace watch of its own; with
    ``-n`` the namespaces are taken as given), and none of its per-object settings apply
    (progress and diff-base storage, finalizers, batching, worker queues, watches)."""
    settings.scanning.disabled = True
    settings.posting.enabled = (
        False  # no handler of kopf's can fail on an object: orca posts its own
    )
    settings.networking.request_timeout = 30
    # Its few requests (discovery at start-up) ride through an API server outage of up to
    # ~5 minutes: kopf's default retries give up after ~54 s, which would stop the operator.
    settings.networking.error_backoffs = [1, 1, 2, 3, 5, 8, 13, 21, 30, 30, 30, 30, 30, 30, 30, 30]


def kopf_registry(
    login: Callable[..., Awaitable[kopf.ConnectionInfo]],
    startup: Callable[..., Awaitable[None]],
    cleanup: Callable[..., Awaitable[None]],
) -> kopf.OperatorRegistry:
    """kopf's handlers: login, start-up and clean-up; no resource handler at all."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(login)
    kopf.on.startup(registry=registry)(startup)
    kopf.on.cleanup(registry=registry)(cleanup)
    return registry


NODES_PATH = "/api/v1/nodes"
#: What a 404 on the Workloads' LIST means, in so many words.
NO_CRD = "the Workload CRD is not installed (kubectl apply -k crds/)"


def workload_paths(namespaces: Iterable[str]) -> list[str]:
    """The Workload collections this operator serves: all namespaces, or each of its own."""
    base = f"/apis/{GROUP}/{VERSION}"
    namespaces = list(namespaces)
    if not namespaces:
        return [f"{base}/{PLURAL}"]
    return [f"{base}/namespaces/{ns}/{PLURAL}" for ns in namespaces]


def informers_for(
    api: KubeApi,
    state: ClusterState,
    queue: WorkQueue,
    gate: StartupGate,
    priorities: PriorityIndex,
    namespaces: Iterable[str] = (),
    resync: float | None = None,
) -> list[Informer]:
    """One informer per collection: Nodes, PriorityClasses, and the Workloads of every
    namespace served (one collection for all of them, or one per ``-n``)."""
    informers = [
        Informer(api, NODES_PATH, "nodes", NodeEvents(state, queue, gate), resync=resync),
        Informer(
            api,
            PRIORITY_CLASSES_PATH,
            "priorityclasses",
            PriorityClassEvents(state, queue, gate, priorities),
            resync=resync,
        ),
    ]
    workloads = WorkloadEvents(state, queue, gate)
    for path in workload_paths(namespaces):
        informers.append(Informer(api, path, "workloads", workloads, resync=resync, missing=NO_CRD))
    return informers


def connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """A kubernetes-client Configuration as kopf's ConnectionInfo."""
    scheme, token = None, None
    header = authorization(configuration)
    if header:
        scheme, _, token = header.partition(" ")
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


def build_version() -> str:
    """The installed package's version (``orca_build_info{version}``): the one ``orca version``
    prints."""
    return version()


def configure_logging(args: argparse.Namespace) -> None:
    log_format = kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(
        debug=args.log_level == "DEBUG",
        verbose=args.log_level == "DEBUG",
        quiet=args.log_level in ("WARNING", "ERROR"),
        log_format=log_format,
    )
    logging.getLogger().setLevel(args.log_level)
    if args.log_level != "DEBUG":  # kopf logs every handler call at INFO: one line per event
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    for noisy in ("celpy", "lark"):  # a full dump of every CEL activation at DEBUG
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def _gauges(reconciler: Reconciler, every: float = gauges.INTERVAL) -> None:
    """The snapshot gauges (phases, pending queues, per-node capacity), refreshed every few
    seconds: one pass over the state, cheap next to a scrape interval."""
    while True:
        reconciler.export_gauges()
        await asyncio.sleep(every)


async def operate(args: argparse.Namespace) -> None:
    """Run kopf and the scheduling loop until SIGINT/SIGTERM."""
    metrics.initialize(build_version())
    # CEL's parser now, from the image's cache (else the user's, else built: 0.3 s), rather
    # than inside the first decision that compiles a constraint.
    install_cel_parser(cache_path())
    configuration = load_configuration(args.kubeconfig)
    api = KubeApi(
        configuration,
        max_connections=max(8, args.max_in_flight),
        reload=lambda: load_configuration(args.kubeconfig),
    )
    state, queue = ClusterState(), WorkQueue()
    identity = default_identity()
    elector: LeaderElector | None = None
    if args.leader_elect:
        elector = LeaderElector(api, args.lease_namespace, args.lease_name, identity)
    gate = StartupGate(state, queue)
    reconciler = Reconciler(
        state,
        queue,
        api,
        Scheduler(),
        is_leader=elector.holds_lease if elector else (lambda: True),
        max_in_flight=args.max_in_flight,
        identity=identity,
        ready=gate.ready,
    )
    informers = informers_for(
        api, state, queue, gate, reconciler.priorities, args.namespaces or (), args.resync_seconds
    )
    if elector is not None:
        elector.on_elected = lambda: queue.add_all(state.records)
        api.fence = elector.holds_lease  # status writes and Events only while the Lease holds
    else:
        metrics.IS_LEADER.set(1)

    async def login(**_: object) -> kopf.ConnectionInfo:
        """kopf's own requests use the same credentials as ours (kubeconfig or in-cluster),
        re-read on every login so rotated tokens and certificates are picked up."""
        return connection_info(load_configuration(args.kubeconfig))

    settings = kopf.OperatorSettings()
    configure_kopf(settings)
    stop = asyncio.Event()  # set when one of our tasks dies: kopf then stops too
    background: list[asyncio.Task[None]] = []

    def stop_on_failure(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s failed: %r", task.get_name(), task.exception())
            stop.set()

    async def start_loop(**_: object) -> None:
        background.append(asyncio.create_task(reconciler.run(), name="scheduling loop"))
        for informer in informers:
            name = f"informer {informer.path}"
            background.append(asyncio.create_task(informer.run(), name=name))
        background.append(asyncio.create_task(gate.open(informers), name="start-up gate"))
        background.append(asyncio.create_task(reconciler.post_events(), name="event poster"))
        background.append(asyncio.create_task(_gauges(reconciler), name="gauges"))
        every = getattr(args, "rebalance_every", None)
        if every:
            loop = RebalanceLoop(reconciler, every, args.rebalance_max_moves)
            background.append(asyncio.create_task(loop.run(), name="rebalancer"))
        if elector is not None:
            background.append(asyncio.create_task(elector.run(), name="leader election"))
        for task in background:
            task.add_done_callback(stop_on_failure)

    async def stop_loop(**_: object) -> None:
        """Let status writes in flight land, then stop deciding and hand the Lease back."""
        if background:  # empty when start-up itself failed
            deciders = [t for t in background if t.get_name() == "rebalancer"]
            # The scheduling loop and the rebalancer decide nothing new (a move cut short lands
            # or not: it is one status write, and the ledger goes with this process) ...
            deciders.insert(0, background[0])
            for task in deciders:
                task.cancel()
            await asyncio.gather(*deciders, return_exceptions=True)
        logger.info("stopping: %d status writes in flight", len(reconciler.in_flight))
        await reconciler.drain()  # ... let what was decided land ...
        await reconciler.flush_events()
        for task in background[1:]:  # ... then release the Lease (elector's finally) and the rest
            task.cancel()
        await asyncio.gather(*background[1:], return_exceptions=True)
        await api.close()
        stop.set()  # kopf also waits on this flag; set it so kopf exits at once

    namespaces = args.namespaces or []
    try:
        await kopf.operator(
            registry=kopf_registry(login, start_loop, stop_loop),
            settings=settings,
            clusterwide=not namespaces,
            namespaces=namespaces,
            standalone=True,  # one replica decides through the Lease, not kopf peering
            liveness_endpoint=None if args.liveness == "none" else args.liveness,
            stop_flag=stop,
        )
    finally:
        await api.close()
    failed = [t for t in background if not t.cancelled() and t.exception() is not None]
    if failed:
        raise RuntimeError(f"{failed[0].get_name()} failed: {failed[0].exception()!r}")
