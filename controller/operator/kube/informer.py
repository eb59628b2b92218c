"""One informer type for every kind the operator follows (Nodes, Workloads, PriorityClasses):
client-go's reflector and its store, in small (``tools/cache/reflector.go``,
``ListAndWatch``; ``delta_fifo.go``, ``Replace``).

An informer owns the listing *and* the watching of one collection (``path``) and delivers
what changed to a ``Handler`` it does not import::

    LIST      in pages (``KubeApi.list_objects``), merged against the informer's own store
              (each object's key and resourceVersion): an object new or changed is delivered
              as added or modified, one the store holds that the list lacks as deleted (it
              went while nobody watched); then ``listed`` (``initial`` the first time), and
              ``synced`` is set: the start-up gate waits for every informer's
    WATCH     from the list's resourceVersion, with bookmarks: every event delivered, and
              its version remembered
      ends    the server closes a watch after ``timeout`` seconds: watch again from the last
              version seen, or LIST again first once ``resync`` seconds have passed since the
              last LIST (the safety net: whatever a watch could have missed is merged)
      410     the version left the API server's watch cache (a restart, a long outage): LIST
              again, this kind only, then watch from the new list's version
      breaks  refused, cut, or ended at once: back off and watch again from the last version

Back-off: 0.5 s doubling to 30 s between failed attempts (LISTs included), starting again
from 0.5 s after a watch that ran for more than a second (client-go's reflector resets its
back-off after a quiet spell too). Each informer retries for ever: the operator never stops
because the API server is away. Two rules make it come back sooner than client-go's
reflector (``tools/cache/reflector.go``: after an expired watch ``ListAndWatch`` returns and
``RunWithContext`` waits its back-off, grown over the outage, before listing again):

- a 410 right after a restart is not a failure: the version the watch asked for came from
  before the break, the server answered at once, so the LIST is made at once. Only a 410 on
  a watch from the version of the LIST just made, within a second, backs off: that LIST's
  own version is already too old, and listing again at once would loop;
- an attempt that got no answer (the server away) waits for its delay *or* for the API
  server to answer any request again (``KubeApi.answering``; the Lease's renews, every 2 s,
  are such requests), but at least the first step (0.5 s); woken so, the back-off starts
  over: the delay grown while nobody answered measured the outage, not the server's load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from controller.operator.kube.client import LIST_PAGE, ApiError, KubeApi, TransportError
from controller.operator.telemetry import metrics

logger = logging.getLogger("orca.informer")

#: Seconds each watch asks the API server to stay open (``timeoutSeconds``), then it starts again.
WATCH_TIMEOUT = 300
#: Back-off between failed attempts (seconds): doubling from the first to the last.
BACKOFF = (0.5, 30.0)
#: A watch that ran longer than this (seconds) was not a failure: the back-off starts over.
QUIET = 1.0

Obj = dict[str, Any]


class Handler(Protocol):
    """Where an informer delivers (client-go's ``ResourceEventHandler``, plus ``listed``).

    ``deleted`` gets the object as the watch last sent it, or, for a deletion a LIST found
    (the object went while nobody watched), its metadata only (name, namespace and the
    resourceVersion last seen): client-go's ``DeletedFinalStateUnknown``."""

    def added(self, obj: Obj) -> None: ...

    def modified(self, obj: Obj) -> None: ...

    def deleted(self, obj: Obj) -> None: ...

    def listed(self, initial: bool) -> None:
        """A LIST was merged: the first one (``initial``), or a relist (after a 410, or the
        periodic resync): whatever changed meanwhile has been delivered."""


def object_key(metadata: Mapping[str, Any]) -> str:
    """The store's key of an object: ``namespace/name``, or ``name`` when cluster-scoped."""
    namespace, name = metadata.get("namespace"), str(metadata.get("name"))
    return f"{namespace}/{name}" if namespace else name


def _stub(key: str, version: str | None) -> Obj:
    """The metadata of an object known only by its key (a deletion found by a LIST)."""
    namespace, _, name = key.rpartition("/")
    metadata = {"name": name, "resourceVersion": version}
    if namespace:
        metadata["namespace"] = namespace
    return {"metadata": metadata}


class Informer:
    """Keeps one collection (``path``) in step with the API server for ``handler``."""

    def __init__(
        self,
        api: KubeApi,
        path: str,
        resource: str,
        handler: Handler,
        *,
        timeout: int = WATCH_TIMEOUT,
        resync: float | None = None,
        page: int = LIST_PAGE,
        missing: str | None = None,
    ) -> None:
        self.api = api
        self.path = path
        self.resource = resource  # the ``resource`` label of the metrics, and the logs' word
        self.handler = handler
        self.timeout = timeout
        self.resync = resync
        self.page = page
        #: What a 404 on the LIST means, said instead of the bare error (a CRD not installed).
        self.missing = missing
        #: The version the next watch starts from (the last LIST's, then the last event's).
        self.version: str | None = None
        #: Set once the first LIST was merged: the start-up gate waits for every informer's.
        self.synced = asyncio.Event()
        self._known: dict[str, str | None] = {}  # key -> resourceVersion, what was delivered
        self._listed_at = 0.0
        self._listed_version: str | None = None  # the version the last LIST returned
        self._delay = BACKOFF[0]
        #: The back-off's clock and sleep (a test gives fake ones).
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """LIST, then watch for ever."""
        await self.list_until_done(initial=True)
        await self.watch_forever()

    async def watch_forever(self) -> None:
        """Watch from ``version`` for ever (the back-off and relists as in the module's
        docstring)."""
        while True:
            if self.resync is not None and self.clock() - self._listed_at >= self.resync:
                await self.list_until_done(initial=False)
            started, since = self.clock(), self.version
            try:
                await self.watch_once()
            except ApiError as exc:
                ran = self.clock() - started
                if ran > QUIET:
                    self._delay = BACKOFF[0]  # it ran a while: a new failure, not a sequel
                if exc.status == 410:
                    metrics.WATCH_RESTARTS.labels(resource=self.resource, reason="expired").inc()
                    logger.info("the %s watch expired (%s): relisting", self.resource, exc)
                    if ran <= QUIET and since == self._listed_version:
                        await self._back_off(f"the {self.resource} watch expired at once")
                    await self.list_until_done(initial=False)
                    continue
                await self._back_off(
                    f"the {self.resource} watch was refused ({exc})", logging.WARNING
                )
            except TransportError as exc:
                metrics.WATCH_RESTARTS.labels(resource=self.resource, reason="broken").inc()
                if self.clock() - started > QUIET:
                    self._delay = BACKOFF[0]  # it ran a while: a new failure, not a sequel
                await self._back_off(f"the {self.resource} watch broke ({exc})", unanswered=True)
            else:
                if self.clock() - started > QUIET:
                    self._delay = BACKOFF[0]
                    continue  # the server ended it after its timeout: watch on at once
                await self._back_off(f"the {self.resource} watch ended at once")

    async def _back_off(
        self, failure: str, level: int = logging.INFO, unanswered: bool = False
    ) -> None:
        """Log ``failure``, wait the back-off's delay, and double it for the next one. After
        an attempt that got no answer (``unanswered``), the wait ends early, though not before
        the first step, once the API server answers again."""
        delay, self._delay = self._delay, min(self._delay * 2, BACKOFF[1])
        logger.log(level, "%s; again in %.1fs", failure, delay)
        if not unanswered or delay <= BACKOFF[0]:
            await self.sleep(delay)
            return
        answering = self.api.answering()
        sleeping = asyncio.ensure_future(self.sleep(delay))
        waiting = asyncio.ensure_future(answering.wait())
        started = self.clock()
        try:
            await asyncio.wait((sleeping, waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            waiting.cancel()
        if answering.is_set() and not sleeping.done():
            logger.info("the API server answers again: the %s informer goes on now", self.resource)
            self._delay = BACKOFF[0]
            await self.sleep(max(0.0, BACKOFF[0] - (self.clock() - started)))

    async def watch_once(self) -> None:
        """One watch, from ``version`` until the server ends it."""
        timeout = self.timeout
        if self.resync is not None:
            timeout = max(1, min(timeout, int(self.resync)))
        async for event in self.api.watch(self.path, self.version, timeout):
            self.deliver(str(event.get("type")), event.get("object") or {})

    def deliver(self, kind: str, obj: Obj) -> None:
        """One watch event to the handler, and into the store; remember its version."""
        metadata = obj.get("metadata") or {}
        version = metadata.get("resourceVersion")
        if kind in ("ADDED", "MODIFIED"):
            self._known[object_key(metadata)] = version
            (self.handler.added if kind == "ADDED" else self.handler.modified)(obj)
        elif kind == "DELETED":
            self._known.pop(object_key(metadata), None)
            self.handler.deleted(obj)
        if version:
            self.version = version  # BOOKMARK events carry only this

    # -- listing -------------------------------------------------------------------------------

    async def list_until_done(self, initial: bool) -> None:
        """``list_once``, retried with the back-off until the API answers."""
        what = "initial listing" if initial else "listing again"
        while True:
            try:
                await self.list_once(initial)
            except (ApiError, TransportError) as exc:
                reason = str(exc).strip()
                if isinstance(exc, ApiError) and exc.not_found and self.missing:
                    reason = f"{self.missing}: {exc}"
                await self._back_off(
                    f"{what} of {self.resource} failed: {reason}",
                    logging.WARNING,
                    unanswered=isinstance(exc, TransportError),
                )
                continue
            return  # the back-off goes on until a watch runs a while (``run``)

    async def list_once(self, initial: bool = False) -> None:
        """One LIST, merged against the store (see the module's docstring), counted."""
        seen: set[str] = set()
        handler, known = self.handler, self._known

        def merge(obj: Obj) -> None:
            metadata = obj.get("metadata") or {}
            key, version = object_key(metadata), metadata.get("resourceVersion")
            seen.add(key)
            if key not in known:
                known[key] = version
                handler.added(obj)
            elif known[key] != version:
                known[key] = version
                handler.modified(obj)

        try:
            version = await self.api.list_objects(self.path, merge, self.page)
        except Exception:
            metrics.RELISTS.labels(resource=self.resource, outcome=metrics.RELIST_FAILED).inc()
            raise
        metrics.RELISTS.labels(resource=self.resource, outcome=metrics.RELIST_LISTED).inc()
        for key in [k for k in known if k not in seen]:
            handler.deleted(_stub(key, known.pop(key)))
        self.version = self._listed_version = version
        self._listed_at = self.clock()
        handler.listed(initial)
        self.synced.set()
