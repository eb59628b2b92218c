"""The API calls the operator makes itself: requests over one pooled aiohttp session, each
watch over a session of its own.

Every request the operator makes goes through this small client: the informers' LISTs and
watches (Nodes, Workloads, PriorityClasses), status writes, Events and the leader Lease; and
the commands that read a live cluster (``orca plan --from-cluster``, ``orca explain``) use it
too. JSON is read and
written by orjson: decoding watch events and PATCH answers was the largest single cost of the
operator's CPU in a backlog (7%, py-spy) with the standard library's decoder.

Credentials come from ``credentials``, in the ecosystem's order: a Pod's service account, or a
kubeconfig through the kubernetes client's own loader (exec plugins, certificates); the bearer
token is asked for per request, so a rotated service-account token keeps working.

Errors: a request (or watch) either gets an answer or raises ``TransportError``. An answer
that is not 2xx is an ``ApiError`` (a watch's ``ERROR`` event too); a write the fence refused
is ``Fenced``; everything that means "no answer came" (refused, reset or closed connections,
TLS, timeouts, a watch cut mid-stream) is one ``TransportError``, so callers catch those three
and nothing of aiohttp, ``OSError`` or ``TimeoutError``: the operator's background tasks
(leader election, the watches, the writers) each retry on it, and a network hiccup never
stops the process.

Write fencing: a request made with ``fenced=True`` (status writes, Events) is checked against
``KubeApi.fence`` when it starts and again at the last moment before its bytes leave the
process: aiohttp writes a request's headers and body from a task of its own, one loop
iteration or more after the request started, and a replica frozen in between (SIGSTOP, a long
GC pause) wakes up with that write queued. The second check finds the Lease expired, drops
the connection with nothing sent, and the caller gets ``Fenced``.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextvars
import logging
import platform
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp.abc import AbstractStreamWriter
from aiohttp.connector import Connection
from yarl import URL

from controller.api.models import API_VERSION, KIND, workload_path
from controller.operator.kube.credentials import ClientConfiguration, CredentialsError
from controller.operator.telemetry import metrics
from controller.version import version

MERGE_PATCH = "application/merge-patch+json"
#: The answer a write asks for when it reads nothing of it but the metadata (the
#: resourceVersion written): the API server encodes the object's metadata alone, not the
#: whole object, and the client decodes that much (``PartialObjectMetadata``, which every
#: resource, custom ones included, can be answered as).
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
#: The query of orca's own writes: the API server skips the strict second decode that only
#: finds unknown or duplicate fields to warn about; orca's bodies come from the models the
#: CRD is generated from, and it reads no warnings.
NO_FIELD_VALIDATION = "?fieldValidation=Ignore"
#: Go's names for the machines Python names otherwise (client-go's ``(GOOS/GOARCH)``).
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}
#: Who orca is to the API server, as client-go's binaries say it (``kube-scheduler/v1.36.3
#: (linux/amd64) ...``): the field manager of every write it makes (the API server takes the
#: agent up to its first "/"), so ``kubectl get --show-managed-fields`` names orca as the
#: owner of a Workload's status; and the agent audit logs and the API server's logs and traces
#: show. aiohttp's own (``Python/3.11 aiohttp/...``) would make every orca write "Python"'s.
USER_AGENT = (
    f"orca-controller/{version()} ({platform.system().lower()}/"
    f"{_GOARCH.get(platform.machine(), platform.machine().lower())})"
)
#: Objects per page of a LIST (``KubeApi.list_objects``).
LIST_PAGE = 500
#: Objects of a listed page handed on between two turns of the event loop (``list_objects``).
LIST_TURN = 100
#: Seconds a session replaced after a 401 lives on for the requests it carries (their
#: timeout is 30 s).
RETIRED_SESSION_GRACE = 35.0
#: Bytes read off a TLS connection's socket at a time. asyncio gives each connection a buffer of
#: ``SSLProtocol.max_size`` (256 KiB), allocated and zeroed whole, so resident: 9 MB over the
#: operator's ~35 connections (the pool's 32 and a watch each), of a ~150 MB process in a
#: 5,000-Node backlog (python/cpython#109534). libuv (uvloop) reads 64 KiB at a time; a 2 MB
#: LIST page then takes 32 reads instead of 8. Set for the process when this module loads.
TLS_READ_BUFFER = 64 * 1024

asyncio.sslproto.SSLProtocol.max_size = min(asyncio.sslproto.SSLProtocol.max_size, TLS_READ_BUFFER)

logger = logging.getLogger("orca.kube")


def api_resource(path: str) -> str:
    """The resource (and subresource) an API path addresses, for a bounded metric label:
    ``/apis/G/V/namespaces/NS/workloads/NAME/status`` -> ``workloads/status``,
    ``/api/v1/nodes`` -> ``nodes``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return "other"
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]  # /namespaces/NS/<resource>...; /namespaces/NS alone is a namespace
    if not rest:
        return "other"
    return f"{rest[0]}/{rest[2]}" if len(rest) >= 3 else rest[0]


