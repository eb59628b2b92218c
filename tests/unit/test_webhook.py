"""The admission webhook's check and registration, without an API server: one rule set (the
webhook's refusal is the message the operator writes for the same spec), what is never
refused, and the shipped configuration saying what the code registers."""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import json
import logging
import ssl
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, cast

import aiohttp.web
import pytest
import yaml
from prometheus_client import REGISTRY

from controller.api.models import GROUP, PLURAL, VERSION, Workload
from controller.operator import tls
from controller.operator.kopf_runtime import kopf
from controller.operator.kube import ApiError
from controller.operator.listener import Limits, Listener
from controller.operator.tls import ServingCert
from controller.operator.webhook import (
    CLASSES_UNKNOWN,
    CONFIGURATIONS,
    MAX_REVIEW_BYTES,
    REQUEST_HEADER_BYTES,
    REVIEW_BYTES_IN_FLIGHT,
    REVIEW_VERSION,
    STORED_OBJECT_BYTES,
    WEBHOOK,
    WEBHOOK_ID,
    WEBHOOK_PATH,
    Admission,
    AdmissionServer,
    BadReview,
    ByteBudget,
    Registrar,
    ServiceRef,
    _plain,
    admission_app,
    parse_review,
    webhook_entry,
    webhook_url,
)
from controller.scheduler.admission import refusal
from controller.scheduler.ledger import Ledger
from controller.scheduler.priority import NO_CLASSES, PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import workload_obj
from tests.support.fakeapi import FakeApiServer, run, until

SHIPPED = Path(__file__).resolve().parents[2] / "manifests" / "webhook"


def workload(name: str = "w", namespace: str = "shop", **spec: Any) -> dict[str, Any]:
    """A Service of 2 unless ``spec`` says otherwise, as a user writes it."""
    return workload_obj(name, namespace, **{"kind": "Service", "count": 2, **spec})


BAD = [
    {"constraints": ['"ssd" in node.tag']},
    {"constraints": ["node.cpu"]},
    {"affinity": [{"target": "node.kind == 1", "weight": 5}]},
    {"runtime": {"oneOf": ["pve-zone"]}},
    {"priorityClassName": "missing"},
    {"constraints": ["node.kind = 'x'"], "runtime": {"oneOf": ["pve-lxc"]}},
]


@pytest.mark.parametrize("spec", BAD)
def test_the_refusal_is_the_invalid_status_message(spec: dict[str, Any]) -> None:
    obj = workload(**spec)
    refused = Admission(lambda: NO_CLASSES).review("CREATE", obj, None, [])
    decision = Scheduler().schedule(Workload.model_validate(obj), Ledger(), NO_CLASSES, now=0.0)
    assert decision.phase.value == "Invalid"
    assert refused == decision.message
    assert refused is not None and "\n" not in refused


def test_what_is_never_refused() -> None:
    admission = Admission(lambda: NO_CLASSES, namespaces=["shop"])
    bad = workload(constraints=["node.cpu"])
    assert (
        admission.review("CREATE", workload(namespace="other", constraints=["x"]), None, []) is None
    )
    assert (
        admission.review(
            "UPDATE", {**bad, "metadata": {**bad["metadata"], "labels": {"a": "b"}}}, bad, []
        )
        is None
    )
    deleting = {**bad, "metadata": {**bad["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert admission.review("UPDATE", {**deleting, "spec": {"kind": "Job"}}, bad, []) is None
    # A change of spec is checked.
    assert admission.review("UPDATE", bad, workload(), []) is not None


def test_priority_classes_not_listed_yet_are_left_to_the_operator_with_a_warning() -> None:
    warnings: list[str] = []
    admission = Admission(lambda: None)
    assert admission.review("CREATE", workload(priorityClassName="high"), None, warnings) is None
    assert warnings and "spec.priorityClassName" in warnings[0]
    known = Admission(lambda: PriorityClasses.of([PriorityClass("high", 1000)]))
    assert known.review("CREATE", workload(priorityClassName="high"), None, []) is None


def test_the_shipped_configuration_is_what_the_code_registers() -> None:
    shipped = yaml.safe_load((SHIPPED / "validatingwebhookconfiguration.yaml").read_text())
    (hook,) = shipped["webhooks"]
    service = hook["clientConfig"]["service"]
    assert service["path"] == "/validate-workloads"
    assert hook == webhook_entry({"service": service})
    assert (WEBHOOK["failurePolicy"], WEBHOOK["timeoutSeconds"]) == ("Ignore", 5)
    service_yaml = yaml.safe_load((SHIPPED / "service.yaml").read_text())
    assert service_yaml["metadata"]["name"] == service["name"]
    assert service_yaml["spec"]["ports"][0]["port"] == service["port"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "Nonsense"}, "spec.kind: Input should be 'Job', 'Service' or 'DaemonSet'"),
        ({"kind": "Job", "count": 2}, "spec: count is only allowed when kind is Service"),
    ],
    ids=["kind", "count-on-a-job"],
)
def test_a_spec_the_model_refuses_is_refused_with_the_models_one_line(
    spec: dict[str, Any], message: str
) -> None:
    """What the model refuses (``ClusterState`` would store it as Invalid with the same words),
    the webhook refuses first."""
    assert refusal(workload_obj("w", "shop", **spec), Scheduler(), NO_CLASSES) == message
    assert refusal(workload_obj("w", "shop", kind="Job"), Scheduler(), NO_CLASSES) is None


