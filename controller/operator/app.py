"""The operator process behind ``orca run``: logging, kopf settings and the tasks around the
reconciler (scheduling loop, Event poster, periodic relist, leader election)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterable

import kopf

from controller.api.models import GROUP
from controller.operator import handlers
from controller.operator.kube import KubeApi, load_configuration
from controller.operator.kube.informer import (
    WATCH_TIMEOUT,
    Informer,
    apply_node_event,
    apply_workload_event,
)
from controller.operator.kube.leader import LeaderElector, default_identity
from controller.operator.rebalancer import RebalanceLoop
from controller.operator.reconciler import LIST_PAGE, NODES_PATH, Reconciler
from controller.operator.state import ClusterState
from controller.operator.telemetry import gauges, metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.celcache import cache_path, install_cel_parser
from controller.scheduler.scheduler import Scheduler
from controller.version import version

logger = logging.getLogger("orca")


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """No diff-base at all: orca registers only event handlers (``handlers.register``), never
    kopf's change-detecting ones (create/update/resume), so nothing ever reads a diff-base.

    kopf still fetches and builds one on every event whatever handlers exist (parsing the
    last-handled annotation, copying the body into an essence): 8% of the operator's CPU under
    a backlog (py-spy, ``bench/bench_vs_kube_scheduler.py``). This storage makes both free.
    ``test_operator_state`` checks that the registry indeed holds no change handlers.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def configure_kopf(settings: kopf.OperatorSettings, args: argparse.Namespace) -> None:
    """kopf for a real deployment: our own annotation prefix and finalizer name (though our
    event handlers store nothing), warnings-only Kubernetes events from kopf itself
    (orca posts its own), bounded retries, short batching (decisions are level-based)."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.persistence.finalizer = f"{GROUP}/kopf-finalizer"
    settings.posting.level = logging.WARNING
    settings.batching.batch_window = 0.01
    # kopf keeps a worker task per object (holding its last body) until it has been idle this
    # long (default 5 s): with a backlog listed at once that is every Workload's body at once.
    # Ours return at once, so a worker may go as soon as its queue is empty.
    settings.queueing.idle_timeout = 0.1
    # And at most this many workers per resource kind: kopf otherwise queues every object of
    # its initial listing (10,000 Workload bodies) at once, while our handlers are fast
    # enough that a few hundred in flight keep up with the API server.
    settings.queueing.worker_limit = 200
    settings.watching.server_timeout = WATCH_TIMEOUT
    settings.watching.chunk_size = LIST_PAGE  # kopf's initial listing in pages, not at once
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 30
    # Ride through an API server outage (restart, etcd down) of up to ~5 minutes: kopf's
    # default retries give up after ~54 s, and a watcher that gives up stops the operator.
    settings.networking.error_backoffs = [1, 1, 2, 3, 5, 8, 13, 21, 30, 30, 30, 30, 30, 30, 30, 30]
    settings.queueing.error_delays = [1, 2, 5, 10, 30, 60]


#: kopf's own log lines when it restarts a watch stream (``kopf._cogs.clients.watching``);
#: kopf exposes no hook or counter for these, so its DEBUG lines are counted (and dropped
#: unless we log at DEBUG). ``test_metrics`` drives kopf's code to keep these in step.
WATCH_LOGGER = "kopf._cogs.clients.watching"
_WATCH_RESTARTS = (
    (re.compile(r"Restarting the watch-stream for (\S+)"), "expired"),
    (re.compile(r"Watch-stream for (\S+) .*is inactive, reconnecting"), "inactive"),
)


class WatchRestartCounter(logging.Filter):
    """Counts kopf's watch restarts into ``orca_watch_restarts_total`` from its log records,
    calls ``on_restart`` for each (a restarted watch may have missed deletions, which kopf's
    re-listing cannot replay: the operator then LISTs on its own), and passes on only the
    records at or above ``level`` (the level the user asked for)."""

    def __init__(self, level: int, on_restart: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.level = level
        self.on_restart = on_restart

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        for pattern, reason in _WATCH_RESTARTS:
            match = pattern.search(message)
            if match:
                resource = match.group(1).split(".", 1)[0]  # "nodes.v1" -> "nodes"
                metrics.WATCH_RESTARTS.labels(resource=resource, reason=reason).inc()
                if self.on_restart is not None:
                    self.on_restart()
        return record.levelno >= self.level


def count_watch_restarts(level: int, on_restart: Callable[[], None] | None = None) -> None:
    """Let kopf's watch logger emit its DEBUG records so the counter sees them."""
    watch_logger = logging.getLogger(WATCH_LOGGER)
    for old in [f for f in watch_logger.filters if isinstance(f, WatchRestartCounter)]:
        watch_logger.removeFilter(old)
    watch_logger.addFilter(WatchRestartCounter(level, on_restart))
    watch_logger.setLevel(logging.DEBUG)