class ApiError(Exception):
    """A non-2xx answer: the HTTP status and the API server's message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


class TransportError(Exception):
    """The request got no answer: the connection was refused, reset or closed by the server
    (``ServerDisconnectedError``, a body or a watch cut short), TLS failed, it timed out, the
    answer was not JSON (a proxy's page with a 200), or the credentials to send could not be
    read. A write may or may not have been applied (its answer lost): callers retry, as after
    a 5xx. ``cause`` is the original exception (also ``__cause__``)."""

    def __init__(self, what: str, cause: BaseException) -> None:
        detail = str(cause).strip()
        name = type(cause).__name__
        super().__init__(f"{what}: {name}: {detail}" if detail else f"{what}: {name}")
        self.what = what
        self.cause = cause

    @property
    def kind(self) -> str:
        """The cause's class name: a bounded metric label (``ServerDisconnectedError``...)."""
        return type(self.cause).__name__


#: What aiohttp and the socket layer raise when a request gets no answer, each mapped to
#: ``TransportError`` (with ``orjson.JSONDecodeError`` for a 2xx body or a watch line that
#: is not JSON, and the credential loaders' errors). ``aiohttp.ClientError`` covers
#: connection errors (refused, reset, ``ServerDisconnectedError``, TLS: ``ClientSSLError``,
#: ``ClientConnectorCertificateError``), a body cut short (``ClientPayloadError``), an answer
#: that is not HTTP (``ClientResponseError``) and aiohttp's timeouts (``ServerTimeoutError``);
#: ``OSError`` the socket's own (``ConnectionResetError``, ``ssl.SSLError``) and
#: ``TimeoutError`` (``asyncio.TimeoutError`` is the same class since Python 3.11: the
#: client's total timeout).
NO_ANSWER: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, TimeoutError)

# A watch's connection: connecting (TCP and the TLS handshake) may take this long, and a watch
# silent this long past the ``timeoutSeconds`` it asked for is cut (the server should have
# ended it by then: a half-open connection, or a proxy that holds it). Seconds; module-level so
# a test can shorten them rather than wait a minute.
WATCH_CONNECT_LIMIT = 30.0
WATCH_SILENCE_GRACE = 60.0


class Fenced(Exception):
    """A write refused locally: this replica no longer holds a valid leader Lease."""

    def __init__(self) -> None:
        super().__init__("not sent: this replica does not hold a valid leader Lease")


@dataclass
class _Sending:
    """The request being made in this task: its fence (None: not fenced), and how many times
    its bytes went out. aiohttp sends an idempotent request (a PUT) once more, at once, when
    its connection closed before the answer (``retry_persistent_connection``, aiohttp's
    client.py), and the first one may have been applied."""

    fence: Callable[[], bool] | None
    sent: int = 0


#: The request being made in this task. A context variable because aiohttp's body-writing
#: task inherits the context of the request that created it.
_SENDING: contextvars.ContextVar[_Sending | None] = contextvars.ContextVar(
    "orca_sending", default=None
)


class _FencedRequest(aiohttp.ClientRequest):
    """Asks the fence right before the request's bytes are written (headers included: aiohttp
    holds them back to send with the body); refused, the connection is closed unsent. Counts
    the times they are written."""

    async def write_bytes(
        self, writer: AbstractStreamWriter, conn: Connection, content_length: int | None = None
    ) -> None:
        sending = _SENDING.get()
        if sending is not None:
            if sending.fence is not None and not sending.fence():
                conn.close()
                return
            sending.sent += 1
        await super().write_bytes(writer, conn, content_length)


def api_error(status: int, reason: str | None, text: bytes) -> ApiError:
    """An ``ApiError`` from an answer's status and body (a ``Status`` object when the API
    server wrote it; anything else, e.g. a proxy's page, is quoted in part)."""
    try:
        payload = orjson.loads(text)
    except orjson.JSONDecodeError:
        payload = None
    if not isinstance(payload, dict):
        payload = {}
    message = payload.get("message") or text[:200].decode(errors="replace")
    return ApiError(status, str(payload.get("reason") or reason), str(message).strip())


