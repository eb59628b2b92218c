"""An API server in the test's own event loop, on loopback, for the operator's client code
(``KubeApi``, ``LeaderElector``, ``Informer``, the start-up LIST): real HTTP through the real
aiohttp client, and only the semantics that code relies on, each modelled on the Kubernetes
source named where it is:

- objects get a ``resourceVersion`` from one counter (etcd's revision); LIST returns the
  counter as the list's version;
- a merge PATCH of a ``status`` subresource replaces the status, preconditioned on the
  ``metadata.resourceVersion`` it carries (409 when it differs, 404 when the object is gone);
  a PUT of it too, everything but the status taken from the stored object (apiextensions-
  apiserver pkg/registry/customresource/strategy.go, ``statusStrategy.PrepareForUpdate``),
  and 422 without a version (a custom resource has ``AllowUnconditionalUpdate`` false);
- a POST or PUT body the API server refuses before storage is a 400: a custom resource without
  its ``kind`` or of another ``apiVersion``, a PUT naming another object (``_refused_body``);
- a write asked to answer ``as=PartialObjectMetadata`` answers with the metadata alone;
- PUT is an update preconditioned on ``metadata.resourceVersion``: 409 Conflict when it differs,
  422 when it is missing (a Lease has ``AllowUnconditionalUpdate`` false), created when the
  object does not exist and no version is given (``AllowCreateOnUpdate`` true), 409 when one
  is (k8s.io/apiserver pkg/registry/generic/registry/store.go ``Store.Update``,
  k8s.io/kubernetes pkg/registry/coordination/lease/strategy.go); POST of an existing name is
  409 AlreadyExists;
- a watch streams every change after its ``resourceVersion`` (an unset version: the objects
  that exist as ADDED, then changes); from a version older than the last compaction it sends
  one ``ERROR`` event with a 410 Expired ``Status`` in a 200 stream, as the watch cache does
  (k8s.io/apiserver pkg/storage/cacher/watch_cache.go ``getAllEventsSinceLocked``: "too old
  resource version", served by cacher.go's ``newErrWatcher``);
- with ``tokens`` set, a request whose bearer token is not one of them gets 401.

And the faults a network and an API server make: a connection closed before the answer
(before or after the request was applied), an answer cut mid-body, a 200 that is not JSON, a
refusal with any status, a request held until the test lets it go, every live watch cut or
ended at once; and a ``BOOKMARK`` to every watch that asked for them (``bookmark``).

Mind that aiohttp sends an idempotent request (GET, PUT) once more, at once, when its
connection was closed before an answer (aiohttp/client.py, ``retry_persistent_connection``):
the client sees one failure for two ``drop``s. An answer ``cut`` short is not sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import re
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from kubernetes import client as k8s_client

from controller.operator.kube import KubeApi

_PATH = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?"
    r"/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$"
)
Key = tuple[str, str, str]  # resource, namespace ("" for cluster-scoped), name


@dataclass
class Seen:
    """One request as the server received it (before any fault), and how it was answered."""

    method: str
    path: str
    query: dict[str, str]
    token: str | None
    body: dict[str, Any] | None
    outcome: str = ""  # an HTTP status, "dropped", "cut", or "" while in progress

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")


@dataclass
class Fault:
    """What to do to the requests of ``method`` (``*``: any) whose path contains ``path``
    (and that are watches, or not, when ``watch`` says), ``times`` times (None: until
    removed)."""

    method: str
    path: str
    action: str  # drop | drop-after | cut | garbage | status | hold | before
    times: int | None = 1
    status: int = 500
    reason: str = "InternalError"
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    hook: Callable[[], None] | None = None
    watch: bool | None = None
    arrived: int = 0

    def matches(self, seen: Seen) -> bool:
        return (
            self.method in ("*", seen.method)
            and self.path in seen.path
            and (self.watch is None or self.watch == seen.watch)
        )


@dataclass(eq=False)
class _Watch:
    request: web.Request
    resource: str
    namespace: str | None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    ending: str = ""  # "" | "end" | "cut"
    bookmarks: bool = False  # asked with allowWatchBookmarks=true
    bookmark_due: bool = False


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``metav1.Status`` as the API server writes it for a failure."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeApiServer:
    """``async with FakeApiServer() as server``: listening on 127.0.0.1 (``server.host``)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.ssl_context = ssl_context  # serve HTTPS with it (``host`` is then https://)
        self.revision = 100
        self.objects: dict[Key, dict[str, Any]] = {}
        self.log: list[tuple[int, Key, str, dict[str, Any]]] = []
        self.compacted = 0  # a watch from a version below this gets 410
        self.requests: list[Seen] = []
        self.faults: list[Fault] = []
        self.tokens: set[str] | None = None
        self._watches: set[_Watch] = set()
        self._runner: web.AppRunner | None = None
        self.host = ""
        self._generated = 0

    async def __aenter__(self) -> FakeApiServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A handler still running at the end (a test that failed mid-way) is cut, not awaited.
        # No access log: on its own thread (``in_thread``) the server would log each request
        # into whatever handler an earlier test left on the stderr the test under way reads.
        self._runner = web.AppRunner(
            app, handle_signals=False, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context).start()
        scheme = "https" if self.ssl_context is not None else "http"
        self.host = f"{scheme}://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.clear()
        self.end_watches()
        assert self._runner is not None
        await self._runner.cleanup()

    # -- the test's side -------------------------------------------------------------------

    def client(
        self, token: str | None = None, reload: Callable[[], k8s_client.Configuration] | None = None
    ) -> KubeApi:
        return KubeApi(self.configuration(token), max_connections=8, reload=reload)

    def configuration(self, token: str | None = None) -> k8s_client.Configuration:
        configuration = k8s_client.Configuration()
        configuration.host = self.host
        configuration.verify_ssl = False
        if token is not None:
            configuration.api_key = {"BearerToken": f"Bearer {token}"}
        return configuration

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object (as another client would), logged for the watches."""
        metadata = obj.setdefault("metadata", {})
        key = (resource, metadata.get("namespace") or "", metadata["name"])
        kind = "MODIFIED" if key in self.objects else "ADDED"
        return self._store(key, obj, kind)

    def delete(self, resource: str, name: str, namespace: str = "") -> None:
        key = (resource, namespace, name)
        obj = copy.deepcopy(self.objects.pop(key))
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.log.append((self.revision, key, "DELETED", obj))
        self._wake(key)

    def get(self, resource: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.objects.get((resource, namespace, name))

    def compact(self) -> None:
        """Forget the history so far: a watch from any version before now gets 410 (one
        from now on, e.g. a LIST's version, needs none of it)."""
        self.compacted = self.revision

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def drop(self, method: str, path: str, times: int | None = 1, after: bool = False) -> Fault:
        """Close the connection without an answer (``after``: once the request was applied)."""
        return self.add(Fault(method, path, "drop-after" if after else "drop", times))

    def refuse(
        self, method: str, path: str, code: int, reason: str, times: int | None = 1
    ) -> Fault:
        return self.add(Fault(method, path, "status", times, status=code, reason=reason))

    def hold(self, method: str, path: str, times: int | None = 1) -> Fault:
        """Keep matching requests waiting until ``fault.gate`` is set."""
        return self.add(Fault(method, path, "hold", times))

    def before(self, method: str, path: str, hook: Callable[[], None], times: int = 1) -> Fault:
        """Run ``hook`` (e.g. another client's write) before handling a matching request."""
        return self.add(Fault(method, path, "before", times, hook=hook))

    def clear(self) -> None:
        for fault in self.faults:
            fault.gate.set()
        self.faults.clear()

    def cut_watches(self) -> int:
        """Close every live watch's connection mid-stream; returns how many were cut."""
        return self._end_watches("cut")

    def bookmark(self) -> int:
        """Send each live watch that asked for bookmarks a ``BOOKMARK`` at the current
        revision, as the watch cache does now and then on a quiet watch: an object of the
        watched kind with only ``metadata.resourceVersion`` (k8s.io/apiserver
        pkg/storage/cacher, ``watchCacheEvent`` of type Bookmark). How many got one."""
        told = [w for w in self._watches if w.bookmarks and not w.ending]
        for watch in told:
            watch.bookmark_due = True
            watch.wake.set()
        return len(told)

    def end_watches(self) -> int:
        """End every live watch as the server does after its ``timeoutSeconds``."""
        return self._end_watches("end")

    @property
    def live_watches(self) -> int:
        return sum(1 for w in self._watches if not w.ending)

    def seen(
        self, method: str | None = None, path: str = "", watch: bool | None = None
    ) -> list[Seen]:
        return [
            s
            for s in self.requests
            if (method is None or s.method == method)
            and path in s.path
            and (watch is None or s.watch == watch)
        ]

    # -- the server's side -----------------------------------------------------------------

    def _store(self, key: Key, obj: dict[str, Any], kind: str) -> dict[str, Any]:
        self.revision += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.objects[key] = obj
        self.log.append((self.revision, key, kind, copy.deepcopy(obj)))
        self._wake(key)
        return copy.deepcopy(obj)

    def _wake(self, key: Key) -> None:
        for watch in self._watches:
            if watch.resource == key[0]:
                watch.wake.set()

    def _end_watches(self, how: str) -> int:
        live = [w for w in self._watches if not w.ending]
        for watch in live:
            watch.ending = how
            watch.wake.set()
        return len(live)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        header = request.headers.get("Authorization", "")
        token = header.split(" ", 1)[1] if " " in header else None
        seen = Seen(
            request.method,
            request.path,
            dict(request.query),
            token,
            orjson.loads(body) if body else None,
        )
        self.requests.append(seen)
        if self.tokens is not None and token not in self.tokens:
            return self._answer(seen, status(401, "Unauthorized", "Unauthorized"), 401)
        after = None
        for fault in list(self.faults):
            if not fault.matches(seen):
                continue
            fault.arrived += 1
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
            if fault.action == "drop":
                return self._drop(request, seen)
            if fault.action == "cut":
                return await self._cut(request, seen)
            if fault.action == "garbage":  # a proxy's page where JSON was expected
                seen.outcome = "garbage"
                return web.Response(text="<html>502 Bad Gateway</html>\n", status=200)
            if fault.action == "status":
                message = f"injected {fault.status}"
                return self._answer(seen, status(fault.status, fault.reason, message), fault.status)
            if fault.action == "hold":
                await fault.gate.wait()
            elif fault.action == "before" and fault.hook is not None:
                fault.hook()
            elif fault.action == "drop-after":
                after = fault
            break
        response = await self._serve(request, seen)
        if after is not None:
            return self._drop(request, seen)
        return response

    def _answer(self, seen: Seen, payload: dict[str, Any], code: int) -> web.Response:
        seen.outcome = str(code)
        return web.json_response(payload, status=code, dumps=lambda o: orjson.dumps(o).decode())

    def _drop(self, request: web.Request, seen: Seen) -> web.Response:
        seen.outcome = "dropped"
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    async def _cut(self, request: web.Request, seen: Seen) -> web.StreamResponse:
        """Headers and part of a body, then the connection closed: the answer cut short."""
        seen.outcome = "cut"
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b'{"kind": "Lease", "metadata": {"na')
        assert request.transport is not None
        request.transport.close()
        return response

    async def _serve(self, request: web.Request, seen: Seen) -> web.StreamResponse:
        match = _PATH.match(request.path)
        if match is None:
            return self._answer(seen, status(404, "NotFound", "no such path"), 404)
        resource, ns, name = match["resource"], match["ns"], match["name"]
        if request.method == "GET" and name is None and seen.watch:
            return await self._watch(request, seen, resource, ns)
        if request.method == "GET" and name is None:
            items = [
                copy.deepcopy(o)
                for (r, n, _), o in sorted(self.objects.items())
                if r == resource and (ns is None or n == ns)
            ]
            listed = {"items": items, "metadata": {"resourceVersion": str(self.revision)}}
            return self._answer(seen, listed, 200)
        if request.method == "POST" and name is None:
            obj = dict(seen.body or {})
            metadata = obj.setdefault("metadata", {})
            if not metadata.get("name"):
                self._generated += 1
                metadata["name"] = f"{metadata.get('generateName', 'x-')}{self._generated}"
            metadata["namespace"] = ns or ""
            key = (resource, ns or "", metadata["name"])
            if key in self.objects:
                message = f'{resource} "{metadata["name"]}" already exists'
                return self._answer(seen, status(409, "AlreadyExists", message), 409)
            return self._answer(seen, _as_asked(request, self._store(key, obj, "ADDED")), 201)
        if request.method in ("POST", "PUT") and (refused := _refused_body(match, seen)):
            return self._answer(seen, status(400, "BadRequest", refused), 400)
        key = (resource, ns or "", name or "")
        current = self.objects.get(key)
        if request.method == "GET":
            if current is None:
                message = f'{resource} "{name}" not found'
                return self._answer(seen, status(404, "NotFound", message), 404)
            return self._answer(seen, copy.deepcopy(current), 200)
        if request.method in ("PATCH", "PUT") and match["sub"] == "status":
            # The status subresource, preconditioned on the resourceVersion the body carries
            # (what the operator's status writes send): 404 when the object is gone, 409 when
            # it changed since; a PUT needs one (422). Only the status changes.
            if current is None:
                message = f'{resource} "{name}" not found'
                return self._answer(seen, status(404, "NotFound", message), 404)
            body = seen.body or {}
            version = (body.get("metadata") or {}).get("resourceVersion")
            if not version and request.method == "PUT":
                invalid = status(422, "Invalid", "metadata.resourceVersion: must be specified")
                return self._answer(seen, invalid, 422)
            if version and version != current["metadata"]["resourceVersion"]:
                conflict = status(409, "Conflict", "the object has been modified")
                return self._answer(seen, conflict, 409)
            patched = {**copy.deepcopy(current), "status": body.get("status")}
            stored = self._store(key, patched, "MODIFIED")
            return self._answer(seen, _as_asked(request, stored), 200)
        if request.method == "PUT":
            obj = dict(seen.body or {})
            version = (obj.get("metadata") or {}).get("resourceVersion")
            conflict = status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
            if current is None:
                if version:
                    return self._answer(seen, conflict, 409)
                return self._answer(seen, self._store(key, obj, "ADDED"), 201)
            if not version:
                invalid = status(422, "Invalid", "metadata.resourceVersion: must be specified")
                return self._answer(seen, invalid, 422)
            if version != current["metadata"]["resourceVersion"]:
                return self._answer(seen, conflict, 409)
            return self._answer(seen, self._store(key, obj, "MODIFIED"), 200)
        return self._answer(seen, status(405, "MethodNotAllowed", request.method), 405)

    async def _watch(
        self, request: web.Request, seen: Seen, resource: str, ns: str | None
    ) -> web.StreamResponse:
        since = request.query.get("resourceVersion")
        timeout = float(request.query.get("timeoutSeconds") or 300)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        seen.outcome = "200"

        async def send(kind: str, obj: dict[str, Any]) -> None:
            await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")

        if since and int(since) < self.compacted:
            message = f"too old resource version: {since} ({self.compacted})"
            await send("ERROR", status(410, "Expired", message))
            await response.write_eof()
            return response
        watch = _Watch(request, resource, ns)
        # As the API server reads a bool parameter (k8s.io/apimachinery pkg/runtime/conversion.go,
        # Convert_Slice_string_To_bool): true unless "0" or "false" in any case.
        asked = request.query.get("allowWatchBookmarks")
        watch.bookmarks = asked is not None and asked != "0" and asked.lower() != "false"
        self._watches.add(watch)
        try:
            if since:
                position = int(since)
            else:
                for (r, n, _), obj in sorted(self.objects.items()):
                    if r == resource and (ns is None or n == ns):
                        await send("ADDED", copy.deepcopy(obj))
                position = self.revision
            deadline = asyncio.get_running_loop().time() + timeout
            while not watch.ending:
                for revision, key, kind, obj in self.log:
                    if revision > position and key[0] == resource and (ns is None or key[1] == ns):
                        await send(kind, obj)
                position = self.revision
                if watch.bookmark_due:
                    watch.bookmark_due = False
                    mark = {"metadata": {"resourceVersion": str(position)}}
                    await send("BOOKMARK", mark)
                watch.wake.clear()
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(watch.wake.wait(), left)
                except TimeoutError:
                    break
        finally:
            self._watches.discard(watch)
        if watch.ending == "cut":
            seen.outcome = "cut"
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response