def relist_on_watch_restart(on_restart: Callable[[], None]) -> None:
    """Route kopf's watch restarts to ``on_restart`` (the reconciler's relist request). One of
    two signals, with the handlers' gap between listing runs: either alone can miss a relist
    (a log wording change, a replay without a gap), and a spare LIST costs little."""
    watch_logger = logging.getLogger(WATCH_LOGGER)
    counters = [f for f in watch_logger.filters if isinstance(f, WatchRestartCounter)]
    if not counters:
        count_watch_restarts(logging.getLogger().getEffectiveLevel(), on_restart)
    for counter in counters:
        counter.on_restart = on_restart


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
    count_watch_restarts(logging.getLevelName(args.log_level))


async def _resync(reconciler: Reconciler, every: float) -> None:
    """The safety net: every ``every`` seconds, or sooner when a watch expired and kopf listed
    again (``Reconciler.request_relist``), LIST everything again (anything a watch missed,
    deletions included, is merged) and look at every Workload again."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reconciler.relist_wanted.wait(), every)
        if reconciler.relist_wanted.is_set():
            await _quiet(reconciler.relist_wanted)
            logger.info("a watch listed again (it expired or reconnected): relisting")
        reconciler.relist_wanted.clear()
        try:
            await reconciler.relist()
        except Exception as exc:
            logger.warning("periodic relist failed: %s", exc)
        reconciler.queue.add_all(reconciler.state.records)


async def _quiet(flag: asyncio.Event, pause: float = 1.0, longest: float = 10.0) -> None:
    """Wait until ``flag`` stays clear for ``pause`` seconds (kopf replays a relist object by
    object: one LIST of ours after the replay, not one per object), at most ``longest``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + longest
    while flag.is_set() and loop.time() < deadline:
        flag.clear()
        await asyncio.sleep(pause)


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
    reconciler = Reconciler(
        state,
        queue,
        api,
        Scheduler(),
        is_leader=elector.holds_lease if elector else (lambda: True),
        max_in_flight=args.max_in_flight,
        identity=identity,
        namespaces=args.namespaces or (),
    )
    if elector is not None:
        elector.on_elected = lambda: queue.add_all(state.records)
        api.fence = elector.holds_lease  # status writes and Events only while the Lease holds
    else:
        metrics.IS_LEADER.set(1)

    relist_on_watch_restart(reconciler.request_relist)
    registry = kopf.OperatorRegistry()
    handlers.register(registry, reconciler, args.kubeconfig)
    settings = kopf.OperatorSettings()
    configure_kopf(settings, args)
    stop = asyncio.Event()  # set when one of our tasks dies: kopf then stops too
    background: list[asyncio.Task[None]] = []

    def stop_on_failure(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s failed: %r", task.get_name(), task.exception())
            stop.set()

    @kopf.on.startup(registry=registry)
    async def start_loop(**_: object) -> None:
        background.append(asyncio.create_task(reconciler.run(), name="scheduling loop"))
        timeout = int(settings.watching.server_timeout or WATCH_TIMEOUT)
        informers = [Informer(reconciler, NODES_PATH, apply_node_event, "nodes", timeout)]
        for path in reconciler.workload_paths():
            informers.append(Informer(reconciler, path, apply_workload_event, "workloads", timeout))
        for informer in informers:
            name = f"watch {informer.path}"
            background.append(asyncio.create_task(informer.run(), name=name))
        background.append(asyncio.create_task(reconciler.post_events(), name="event poster"))
        resync = _resync(reconciler, args.resync_seconds)
        background.append(asyncio.create_task(resync, name="resync"))
        background.append(asyncio.create_task(_gauges(reconciler), name="gauges"))
        every = getattr(args, "rebalance_every", None)
        if every:
            loop = RebalanceLoop(reconciler, every, args.rebalance_max_moves)
            background.append(asyncio.create_task(loop.run(), name="rebalancer"))
        if elector is not None:
            background.append(asyncio.create_task(elector.run(), name="leader election"))
        for task in background:
            task.add_done_callback(stop_on_failure)

    @kopf.on.cleanup(registry=registry)
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
            registry=registry,
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