def authorization(configuration: ClientConfiguration) -> str | None:
    """The ``Authorization`` header value of a client Configuration, or None (client certs).

    The kubeconfig loader stores a token under ``BearerToken`` (with the refresh hook of an
    exec plugin's token); ``authorization`` is the older key. ``InClusterConfiguration``
    answers either with its token file's.
    """
    token: str | None = configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
    return token


@dataclass
class KubeApi:
    """A minimal async JSON client for the Kubernetes API."""

    configuration: ClientConfiguration
    max_connections: int = 32
    #: Asked right before a ``fenced`` request is sent; False refuses it (``Fenced``).
    fence: Callable[[], bool] | None = None
    #: Loads the credentials again (``load_configuration``): used once after a 401, so a
    #: token that was rotated and revoked at once does not wait for the periodic re-read.
    reload: Callable[[], ClientConfiguration] | None = None
    _session: aiohttp.ClientSession | None = None
    _retired: set[aiohttp.ClientSession] = field(default_factory=set)
    _answering: asyncio.Event | None = None
    _turns: asyncio.Semaphore | None = None
    _turns_loop: asyncio.AbstractEventLoop | None = None

    def turns(self) -> asyncio.Semaphore:
        """One per connection, handed out in the order they were asked for (asyncio's
        semaphore is first come, first served). aiohttp's pool is not: ``TCPConnector.connect``
        takes an idle connection before looking at who waits for one, so a caller that asks
        again as soon as it is answered (the scheduling loop's workers, as many as the
        connections) takes back every connection it frees, and the others wait until their
        timeout: in a 5,000-Node backlog every Event POST timed out after 30 s, none posted.
        Holding a turn while a request is sent and read, the pool is never asked for more
        connections than it has. (A new one in a new event loop: a semaphore that made a
        caller wait belongs to the loop it waited in.)"""
        loop = asyncio.get_running_loop()
        if self._turns is None or self._turns_loop is not loop:
            self._turns, self._turns_loop = asyncio.Semaphore(self.max_connections), loop
        return self._turns

    def answering(self) -> asyncio.Event:
        """Set once the API server answers a request (any status) made after the latest one
        that got no answer; already set when it has. An informer backing off after the
        server went away waits on it as well as on its delay: the Lease renews every 2 s
        probe the server anyway, and the back-off grown over an outage (up to 30 s) would
        otherwise keep the operator blind that long after the server is back."""
        if self._answering is None:
            self._answering = asyncio.Event()
        return self._answering

    def _no_answer(self) -> None:
        if self._answering is None or self._answering.is_set():
            self._answering = asyncio.Event()

    def _answered(self) -> None:
        if self._answering is not None:
            self._answering.set()

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    def _ssl(self) -> ssl.SSLContext:
        """The API server's certificate checked against the configured CA (unless
        ``insecure-skip-tls-verify``), and the client certificate presented either way: a
        kubeconfig that skips the check still authenticates with its certificate, as kubectl
        does (skipping verification used to send no certificate at all, so such a user was
        anonymous, 401 or 403)."""
        cfg = self.configuration
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert if cfg.verify_ssl else None)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file)
        return context

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, ssl=self._ssl())
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=30),
                # The API server sets no cookie orca needs; the default jar filters every
                # request's URL against its cookies (5% of a status write's client CPU).
                cookie_jar=aiohttp.DummyCookieJar(),
                request_class=_FencedRequest,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        for retired in list(self._retired):
            await retired.close()

    def _retire_session(self) -> None:
        """Start a new session for the next requests (new credentials), and close the old
        one only once what it carries is done: aiohttp leaves a response pending on a closed
        session silent until its timeout, so closing it at once stalls the requests in
        flight (status writes, a Lease renew) for that long."""
        old, self._session = self._session, None
        if old is None:
            return
        self._retired.add(old)

        def close_old() -> None:
            closing = asyncio.ensure_future(old.close())
            closing.add_done_callback(lambda _: self._retired.discard(old))

        asyncio.get_running_loop().call_later(RETIRED_SESSION_GRACE, close_old)

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        """JSON (unless ``extra`` says otherwise), orca's ``USER_AGENT``, with the bearer
        token read now (rotated tokens) when there is one."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, **extra}
        try:
            token = authorization(self.configuration)  # may re-read a token file or run a plugin
        except (CredentialsError, OSError) as exc:
            raise TransportError("reading the credentials", exc) from exc
        if token:
            headers["Authorization"] = token
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        fenced: bool = False,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        """One API call; raises ``ApiError`` on a non-2xx answer, ``Fenced`` when ``fenced``
        and the fence refuses it (now, or as its bytes were about to be written). ``accept``:
        the answer's media type (JSON; ``METADATA_ONLY`` for its metadata alone)."""
        fence = self.fence if fenced else None
        if fence is not None and not fence():
            raise Fenced()
        sending = _Sending(fence) if fenced else None
        token = _SENDING.set(sending)
        try:
            try:
                return await self._send(method, path, body, content_type, params, accept)
            except ApiError as exc:
                if exc.status != 401 or not self._reload(f"401 on {method} {path}"):
                    raise
            self._retire_session()  # the TLS client certificate may have been rotated too
            if sending is not None:
                sending.sent = 0  # refused with a 401: that one changed nothing
            return await self._send(method, path, body, content_type, params, accept)
        except TransportError:
            if fence is not None and not fence():
                raise Fenced() from None  # closed unsent by _FencedRequest
            raise
        finally:
            _SENDING.reset(token)

    def _reload(self, why: str) -> bool:
        """Load the credentials again after a 401; False (the 401 stands) when there is no
        loader or it fails (a token file being replaced, an exec plugin down): the caller
        retries later, as after any refusal, instead of the error escaping as something else."""
        if self.reload is None:
            return False
        logger.info("credentials refused (%s): loading them again", why)
        try:
            self.configuration = self.reload()
        except Exception as exc:  # CredentialsError, a plugin's own errors
            logger.warning("could not load the credentials again: %s", exc)
            return False
        return True

    async def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        content_type: str,
        params: Mapping[str, str] | None,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        headers = self._headers({"Content-Type": content_type, "Accept": accept})
        data = None if body is None else orjson.dumps(body)
        resource = api_resource(path)
        try:
            session = await self.session()  # reads the CA and client certificate files
            async with (
                self.turns(),
                session.request(
                    method,
                    # Already encoded: API paths are built from names the API server validated
                    # (DNS labels and subdomains), and yarl's parsing and re-encoding of every URL
                    # was a tenth of a status write's CPU.
                    URL(self.configuration.host + path, encoded=True),
                    data=data,
                    headers=headers,
                    params=params,
                ) as response,
            ):
                text = await response.read()
        except NO_ANSWER as exc:  # refused, reset, closed, TLS, timed out: still a request made
            metrics.api_requests(method, resource, "error").inc()
            self._no_answer()
            raise TransportError(f"{method} {path}", exc) from exc
        except BaseException:  # cancelled
            metrics.api_requests(method, resource, "error").inc()
            raise
        metrics.api_requests(method, resource, str(response.status)).inc()
        self._answered()
        if response.status >= 300:
            error = api_error(response.status, response.reason, text)
            sending = _SENDING.get()
            if sending is not None and sending.sent > 1:
                # A write sent twice and refused the second time says nothing of the first:
                # a status write that landed meets its own new resourceVersion (409). For the
                # caller it got no answer (``transaction``: both outcomes held, read back).
                raise TransportError(f"{method} {path} (sent twice, the second refused)", error)
            raise error
        try:
            result: dict[str, Any] = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError as exc:
            raise TransportError(f"{method} {path} (unreadable answer)", exc) from exc
        return result

    async def list_objects(
        self, path: str, each: Callable[[dict[str, Any]], None], page: int = LIST_PAGE
    ) -> str | None:
        """``each`` object at ``path``, read in pages of ``page`` (one consistent snapshot: the
        API server serves the pages of one list from the same revision), each object without
        ``managedFields`` (nothing in orca reads them, and they are a third to a half of a
        Workload with a status); returns the list's resourceVersion. Each page is handed on as
        it arrives: the whole list never sits in memory at once (10,000 Workloads as dicts
        were the operator's peak of memory).

        The next page is asked for before this one is handed on, and the event loop gets a
        turn every ``LIST_TURN`` objects, so that the API server serves page n+1 while orca
        reads page n. Asked for one after the other, the two took turns: at 5,000 Nodes and
        30,000 Workloads orca's own CPU was about 3 s of the 7.9 s its listing took."""
        params = {"limit": str(page)}
        pending = asyncio.ensure_future(self.request("GET", path, params=params))
        try:
            while True:
                answer = await pending
                metadata = answer.get("metadata") or {}
                token = metadata.get("continue")
                if token:
                    params = {"limit": str(page), "continue": token}
                    pending = asyncio.ensure_future(self.request("GET", path, params=params))
                for index, obj in enumerate(answer.get("items") or []):
                    if index % LIST_TURN == 0:
                        await asyncio.sleep(0)  # the next page's request sent, its answer read
                    (obj.get("metadata") or {}).pop("managedFields", None)
                    each(obj)
                if not token:
                    version: str | None = metadata.get("resourceVersion")
                    return version
        finally:
            if not pending.done():
                pending.cancel()  # ``each`` raised, or the listing was cancelled

    async def watch(
        self, path: str, version: str | None, timeout: int
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch of ``path`` from ``version`` (bookmarks asked for), until
        the server ends it (after ``timeout`` seconds). Raises ``ApiError`` when the watch is
        refused, and for an ``ERROR`` event (410 Gone: the version is too old, LIST again);
        ``TransportError`` when it could not start or broke mid-stream (the events before the
        break were yielded: watch again from the last version seen). A 401 loads the
        credentials again once."""
        params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout)}
        if version:
            params["resourceVersion"] = version
        for attempt in (1, 2):
            try:
                async for event in self._watch(path, params, timeout):
                    yield event
                return
            except ApiError as exc:
                if exc.status != 401 or attempt == 2 or not self._reload(f"401 watching {path}"):
                    raise
            except NO_ANSWER as exc:
                self._no_answer()
                raise TransportError(f"WATCH {path}", exc) from exc
            except orjson.JSONDecodeError as exc:  # a line cut or mangled (by a proxy)
                raise TransportError(f"WATCH {path} (unreadable event)", exc) from exc
            # The next attempt's session uses the credentials just loaded.

    async def _watch(
        self, path: str, params: Mapping[str, str], timeout: int
    ) -> AsyncIterator[dict[str, Any]]:
        headers = self._headers({})
        resource = api_resource(path)
        # No total timeout: the server ends the watch; a silent connection is cut a minute
        # past that (a half-open TCP connection never errors by itself).
        limits = aiohttp.ClientTimeout(
            total=None, sock_connect=WATCH_CONNECT_LIMIT, sock_read=timeout + WATCH_SILENCE_GRACE
        )
        url = self.configuration.host + path
        # A session (and connection) of its own per watch: a shared session closed under a
        # streaming response (``request`` does so after a 401, to load rotated credentials)
        # leaves that stream silent, without an error, until ``sock_read`` runs out. One TLS
        # handshake per watch, every few minutes, is nothing next to that.
        connector = aiohttp.TCPConnector(limit=1, ssl=self._ssl())
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(url, params=params, headers=headers, timeout=limits) as response,
        ):
            metrics.api_requests("WATCH", resource, str(response.status)).inc()
            self._answered()
            if response.status >= 300:
                raise api_error(response.status, response.reason, await response.read())
            pending = bytearray()
            async for chunk in response.content.iter_any():
                pending += chunk
                if b"\n" not in chunk:
                    continue  # a large object arrives in several chunks
                *lines, rest = pending.split(b"\n")
                pending = bytearray(rest)
                for line in lines:
                    if not line:
                        continue
                    event: dict[str, Any] = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise ApiError(
                            int(status.get("code") or 500),
                            str(status.get("reason") or "Error"),
                            str(status.get("message") or "").strip(),
                        )
                    yield event

    # -- the calls the loop makes ------------------------------------------------------------

    async def write_workload_status(
        self,
        namespace: str,
        name: str,
        status: Mapping[str, Any],
        resource_version: str | None,
    ) -> dict[str, Any]:
        """One PUT of ``/status`` with ``status`` alone: it replaces the status, and the API
        server takes everything else from the stored object (``statusStrategy``,
        apiextensions-apiserver's pkg/registry/customresource/strategy.go, so nothing but the
        status is sent); ``resource_version`` is a precondition (409 Conflict when the object
        changed since the decision was made; the API server refuses a custom resource's
        update without one, 422: every object listed or watched has one). Answered with the
        metadata alone.

        Why a PUT and not a merge PATCH: the API server applies a merge patch to a custom
        resource by encoding the stored object to JSON, merging, and decoding and pruning the
        result again, all before the work any write does (``bench_server_cost.py``'s
        profiles); a PUT's body is decoded once."""
        metadata = {"name": name, "namespace": namespace, "resourceVersion": resource_version}
        body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "status": status}
        path = workload_path(namespace, name, status=True) + NO_FIELD_VALIDATION
        return await self.request("PUT", path, body, accept=METADATA_ONLY, fenced=True)

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Post an Event; answered with its metadata alone (nothing reads more of it)."""
        path = f"/api/v1/namespaces/{namespace}/events" + NO_FIELD_VALIDATION
        return await self.request("POST", path, event, accept=METADATA_ONLY, fenced=True)
