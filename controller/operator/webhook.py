"""The validating admission webhook for Workloads: served through kopf, registered by orca.

kopf serves it (``@kopf.on.validate``, ``kopf.WebhookServer``): the handler asks the same
question the operator asks before it writes ``phase: Invalid``
(``controller.scheduler.admission.refusal``) and refuses with that one line, naming the field.
``AdmissionServer`` takes the place of kopf's server: orca's serving certificate (``tls``), kept
current in place, the deadlines and the bound on connections every port of orca's has
(``listener``), one route, and a strict reading of what it is sent: the whole body up to
``MAX_REVIEW_BYTES`` (why that figure: there), an ``admission.k8s.io/v1`` AdmissionReview, else
one line and a 4xx that repeats nothing of the request, never a traceback.

Registration is orca's, not kopf's managed mode (which writes ``timeoutSeconds: 30`` for every
webhook and removes them when the operator stops): ``Registrar`` either writes the whole
ValidatingWebhookConfiguration pointing at a URL (``orca run --webhook-host H --webhook-port
P``, against the dev cluster, whose API server runs on the same machine), or, in the cluster,
keeps the ``caBundle`` of the shipped configuration's webhook (which points at a Service)
equal to the CA the serving certificate was issued by.

Failure policy and timeout (``WEBHOOK``): ``Ignore`` and 5 s. The webhook is orca's front door,
not a security boundary: a Workload admitted while no replica answers (the operator down, a
rollout, a cold start) is still checked when the operator decides it and becomes ``Invalid``
with the same message, and it books nothing. ``Fail`` would make every create and update of a
Workload depend on the operator's availability, including a GitOps sync that installs the
operator and its Workloads together (the Workloads would be refused until the operator's
Pods are ready). 5 s bounds what an operator that hangs (rather than being absent, which is
refused at once) adds to an apply; a check takes milliseconds. Updates that leave ``spec``
as it is (labels, annotations, finalizers) and objects being deleted are never refused, so
an object stored before a rule existed can still be relabelled and deleted.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp.web

from controller.api.models import GROUP, PLURAL, VERSION
from controller.operator.kopf_runtime import kopf
from controller.operator.kube import ApiError, KubeApi, TransportError
from controller.operator.listener import DEFAULT_LIMITS, Limits, Listener
from controller.operator.tls import ServingCert
from controller.scheduler.admission import refusal
from controller.scheduler.priority import PriorityClasses
from controller.scheduler.scheduler import Scheduler

logger = logging.getLogger("orca.webhook")

#: The handler's id, and so the path it is served under (kopf routes ``/<id>``).
WEBHOOK_ID = "validate-workloads"
WEBHOOK_PATH = f"/{WEBHOOK_ID}"
#: The webhook's name in the configuration (a DNS subdomain, unique within it).
WEBHOOK_NAME = f"{WEBHOOK_ID}.{GROUP}"
DEFAULT_CONFIGURATION = "orca-controller"
NAME_LABEL = "orca-controller"
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
#: The only review version served: the one the configuration asks for
#: (``admissionReviewVersions: [v1]``).
REVIEW_VERSION = "admission.k8s.io/v1"
MiB = 1024 * 1024
#: What kube-apiserver's etcd client sends at most in one request, so the largest Workload it
#: can store, whatever etcd's own ``--max-request-bytes`` (default 1.5 MiB,
#: ``DefaultMaxRequestBytes`` in ``go.etcd.io/etcd/server/v3/embed/config.go``):
#: ``defaultMaxCallSendMsgSize`` in ``go.etcd.io/etcd/client/v3/options.go``, which
#: ``k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go`` leaves as it is.
STORED_OBJECT_BYTES = 2 * MiB
#: The request headers kube-apiserver reads (``MaxHeaderBytes: 1 << 20``,
#: ``k8s.io/apiserver/pkg/server/secure_serving.go``): the credentials a review's ``userInfo``
#: comes from (a token, impersonation headers) arrive within them.
REQUEST_HEADER_BYTES = 1 * MiB
#: An AdmissionReview body larger than this is refused unread (413), and with
#: ``failurePolicy: Ignore`` that admits the request: the bound must lie above any review of a
#: Workload that can be stored. An UPDATE's review carries ``object`` and ``oldObject``, each
#: at most ``STORED_OBJECT_BYTES`` once stored (one that is larger is admitted unchecked and
#: then refused by the etcd client: nothing is stored), and ``userInfo``, at most
#: ``REQUEST_HEADER_BYTES``; 1 MiB more for the rest of the review (uid, kinds, options: a few
#: hundred bytes) and for the object's JSON differing from its stored copy (its
#: resourceVersion). kube-apiserver's own request body limit, 3 MiB (``MaxRequestBodyBytes``
#: in ``k8s.io/apiserver/pkg/server/config.go``), bounds what a user sends, not what a patch
#: makes of the stored object, so it bounds nothing here.
MAX_REVIEW_BYTES = 2 * STORED_OBJECT_BYTES + REQUEST_HEADER_BYTES + 1 * MiB
#: Review bodies held at once (read, parsed, checked): two of the largest, or some thousands of
#: the usual few KiB. A body waits for room (within its read deadline), then 503.
REVIEW_BYTES_IN_FLIGHT = 2 * MAX_REVIEW_BYTES
#: How often the registration is checked again (a GitOps sync or a person may reset it).
RECHECK_SECONDS = 60.0
#: Said when a Workload names a PriorityClass before the operator has listed them.
CLASSES_UNKNOWN = (
    "orca: PriorityClasses not listed yet: spec.priorityClassName is checked when the "
    "operator decides this Workload"
)

#: Everything but ``clientConfig`` (and, with ``-n``, the namespaceSelector): the shipped
#: ``manifests/webhook`` configuration says the same (a test compares them).
WEBHOOK: dict[str, Any] = {
    "name": WEBHOOK_NAME,
    "admissionReviewVersions": ["v1"],
    "sideEffects": "None",  # so --dry-run=server asks it too
    "failurePolicy": "Ignore",
    "timeoutSeconds": 5,
    "matchPolicy": "Equivalent",
    "rules": [
        {
            "apiGroups": [GROUP],
            "apiVersions": [VERSION],
            "operations": ["CREATE", "UPDATE"],
            "resources": [PLURAL],
            "scope": "Namespaced",
        }
    ],
}


class Admission:
    """The check kopf calls for each review. ``classes`` answers the PriorityClasses the
    operator has listed, or None before its informer has (``refusal`` then leaves that check
    to the operator). A Scheduler of its own: its CEL memo is not shared with the loop's."""

    def __init__(
        self,
        classes: Callable[[], PriorityClasses | None],
        namespaces: Sequence[str] = (),
        scheduler: Scheduler | None = None,
    ) -> None:
        self.classes = classes
        self.namespaces = frozenset(namespaces)
        self.scheduler = scheduler if scheduler is not None else Scheduler()

    def review(
        self,
        operation: str | None,
        new: Mapping[str, Any],
        old: Mapping[str, Any] | None,
        warnings: list[str],
    ) -> str | None:
        """The refusal for this create or update, or None to let it through."""
        metadata = new.get("metadata") or {}
        if self.namespaces and metadata.get("namespace") not in self.namespaces:
            return None  # another operator's (or nobody's) namespace
        if (
            operation == "UPDATE"
            and old is not None
            and (metadata.get("deletionTimestamp") or old.get("spec") == new.get("spec"))
        ):
            return None  # labels, finalizers, a deletion: never blocked by a spec rule
        classes = self.classes()
        if classes is None and (new.get("spec") or {}).get("priorityClassName"):
            warnings.append(CLASSES_UNKNOWN)
        return refusal(new, self.scheduler, classes)

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Put the validating handler into kopf's ``registry``."""

        @kopf.on.validate(
            GROUP,
            VERSION,
            PLURAL,
            id=WEBHOOK_ID,
            operations=["CREATE", "UPDATE"],
            registry=registry,
        )  # failure policy and the rest: ``WEBHOOK``, registered by ``Registrar``
        async def validate(**kwargs: Any) -> None:
            warnings: list[str] = kwargs["warnings"]
            try:
                new, old = _plain(kwargs["body"]) or {}, _plain(kwargs.get("old"))
                message = self.review(kwargs.get("operation"), new, old, warnings)
            except Exception as exc:  # a bug of ours must not block anyone's apply
                logger.error("admission check failed, allowing: %r", exc)
                warnings.append(f"orca could not check this Workload ({type(exc).__name__})")
                return
            if message is not None:
                raise kopf.AdmissionError(message, code=422)


