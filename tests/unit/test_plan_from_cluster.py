"""``orca plan --from-cluster`` in-process against ``FakeApiServer`` (a thread of its own:
the command runs its own event loop): the cluster's Nodes and placements, the ``--workloads``
file's Workloads planned on them, the what-ifs on every Workload of the cluster, warnings and
errors as lines on stderr, exit codes (docs/usage.md, docs/before-you-drain.md)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fakeapi
from tests.support.cli import Orca, write
from tests.support.factories import job, node_object, stored_workload
from tests.support.factories import workload_obj as wl
from tests.unit.test_kube_credentials import kubeconfig

NOW = "2026-12-01T10:00:00Z"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[fakeapi.FakeApiServer]:
    """A fake API server, with no other credentials to fall back on than ``--kubeconfig``
    (``$KUBECONFIG`` and ``~/.kube/config`` lead nowhere, not in a Pod)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with fakeapi.in_thread() as served:
        yield served


def nowhere() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    return f"https://127.0.0.1:{port}"


@pytest.fixture
def config(server: fakeapi.FakeApiServer, tmp_path: Path) -> str:
    """A kubeconfig whose current context points nowhere; context ``live`` is the server."""
    return kubeconfig(
        tmp_path / "kubeconfig", ("dead", nowhere(), None), ("live", server.host, None)
    )


def cluster_args(config: str) -> tuple[str, ...]:
    return ("plan", "--from-cluster", "--kubeconfig", config, "--context", "live", "--now", NOW)


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def placed(
    name: str, node: str, cpu: str, priority: int = 0, created: str | None = None
) -> dict[str, Any]:
    """A Job of one replica of ``cpu`` the operator placed on ``node`` at ``priority``."""
    obj = job(name, cpu=cpu, node=node)
    obj["status"]["priority"] = priority
    if created is not None:
        obj["metadata"]["creationTimestamp"] = created
    return obj


def results(out: str) -> dict[str, dict[str, Any]]:
    return {r["workload"]: r for r in json.loads(out)["results"]}


