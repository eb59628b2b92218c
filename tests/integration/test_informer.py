"""The informers (``controller.operator.kube.informer``) against the real API server: what a
watch delivers from a LIST's version, a version the server no longer holds (410 Gone), and an
informer that must LIST again and lose nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controller.devcluster.controlplane import ControlPlane
from controller.operator.handlers import NodeEvents, StartupGate, WorkloadEvents
from controller.operator.kube import ApiError, KubeApi, load_configuration
from controller.operator.kube.informer import Informer
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from controller.scheduler.nodes import NODES_PATH
from tests.support.factories import node_object, workload_obj
from tests.support.harness import Cluster

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("installed")]


def _path(namespace: str) -> str:
    return f"/apis/orca.cloudinit.dev/v1alpha1/namespaces/{namespace}/workloads"


def _run(control_plane: ControlPlane, body: Callable[[KubeApi], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        api = KubeApi(load_configuration(str(control_plane.kubeconfig_path)))
        try:
            return await asyncio.wait_for(body(api), 60)
        finally:
            await api.close()

    return asyncio.run(main())


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached in {timeout}s")
        await asyncio.sleep(0.05)


def test_a_watch_delivers_every_change_after_the_list_version(
    control_plane: ControlPlane, cluster: Cluster, namespace: str
) -> None:
    cluster.apply(workload_obj("old", namespace, kind="Job"))

    async def body(api: KubeApi) -> list[tuple[str, str]]:
        listed = await api.request("GET", _path(namespace))
        assert [o["metadata"]["name"] for o in listed["items"]] == ["old"]
        seen: list[tuple[str, str]] = []

        async def follow() -> None:
            async for event in api.watch(
                _path(namespace), listed["metadata"]["resourceVersion"], 30
            ):
                seen.append((event["type"], event["object"]["metadata"].get("name", "")))
                if event["type"] == "DELETED":
                    return

        watching = asyncio.create_task(follow())
        await asyncio.to_thread(cluster.apply, workload_obj("new", namespace, kind="Job"))
        labelled = ("label", "workload", "new", "-n", namespace, "team=shop")
        await asyncio.to_thread(cluster.run, *labelled)
        await asyncio.to_thread(cluster.run, "delete", "workload", "old", "-n", namespace)
        await watching
        return seen

    seen = _run(control_plane, body)
    # "old" was in the LIST, so the watch starts after it: never an ADDED for it.
    assert [s for s in seen if s[0] != "BOOKMARK"] == [
        ("ADDED", "new"),
        ("MODIFIED", "new"),
        ("DELETED", "old"),
    ]


def test_a_watch_from_a_version_the_server_no_longer_holds_is_gone(
    control_plane: ControlPlane, namespace: str
) -> None:
    async def body(api: KubeApi) -> ApiError:
        with pytest.raises(ApiError) as refused:
            async for _ in api.watch(_path(namespace), "1", 10):
                pass
        return refused.value

    error = _run(control_plane, body)
    assert error.status == 410, error


def test_an_expired_watch_lists_again_and_loses_nothing(
    control_plane: ControlPlane, cluster: Cluster, namespace: str
) -> None:
    """The informers start from a version the server has forgotten (as after an outage long
    enough for etcd to compact it): both LIST again, and the state holds what exists, not what
    was deleted meanwhile; then they go on watching."""
    cluster.apply(node_object("n1"))
    cluster.apply(*(workload_obj(n, namespace, kind="Job") for n in ("kept", "gone")))

    async def body(api: KubeApi) -> None:
        state, queue = ClusterState(), WorkQueue()
        gate = StartupGate(state, queue)
        informers = [
            Informer(api, NODES_PATH, "nodes", NodeEvents(state, queue, gate), timeout=30),
            Informer(
                api, _path(namespace), "workloads", WorkloadEvents(state, queue, gate), timeout=30
            ),
        ]
        for informer in informers:
            await informer.list_once(initial=True)
        assert {"n1"} <= set(state.nodes) and len(state.records) == 2
        await asyncio.to_thread(cluster.run, "delete", "workload", "gone", "-n", namespace)
        await asyncio.to_thread(cluster.apply, node_object("n2"))
        for informer in informers:
            informer.version = "1"  # long gone
        gate.ready.set()
        tasks = [asyncio.create_task(i.watch_forever()) for i in informers]
        try:
            await _until(lambda: f"{namespace}/gone" not in state.records, "the delete merged")
            await _until(lambda: "n2" in state.nodes, "the new node listed")
            assert set(state.records) == {f"{namespace}/kept"}
            # And they watch on from the new LIST: later changes arrive without another.
            await asyncio.to_thread(cluster.apply, workload_obj("late", namespace, kind="Job"))
            await asyncio.to_thread(cluster.run, "delete", "node", "n1")
            await _until(lambda: f"{namespace}/late" in state.records, "the late Workload")
            await _until(lambda: "n1" not in state.nodes, "the node delete")
            assert all(i.version not in (None, "1") for i in informers)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    _run(control_plane, body)


def test_the_watches_go_on_when_the_requests_session_is_closed(
    control_plane: ControlPlane, cluster: Cluster, namespace: str
) -> None:
    """After a 401 the client loads its credentials again and replaces its requests' session
    (rotated client certificates). A watch streaming on a session closed under it goes silent,
    without an error, until its read timeout (minutes): each watch has a session of its own."""

    async def body(api: KubeApi) -> None:
        state, queue = ClusterState(), WorkQueue()
        handler = WorkloadEvents(state, queue, StartupGate(state, queue))
        informer = Informer(api, _path(namespace), "workloads", handler)
        task = asyncio.create_task(informer.run())
        try:
            await informer.synced.wait()
            await asyncio.to_thread(cluster.apply, workload_obj("first", namespace, kind="Job"))
            await _until(lambda: f"{namespace}/first" in state.records, "the first Workload")
            await api.close()  # what a 401 does to the requests' session, at worst
            await asyncio.to_thread(cluster.apply, workload_obj("second", namespace, kind="Job"))
            await _until(lambda: f"{namespace}/second" in state.records, "the second Workload", 20)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    _run(control_plane, body)