def _plain(body: Any) -> dict[str, Any] | None:
    """kopf's Body (a read-only mapping view) as the plain dict the models read."""
    return None if body is None else json.loads(json.dumps(dict(body)))


# -- serving --------------------------------------------------------------------------------


class AdmissionServer:
    """The webhook's listener, as kopf's webhook server (``settings.admission.server``: kopf
    calls it with its review function and waits on what it yields): orca's certificate, kept
    current in place, its own ``listener`` (deadlines, a bound on connections) and its own
    front: only ``POST /validate-workloads`` (404 elsewhere, 405 for another method), only an
    ``admission.k8s.io/v1`` AdmissionReview, one line and a 4xx for anything else, never a
    part of the request in the answer."""

    def __init__(
        self, cert: ServingCert, *, addr: str, port: int, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        self.cert, self.addr, self.port, self.limits = cert, addr, port, limits
        self.budget = ByteBudget(REVIEW_BYTES_IN_FLIGHT)
        self.listener: Listener | None = None  # while serving

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        app = admission_app(fn, self.budget, self.limits)
        self.listener = Listener(
            app, self.addr, self.port, self.cert.context, self.limits, "webhook"
        )
        await self.listener.start()
        logger.info("serving the admission webhook at %s", webhook_url(self.addr, self.port))
        try:
            # For kopf's managed configuration, which orca does not use (``Registrar``).
            yield kopf.WebhookClientConfig(url=webhook_url(self.addr, self.port) + WEBHOOK_PATH)
            await asyncio.Event().wait()  # until kopf stops the operator
        finally:
            await self.listener.stop()


def admission_app(
    fn: Any, budget: ByteBudget, limits: Limits = DEFAULT_LIMITS
) -> aiohttp.web.Application:
    """The webhook's one route. ``fn`` is kopf's ``serve_admission_request`` (with its memo
    store bound), which calls ``Admission``'s handler."""

    async def validate(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        deadline = asyncio.get_running_loop().time() + limits.body
        try:
            length = declared_length(request)
            async with budget.hold(length, deadline):
                review = parse_review(await read_body(request, length, deadline))
                try:
                    response = await fn(review, webhook=WEBHOOK_ID, headers={})
                finally:
                    await _forget(fn, review)
        except BadReview as exc:
            logger.info("admission request from %s refused: %s", request.remote, exc.text)
            return aiohttp.web.Response(status=exc.status, text=exc.text + "\n")
        except Exception as exc:  # kopf's WebhookError family and anything else: one line
            status, text = _failure(exc)
            logger.warning("admission request not served: %s (%r)", text, exc)
            return aiohttp.web.Response(status=status, text=text + "\n")
        return aiohttp.web.json_response(response)

    app = aiohttp.web.Application()
    app.router.add_post(WEBHOOK_PATH, validate)
    return app


def _failure(exc: Exception) -> tuple[int, str]:
    """A review kopf could not serve, in words of ours (kopf's repeat the request's)."""
    if type(exc).__name__ == "UnknownResourceError":
        return 404, f"Not Found: this webhook reviews {PLURAL}.{GROUP} only"
    return 400, f"Bad Request: the review could not be served ({type(exc).__name__})"


async def _forget(fn: Any, review: dict[str, Any]) -> None:
    """kopf keeps a memo per object it was asked about on UPDATE and drops it only when a
    watch of its own sees the object deleted; this operator has no kopf watch, so kopf's
    memories would grow with every Workload ever updated. Nothing reads them: drop each at
    once (``fn`` is kopf's ``serve_admission_request`` with its ``memories`` bound)."""
    memories = getattr(fn, "keywords", {}).get("memories")
    inner = review["request"]
    body = inner.get("object") or inner.get("oldObject")
    if memories is not None and hasattr(memories, "forget"):
        await memories.forget(body)


@dataclass
class BadReview(Exception):
    status: int
    text: str


class ByteBudget:
    """At most ``total`` bytes of review bodies held at once (read, parsed, checked), handed
    out first come, first served: a body waits for room until its deadline."""

    def __init__(self, total: int) -> None:
        self.total = self.free = total
        self._queue: deque[tuple[int, asyncio.Future[None]]] = deque()

    @contextlib.asynccontextmanager
    async def hold(self, size: int, deadline: float) -> AsyncIterator[None]:
        await self._take(size, deadline)
        try:
            yield
        finally:
            self.free += size
            self._wake()

    async def _take(self, size: int, deadline: float) -> None:
        if not self._queue and size <= self.free:
            self.free -= size
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, turn)
        self._queue.append(entry)
        try:
            async with asyncio.timeout_at(deadline):
                await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self.free += size  # given room just as its time ran out: give it back
            else:
                self._queue.remove(entry)
            self._wake()  # whoever waited behind it may fit now
            if isinstance(exc, TimeoutError):
                raise BadReview(
                    503, "Service Unavailable: too many admission reviews in flight"
                ) from None
            raise

    def _wake(self) -> None:
        while self._queue and self._queue[0][0] <= self.free:
            size, turn = self._queue.popleft()
            if not turn.done():  # not cancelled while it waited
                self.free -= size
                turn.set_result(None)


def declared_length(request: aiohttp.web.Request) -> int:
    """The body's length as its headers declare it, refused before a byte of it is read:
    the API server always sends a ``Content-Length`` (its body is one buffer)."""
    if request.content_type != "application/json":
        raise BadReview(415, "Unsupported Media Type: want application/json")
    length = request.content_length
    if length is None:
        raise BadReview(411, "Length Required: an AdmissionReview has a Content-Length")
    if length > MAX_REVIEW_BYTES:
        raise BadReview(413, f"Request Entity Too Large: over {MAX_REVIEW_BYTES} bytes")
    return length


async def read_body(request: aiohttp.web.Request, length: int, deadline: float) -> bytes:
    """The whole body, ``length`` bytes, by ``deadline``."""
    try:
        async with asyncio.timeout_at(deadline):
            return await request.content.readexactly(length)
    except TimeoutError:
        raise BadReview(408, "Request Timeout: the body did not arrive in time") from None


def parse_review(data: bytes) -> dict[str, Any]:
    """The ``admission.k8s.io/v1`` AdmissionReview in ``data``, checked for the shape kopf
    reads."""
    try:
        review = json.loads(data)
    except (ValueError, RecursionError):
        raise BadReview(400, "Bad Request: not JSON") from None
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        raise BadReview(400, "Bad Request: not an AdmissionReview")
    if review.get("apiVersion") != REVIEW_VERSION:
        raise BadReview(400, f"Bad Request: not an {REVIEW_VERSION} AdmissionReview")
    inner = review.get("request")
    resource = inner.get("resource") if isinstance(inner, dict) else None
    if (
        not isinstance(inner, dict)
        or not isinstance(inner.get("uid"), str)
        or not isinstance(resource, dict)
        or not all(isinstance(resource.get(k), str) for k in ("group", "version", "resource"))
        or not isinstance(inner.get("object") or inner.get("oldObject"), dict)
        or not isinstance(inner.get("userInfo"), dict)
    ):
        raise BadReview(
            400, "Bad Request: AdmissionReview.request lacks uid, resource, userInfo or object"
        )
    return review


def webhook_url(host: str, port: int) -> str:
    """``https://HOST:PORT``, an IPv6 address in brackets, the port left out when 443."""
    with contextlib.suppress(ValueError):
        host = f"[{ipaddress.IPv6Address(host)}]"
    return f"https://{host}" if port == 443 else f"https://{host}:{port}"


# -- registration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceRef:
    namespace: str
    name: str
    port: int = 443


def webhook_entry(client_config: dict[str, Any], namespaces: Sequence[str] = ()) -> dict[str, Any]:
    """The one webhook of the configuration, pointing at ``client_config``."""
    entry = {**json.loads(json.dumps(WEBHOOK)), "clientConfig": client_config}
    if namespaces:
        entry["namespaceSelector"] = {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "In",
                    "values": sorted(namespaces),
                }
            ]
        }
    return entry