# -- the front: what the webhook port reads and answers -----------------------------------------


def review_of(obj: Any, **request: Any) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it for a Workload."""
    return {
        "apiVersion": REVIEW_VERSION,
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": GROUP, "version": VERSION, "kind": "Workload"},
            "resource": {"group": GROUP, "version": VERSION, "resource": PLURAL},
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
            **request,
        },
    }


NOT_JSON = "Bad Request: not JSON"
NOT_A_REVIEW = "Bad Request: not an AdmissionReview"
NOT_V1 = "Bad Request: not an admission.k8s.io/v1 AdmissionReview"
LACKS = "Bad Request: AdmissionReview.request lacks uid, resource, userInfo or object"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", NOT_JSON),
        (b"[" * 100_000 + b"]" * 100_000, NOT_JSON),
        (b'{"kind": "Pod"}', NOT_A_REVIEW),
        (b'["AdmissionReview"]', NOT_A_REVIEW),
        (json.dumps({**review_of(workload()), "apiVersion": "admission.k8s.io/v1beta1"}), NOT_V1),
        (json.dumps({**review_of(workload()), "apiVersion": None}), NOT_V1),
        (json.dumps({"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview"}), LACKS),
        (json.dumps(review_of(None)), LACKS),
        (json.dumps(review_of(workload(), uid=7)), LACKS),
        (json.dumps(review_of(workload(), resource={"group": GROUP})), LACKS),
        (json.dumps(review_of(workload(), resource="workloads")), LACKS),
        (json.dumps(review_of(workload(), userInfo=None)), LACKS),
        (json.dumps(review_of("a Workload")), LACKS),
    ],
    ids=[
        "not-json",
        "deep",
        "not-a-review",
        "a-list",
        "v1beta1",
        "no-api-version",
        "no-request",
        "no-object",
        "uid-not-a-string",
        "resource-incomplete",
        "resource-not-a-map",
        "no-user-info",
        "object-not-a-map",
    ],
)
def test_a_body_that_is_not_a_v1_review_is_a_400_that_repeats_none_of_it(
    body: bytes | str, says: str
) -> None:
    data = body.encode() if isinstance(body, str) else body
    with pytest.raises(BadReview) as refused:
        parse_review(data)
    assert (refused.value.status, refused.value.text) == (400, says)
    for echoed in ("not json", "Pod", "v1beta1", "a Workload", "alice"):
        assert echoed not in refused.value.text.replace("not JSON", "")


def test_an_update_review_or_one_of_an_object_being_deleted_reads() -> None:
    update = review_of(workload(), operation="UPDATE", oldObject=workload())
    assert parse_review(json.dumps(update).encode()) == update
    gone = review_of(None, operation="DELETE", oldObject=workload())
    assert parse_review(json.dumps(gone).encode()) == gone


def test_the_largest_review_the_api_server_can_send_is_under_the_limit() -> None:
    """``MAX_REVIEW_BYTES`` holds an UPDATE of the largest Workload that can be stored, with
    the user info of the largest headers the API server reads: the figures it is made of."""
    assert 2 * STORED_OBJECT_BYTES + REQUEST_HEADER_BYTES < MAX_REVIEW_BYTES
    assert (STORED_OBJECT_BYTES, REQUEST_HEADER_BYTES) == (2 * 1024 * 1024, 1024 * 1024)


class Memories:
    """kopf's memo store, as far as ``_forget`` uses it."""

    def __init__(self) -> None:
        self.forgotten: list[Any] = []

    async def forget(self, body: Any) -> None:
        self.forgotten.append(body)