#: API groups whose objects are custom resources here: decoded as unstructured objects, which
#: name their kind and apiVersion themselves (a built-in object's are defaulted from the URL).
CUSTOM_GROUPS = frozenset({"orca.cloudinit.dev"})
#: The kind of each built-in resource orca writes: a body may leave its kind out (the decoder
#: takes the URL's), but one naming another kind is refused.
BUILTIN_KINDS = {
    "leases": "Lease",
    "events": "Event",
    "secrets": "Secret",
    "tokenreviews": "TokenReview",
    "subjectaccessreviews": "SubjectAccessReview",
}


def _refused_body(match: re.Match[str], seen: Seen) -> str | None:
    """Why the API server refuses a POST or PUT body before it reaches storage (400), or None:
    a custom resource's body without a ``kind`` (k8s.io/apimachinery
    pkg/runtime/serializer/json/json.go, ``Decode`` into an unstructured object:
    ``NewMissingKindErr``) or of another ``apiVersion`` than the URL's (k8s.io/apiserver
    pkg/endpoints/handlers/update.go and create.go, ``AcceptsGroupVersion``); a built-in
    object's naming another apiVersion or kind (left out, they are the URL's: json.go's
    ``gvkWithDefaults``); a PUT whose
    ``metadata.name`` is not the URL's, or whose namespace, when it names one, is not
    (handlers/rest.go, ``checkName``)."""
    body = seen.body or {}
    metadata = body.get("metadata") or {}
    parts = seen.path.split("/")
    group_version = parts[2] if parts[1] == "api" else f"{parts[2]}/{parts[3]}"
    if parts[1] == "apis" and parts[2] in CUSTOM_GROUPS:
        if not body.get("kind"):
            return "Object 'Kind' is missing in the body"
        if body.get("apiVersion") != group_version:
            return (
                f"the API version in the data ({body.get('apiVersion') or ''}) does not match "
                f"the expected API version ({group_version})"
            )
    else:  # a built-in object: kind and apiVersion defaulted from the URL when left out
        if body.get("apiVersion") and body["apiVersion"] != group_version:
            return (
                f"the API version in the data ({body['apiVersion']}) does not match the "
                f"expected API version ({group_version})"
            )
        kind = BUILTIN_KINDS.get(match["resource"])
        if body.get("kind") and kind is not None and body["kind"] != kind:
            return f'no kind "{body["kind"]}" is registered for version "{group_version}"'
    if seen.method == "PUT":
        name = metadata.get("name") or ""
        if name != match["name"]:
            return (
                f"the name of the object ({name}) does not match the name on the URL "
                f"({match['name']})"
            )
        namespace = metadata.get("namespace")
        if namespace and match["ns"] and namespace != match["ns"]:
            return (
                f"the namespace of the object ({namespace}) does not match the namespace on "
                f"the request ({match['ns']})"
            )
    return None