def test_the_files_workloads_are_planned_on_the_clusters_nodes_and_placements(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """Node ``a`` has 4 cpu of which the cluster's ``web`` holds 3 (its status): of the
    file's Workloads one of 1 cpu fits, one of 2 does not (exit 1); only the file's are in
    the plan, and their conditions carry ``--now``."""
    server.put("nodes", node_object("a", cpu="4"))
    server.put("workloads", placed("web", "a", "3"))
    server.put("workloads", stored_workload("idle"))  # no status: nothing booked
    path = write(
        tmp_path,
        "w.yaml",
        [
            wl("small", "ns", kind="Job", resources={"cpu": "1"}),
            wl("big", "ns", kind="Job", resources={"cpu": "2"}),
        ],
    )
    code, out, err = orca(*cluster_args(config), "--workloads", path, "-o", "json")
    assert code == 1, err
    got = results(out)
    assert sorted(got) == ["ns/big", "ns/small"]
    assert [p["node"] for p in got["ns/small"]["placements"]] == ["a"]
    assert got["ns/big"]["placed"] == 0 and "Insufficient cpu" in got["ns/big"]["message"]
    times = {c["lastTransitionTime"] for r in got.values() for c in r["conditions"]}
    assert times == {NOW}
    assert err == ""


def test_priority_classes_come_from_the_cluster_and_the_file(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    server.put("nodes", node_object("a", cpu="4"))
    server.put("priorityclasses", priority_class("high", 1000))
    path = write(
        tmp_path,
        "w.yaml",
        [
            priority_class("low", 10),
            wl("urgent", "ns", kind="Job", priorityClassName="high"),
            wl("batch", "ns", kind="Job", priorityClassName="low"),
        ],
    )
    code, out, err = orca(*cluster_args(config), "--workloads", path, "-o", "json")
    assert code == 0, err
    got = results(out)
    assert (got["ns/urgent"]["priority"], got["ns/batch"]["priority"]) == (1000, 10)


def test_a_workload_preempts_the_clusters_by_the_priority_their_status_records(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """``low`` (priority 5 in its status) fills ``a``; ``urgent`` (class ``high``, 1000)
    takes its place, and the plan says whom it preempted."""
    server.put("nodes", node_object("a", cpu="2"))
    server.put("priorityclasses", priority_class("high", 1000))
    server.put("workloads", placed("low", "a", "2", priority=5))
    server.put("workloads", stored_workload("idle"))  # no status
    path = write(
        tmp_path,
        "w.yaml",
        [wl("urgent", "ns", kind="Job", priorityClassName="high", resources={"cpu": "2"})],
    )
    code, out, err = orca(*cluster_args(config), "--workloads", path, "-o", "json")
    assert code == 0, err
    urgent = results(out)["ns/urgent"]
    assert [p["node"] for p in urgent["placements"]] == ["a"]
    assert urgent["victims"] == [
        {"workload": "ns/low", "allocId": "ns/low-0", "node": "a", "priority": 5}
    ]


@pytest.mark.parametrize("later", ["a", "b"])
def test_between_equal_nodes_the_victim_started_last_is_preempted(
    later: str, orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """Two equal nodes, each full with a Job of the same priority: the one created last (its
    ``metadata.creationTimestamp`` in the cluster) is preempted, wherever it is."""
    earlier = "b" if later == "a" else "a"
    for name in ("a", "b"):
        server.put("nodes", node_object(name, cpu="2"))
    server.put("priorityclasses", priority_class("high", 1000))
    server.put("workloads", placed("old", earlier, "2", 5, created="2026-01-01T00:00:00Z"))
    server.put("workloads", placed("new", later, "2", 5, created="2026-06-01T00:00:00Z"))
    path = write(
        tmp_path,
        "w.yaml",
        [wl("urgent", "ns", kind="Job", priorityClassName="high", resources={"cpu": "2"})],
    )
    code, out, err = orca(*cluster_args(config), "--workloads", path, "-o", "json")
    assert code == 0, err
    urgent = results(out)["ns/urgent"]
    assert [v["workload"] for v in urgent["victims"]] == ["ns/new"]
    assert [p["node"] for p in urgent["placements"]] == [later]


def drain_cluster(server: fakeapi.FakeApiServer) -> None:
    """``a`` (4 cpu) holds ``web`` and ``db`` (1 cpu each); ``b`` has 2 cpu free."""
    server.put("nodes", node_object("a", cpu="4"))
    server.put("nodes", node_object("b", cpu="2"))
    server.put("workloads", placed("web", "a", "1"))
    server.put("workloads", placed("db", "a", "1"))


def test_a_drain_without_a_file_plans_every_workload_of_the_cluster(
    orca: Orca, server: fakeapi.FakeApiServer, config: str
) -> None:
    drain_cluster(server)
    code, out, err = orca(*cluster_args(config), "--drain", "a", "-o", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["drained"] == ["a"]
    moved = {(m["workload"], m["from"], m["to"]) for m in document["moved"]}
    assert moved == {("ns/web", "a", "b"), ("ns/db", "a", "b")}
    assert document["unplaced"] == []
    times = {c["lastTransitionTime"] for r in document["results"] for c in r["conditions"]}
    assert times == {NOW}


def test_a_drain_plans_the_files_workload_in_place_of_the_clusters_of_its_name(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """The file's ``db`` asks 3 cpu: after ``a`` is drained, ``b`` (2 cpu) holds ``web``
    but not it."""
    drain_cluster(server)
    path = write(tmp_path, "w.yaml", [wl("db", "ns", kind="Job", resources={"cpu": "3"})])
    code, out, err = orca(*cluster_args(config), "--workloads", path, "--drain", "a", "-o", "json")
    assert code == 1, err
    document = json.loads(out)
    assert {(m["workload"], m["to"]) for m in document["moved"]} == {("ns/web", "b")}
    assert [u["workload"] for u in document["unplaced"]] == ["ns/db"]


def test_a_drain_releases_a_gang_below_its_min_count_at_once(
    orca: Orca, server: fakeapi.FakeApiServer, config: str
) -> None:
    """A what-if answers where the cluster settles: a placed gang of 2 that can keep only one
    replica is released whole, not held for its ``timeoutSeconds`` (docs/workloads.md)."""
    for name in ("a", "b"):
        server.put("nodes", node_object(name, cpu="4"))
    gang = {"minCount": 2, "timeoutSeconds": 300}
    status = {
        "phase": "Scheduled",
        "placements": [
            {"node": "a", "allocId": "ns/train-0", "score": 0},
            {"node": "b", "allocId": "ns/train-1", "score": 0},
        ],
        "resources": {"cpu": "3"},
    }
    spec = {"kind": "Service", "count": 2, "gang": gang, "resources": {"cpu": "3"}}
    server.put("workloads", stored_workload("train", spec=spec, status=status))
    code, out, err = orca(*cluster_args(config), "--drain", "b", "-o", "json")
    assert code == 1, err
    document = json.loads(out)
    train = results(out)["ns/train"]
    assert train["placed"] == 0 and train["phase"] == "Unschedulable"
    assert train["message"].startswith("gang minCount 2: 1 of 2 replicas would fit")
    assert sorted(u["allocId"] for u in document["unplaced"]) == ["ns/train-0", "ns/train-1"]


def zones_cluster(server: fakeapi.FakeApiServer) -> None:
    server.put("nodes", node_object("a", cpu="4", labels={"zone": "z1"}))
    server.put("nodes", node_object("b", cpu="4", labels={"zone": "z2"}))
    server.put("workloads", placed("web", "a", "1"))
    server.put("workloads", placed("db", "b", "1"))


def test_resilience_plans_every_workload_of_the_cluster(
    orca: Orca, server: fakeapi.FakeApiServer, config: str
) -> None:
    """Either zone lost, its one Job moves to the other's node: every replica has a place."""
    zones_cluster(server)
    code, out, err = orca(*cluster_args(config), "--resilience", "zone", "-o", "json")
    assert code == 0, err
    domains = {d["domain"]: d for d in json.loads(out)["resilience"]}
    assert sorted(domains) == ["z1", "z2"]
    assert all(not d["unplaced"] for d in domains.values())


def test_resilience_plans_the_files_workload_in_place_of_the_clusters(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """The file's ``db`` asks 4 cpu: with ``z2`` lost, ``a`` (4 cpu, ``web`` on it) cannot
    hold it."""
    zones_cluster(server)
    path = write(tmp_path, "w.yaml", [wl("db", "ns", kind="Job", resources={"cpu": "4"})])
    code, out, err = orca(
        *cluster_args(config), "--workloads", path, "--resilience", "zone", "-o", "json"
    )
    assert code == 1, err
    domains = {d["domain"]: d for d in json.loads(out)["resilience"]}
    assert [u["workload"] for u in domains["z2"]["unplaced"]] == ["ns/db"]


def test_the_clusters_warnings_are_lines_on_stderr(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """PriorityClasses and the Lease refused (403): the plan goes on, says so in one
    ``warning:`` line each on stderr, and a Workload naming a class is Invalid (exit 1)."""
    server.put("nodes", node_object("a", cpu="4"))
    server.put("priorityclasses", priority_class("high", 1000))
    server.refuse("GET", CLASSES, 403, "Forbidden", times=None)
    server.refuse("GET", LEASE, 403, "Forbidden", times=None)
    path = write(
        tmp_path,
        "w.yaml",
        [wl("urgent", "ns", kind="Job", priorityClassName="high"), wl("plain", "ns", kind="Job")],
    )
    code, out, err = orca(*cluster_args(config), "--workloads", path, "-o", "json")
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("warning: ") for line in lines), err
    assert lines[0] == (
        "warning: PriorityClasses cannot be listed (403 Forbidden): Workloads naming one are "
        "Invalid in this plan"
    )
    assert lines[1].startswith("warning: node lifecycle: cannot read Lease kube-system/")
    got = results(out)
    assert got["ns/urgent"]["phase"] == "Invalid" and got["ns/plain"]["phase"] == "Scheduled"


def test_a_cluster_out_of_reach_is_one_line_and_exit_2(
    orca: Orca, server: fakeapi.FakeApiServer, tmp_path: Path
) -> None:
    host = nowhere()
    config = kubeconfig(tmp_path / "k.yaml", ("c", host, None))
    path = write(tmp_path, "w.yaml", [wl("web", "ns", kind="Job")])
    code, out, err = orca("plan", "--from-cluster", "--kubeconfig", config, "--workloads", path)
    assert (code, out) == (2, "")
    assert err == f"error: cannot reach the API server: Connection refused ({host})\n"


def test_the_current_context_is_read_without_context(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """``config``'s current context points nowhere: without ``--context`` that is read."""
    path = write(tmp_path, "w.yaml", [wl("web", "ns", kind="Job")])
    code, _out, err = orca("plan", "--from-cluster", "--kubeconfig", config, "--workloads", path)
    assert code == 2 and err.startswith("error: cannot reach the API server: "), err


def test_a_spec_the_operator_would_refuse_is_exit_2(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    """CEL that does not compile is bad input whatever the cluster: one line naming the
    field, before the cluster is read."""
    server.put("nodes", node_object("a", cpu="4"))
    path = write(tmp_path, "w.yaml", [wl("web", "ns", kind="Job", constraints=["node.cpu >"])])
    code, out, err = orca(*cluster_args(config), "--workloads", path)
    assert (code, out) == (2, ""), err
    assert err.startswith("error: ") and err.count("\n") == 1 and "constraints" in err, err
    assert server.requests == []


def test_timings_name_each_phase_in_order(
    orca: Orca, server: fakeapi.FakeApiServer, config: str, tmp_path: Path
) -> None:
    server.put("nodes", node_object("a", cpu="4"))
    path = write(tmp_path, "w.yaml", [wl("web", "ns", kind="Job")])
    code, _out, err = orca(*cluster_args(config), "--workloads", path, "--timings")
    assert code == 0, err
    line = err.splitlines()[-1]
    assert line.startswith("orca plan: timings: ")
    names = [
        item.rsplit(" ", 2)[0] for item in line.removeprefix("orca plan: timings: ").split(", ")
    ]
    assert names == [
        "start-up",
        "workloads",
        "cluster",
        "first decision",
        "planning",
        "output",
        "total",
    ]


def test_resilience_reads_the_clock_from_now(
    orca: Orca, server: fakeapi.FakeApiServer, config: str
) -> None:
    """Node ``c`` turned NotReady a minute before ``--now`` (no controller manager's Lease:
    it counts as tainted ``not-ready:NoExecute`` since then): ``late`` on it tolerates that for
    300 s, so at ``--now`` it stays, and only the lost zone's own replicas move."""
    zones_cluster(server)
    since = "2026-12-01T09:59:00Z"
    server.put("nodes", node_object("c", cpu="4", labels={"zone": "z3"}, ready=False, since=since))
    server.put("workloads", placed("late", "c", "1"))
    code, out, err = orca(*cluster_args(config), "--resilience", "zone", "-o", "json")
    assert code == 0, err
    moved = {
        d["domain"]: sorted((m["workload"], m["from"]) for m in d["moved"])
        for d in json.loads(out)["resilience"]
    }
    assert moved == {
        "z1": [("ns/web", "a")],
        "z2": [("ns/db", "b")],
        "z3": [("ns/late", "c")],
    }


def test_consolidate_takes_only_the_selected_nodes_of_the_cluster(
    orca: Orca, server: fakeapi.FakeApiServer, config: str
) -> None:
    """Either node could go (its one Job fits on the other); ``--select zone=z2`` lets only
    ``b`` go, its Job moving to ``a``."""
    zones_cluster(server)
    code, out, err = orca(
        *cluster_args(config), "--consolidate", "--select", "zone=z2", "-o", "json"
    )
    assert code == 0, err
    consolidation = json.loads(out)["consolidation"]
    assert consolidation["removable"] == ["b"]
    assert [(m["workload"], m["from"], m["to"]) for m in consolidation["moves"]] == [
        ("ns/db", "b", "a")
    ]