def kopf_fn(answer: dict[str, Any] | Exception, memories: Memories) -> Any:
    """kopf's ``serve_admission_request`` with its memo store bound, answering ``answer``."""

    async def serve(review: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        serve.asked.append((review, kwargs))  # type: ignore[attr-defined]
        if isinstance(answer, Exception):
            raise answer
        return answer

    serve.asked = []  # type: ignore[attr-defined]
    return functools.partial(serve, memories=memories)


#: A body not read (a 404, a 413) is drained for ``body`` seconds before the connection closes.
PLAIN = Limits(body=0.2, connections=8)
ALLOWED = {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": {"uid": "u-1"}}


async def exchange(
    app: aiohttp.web.Application,
    head: bytes,
    body: bytes = b"",
    pieces: int = 1,
    pause: float = 0.0,
    limits: Limits = PLAIN,
) -> tuple[int, bytes]:
    """Send ``head`` then ``body`` in ``pieces`` writes ``pause`` s apart, over plain HTTP;
    the status and body of the answer."""
    listener = Listener(app, "127.0.0.1", 0, None, limits, "webhook")
    await listener.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
        writer.write(head)
        step = -(-len(body) // pieces) if body else 1
        for at in range(0, len(body), step):
            await asyncio.sleep(pause)
            writer.write(body[at : at + step])
            await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
    finally:
        await listener.stop()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split(b" ")[1]), rest.partition(b"\r\n\r\n")[2]


def post(body: bytes, path: str = WEBHOOK_PATH, content_type: str = "application/json") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: orca\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()


def test_a_review_is_read_whole_however_it_arrives() -> None:
    """The API server's bytes arrive in as many pieces as the network makes of them: the
    review is read to its Content-Length, not to what has arrived (a 200 KiB review read
    that way was "not JSON", and with failurePolicy Ignore, admitted)."""
    memories = Memories()
    big = workload(constraints=["node.cpu"])
    big["metadata"]["annotations"] = {"padding": "x" * 200 * 1024}
    body = json.dumps(review_of(big)).encode()
    fn = kopf_fn(ALLOWED, memories)
    status, answer = asyncio.run(
        exchange(admission_app(fn, ByteBudget(len(body))), post(body), body, 40, 0.005)
    )
    assert (status, json.loads(answer)) == (200, ALLOWED)
    ((asked, kwargs),) = fn.func.asked
    assert asked == review_of(big)
    assert kwargs["webhook"] == WEBHOOK_ID
    assert memories.forgotten == [big]  # a CREATE's memo: the object's, there is no old one


def test_the_memo_of_an_update_is_forgotten_by_its_new_object() -> None:
    memories = Memories()
    new, old = workload(count=3), workload()
    body = json.dumps(review_of(new, operation="UPDATE", oldObject=old)).encode()
    status, _ = asyncio.run(
        exchange(admission_app(kopf_fn(ALLOWED, memories), ByteBudget(len(body))), post(body), body)
    )
    assert (status, memories.forgotten) == (200, [new])


def test_at_the_limit_a_review_is_read_and_one_byte_more_is_refused_unread() -> None:
    memories = Memories()
    review = review_of(workload())
    pad = MAX_REVIEW_BYTES - len(json.dumps(review).encode())
    at_limit = json.dumps(review).encode()[:-1] + b" " * pad + b"}"
    assert len(at_limit) == MAX_REVIEW_BYTES
    budget = ByteBudget(REVIEW_BYTES_IN_FLIGHT)
    fn = kopf_fn(ALLOWED, memories)
    status, _ = asyncio.run(exchange(admission_app(fn, budget), post(at_limit), at_limit))
    assert status == 200
    over = at_limit + b" "
    status, answer = asyncio.run(exchange(admission_app(fn, budget), post(over), b""))
    assert (status, answer) == (
        413,
        f"Request Entity Too Large: over {MAX_REVIEW_BYTES} bytes\n".encode(),
    )
    assert len(fn.func.asked) == 1


@pytest.mark.parametrize(
    ("head", "status", "says"),
    [
        (post(b"{}", path="/validate-pods"), 404, b"Not Found"),
        (post(b"{}", path="/"), 404, b"Not Found"),
        (post(b"{}", path="/validate-workloads/x"), 404, b"Not Found"),
        (
            b"GET /validate-workloads HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n",
            405,
            b"Method",
        ),
        (
            post(b"{}", content_type="text/x-s3cr3t"),
            415,
            b"Unsupported Media Type: want application/json\n",
        ),
        (
            b"POST /validate-workloads HTTP/1.1\r\nHost: o\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            411,
            b"Length Required: an AdmissionReview has a Content-Length\n",
        ),
        (post(b"x" * 100).replace(b"100", b"9999999999"), 413, b"Request Entity Too Large"),
    ],
    ids=["another-path", "root", "below-the-path", "get", "content-type", "chunked", "too-large"],
)
def test_only_a_post_of_json_with_its_length_to_the_path_is_read(
    head: bytes, status: int, says: bytes
) -> None:
    fn = kopf_fn(ALLOWED, Memories())
    got, answer = asyncio.run(exchange(admission_app(fn, ByteBudget(1 << 20)), head))
    assert got == status
    assert says in answer
    assert b"s3cr3t" not in answer and b"pods" not in answer
    assert fn.func.asked == []


def test_a_body_that_stalls_is_a_408() -> None:
    fn = kopf_fn(ALLOWED, Memories())
    body = json.dumps(review_of(workload())).encode()
    quick = Limits(body=0.2, connections=8)
    app = admission_app(fn, ByteBudget(1 << 20), quick)
    status, answer = asyncio.run(exchange(app, post(body), body[:10], limits=quick))
    assert (status, answer) == (408, b"Request Timeout: the body did not arrive in time\n")
    assert fn.func.asked == []


def kopf_error(name: str) -> Exception:
    """One of kopf's WebhookError family, by name, its text repeating the request's."""
    error: Exception = type(name, (Exception,), {})("apps/v1 deployments s3cr3t")
    return error


@pytest.mark.parametrize(
    ("error", "status", "says"),
    [
        (
            type("UnknownResourceError", (Exception,), {})("apps/v1 s3cr3t"),
            404,
            "Not Found: this webhook reviews workloads.orca.cloudinit.dev only",
        ),
        (
            type("MissingDataError", (Exception,), {})("s3cr3t"),
            400,
            "Bad Request: the review could not be served (MissingDataError)",
        ),
        (ValueError("s3cr3t"), 400, "Bad Request: the review could not be served (ValueError)"),
    ],
    ids=["unknown-resource", "kopf-error", "a-bug"],
)
def test_what_kopf_cannot_serve_is_one_line_in_words_of_ours(
    error: Exception, status: int, says: str
) -> None:
    memories = Memories()
    body = json.dumps(review_of(workload())).encode()
    got, answer = asyncio.run(
        exchange(admission_app(kopf_fn(error, memories), ByteBudget(1 << 20)), post(body), body)
    )
    assert (got, answer) == (status, says.encode() + b"\n")
    assert memories.forgotten == [workload()]  # forgotten even so


# -- the budget of review bytes --------------------------------------------------------------


def test_the_budget_hands_out_room_first_come_first_served_until_a_deadline() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        budget = ByteBudget(10)
        order: list[str] = []
        release = asyncio.Event()

        async def holder(name: str, size: int, patience: float = 5.0) -> None:
            try:
                async with budget.hold(size, loop.time() + patience):
                    order.append(f"{name} in")
                    await release.wait()
            except BadReview as exc:
                order.append(f"{name} {exc.status}")

        first = asyncio.create_task(holder("a", 8))
        await asyncio.sleep(0)
        big = asyncio.create_task(holder("b", 10))  # waits: 2 free
        await asyncio.sleep(0)
        small = asyncio.create_task(holder("c", 2))  # fits, but b came first: waits too
        late = asyncio.create_task(holder("d", 1, patience=0.05))  # gives up: 503
        await asyncio.sleep(0.2)
        assert budget.free == 2
        release.set()
        await asyncio.gather(first, big, small, late)
        assert budget.free == 10 and not budget._queue
        return order

    assert asyncio.run(scenario()) == ["a in", "d 503", "b in", "c in"]


def test_a_review_given_up_while_it_waited_gives_its_place_to_the_next() -> None:
    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        budget = ByteBudget(10)
        release = asyncio.Event()

        async def hold(size: int) -> None:
            async with budget.hold(size, loop.time() + 5):
                await release.wait()

        first = asyncio.create_task(hold(10))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(hold(5))
        behind = asyncio.create_task(hold(5))
        await asyncio.sleep(0.01)
        waiting.cancel()  # its client went away
        release.set()
        await asyncio.gather(first, behind)
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return budget.free

    assert asyncio.run(scenario()) == 10


# -- registration ------------------------------------------------------------------------------

CONFIGURATION_PATH = f"{CONFIGURATIONS}/orca-test"


def serving(hosts: tuple[str, ...] = ("127.0.0.1",)) -> ServingCert:
    cert = tls.generated(list(hosts))
    asyncio.run(cert.load())
    return cert


def as_the_api_server_returns(configuration: dict[str, Any]) -> dict[str, Any]:
    """What the API server adds to a configuration it stores: defaults we do not set."""
    stored = copy.deepcopy(configuration)
    for hook in stored["webhooks"]:
        hook.setdefault("objectSelector", {})
        hook.setdefault("namespaceSelector", {})
        hook["rules"][0].setdefault("scope", "*")
    return stored


def test_by_url_the_whole_configuration_is_written_once_and_again_only_when_it_differs() -> None:
    cert = serving()
    ca = base64.b64encode(cert.ca).decode()

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            registrar = Registrar(
                api, cert, "orca-test", url="https://127.0.0.1:9443", namespaces=["b", "a"]
            )
            assert await registrar.ensure() is True
            written = server.get("validatingwebhookconfigurations", "orca-test")
            assert written is not None
            assert written["metadata"]["labels"] == {"app.kubernetes.io/name": "orca-controller"}
            (hook,) = written["webhooks"]
            assert hook["clientConfig"] == {
                "url": "https://127.0.0.1:9443/validate-workloads",
                "caBundle": ca,
            }
            assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["a", "b"]
            assert {k: hook[k] for k in WEBHOOK} == WEBHOOK
            # Stored with the API server's defaults: nothing to do, however often asked.
            server.put("validatingwebhookconfigurations", as_the_api_server_returns(written))
            for _ in range(3):
                assert await registrar.ensure() is False
            assert len(server.seen("PUT")) == 0 and len(server.seen("POST")) == 1
            # Someone made it fail closed: put back.
            changed = copy.deepcopy(server.get("validatingwebhookconfigurations", "orca-test"))
            assert changed is not None
            changed["webhooks"][0]["failurePolicy"] = "Fail"
            server.put("validatingwebhookconfigurations", changed)
            assert await registrar.ensure() is True
            back = server.get("validatingwebhookconfigurations", "orca-test")
            assert back is not None and back["webhooks"][0]["failurePolicy"] == "Ignore"

    run(scenario)


def shipped_configuration(ca: str | None = None) -> dict[str, Any]:
    """The shipped configuration (manifests/webhook) under the test's name, with a second
    webhook of someone else's beside orca's."""
    config = yaml.safe_load((SHIPPED / "validatingwebhookconfiguration.yaml").read_text())
    config["metadata"]["name"] = "orca-test"
    theirs = copy.deepcopy(config["webhooks"][0])
    theirs["name"] = "theirs.example.com"
    theirs["clientConfig"]["service"] = {"namespace": "other", "name": "orca-webhook"}
    config["webhooks"].append(theirs)
    if ca is not None:
        config["webhooks"][0]["clientConfig"]["caBundle"] = ca
    return dict(config)


def test_by_service_only_the_ca_bundle_of_our_webhook_is_kept() -> None:
    cert = serving()
    ca = base64.b64encode(cert.ca).decode()

    async def scenario(server: FakeApiServer) -> None:
        server.put("validatingwebhookconfigurations", shipped_configuration())
        before = copy.deepcopy(server.get("validatingwebhookconfigurations", "orca-test"))
        async with server.client() as api:
            registrar = Registrar(
                api, cert, "orca-test", service=ServiceRef("orca-system", "orca-webhook")
            )
            assert await registrar.ensure() is True
            assert await registrar.ensure() is False  # current: no write
        after = server.get("validatingwebhookconfigurations", "orca-test")
        assert before is not None and after is not None
        assert after["webhooks"][0]["clientConfig"]["caBundle"] == ca
        assert "caBundle" not in after["webhooks"][1]["clientConfig"]  # not ours
        after["webhooks"][0]["clientConfig"].pop("caBundle")
        assert after["webhooks"] == before["webhooks"]  # nothing else changed
        assert len(server.seen("PUT", CONFIGURATION_PATH)) == 1

    run(scenario)


def test_by_service_a_configuration_that_is_not_there_is_said_once_and_not_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert = serving()

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            registrar = Registrar(
                api, cert, "orca-test", service=ServiceRef("orca-system", "orca-webhook")
            )
            assert [await registrar.ensure() for _ in range(3)] == [False] * 3
        assert server.seen("POST") == [] and server.seen("PUT") == []

    with caplog.at_level(logging.WARNING, logger="orca.webhook"):
        run(scenario)
    (record,) = [r for r in caplog.records if r.name == "orca.webhook"]
    assert "ValidatingWebhookConfiguration orca-test not found" in record.getMessage()


def test_a_refused_read_is_raised_and_the_loop_goes_on_after_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert = serving()
    ca = base64.b64encode(cert.ca).decode()

    async def scenario(server: FakeApiServer) -> None:
        server.put("validatingwebhookconfigurations", shipped_configuration())
        server.refuse("GET", CONFIGURATION_PATH, 403, "Forbidden")
        async with server.client() as api:
            registrar = Registrar(
                api, cert, "orca-test", service=ServiceRef("orca-system", "orca-webhook")
            )
            with pytest.raises(ApiError):
                await registrar.ensure()
            server.refuse("GET", CONFIGURATION_PATH, 403, "Forbidden")
            looping = asyncio.create_task(registrar.run(every=0.05))

            def landed() -> bool:
                got = server.get("validatingwebhookconfigurations", "orca-test") or {}
                return bool(got["webhooks"][0]["clientConfig"].get("caBundle") == ca)

            await until(landed, "the caBundle set on the next round", timeout=5)
            looping.cancel()

    with caplog.at_level(logging.WARNING, logger="orca.webhook"):
        run(scenario)
    assert any("not updated" in r.getMessage() and "403" in r.getMessage() for r in caplog.records)


def test_a_rotation_is_registered_at_once_not_at_the_next_round() -> None:
    first, second = tls.generate(["127.0.0.1"]), tls.generate(["127.0.0.1"])
    bundles = [first]

    async def source() -> tls.CertBundle:
        return bundles[-1]

    cert = ServingCert(source, "test")

    async def scenario(server: FakeApiServer) -> None:
        await cert.load()
        server.put("validatingwebhookconfigurations", shipped_configuration())
        async with server.client() as api:
            registrar = Registrar(
                api, cert, "orca-test", service=ServiceRef("orca-system", "orca-webhook")
            )
            looping = asyncio.create_task(registrar.run(every=3600))

            def bundle() -> str | None:
                got = server.get("validatingwebhookconfigurations", "orca-test") or {}
                return got["webhooks"][0]["clientConfig"].get("caBundle")  # type: ignore[no-any-return]

            first_ca = base64.b64encode(first.ca).decode()
            await until(lambda: bundle() == first_ca, "first CA", timeout=5)
            bundles.append(second)
            await cert.load()  # rotated: sets cert.changed
            second_ca = base64.b64encode(second.ca).decode()
            await until(lambda: bundle() == second_ca, "second CA", timeout=5)
            looping.cancel()

    run(scenario)


def test_the_url_of_a_host_and_port() -> None:
    assert webhook_url("127.0.0.1", 9443) == "https://127.0.0.1:9443"
    assert webhook_url("::1", 9443) == "https://[::1]:9443"
    assert webhook_url("orca.example", 443) == "https://orca.example"


# -- the check kopf calls, and the server kopf runs -----------------------------------------


def test_an_object_being_deleted_is_never_refused_whatever_its_spec() -> None:
    admission = Admission(lambda: NO_CLASSES)
    old = workload()
    deleting = workload(constraints=["node.cpu"])  # a bad spec, as finalizers come off
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    assert admission.review("UPDATE", deleting, old, []) is None
    del deleting["metadata"]["deletionTimestamp"]
    assert admission.review("UPDATE", deleting, old, []) is not None


def test_the_warning_about_classes_is_only_for_a_class_named_before_they_are_known() -> None:
    high = PriorityClasses.of([PriorityClass("high", 1000)])
    cases = [
        (lambda: None, workload(), []),
        (lambda: high, workload(priorityClassName="high"), []),
        (lambda: None, workload(priorityClassName="high"), [CLASSES_UNKNOWN]),
    ]
    for classes, obj, said in cases:
        warnings: list[str] = []
        assert Admission(classes).review("CREATE", obj, None, warnings) is None
        assert warnings == said


def test_the_scheduler_given_is_the_one_that_checks() -> None:
    scheduler = Scheduler()
    assert Admission(lambda: NO_CLASSES, scheduler=scheduler).scheduler is scheduler
    assert isinstance(Admission(lambda: NO_CLASSES).scheduler, Scheduler)


def body(obj: dict[str, Any]) -> kopf.Body:
    """``obj`` as kopf hands a handler its object."""
    return kopf.Body(cast(Any, obj))


def validating_handler(admission: Admission) -> Any:
    registry = kopf.OperatorRegistry()
    admission.register(registry)
    (handler,) = registry._webhooks.get_all_handlers()
    return handler


def test_kopf_calls_the_check_under_the_webhooks_id_for_creates_and_updates() -> None:
    handler = validating_handler(Admission(lambda: None))
    assert handler.id == WEBHOOK_ID and handler.reason.value == "validating"
    assert sorted(handler.operations) == ["CREATE", "UPDATE"]
    selector = handler.selector
    assert (selector.group, selector.version, selector.any_name) == (GROUP, VERSION, PLURAL)

    async def call(**kwargs: Any) -> Any:
        return await handler.fn(**kwargs)

    bad = workload(constraints=["node.cpu"])
    with pytest.raises(kopf.AdmissionError) as refused:
        asyncio.run(call(body=body(bad), old=None, operation="CREATE", warnings=[]))
    assert refused.value.code == 422
    assert str(refused.value) == Admission(lambda: None).review("CREATE", bad, None, [])
    warnings: list[str] = []
    kept = workload(priorityClassName="high")
    assert (
        asyncio.run(call(body=body(kept), old=body(kept), operation="UPDATE", warnings=warnings))
        is None
    )
    assert warnings == []  # the spec is unchanged: not even looked at
    asyncio.run(call(body=body(kept), old=None, operation="CREATE", warnings=warnings))
    assert warnings == [CLASSES_UNKNOWN]


def test_a_bug_in_the_check_lets_the_write_through_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    admission = Admission(lambda: None)

    def broken(*args: Any) -> str | None:
        raise KeyError("a bug")

    monkeypatch.setattr(admission, "review", broken)
    handler = validating_handler(admission)
    warnings: list[str] = []
    with caplog.at_level(logging.ERROR, logger="orca.webhook"):
        result = asyncio.run(
            handler.fn(body=body(workload()), old=None, operation="CREATE", warnings=warnings)
        )
    assert result is None
    assert warnings == ["orca could not check this Workload (KeyError)"]
    (record,) = [r for r in caplog.records if r.name == "orca.webhook"]
    assert "admission check failed, allowing" in record.getMessage()


def test_kopfs_bodies_are_read_as_plain_dicts() -> None:
    obj = workload(constraints=["node.cpu > 1"])
    plain = _plain(body(obj))
    assert plain == obj and type(plain) is dict
    assert type(plain["spec"]["constraints"]) is list
    assert _plain(None) is None


def test_the_server_kopf_runs_serves_the_path_until_kopf_stops_it() -> None:
    cert = serving()
    answered = {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": {"uid": "u"}}

    async def fn(review: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return answered

    async def scenario() -> tuple[Any, int, bytes]:
        server = AdmissionServer(cert, addr="127.0.0.1", port=0, limits=PLAIN)
        served = cast(AsyncGenerator[Any, None], server(cast(Any, fn)))
        config = await anext(served)
        assert server.listener is not None
        port = server.listener.bound_port
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(cert))
        body = json.dumps(review_of(workload())).encode()
        writer.write(post(body) + body)
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        await served.aclose()  # kopf stops
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        return config, int(answer.split(b" ")[1]), answer.partition(b"\r\n\r\n")[2]

    config, status, body = asyncio.run(scenario())
    assert config == {"url": "https://127.0.0.1:0/validate-workloads"}
    assert (status, json.loads(body)) == (200, answered)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_server_listens_where_it_is_told_says_so_and_names_itself_when_full(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The log says where the webhook listens (the address and port given, the URL the API
    server is given), and a refusal at the bound on connections names the webhook's listener
    (the metrics port has its own)."""
    cert = serving()
    port = free_port()
    release = asyncio.Event()

    async def fn(review: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        await release.wait()  # a review in hand until the test lets it go
        return {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": {"uid": "u"}}

    async def scenario() -> bytes:
        server = AdmissionServer(
            cert, addr="127.0.0.1", port=port, limits=Limits(body=2, connections=1)
        )
        served = cast(AsyncGenerator[Any, None], server(cast(Any, fn)))
        await anext(served)
        context = client_context(cert)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        body = json.dumps(review_of(workload())).encode()
        writer.write(post(body) + body)
        await until(lambda: bool(server.listener and server.listener.open), "a review in hand")
        await asyncio.sleep(0.2)  # the review reaches its handler: BUSY
        try:  # the next one is closed before its TLS handshake ends: unanswered
            refused_reader, refused = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            refused.write(post(body) + body)
            assert await asyncio.wait_for(refused_reader.read(), 30) == b""
            refused.close()
        except (ConnectionError, ssl.SSLError):
            pass
        release.set()
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        await served.aclose()
        return answer

    with caplog.at_level(logging.INFO):
        answer = asyncio.run(scenario())
    assert answer.startswith(b"HTTP/1.1 200 ")
    messages = [r.getMessage() for r in caplog.records]
    assert f"serving the admission webhook at https://127.0.0.1:{port}" in messages
    assert "webhook: 1 connections with a request in hand: new ones refused (1)" in messages


def test_the_server_holds_a_stalled_body_for_its_own_deadline_only() -> None:
    """The body's deadline is the one the server is given (``--webhook-*`` limits), not the
    default's 10 s: a review whose body stalls is answered 408 once it passes."""
    cert = serving()

    async def fn(review: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("a review without its body is never reviewed")

    async def scenario() -> bytes:
        server = AdmissionServer(
            cert, addr="127.0.0.1", port=0, limits=Limits(body=0.5, connections=8)
        )
        served = cast(AsyncGenerator[Any, None], server(cast(Any, fn)))
        await anext(served)
        assert server.listener is not None
        port = server.listener.bound_port
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(cert))
        body = json.dumps(review_of(workload())).encode()
        writer.write(post(body) + body[:10])
        # Well before the default's 10 s; the 0.5 s given leave a loaded machine 7 s more.
        answer = await asyncio.wait_for(reader.read(), 7.5)
        writer.close()
        await served.aclose()
        return answer

    answer = asyncio.run(scenario())
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert answer.endswith(b"Request Timeout: the body did not arrive in time\n")


def client_context(cert: ServingCert) -> ssl.SSLContext:
    """A client that trusts ``cert``'s CA, as the API server does with the caBundle."""
    return ssl.create_default_context(cadata=cert.ca.decode())


def test_what_the_registrar_says_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """The lines an administrator reads: registered, updated, missing (once), not updated."""
    cert = serving()

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            by_url = Registrar(api, cert, "orca-test", url="https://127.0.0.1:9443")
            await by_url.ensure()
            changed = copy.deepcopy(server.get("validatingwebhookconfigurations", "orca-test"))
            assert changed is not None
            changed["webhooks"][0]["timeoutSeconds"] = 30
            server.put("validatingwebhookconfigurations", changed)
            await by_url.ensure()
            by_service = Registrar(
                api, cert, "orca-missing", service=ServiceRef("orca-system", "orca-webhook")
            )
            await by_service.ensure()
            await by_service.ensure()
            server.refuse("GET", f"{CONFIGURATIONS}/orca-test", 500, "InternalError")
            looping = asyncio.create_task(by_url.run(every=3600))
            await until(lambda: any("not updated" in r.message for r in caplog.records), "")
            looping.cancel()

    with caplog.at_level(logging.INFO, logger="orca.webhook"):
        run(scenario)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "orca.webhook"]
    assert lines[:3] == [
        ("INFO", "registered the admission webhook orca-test at https://127.0.0.1:9443"),
        ("INFO", "updated the admission webhook configuration orca-test"),
        (
            "WARNING",
            "ValidatingWebhookConfiguration orca-missing not found: Workloads are checked only "
            "when the operator decides them",
        ),
    ]
    level, message = lines[3]
    assert level == "WARNING"
    assert message.startswith("webhook configuration orca-test not updated: ")
    assert "500" in message and len(lines) == 4


def test_a_written_configuration_is_a_v1_validatingwebhookconfiguration() -> None:
    cert = serving()

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            await Registrar(
                api, cert, "orca-test", url="https://127.0.0.1:9443", namespaces=["a"]
            ).ensure()
        (posted,) = server.seen("POST", CONFIGURATIONS)
        assert posted.body is not None
        assert posted.body["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert posted.body["kind"] == "ValidatingWebhookConfiguration"
        assert posted.body["metadata"]["name"] == "orca-test"
        (hook,) = posted.body["webhooks"]
        assert hook["namespaceSelector"] == {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a"]}
            ]
        }

    run(scenario)


def test_a_review_that_finds_no_room_in_time_is_a_503_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two reviews, room for one: the second waits for the first within its body's
    deadline, then is answered 503 (and with failurePolicy Ignore, admitted: checked later)."""
    release = asyncio.Event()

    async def slow(review: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        await release.wait()
        return ALLOWED

    body = json.dumps(review_of(workload())).encode()
    quick = Limits(body=0.2, connections=8)

    async def scenario() -> tuple[int, bytes]:
        app = admission_app(slow, ByteBudget(len(body)), quick)
        listener = Listener(app, "127.0.0.1", 0, None, quick, "webhook")
        await listener.start()
        try:
            first = await asyncio.open_connection("127.0.0.1", listener.bound_port)
            first[1].write(post(body) + body)
            await asyncio.sleep(0.05)
            reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
            writer.write(post(body) + body)
            answer = await asyncio.wait_for(reader.read(), 30)
            release.set()
            await asyncio.wait_for(first[0].read(), 30)
            return int(answer.split(b" ")[1]), answer.partition(b"\r\n\r\n")[2]
        finally:
            await listener.stop()

    with caplog.at_level(logging.INFO, logger="orca.webhook"):
        assert asyncio.run(scenario()) == (
            503,
            b"Service Unavailable: too many admission reviews in flight\n",
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "orca.webhook"]
    assert lines == [
        "admission request from 127.0.0.1 refused: "
        "Service Unavailable: too many admission reviews in flight"
    ]


def test_a_review_kopf_cannot_serve_is_logged_with_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = json.dumps(review_of(workload())).encode()
    fn = kopf_fn(kopf_error("MissingDataError"), Memories())
    with caplog.at_level(logging.INFO, logger="orca.webhook"):
        asyncio.run(exchange(admission_app(fn, ByteBudget(1 << 20)), post(body), body))
    (record,) = [r for r in caplog.records if r.name == "orca.webhook"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "admission request not served: Bad Request: the review could not be served "
        "(MissingDataError) (MissingDataError('apps/v1 deployments s3cr3t'))"
    )


def test_a_review_of_an_object_without_its_new_self_forgets_the_old_one() -> None:
    memories = Memories()
    old = workload()
    body = json.dumps(review_of(None, operation="UPDATE", oldObject=old)).encode()
    asyncio.run(
        exchange(admission_app(kopf_fn(ALLOWED, memories), ByteBudget(1 << 20)), post(body), body)
    )
    assert memories.forgotten == [old]


def test_a_memo_store_that_cannot_forget_is_left_alone() -> None:
    """kopf's memo store has ``forget`` in the versions orca pins; one without is no reason
    to refuse a review."""

    class Forgetful:
        pass

    async def serve(review: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return ALLOWED

    body = json.dumps(review_of(workload())).encode()
    fn = functools.partial(serve, memories=Forgetful())
    status, answer = asyncio.run(exchange(admission_app(fn, ByteBudget(1 << 20)), post(body), body))
    assert (status, json.loads(answer)) == (200, ALLOWED)


def test_room_given_just_as_a_review_gives_up_is_given_back() -> None:
    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        budget = ByteBudget(10)
        async with budget.hold(10, loop.time() + 5):
            waiting = asyncio.create_task(budget._take(5, loop.time() + 5))
            await asyncio.sleep(0)  # queued
        # The holder left: room was handed to the waiter, which is cancelled (its client
        # gone) before it runs again.
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return budget.free

    assert asyncio.run(scenario()) == 10


def test_only_a_difference_in_what_orca_sets_rewrites_the_configuration() -> None:
    """The API server's defaults (an empty namespaceSelector, objectSelector, scope) are no
    difference; the URL, the CA or the namespaces are."""
    cert = serving()

    async def scenario(server: FakeApiServer) -> list[bool]:
        async with server.client() as api:
            registrar = Registrar(api, cert, "orca-test", url="https://127.0.0.1:9443")
            assert await registrar.ensure() is True
            stored = server.get("validatingwebhookconfigurations", "orca-test")
            assert stored is not None
            server.put("validatingwebhookconfigurations", as_the_api_server_returns(stored))
            rewritten = [await registrar.ensure()]
            for change in (
                {"url": "https://127.0.0.1:9444/validate-workloads"},
                {"caBundle": "b3RoZXI="},
            ):
                current = server.get("validatingwebhookconfigurations", "orca-test")
                assert current is not None
                changed = copy.deepcopy(current)
                changed["webhooks"][0]["clientConfig"].update(change)
                server.put("validatingwebhookconfigurations", changed)
                rewritten.append(await registrar.ensure())
            current = server.get("validatingwebhookconfigurations", "orca-test")
            assert current is not None
            changed = copy.deepcopy(current)
            changed["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"team": "a"}}
            server.put("validatingwebhookconfigurations", changed)
            rewritten.append(await registrar.ensure())
            rewritten.append(await registrar.ensure())
            return rewritten

    results: list[list[bool]] = []

    async def keep(server: FakeApiServer) -> None:
        results.append(await scenario(server))

    run(keep)
    assert results == [[False, True, True, True, False]]


def test_the_registrars_requests_are_counted_by_verb() -> None:
    """``orca_api_requests_total`` counts them as kube does (upper-case verbs): a read, a
    create, a replace."""
    cert = serving()

    def count(verb: str, code: str) -> float:
        labels = {"verb": verb, "resource": "validatingwebhookconfigurations", "code": code}
        return REGISTRY.get_sample_value("orca_api_requests_total", labels) or 0.0

    before = {
        key: count(*key)
        for key in (("GET", "404"), ("POST", "201"), ("GET", "200"), ("PUT", "200"))
    }

    async def scenario(server: FakeApiServer) -> None:
        async with server.client() as api:
            registrar = Registrar(api, cert, "orca-test", url="https://127.0.0.1:9443")
            await registrar.ensure()  # GET 404, POST
            current = server.get("validatingwebhookconfigurations", "orca-test")
            assert current is not None
            changed = copy.deepcopy(current)
            changed["webhooks"][0]["timeoutSeconds"] = 30
            server.put("validatingwebhookconfigurations", changed)
            await registrar.ensure()  # GET 200, PUT

    run(scenario)
    assert {key: count(*key) - n for key, n in before.items()} == dict.fromkeys(before, 1.0)