def _as_asked(request: web.Request, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the request's ``Accept`` asks: the metadata alone for
    ``as=PartialObjectMetadata`` (k8s.io/apiserver pkg/endpoints/handlers/response.go)."""
    if "as=PartialObjectMetadata" not in request.headers.get("Accept", ""):
        return obj
    metadata = copy.deepcopy(obj.get("metadata") or {})
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}


#: The tasks of the running scenario that never end by themselves (an informer's loop:
#: ``never_ends``), set by ``run``.
_LIVING: contextvars.ContextVar[list[asyncio.Task[Any]]] = contextvars.ContextVar("living")


def never_ends(task: asyncio.Task[Any]) -> asyncio.Task[Any]:
    """Mark ``task`` as one that runs until the scenario cancels it: ``until`` fails at once
    with its error if it ends meanwhile. An informer that crashed would otherwise leave the
    test waiting out its timeout for an event that can no longer come (and each mutant that
    makes it crash waiting out mutmut's, two minutes, instead of failing in milliseconds)."""
    living = _LIVING.get(None)
    if living is not None:
        living.append(task)
    return task


def let_end(task: asyncio.Task[Any]) -> None:
    """``task`` may end now (the scenario is cancelling it)."""
    living = _LIVING.get(None)
    if living is not None and task in living:
        living.remove(task)


def _check_living(what: str) -> None:
    for task in _LIVING.get(None) or ():
        if not task.done():
            continue
        error = None if task.cancelled() else task.exception()
        raise AssertionError(
            f"{task.get_name()} ended by itself while waiting for {what}: {error!r}"
        ) from error


async def until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Wait (polling the loop) until ``predicate`` holds; fail with ``what`` after ``timeout``
    seconds (generous: the machine is loaded; a pass takes milliseconds), or at once if a task
    marked ``never_ends`` ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        _check_living(what)
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {timeout:.0f}s: {what}")
        await asyncio.sleep(0.005)


def run(scenario: Callable[[FakeApiServer], Awaitable[None]]) -> None:
    """Run ``scenario`` against a fresh server in an event loop of its own; a scenario that
    hangs fails after two minutes instead of holding the session."""

    async def main() -> None:
        _LIVING.set([])
        async with FakeApiServer() as server:
            await asyncio.wait_for(scenario(server), 120)

    asyncio.run(main())


@contextlib.contextmanager
def in_thread(ssl_context: ssl.SSLContext | None = None) -> Iterator[FakeApiServer]:
    """A ``FakeApiServer`` whose event loop runs in a thread of its own, for code that runs
    its own loop and so cannot share the test's (``asyncio.run``: ``read_cluster``, the
    ``orca`` commands run in-process). Give it objects (``put``) and faults (``refuse``,
    ``drop``) before that code runs, and read ``requests`` after it returned: the server's
    loop is then idle, waiting on its socket, so the two threads never touch its lists at
    once. No watches: their wake-ups belong to the server's loop."""
    started = threading.Event()
    box: list[FakeApiServer | BaseException] = []
    stop: list[Callable[[], object]] = []

    async def serve() -> None:
        ending = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop.append(lambda: loop.call_soon_threadsafe(ending.set))
        try:
            async with FakeApiServer(ssl_context) as server:
                box.append(server)
                started.set()
                await ending.wait()
        except BaseException as exc:  # failed to start: the test's thread raises it
            box.append(exc)
            started.set()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), name="fakeapi", daemon=True)
    thread.start()
    if not started.wait(30):
        raise AssertionError("the fake API server did not start within 30 s")
    served = box[0]
    if isinstance(served, BaseException):
        raise served
    try:
        yield served
    finally:
        stop[0]()
        thread.join(30)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
