"""The operator process behind ``orca run`` (``controller.cli.run``): kopf as the runtime, and
the operator's named parts wired together.

kopf runs the process: logging, login, start-up and clean-up, the liveness probe. It serves no
resource (``configure_kopf``). ``Operator`` builds the parts, each owning one job::

    informers    one per collection (Nodes, PriorityClasses, Workloads per namespace path):
                 LIST and watch, into the handlers (``handlers``), which feed the state and
                 queue whoever may need a decision; the start-up gate opens once each listed
    loop         queue -> schedule -> write (``loop``), through the status-write transaction
                 (``transaction``), with preemption (``preemption``)
    events       the Event recorder and its posters (``events``)
    gauges       the snapshot gauges, refreshed every few seconds (``telemetry.gauges``)
    rebalancer   with ``--rebalance-interval`` (``rebalancer``)
    resilience   each failure domain's loss, every ``--resilience-interval`` (``resilience``)
    elector      with ``--leader-elect`` (``kube.leader``): decisions and writes only while
                 the Lease holds

Around them, at the process's edge: the HTTPS endpoint on ``--metrics-port`` (``serving``:
``/metrics`` behind TokenReview and SubjectAccessReview, the probes, ``/readyz`` from the
informers), the admission webhook on ``--webhook-port`` (``webhook``: the same check as
``Invalid``, and its registration), each listening on its ``--*-bind-address`` with deadlines
and a bound on connections (``listener``), and their certificate (``tls``), watched for
rotation.

A stop (``Operator.stop``) decides nothing new, lets the writes in flight land, posts the
queued Events for a bounded time, then hands the Lease back and ends the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.api.models import workload_path
from controller.operator import tls
from controller.operator.events import COMPONENT, EventRecorder
from controller.operator.handlers import (
    NodeEvents,
    PriorityClassEvents,
    StartupGate,
    WorkloadEvents,
)
from controller.operator.kopf_runtime import kopf
from controller.operator.kube import (
    ApiError,
    KubeApi,
    TransportError,
    authorization,
    load_configuration,
)
from controller.operator.kube.informer import Informer
from controller.operator.kube.leader import LeaderElector, default_identity
from controller.operator.lifecycle import NodeLifecycle, resolve
from controller.operator.listener import Listener
from controller.operator.loop import WORKERS, SchedulingLoop
from controller.operator.preemption import Preemption
from controller.operator.priorities import PriorityIndex
from controller.operator.rebalancer import RebalanceLoop
from controller.operator.resilience import DEFAULT_RESILIENCE_KEY, ResilienceLoop
from controller.operator.serving import DelegatedAuth, Readiness, endpoint_app
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.telemetry.gauges import GaugeExporter
from controller.operator.transaction import StatusWrites
from controller.operator.webhook import (
    Admission,
    AdmissionServer,
    Registrar,
    ServiceRef,
    webhook_url,
)
from controller.operator.workqueue import WorkQueue
from controller.scheduler.celcache import cache_path, install_cel_parser
from controller.scheduler.nodes import NODES_PATH
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.priority import LIST_PATH as PRIORITY_CLASSES_PATH
from controller.scheduler.priority import PriorityClasses
from controller.scheduler.rebalance import DEFAULT_MAX_MOVES
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import rfc3339_now
from controller.version import version

logger = logging.getLogger("orca")

#: What a 404 on the Workloads' LIST means, in so many words.
NO_CRD = "the Workload CRD is not installed (kubectl apply -k crds/)"


def workload_paths(namespaces: Iterable[str]) -> list[str]:
    """The Workload collections this operator serves: all namespaces, or each of its own."""
    return [workload_path(ns) for ns in namespaces] or [workload_path()]


@dataclass
class Operator:
    """The operator's named parts, wired (``wire``); ``operate`` runs them under kopf, and the
    tests drive them one by one."""

    api: KubeApi
    state: ClusterState
    queue: WorkQueue
    priorities: PriorityIndex
    gate: StartupGate
    events: EventRecorder
    writes: StatusWrites
    preemption: Preemption
    loop: SchedulingLoop
    gauges: GaugeExporter
    elector: LeaderElector | None = None
    rebalancer: RebalanceLoop | None = None
    resilience: ResilienceLoop | None = None
    informers: list[Informer] = field(default_factory=list)
    #: How NotReady Nodes are read (``lifecycle``): resolved before the informers start.
    lifecycle: NodeLifecycle = NodeLifecycle.READY
    _deciding: asyncio.Task[None] | None = None  # the scheduling loop, once started
    _moving: asyncio.Task[None] | None = None  # the rebalancer, once started
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)  # every part's

    @classmethod
    def wire(
        cls,
        api: KubeApi,
        state: ClusterState | None = None,
        queue: WorkQueue | None = None,
        scheduler: Scheduler | None = None,
        *,
        namespaces: Iterable[str] = (),
        resync: float | None = None,
        workers: int = WORKERS,
        elector: LeaderElector | None = None,
        rebalance_every: float | None = None,
        rebalance_max_moves: int | None = None,
        now: Callable[[], str] = rfc3339_now,
        identity: str = COMPONENT,
        tolerations: DefaultTolerations | None = None,
        lifecycle: NodeLifecycle = NodeLifecycle.READY,
        per_node_metrics: bool = True,
        resilience_key: str = DEFAULT_RESILIENCE_KEY,
        resilience_every: float | None = None,
    ) -> Operator:
        state = state if state is not None else ClusterState()
        queue = queue if queue is not None else WorkQueue()
        scheduler = scheduler if scheduler is not None else Scheduler(tolerations=tolerations)
        priorities = PriorityIndex()
        # The queue hands out higher priorities first: the priorities resolved here.
        queue.priority_of = lambda key: priorities.resolve(state, key).value
        is_leader = elector.holds_lease if elector is not None else (lambda: True)
        gate = StartupGate(state, queue)
        events = EventRecorder(api, now=now, identity=identity)
        writes = StatusWrites(state, queue, api, events)
        # Events hold back while status writes are in flight, not while the queue merely has
        # keys: kwok's Nodes flapping under a 5,000-Node backlog kept re-queuing Workloads
        # already placed (decided again, unchanged, nothing written), and the posters paced at
        # 20/s for as long as that lasted, 10,000 Events needing 500 s after the last placement.
        events.busy = lambda: writes.in_flight > 0
        preemption = Preemption(state, queue, scheduler, priorities, writes, now)
        loop = SchedulingLoop(
            state,
            queue,
            scheduler,
            priorities,
            writes,
            preemption,
            gate.ready,
            is_leader,
            workers,
            now,
        )
        rebalancer = None
        if rebalance_every:
            moves = rebalance_max_moves if rebalance_max_moves is not None else DEFAULT_MAX_MOVES
            rebalancer = RebalanceLoop(
                state, queue, writes, gate.ready, rebalance_every, moves, is_leader, tolerations
            )
        operator = cls(
            api,
            state,
            queue,
            priorities,
            gate,
            events,
            writes,
            preemption,
            loop,
            GaugeExporter(per_node=per_node_metrics),
            elector,
            rebalancer,
        )
        if resilience_every:
            operator.resilience = ResilienceLoop(
                state,
                queue,
                priorities,
                gate.ready,
                resilience_key,
                resilience_every,
                is_leader,
                tolerations,
                now,
            )
        operator.informers = operator.informers_for(namespaces, resync)
        operator.lifecycle = lifecycle
        if elector is not None:
            elector.on_elected = lambda: queue.add_all(state.undecided_first())
            api.fence = elector.holds_lease  # status writes and Events only while the Lease holds
        return operator

    def informers_for(self, namespaces: Iterable[str], resync: float | None) -> list[Informer]:
        """One informer per collection: Nodes, PriorityClasses, and the Workloads of every
        namespace served (one collection for all of them, or one per ``-n``)."""
        api, state, queue, gate = self.api, self.state, self.queue, self.gate
        nodes = NodeEvents(state, queue, gate)
        classes = PriorityClassEvents(state, queue, gate, self.priorities)
        workloads = WorkloadEvents(state, queue, gate)
        informers = [
            Informer(api, NODES_PATH, "nodes", nodes, resync=resync),
            Informer(api, PRIORITY_CLASSES_PATH, "priorityclasses", classes, resync=resync),
        ]
        for path in workload_paths(namespaces):
            informers.append(
                Informer(api, path, "workloads", workloads, resync=resync, missing=NO_CRD)
            )
        return informers

    # -- running -------------------------------------------------------------------------------

    def start(self, on_failure: Callable[[asyncio.Task[None]], None]) -> None:
        """Start every part as a task of its own; ``on_failure`` hears of one that died."""

        def task(part: Awaitable[None], name: str) -> asyncio.Task[None]:
            return self.background(part, name, on_failure)

        self._deciding = task(self.loop.run(), "scheduling loop")
        if self.rebalancer is not None:
            self._moving = task(self.rebalancer.run(), "rebalancer")
        if self.resilience is not None:
            task(self.resilience.run(), "failure domains")
        task(self.gate.open(self.informers), "start-up gate")
        task(self.events.post(), "event posters")
        task(self.gauges.refresh(self.state, self.queue), "gauges")
        task(self._start_informers(task), "node lifecycle")
        if self.elector is not None:
            task(self.elector.run(), "leader election")

    async def _start_informers(self, task: Callable[[Awaitable[None], str], object]) -> None:
        """Start the informers once it is known how NotReady Nodes are read: the first Node
        read must already be read that way."""
        self.state.imply_lifecycle = await resolve(self.api, self.lifecycle)
        for informer in self.informers:
            task(informer.run(), f"informer {informer.path}")

    async def stop(self) -> None:
        """Decide nothing new (a move cut short lands or not: it is one status write, and the
        ledger goes with this process), let the writes in flight land, post what is queued
        for a bounded time, then hand the Lease back (the elector's ``finally``) and end the
        rest."""
        if self._deciding is None:  # start-up itself failed
            return
        self.loop.stop()
        if self._moving is not None:
            self._moving.cancel()
            await asyncio.gather(self._moving, return_exceptions=True)
        if not self.gate.ready.is_set():
            self._deciding.cancel()  # still waiting for the initial listing: nothing in flight
        logger.info("stopping: letting the status writes in flight land")
        await asyncio.gather(self._deciding, return_exceptions=True)
        await self.events.flush()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def background(
        self,
        part: Awaitable[None],
        name: str,
        on_failure: Callable[[asyncio.Task[None]], None],
    ) -> asyncio.Task[None]:
        """Run a part as a task of its own (also the certificate watch, the webhook
        registration): cancelled at ``stop``, ``on_failure`` hearing of its death."""
        started = asyncio.ensure_future(part)
        started.set_name(name)
        started.add_done_callback(on_failure)
        self._tasks.append(started)
        return started

    def failed(self) -> list[asyncio.Task[None]]:
        """The parts that died of an exception."""
        return [t for t in self._tasks if t.done() and not t.cancelled() and t.exception()]


# -- kopf --------------------------------------------------------------------------------------


def configure_kopf(settings: kopf.OperatorSettings) -> None:
    """kopf runs the process (login, start-up and clean-up, the liveness probe) and serves no
    resource: the informers list and watch every kind the operator reads, so kopf has no
    handler to feed and nothing to scan for (no CRD or namespace watch of its own; with
    ``-n`` the namespaces are taken as given), and none of its per-object settings apply
    (progress and diff-base storage, finalizers, batching, worker queues, watches)."""
    settings.scanning.disabled = True
    settings.posting.enabled = False  # no handler of kopf's can fail on an object
    settings.networking.request_timeout = 30
    # Its few requests (discovery at start-up) ride through an API server outage of up to
    # ~5 minutes: kopf's default retries give up after ~54 s, which would stop the operator.
    settings.networking.error_backoffs = [1, 1, 2, 3, 5, 8, 13, 21, 30, 30, 30, 30, 30, 30, 30, 30]


def kopf_registry(
    login: Callable[..., Awaitable[kopf.ConnectionInfo]],
    startup: Callable[..., Awaitable[None]],
    cleanup: Callable[..., Awaitable[None]],
    admission: Admission | None = None,
) -> kopf.OperatorRegistry:
    """kopf's handlers: login, start-up and clean-up, and the validating webhook's when
    ``admission`` is given; no resource handler at all."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(login)
    kopf.on.startup(registry=registry)(startup)
    kopf.on.cleanup(registry=registry)(cleanup)
    if admission is not None:
        admission.register(registry)
    return registry


class ConfigError(Exception):
    """A flag's value the operator cannot start with (one line; ``orca run`` exits 2)."""


def serving_cert(args: argparse.Namespace, api: KubeApi) -> tls.ServingCert:
    """The HTTPS endpoints' certificate: ``--tls-cert-dir``, else the ``--tls-secret`` the
    operator keeps, else generated now for the names it will be reached by."""
    if args.tls_cert_dir:
        return tls.from_dir(Path(args.tls_cert_dir))
    hosts = ["localhost", "127.0.0.1", *args.tls_san]
    if args.webhook_host:
        hosts.insert(0, args.webhook_host)
    if args.webhook_service:
        ns, name = args.webhook_service
        hosts[:0] = [f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"]
    hosts = list(dict.fromkeys(hosts))
    if args.tls_secret:
        ns, name = args.tls_secret
        return tls.from_secret(api, ns, name, hosts)
    return tls.generated(hosts)


async def start_endpoint(
    args: argparse.Namespace, api: KubeApi, cert: tls.ServingCert | None, operator: Operator
) -> Listener | None:
    """``/metrics`` and the probes on ``--metrics-bind-address``:``--metrics-port``: HTTPS
    behind TokenReview and SubjectAccessReview, or plain and open with ``--metrics-insecure``;
    every connection within the listener's deadlines (``listener``)."""
    if not args.metrics_port:
        return None
    auth = None if args.metrics_insecure else DelegatedAuth(api)
    app = endpoint_app(auth, Readiness(operator.informers))
    context = None if cert is None else cert.context
    address = args.metrics_bind_address
    listener = Listener(app, address, args.metrics_port, context, name="metrics")
    try:
        await listener.start()
    except OSError as exc:
        raise ConfigError(
            f"metrics port {args.metrics_port} on {address}: {exc.strerror}"
        ) from None
    scheme = "http" if context is None else "https"
    logger.info(
        "serving /metrics and /healthz /livez /readyz at %s://%s:%d%s",
        scheme,
        f"[{address}]" if ":" in address else address,
        args.metrics_port,
        "" if auth is None else " (TokenReview + SubjectAccessReview)",
    )
    if args.metrics_insecure:
        logger.warning(
            "--metrics-insecure: /metrics is plain HTTP and open to anyone who can "
            "reach %s port %d; for local use only",
            address,
            args.metrics_port,
        )
    return listener


def check_port_free(address: str, port: int, what: str) -> None:
    """Fail now, in one line, when ``port`` is taken or ``address`` is not this machine's: the
    webhook's listener binds later, inside kopf, where a failure is a traceback."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as exc:
            raise ConfigError(f"{what} {port} on {address}: {exc.strerror}") from None


def admission_for(args: argparse.Namespace, operator: Operator) -> Admission | None:
    """The webhook's check, reading the operator's PriorityClasses once they are listed."""
    if not args.webhook_port:
        return None
    classes_informer = next(i for i in operator.informers if i.path == PRIORITY_CLASSES_PATH)

    def classes() -> PriorityClasses | None:
        return operator.priorities.classes if classes_informer.synced.is_set() else None

    return Admission(classes, args.namespaces or ())


def registrar_for(
    args: argparse.Namespace, api: KubeApi, cert: tls.ServingCert
) -> Registrar | None:
    """Who keeps the API server calling the webhook: by URL (``--webhook-host``), or the
    CA bundle of the shipped configuration (``--webhook-service``), or nobody."""
    if not args.webhook_port:
        return None
    if args.webhook_host:
        url = webhook_url(args.webhook_host, args.webhook_port)
        return Registrar(
            api, cert, args.webhook_configuration, url=url, namespaces=args.namespaces or ()
        )
    if args.webhook_service:
        ns, name = args.webhook_service
        return Registrar(api, cert, args.webhook_configuration, service=ServiceRef(ns, name))
    return None


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


def configure_logging(args: argparse.Namespace) -> None:
    log_format = kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(
        debug=args.log_level == "DEBUG",
        verbose=args.log_level == "DEBUG",
        quiet=args.log_level in ("WARNING", "ERROR"),
        log_format=log_format,
    )
    logging.getLogger().setLevel(args.log_level)
    for noisy in ("celpy", "lark"):  # a full dump of every CEL activation at DEBUG
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def operate(args: argparse.Namespace) -> None:
    """Run kopf and the operator's parts until SIGINT/SIGTERM."""
    metrics.initialize(version())
    # CEL's parser now, from the image's cache (else the user's, else built: 0.3 s), rather
    # than inside the first decision that compiles a constraint.
    install_cel_parser(cache_path())
    api = KubeApi(
        load_configuration(args.kubeconfig, args.context),
        max_connections=max(8, args.max_in_flight),
        reload=lambda: load_configuration(args.kubeconfig, args.context),
    )
    identity = default_identity()
    elector = None
    if args.leader_elect:
        elector = LeaderElector(api, args.lease_namespace, args.lease_name, identity)
    else:
        metrics.IS_LEADER.set(1)
    operator = Operator.wire(
        api,
        namespaces=args.namespaces or (),
        resync=args.resync_seconds,
        workers=args.max_in_flight,
        elector=elector,
        rebalance_every=args.rebalance_every,
        rebalance_max_moves=args.rebalance_max_moves,
        identity=identity,
        tolerations=DefaultTolerations(
            not_ready=args.default_not_ready_toleration_seconds,
            unreachable=args.default_unreachable_toleration_seconds,
        ),
        lifecycle=NodeLifecycle(args.node_lifecycle),
        per_node_metrics=args.node_metrics,
        resilience_key=args.resilience_key,
        resilience_every=args.resilience_every,
    )
    stop = asyncio.Event()  # set when one of the parts dies: kopf then stops too
    secure = not args.metrics_insecure and bool(args.metrics_port)
    cert = serving_cert(args, api) if secure or args.webhook_port else None
    if cert is not None:
        try:
            await cert.load()
        except (tls.CertificateError, ApiError, TransportError) as exc:
            await api.close()
            raise ConfigError(f"serving certificate: {exc}") from None
    registrar = registrar_for(args, api, cert) if cert is not None else None
    try:
        endpoint = await start_endpoint(args, api, cert if secure else None, operator)
    except ConfigError:
        await api.close()
        raise

    def on_failure(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s failed: %r", task.get_name(), task.exception())
            stop.set()

    async def login(**_: object) -> kopf.ConnectionInfo:
        """kopf's own requests use the same credentials as ours (kubeconfig or in-cluster),
        re-read on every login so rotated tokens and certificates are picked up."""
        return connection_info(load_configuration(args.kubeconfig, args.context))

    async def startup(**_: object) -> None:
        operator.start(on_failure)
        if cert is not None:
            operator.background(cert.watch(), "serving certificate", on_failure)
        if registrar is not None:
            operator.background(registrar.run(), "webhook registration", on_failure)

    async def cleanup(**_: object) -> None:
        await operator.stop()
        if endpoint is not None:
            await endpoint.stop()
        await api.close()
        stop.set()  # kopf also waits on this flag; set it so kopf exits at once

    settings = kopf.OperatorSettings()
    configure_kopf(settings)
    admission = admission_for(args, operator)
    if admission is not None:
        try:
            check_port_free(args.webhook_bind_address, args.webhook_port, "webhook port")
        except ConfigError:
            if endpoint is not None:
                await endpoint.stop()
            await api.close()
            raise
    if admission is not None and cert is not None:
        settings.admission.server = AdmissionServer(
            cert, addr=args.webhook_bind_address, port=args.webhook_port
        )
    namespaces = args.namespaces or []
    try:
        await kopf.operator(
            registry=kopf_registry(login, startup, cleanup, admission),
            settings=settings,
            clusterwide=not namespaces,
            namespaces=namespaces,
            standalone=True,  # one replica decides through the Lease, not kopf peering
            liveness_endpoint=None if args.liveness == "none" else args.liveness,
            stop_flag=stop,
        )
    finally:
        await api.close()
    failed = operator.failed()
    if failed:
        raise RuntimeError(f"{failed[0].get_name()} failed: {failed[0].exception()!r}")
