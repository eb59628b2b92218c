"""What the API server + etcd spend on each request a placement makes, kube-scheduler's and
orca's side by side, with nothing watching but the server's own cache; and what each of the
levers orca pulls on its requests saves, one at a time, in the same run.

Per row, in a namespace of its own, ``--objects`` objects, 32 requests in flight:

- ``kube-scheduler``: a Pod's create, kube-scheduler's placement write (the ``binding``
  subresource), an Event (``--pod-event``: kube-scheduler's own, an ``events.k8s.io/v1``
  Event in protobuf as its recorder posts it, ``kube_events.py``, each read back and checked;
  or the JSON core/v1 body orca posts);
- ``orca before``: a Workload's create (the CRD as it was before issue 31: ``conditions`` a
  map keyed by type, each ``status`` field tracked on its own), the placement write orca made
  before issue 31 (a merge PATCH of ``/status`` with the status of ``BEFORE``, preconditioned
  on the resourceVersion, the whole object answered) and the Event orca posted then (JSON);
- one row per lever (``LEVERS``), ``before`` with that lever alone switched on;
- ``orca now``: every lever on, i.e. the CRD as shipped and what orca's own code sends now
  (``KubeApi``'s ``write_workload_status`` and ``create_event`` with the status orca's
  scheduler decides);
- diagnostic rows (``--diagnostics``), ``before`` with something orca does not do: a status
  smaller than what users read (no condition ``observedGeneration``; the phase and the
  placements alone), or a changed server (the CRD without its CEL rules, Workloads whose
  ``managedFields`` were cleared so the field manager skips them): what those parts of the
  server's work cost; ``every lever and no managedFields``, ``now``'s requests on objects without
  managedFields; ``floor``, all of them at once with every lever (the cheapest placement
  write any client could make to a custom resource on this server); ``bare client``, the
  requests ``now`` sends, encoded before the clock and sent straight through aiohttp: the
  client CPU any asyncio client pays per request, against orca's own ``KubeApi`` in ``now``.

The rows run in a rotated order each round (``--rounds``: the machine is shared; compare
within a round). Printed per row: kube-apiserver and etcd CPU per request (from ``/proc``),
and orca's client CPU (this process: orca's own ``KubeApi``, aiohttp, TLS, orjson).

``--pprof DIR`` also takes a kube-apiserver CPU profile (``/debug/pprof/profile``) of the
first ``--pprof-seconds`` of each create, placement write and Event, saves it in
``DIR/round<N>`` and prints where the server's CPU went, by category
(``apiserver_profile.CATEGORIES``), in ms per request, and the medians over the rounds.
Read them further with ``go tool pprof -top BINARY DIR/round0/FILE``. ``--fresh`` deletes
each row's namespace before the next row starts.

    python bench/bench_server_cost.py --objects 2000 --rounds 2
    python bench/bench_server_cost.py --objects 6000 --rounds 1 --pprof /tmp/pprof \\
        --rows kube-scheduler,before,now
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import median
from typing import Any

import orjson
import yaml
from yarl import URL

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench import apiserver_profile
from bench.bench_vs_kube_scheduler import (
    node_objects,
    pod_object,
    wait_default_service_account,
    workload_object,
)
from bench.common import command_line, cpu_seconds, record
from bench.kube_events import EVENTS_V1, PROTOBUF, scheduled_event
from controller.api.models import API_VERSION, KIND, status_body, workload_path
from controller.devcluster.controlplane import ControlPlane
from controller.inputs.manifests import parse_workload
from controller.operator.events import PendingEvent
from controller.operator.kube import ApiError, KubeApi, load_configuration
from controller.operator.kube.client import MERGE_PATCH, NO_FIELD_VALIDATION, authorization
from controller.scheduler.nodes import node_info_from_node
from controller.scheduler.plan import plan

CRD = Path(__file__).resolve().parents[1] / "crds" / "workloads.orca.cloudinit.dev.yaml"
WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1/namespaces/{ns}/workloads"
WIDTH = 32  # requests in flight
KUBE, BEFORE, NOW = "kube-scheduler", "before", "now"
NODE = "node-00001"

#: The status orca wrote for a one-replica Job before issue 31 (its own scheduler's words, a
#: placement from ``orca_status``'s cluster), kept here so the lever rows have a fixed start.
BEFORE_STATUS: dict[str, Any] = {
    "observedGeneration": 1,
    "phase": "Scheduled",
    "desired": 1,
    "placed": 1,
    "placements": [{"node": NODE, "allocId": "{ns}/{name}-0", "score": 83}],
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "AllPlaced",
            "message": "1/1 replicas placed",
            "lastTransitionTime": "2026-11-30T00:00:00Z",
            "observedGeneration": 1,
        },
        {
            "type": "Reconciling",
            "status": "False",
            "reason": "AllPlaced",
            "lastTransitionTime": "2026-11-30T00:00:00Z",
            "observedGeneration": 1,
        },
        {
            "type": "Stalled",
            "status": "False",
            "reason": "AllPlaced",
            "lastTransitionTime": "2026-11-30T00:00:00Z",
            "observedGeneration": 1,
        },
        {
            "type": "Scheduled",
            "status": "True",
            "reason": "AllPlaced",
            "message": "1/1 replicas placed",
            "lastTransitionTime": "2026-11-30T00:00:00Z",
            "observedGeneration": 1,
        },
    ],
    "message": "1/1 replicas placed",
    "unschedulable": [],
    "nodes": NODE,
    "resources": {"cpu": "100m", "memory": "128Mi"},
    "priority": 0,
}


# -- what a row sends -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Writes:
    """How a row writes a placement and its Event (orca's side)."""

    status: Callable[[str, str], dict[str, Any]]  # (namespace, name) -> the status written
    put: bool = False  # a PUT of the status alone (with the object's name and version)
    params: dict[str, str] = field(default_factory=dict)  # the write's query
    accept: str = "application/json"  # the write's answer
    event_params: dict[str, str] = field(default_factory=dict)
    event_accept: str = "application/json"
    #: The CRD before issue 31 (``conditions`` a map keyed by type) and before ``status``
    #: was one atomic map: ``before`` has both, a lever takes one away.
    map_conditions: bool = False
    granular_status: bool = False
    crd: Callable[[dict[str, Any]], dict[str, Any]] = lambda crd: crd  # a diagnostic's change
    clear_managed_fields: bool = False  # diagnostic: no managedFields on the objects written
    #: Diagnostic: the write and the Event ``now`` sends, as bytes encoded before the clock,
    #: straight through the aiohttp session (no orca code in the way): the client's floor.
    bare: bool = False

    def schema(self, shipped: dict[str, Any]) -> dict[str, Any]:
        """The CRD this row writes to: the shipped one as ``before`` had it, less the levers
        on, with the diagnostic's change."""
        crd = granular_status(shipped) if self.granular_status else shipped
        return self.crd(map_conditions(crd) if self.map_conditions else crd)


def before_status(namespace: str, name: str) -> dict[str, Any]:
    status = copy.deepcopy(BEFORE_STATUS)
    status["placements"][0]["allocId"] = f"{namespace}/{name}-0"
    return status


_CURRENT: dict[str, Any] = {}


def current_status(namespace: str, name: str) -> dict[str, Any]:
    """The status orca's scheduler decides now for the bench's Workload, as the operator
    sends it (the same placement as ``BEFORE_STATUS``'s, so only the shape differs)."""
    if not _CURRENT:
        nodes = [node_info_from_node(n) for n in node_objects(50, seed=7)]
        workload = parse_workload(workload_object("w", "ns"), "bench")
        (result,) = plan(nodes, [workload])
        _CURRENT.update(status_body(result.status))
    status = copy.deepcopy(_CURRENT)
    for placement in status.get("placements") or []:
        placement.update(node=NODE, allocId=f"{namespace}/{name}-0", score=83)
    if "nodes" in status:
        status["nodes"] = NODE
    return status


PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def shaped(w: Writes, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Writes:
    """``w`` writing its status changed by ``change``."""
    return replace(w, status=lambda ns, name: change(w.status(ns, name)))


def no_condition_generation(status: dict[str, Any]) -> dict[str, Any]:
    for condition in status["conditions"]:
        condition.pop("observedGeneration", None)
    return status


#: Each lever: what it changes of ``before``'s requests, alone (``orca now`` has them all).
LEVERS: dict[str, Callable[[Writes], Writes]] = {
    "status shape": lambda w: replace(w, status=current_status),
    "conditions atomic (CRD)": lambda w: replace(w, map_conditions=False),
    "status atomic (CRD)": lambda w: replace(w, granular_status=False),
    "PUT /status": lambda w: replace(w, put=True),
    "metadata answer": lambda w: replace(w, accept=PARTIAL),
    "fieldValidation=Ignore": lambda w: replace(
        w, params={**w.params, "fieldValidation": "Ignore"}
    ),
    "Event: metadata answer": lambda w: replace(w, event_accept=PARTIAL),
    "Event: fieldValidation=Ignore": lambda w: replace(
        w, event_params={**w.event_params, "fieldValidation": "Ignore"}
    ),
}


def without_rules(node: Any) -> Any:
    """The CRD document with every ``x-kubernetes-validations`` removed."""
    if isinstance(node, dict):
        return {k: without_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_rules(v) for v in node]
    return node


def map_conditions(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD as orca shipped it before issue 31: ``status.conditions`` a map keyed by
    ``type`` (one managedFields path per condition and field) instead of an atomic list (one
    for the list)."""
    crd = copy.deepcopy(crd)
    for version in crd["spec"]["versions"]:
        conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
            "conditions"
        ]
        conditions["x-kubernetes-list-type"] = "map"
        conditions["x-kubernetes-list-map-keys"] = ["type"]
    return crd


def granular_status(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD as orca shipped it before ``status`` was one atomic map: one managedFields path
    per status field (and per field of each condition when they are a map) instead of
    ``f:status`` alone."""
    crd = copy.deepcopy(crd)
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["status"].pop(
            "x-kubernetes-map-type", None
        )
    return crd


def minimal(status: dict[str, Any]) -> dict[str, Any]:
    """The floor: the phase and the placements alone."""
    return {"phase": status["phase"], "placements": status["placements"]}


def every_lever(w: Writes) -> Writes:
    """``w`` with every lever on: ``now``'s requests, sent by this bench's own code."""
    for lever in LEVERS.values():
        w = lever(w)
    return w


def floor(w: Writes) -> Writes:
    """Every lever orca pulls, and every cut of the diagnostics above at once: the cheapest
    placement write any client could make to a custom resource on this server (the phase and
    the placements alone, no CEL rules, no managedFields, a PUT answered with metadata, no
    strict field check). What it still costs over a Pod binding is the custom resource's path
    through the server, which no client chooses."""
    return replace(shaped(every_lever(w), minimal), crd=without_rules, clear_managed_fields=True)


DIAGNOSTICS: dict[str, Callable[[Writes], Writes]] = {
    "no condition observedGeneration": lambda w: shaped(w, no_condition_generation),
    "phase and placements alone": lambda w: shaped(w, minimal),
    "no CEL rules (server)": lambda w: replace(w, crd=without_rules),
    "no managedFields (server)": lambda w: replace(w, clear_managed_fields=True),
    "every lever and no managedFields (server)": lambda w: replace(
        every_lever(w), clear_managed_fields=True
    ),
    "floor: every cut at once": floor,
    "bare client": lambda w: replace(every_lever(w), bare=True),
}


def rows(levers: Iterable[str], diagnostics: Iterable[str]) -> dict[str, Writes | None]:
    """The rows in their first round's order: kube-scheduler (None), before, each lever,
    each diagnostic, now."""
    before = Writes(status=before_status, map_conditions=True, granular_status=True)
    out: dict[str, Writes | None] = {KUBE: None, BEFORE: before}
    out.update({f"+ {name}": LEVERS[name](before) for name in levers})
    out.update({f"? {name}": DIAGNOSTICS[name](before) for name in diagnostics})
    out[NOW] = None  # orca's own client and status, whatever they are now
    return out


# -- measuring ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    rate: float  # requests/s
    apiserver_ms: float  # kube-apiserver CPU per request
    etcd_ms: float
    client_ms: float  # this process's CPU per request: orca's own client, ``KubeApi``
    profile: dict[str, float] | None = None  # ms per request by category (``--pprof``)

    @property
    def server_ms(self) -> float:
        return self.apiserver_ms + self.etcd_ms


@dataclass
class Profiling:
    """Where to save kube-apiserver profiles and for how long to take each."""

    directory: Path
    seconds: int
    binary: Path


async def each(
    plane: ControlPlane,
    api: KubeApi,
    items: Iterable[Any],
    call: Callable[[Any], Awaitable[None]],
    profile: tuple[Profiling, str] | None = None,
) -> Cost:
    """What ``call`` on every item costs, ``WIDTH`` in flight. With ``profile``, the figures
    are those of the profile's window (its first seconds) and its breakdown is added."""
    pending = list(items)
    queue = iter(pending)
    window = {"done": 0, "open": True}

    async def worker() -> None:
        for item in queue:
            await call(item)
            if window["open"]:
                window["done"] += 1

    pids = plane.pids
    apiserver, etcd = pids["kube-apiserver"], pids["etcd"]
    before = (cpu_seconds(apiserver), cpu_seconds(etcd), time.process_time())
    started = time.perf_counter()
    capture = None
    if profile is not None:
        profiling, name = profile
        path = profiling.directory / f"{name}.pprof"
        capture = asyncio.create_task(
            apiserver_profile.capture(api.configuration, profiling.seconds, path)
        )

        def close(_: object) -> None:
            window["open"] = False

        capture.add_done_callback(close)
    workers: asyncio.Future[list[None]] = asyncio.gather(*(worker() for _ in range(WIDTH)))
    if capture is None:
        await workers
        count, seconds = len(pending), time.perf_counter() - started
        after = (cpu_seconds(apiserver), cpu_seconds(etcd), time.process_time())
        breakdown = None
    else:
        both: list[asyncio.Future[Any]] = [capture, workers]
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        # The figures end with the first of the two: the requests' window, without the idle
        # tail of a profile that outlasts them (which made every row look alike).
        after = (cpu_seconds(apiserver), cpu_seconds(etcd), time.process_time())
        count, seconds = max(window["done"], 1), time.perf_counter() - started
        if not capture.done():
            print(f"  (profile {name}: every request done before the profile ended)", flush=True)
            await capture
        await workers
        total, categories = apiserver_profile.breakdown(profiling.binary, capture.result())
        breakdown = {k: v / count * 1000 for k, v in categories.items()}
        breakdown["(sampled)"] = total / count * 1000
    apiserver_ms, etcd_ms, client_ms = (
        (a - b) / count * 1000 for a, b in zip(after, before, strict=True)
    )
    return Cost(count / seconds, apiserver_ms, etcd_ms, client_ms, breakdown)


async def settle(plane: ControlPlane, quiet: float = 0.15, timeout: float = 180) -> None:
    """Wait until kube-apiserver and etcd use less than ``quiet`` of a core over a second
    (twice in a row): what the previous row left behind (the watch cache catching up with
    a new CRD, the controller manager's garbage collector relisting) is not this row's."""
    pids = [plane.pids["kube-apiserver"], plane.pids["etcd"]]
    deadline, calm = time.monotonic() + timeout, 0
    while calm < 2 and time.monotonic() < deadline:
        before = sum(cpu_seconds(p) for p in pids)
        await asyncio.sleep(1)
        calm = calm + 1 if sum(cpu_seconds(p) for p in pids) - before < quiet else 0


async def delete_namespace(
    plane: ControlPlane, api: KubeApi, namespace: str, timeout: float = 600
) -> None:
    """Delete a row's namespace and wait until it is gone (the namespace controller deletes
    what is in it), then for the API server to settle: every row starts from the same
    cluster, not one that grew by every row before it (a bigger watch cache and heap)."""
    plane.kubectl("delete", "namespace", namespace, "--wait=false", check=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await api.request("GET", f"/api/v1/namespaces/{namespace}")
        except ApiError as exc:
            if exc.not_found:
                break
            raise
        await asyncio.sleep(1)
    else:
        raise SystemExit(f"namespace {namespace} still there after {timeout:.0f}s")
    await settle(plane)


async def kube_scheduler_row(
    plane: ControlPlane,
    api: KubeApi,
    namespace: str,
    count: int,
    pod_event: str,
    profiling: Profiling | None,
) -> dict[str, Cost]:
    """Pods: create, bind, an Event each (``--pod-event``)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    names = [f"o{i:05d}" for i in range(count)]
    created: dict[str, dict[str, Any]] = {}

    async def create(name: str) -> None:
        created[name] = await api.request("POST", path, pod_object(name, namespace))

    async def bind(name: str) -> None:
        target = {"apiVersion": "v1", "kind": "Node", "name": NODE}
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}}
        await api.request("POST", f"{path}/{name}/binding", {**binding, "target": target})

    async def post(name: str) -> None:
        meta = created[name]["metadata"]
        if pod_event == "json":
            body = event_body(name, namespace, meta["uid"], meta["resourceVersion"], "v1", "Pod")
            await api.request("POST", f"/api/v1/namespaces/{namespace}/events", body)
            return
        event = scheduled_event(name, namespace, meta["uid"], meta["resourceVersion"], NODE)
        await post_protobuf(api, EVENTS_V1.format(ns=namespace), event)

    costs = {"create": await each(plane, api, names, create, _profile(profiling, "pod-create"))}
    costs["placement write"] = await each(plane, api, names, bind, _profile(profiling, "binding"))
    costs["Event"] = await each(plane, api, names, post, _profile(profiling, "binding-event"))
    if pod_event == "kube-scheduler":
        await check_kube_scheduler_events(api, namespace, count)
    return costs


async def send_bytes(
    api: KubeApi, method: str, path: str, body: bytes, content_type: str, accept: str
) -> tuple[int, bytes]:
    """``body`` as it is, straight through ``api``'s session with its credentials (none of
    ``KubeApi.request``'s own work on the way); the answer's status and bytes."""
    headers = {"Content-Type": content_type, "Accept": accept}
    token = authorization(api.configuration)
    if token:
        headers["Authorization"] = token
    session = await api.session()
    url = URL(api.configuration.host + path, encoded=True)
    async with session.request(method, url, data=body, headers=headers) as response:
        return response.status, await response.read()


async def post_protobuf(api: KubeApi, path: str, body: bytes) -> None:
    """POST ``body`` as kube-scheduler's client does (protobuf in, protobuf out)."""
    status, answer = await send_bytes(api, "POST", path, body, PROTOBUF, PROTOBUF)
    if status != 201:
        raise SystemExit(f"POST {path}: {status} {answer[:300]!r}")


async def check_kube_scheduler_events(api: KubeApi, namespace: str, count: int) -> None:
    """Every protobuf Event posted reads back (JSON) as kube-scheduler's ``Scheduled``."""
    listed = (await api.request("GET", EVENTS_V1.format(ns=namespace)))["items"]
    good = [
        e
        for e in listed
        if e.get("reason") == "Scheduled"
        and e.get("action") == "Binding"
        and e.get("reportingController") == "default-scheduler"
        and (e.get("regarding") or {}).get("kind") == "Pod"
        and (e.get("note") or "").startswith(f"Successfully assigned {namespace}/")
        and e.get("eventTime")
    ]
    if len(good) != count:
        raise SystemExit(f"{len(good)}/{count} Events read back as kube-scheduler's: {listed[:1]}")


def _profile(profiling: Profiling | None, name: str) -> tuple[Profiling, str] | None:
    return (profiling, name) if profiling is not None else None


def event_body(
    name: str, namespace: str, uid: str, version: str, api_version: str, kind: str
) -> dict[str, Any]:
    """The ``Scheduled`` Event orca posts for a placement (on a Pod for the Pods' row)."""
    event = PendingEvent(
        name, namespace, uid, version, "Scheduled", f"Placed 1/1 replicas on {NODE}", False,
        "2026-11-30T00:00:00Z", "bench",
    )  # fmt: skip
    body = event.body()
    body["involvedObject"].update(apiVersion=api_version, kind=kind)
    return body


async def orca_row(
    plane: ControlPlane,
    api: KubeApi,
    namespace: str,
    count: int,
    writes: Writes | None,
    label: str,
    profiling: Profiling | None,
) -> dict[str, Cost]:
    """Workloads: create, a status write, an Event each; ``writes`` None: orca's own calls."""
    path = WORKLOADS.format(ns=namespace)
    names = [f"o{i:05d}" for i in range(count)]
    created: dict[str, dict[str, Any]] = {}

    async def create(name: str) -> None:
        created[name] = await api.request("POST", path, workload_object(name, namespace))
        if writes is not None and writes.clear_managed_fields:
            reset: dict[str, Any] = {"metadata": {"managedFields": [{}]}}
            created[name] = await api.request(
                "PATCH", workload_path(namespace, name), reset, MERGE_PATCH
            )

    def put_body(name: str, status: dict[str, Any]) -> dict[str, Any]:
        """A PUT of ``status`` alone, preconditioned on the created object's version."""
        version = created[name]["metadata"]["resourceVersion"]
        metadata = {"name": name, "namespace": namespace, "resourceVersion": version}
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "status": status}

    def event_of(name: str) -> dict[str, Any]:
        meta = created[name]["metadata"]
        return event_body(
            name, namespace, meta["uid"], meta["resourceVersion"], "orca.cloudinit.dev/v1alpha1",
            "Workload",
        )  # fmt: skip

    prepared: dict[str, tuple[bytes, bytes]] = {}  # ``bare``: each object's write and Event

    async def bare(method: str, path: str, body: bytes) -> None:
        query = path + NO_FIELD_VALIDATION
        status, answer = await send_bytes(api, method, query, body, "application/json", PARTIAL)
        if status >= 300:
            raise SystemExit(f"{method} {path}: {status} {answer[:300]!r}")

    async def write(name: str) -> None:
        version = created[name]["metadata"]["resourceVersion"]
        if writes is not None and writes.bare:
            await bare("PUT", workload_path(namespace, name, status=True), prepared[name][0])
            return
        if writes is None:
            await api.write_workload_status(
                namespace, name, current_status(namespace, name), version
            )
            return
        status = writes.status(namespace, name)
        if writes.put:
            body = put_body(name, status)
        else:
            body = {"metadata": {"resourceVersion": version}, "status": status}
        await api.request(
            "PUT" if writes.put else "PATCH",
            workload_path(namespace, name, status=True),
            body,
            "application/json" if writes.put else MERGE_PATCH,
            params=writes.params or None,
            accept=writes.accept,
        )

    async def post(name: str) -> None:
        body = event_of(name)
        if writes is None:
            await api.create_event(namespace, body)
            return
        if writes.bare:
            await bare("POST", f"/api/v1/namespaces/{namespace}/events", prepared[name][1])
            return
        await api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            body,
            params=writes.event_params or None,
            accept=writes.event_accept,
        )

    slug = label.strip("+? ").replace(" ", "-").replace("=", "-").replace(":", "")
    costs = {"create": await each(plane, api, names, create, _profile(profiling, f"{slug}-create"))}
    if writes is not None and writes.bare:  # encoded before the clock
        for name in names:
            put = put_body(name, writes.status(namespace, name))
            prepared[name] = (orjson.dumps(put), orjson.dumps(event_of(name)))
    costs["placement write"] = await each(
        plane, api, names, write, _profile(profiling, f"{slug}-status-write")
    )
    costs["Event"] = await each(plane, api, names, post, _profile(profiling, f"{slug}-event"))
    return costs


def install(plane: ControlPlane, document: dict[str, Any], workdir: Path) -> None:
    path = workdir / "crd.yaml"
    path.write_text(yaml.safe_dump(document))
    plane.kubectl("apply", "-f", str(path), check=True)
    established = "--for=condition=established"
    plane.kubectl("wait", established, "crd/workloads.orca.cloudinit.dev", check=True)


# -- the run --------------------------------------------------------------------------------------


def report(round_: int, label: str, costs: dict[str, Cost], reference: float | None) -> float:
    """Print a row; returns its API server + etcd CPU per placement (write + Event)."""
    write, event = costs["placement write"], costs["Event"]
    total = write.server_ms + event.server_ms
    ratio = f" = {total / reference:.2f}x kube-scheduler's" if reference else ""
    print(
        f"round {round_}  {label:30s} create {costs['create'].server_ms:5.2f} ms | "
        f"placement write {write.apiserver_ms:5.2f} + etcd {write.etcd_ms:4.2f} ms "
        f"({write.rate:4.0f}/s) | Event {event.apiserver_ms:5.2f} + etcd {event.etcd_ms:4.2f} ms"
        f" | per placement {total:5.2f} ms{ratio}",
        flush=True,
    )
    if label != KUBE:
        print(
            f"round {round_}  {'':30s} client (this process) CPU per write + Event: "
            f"{write.client_ms:.2f} + {event.client_ms:.2f} ms",
            flush=True,
        )
    for what, cost in (("create", costs["create"]), ("placement write", write), ("Event", event)):
        if cost.profile:
            parts = ", ".join(f"{k} {v:.2f}" for k, v in cost.profile.items() if v >= 0.005)
            print(f"          kube-apiserver profile, {what}, ms per request: {parts}", flush=True)
    return total


async def run(
    plane: ControlPlane, workdir: Path, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """Every row of every round; returns their API server + etcd CPU per request, for
    ``bench/results``."""
    shipped = yaml.safe_load(CRD.read_text())
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    installed: Any = None
    every: list[dict[str, dict[str, Cost]]] = []
    try:
        for round_ in range(args.rounds):
            table = rows(args.levers, args.diagnostics)
            order = list(table.items())
            order = order[round_ % len(order) :] + order[: round_ % len(order)]
            results: dict[str, dict[str, Cost]] = {}
            profiling = (
                Profiling(
                    args.pprof / f"round{round_}",
                    args.pprof_seconds,
                    plane.bin_dir / "kube-apiserver",
                )
                if args.pprof
                else None
            )
            for i, (label, writes) in enumerate(order):
                namespace = f"r{round_}-{i}"
                plane.kubectl("create", "namespace", namespace, check=True)
                await settle(plane)
                if label == KUBE:
                    await wait_default_service_account(api, namespace, 60)
                    results[label] = await kube_scheduler_row(
                        plane, api, namespace, args.objects, args.pod_event, profiling
                    )
                else:
                    crd = writes.schema(shipped) if writes is not None else shipped
                    if crd != installed:
                        install(plane, crd, workdir)
                        installed = crd
                        await asyncio.sleep(3)  # the new schema served by every handler
                        await settle(plane)
                    results[label] = await orca_row(
                        plane, api, namespace, args.objects, writes, label, profiling
                    )
                if args.fresh:
                    await delete_namespace(plane, api, namespace)
            reference = None
            for label in table:  # printed in the table's order, whatever order they ran in
                total = report(round_, label, results[label], reference)
                reference = total if label == KUBE else reference
            every.append(results)
    finally:
        await api.close()
    figures: dict[str, dict[str, float]] = {}
    if len(every) > 1:
        figures["medians"] = summary(every)
    for i, results in enumerate(every):
        figures[f"round {i}"] = {
            f"{label}: {what}_ms": cost.server_ms
            for label, costs in results.items()
            for what, cost in costs.items()
        }
        figures[f"round {i}"].update(
            {
                f"{label}: client CPU per {what}_ms": costs[what].client_ms
                for label, costs in results.items()
                if label != KUBE
                for what in ("placement write", "Event")
            }
        )
    return figures


def summary(every: list[dict[str, dict[str, Cost]]]) -> dict[str, float]:
    """Per row, the median over the rounds of its API server + etcd CPU per placement write,
    per Event and per placement, and of its ratio to kube-scheduler's and to ``before``'s
    in the same round (a ratio within a round is steadier than a figure across rounds);
    printed, and returned with the client's CPU per placement for ``bench/results``."""
    medians: dict[str, float] = {}

    def per(results: dict[str, Cost]) -> tuple[float, float, float]:
        write, event = results["placement write"].server_ms, results["Event"].server_ms
        return write, event, write + event

    print(f"medians over {len(every)} rounds (API server + etcd CPU, ms):", flush=True)
    for label in every[0]:
        figures = [per(results[label]) for results in every]
        vs_kube = [per(r[label])[2] / per(r[KUBE])[2] for r in every]
        write, event, total = (median(f[i] for f in figures) for i in range(3))
        line = f"  {label:34s} write {write:5.2f}  Event {event:5.2f}  per placement {total:5.2f}"
        medians[f"{label}: API server + etcd per placement_ms"] = total
        if label != KUBE:
            line += f"  = {median(vs_kube):.2f}x kube-scheduler's"
            medians[f"{label}: vs kube-scheduler_x"] = median(vs_kube)
            client = [
                r[label]["placement write"].client_ms + r[label]["Event"].client_ms for r in every
            ]
            medians[f"{label}: client CPU per placement_ms"] = median(client)
        if label not in (KUBE, BEFORE) and BEFORE in every[0]:
            writes = [per(r[label])[0] / per(r[BEFORE])[0] for r in every]
            line += f"; its write {100 * (median(writes) - 1):+.0f}% vs before's"
        print(line, flush=True)
        for what in ("create", "placement write", "Event"):
            profiles = [p for r in every if (p := r[label][what].profile)]
            if len(profiles) == len(every):
                parts = {k: median(p.get(k, 0.0) for p in profiles) for k in profiles[0]}
                shown = ", ".join(f"{k} {v:.2f}" for k, v in parts.items() if v >= 0.005)
                print(f"    kube-apiserver profile, {what}, ms per request: {shown}", flush=True)
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--levers",
        type=lambda s: [x for x in s.split(",") if x],
        default=list(LEVERS),
        help=f"comma-separated, of: {', '.join(LEVERS)} (default: all; '' for none)",
    )
    parser.add_argument(
        "--diagnostics",
        type=lambda s: [x for x in s.split(",") if x],
        default=[],
        help=f"comma-separated, of: {', '.join(DIAGNOSTICS)}",
    )
    parser.add_argument(
        "--pod-event",
        choices=("kube-scheduler", "json"),
        default="kube-scheduler",
        help="the Pods' Event: kube-scheduler's own (events.k8s.io/v1, protobuf), or the "
        "JSON core/v1 body orca posts",
    )
    parser.add_argument("--pprof", type=Path, help="save kube-apiserver CPU profiles here")
    parser.add_argument("--pprof-seconds", type=int, default=5)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="delete each row's namespace (and wait until it is gone) before the next row",
    )
    args = parser.parse_args(argv)
    if args.objects < 1 or args.rounds < 1 or args.pprof_seconds < 1:
        parser.error("--objects, --rounds and --pprof-seconds must be at least 1")
    unknown = [x for x in args.levers if x not in LEVERS] + [
        x for x in args.diagnostics if x not in DIAGNOSTICS
    ]
    if unknown:
        parser.error(f"unknown lever or diagnostic: {', '.join(unknown)}")
    print(
        f"{args.objects} objects per row, {WIDTH} in flight, on {os.cpu_count()} cores "
        f"(load average {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    with (
        tempfile.TemporaryDirectory(prefix="orca-server-cost-") as tmp,
        ControlPlane(Path(tmp) / "cp") as plane,
    ):
        figures = asyncio.run(run(plane, Path(tmp), args))
    record("bench_server_cost", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