class Registrar:
    """Keeps the API server calling this webhook with the right CA.

    ``url`` set: owns the whole configuration ``name`` (created or replaced). ``service`` set:
    only sets the ``caBundle`` of the webhooks in ``name`` that point at that Service (the
    configuration itself is installed with the manifests)."""

    def __init__(
        self,
        api: KubeApi,
        cert: ServingCert,
        name: str,
        *,
        url: str | None = None,
        service: ServiceRef | None = None,
        namespaces: Sequence[str] = (),
    ) -> None:
        self.api, self.cert, self.name = api, cert, name
        self.url, self.service, self.namespaces = url, service, tuple(namespaces)
        self._missing_said = False

    async def run(self, every: float = RECHECK_SECONDS) -> None:
        while True:
            try:
                await self.ensure()
            except (ApiError, TransportError) as exc:
                logger.warning("webhook configuration %s not updated: %s", self.name, exc)
            self.cert.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.cert.changed.wait(), every)

    async def ensure(self) -> bool:
        """Bring the configuration in line; True when it was written."""
        ca = base64.b64encode(self.cert.ca).decode()
        path = f"{CONFIGURATIONS}/{self.name}"
        try:
            current: dict[str, Any] | None = await self.api.request("GET", path)
        except ApiError as exc:
            if not exc.not_found:
                raise
            current = None
        if self.url is not None:
            want = [
                webhook_entry({"url": self.url + WEBHOOK_PATH, "caBundle": ca}, self.namespaces)
            ]
            if current is None:
                await self.api.request("POST", CONFIGURATIONS, self._configuration(want))
                logger.info("registered the admission webhook %s at %s", self.name, self.url)
                return True
            if _comparable(current.get("webhooks")) == _comparable(want):
                return False
            current["webhooks"] = want
        else:
            if current is None:
                if not self._missing_said:
                    logger.warning(
                        "ValidatingWebhookConfiguration %s not found: Workloads are "
                        "checked only when the operator decides them",
                        self.name,
                    )
                    self._missing_said = True
                return False
            if not self._set_ca(current, ca):
                return False
        await self.api.request("PUT", path, current)
        logger.info("updated the admission webhook configuration %s", self.name)
        return True

    def _configuration(self, webhooks: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {
                "name": self.name,
                "labels": {"app.kubernetes.io/name": "orca-controller"},
            },
            "webhooks": webhooks,
        }

    def _set_ca(self, configuration: dict[str, Any], ca: str) -> bool:
        """Set ``caBundle`` on the webhooks that call our Service; True if one changed."""
        changed = False
        for hook in configuration.get("webhooks") or []:
            config = hook.get("clientConfig") or {}
            service = config.get("service") or {}
            ours = self.service is not None and (service.get("namespace"), service.get("name")) == (
                self.service.namespace,
                self.service.name,
            )
            if ours and config.get("caBundle") != ca:
                config["caBundle"] = ca
                hook["clientConfig"] = config
                changed = True
        return changed


def _comparable(webhooks: Any) -> Any:
    """The fields we set, as the API server returns them (it fills in defaults we do not set,
    such as objectSelector: those do not count as a difference)."""
    out = []
    for hook in webhooks or []:
        keep = {k: hook.get(k) for k in (*WEBHOOK, "clientConfig", "namespaceSelector")}
        if keep.get("namespaceSelector") == {}:
            keep["namespaceSelector"] = None
        out.append(keep)
    return out
