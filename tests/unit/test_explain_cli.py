"""``orca explain NAME`` end to end through ``controller.cli.main``, as a user runs it: the table
and the ``-o json``/``-o yaml`` document field by field, who preempted whom, the what-if flags,
the namespace rules, and the exit codes 0/1/2 with their one line.

The cluster is read through one seam at our own boundary: ``controller.cli.cluster.read_cluster``
is replaced by one returning ``controller.inputs.fromcluster.view_of`` of the objects a test
lists (what the real one hands it after its LISTs), recording the ``--kubeconfig`` and
``--context`` it was asked for. The real API server's path is
``tests/integration/test_explain.py``'s.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.inputs.fromcluster import ClusterError, ClusterView, view_of
from tests.support.cli import Orca, write
from tests.support.factories import node_object, workload_obj
from tests.unit.test_kube_credentials import kubeconfig

NODE_KEYS = {"node", "replicas", "passes"}  # every node row of the document has these


@dataclass
class Cluster:
    """The objects ``read_cluster`` returns, and each (kubeconfig, context) it was asked for."""

    config: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    reads: list[tuple[str | None, str | None]] = field(default_factory=list)
    error: str | None = None

    def read(self, kubeconfig: str | None, context: str | None = None) -> ClusterView:
        self.reads.append((kubeconfig, context))
        if self.error is not None:
            raise ClusterError(self.error)
        return view_of(self.nodes, self.workloads, self.classes)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """An empty cluster; the kubeconfig's current context ``main`` is in namespace ``shop``,
    its context ``ops`` in namespace ``ops`` (the server is never reached)."""
    config = kubeconfig(
        tmp_path / "kubeconfig",
        ("main", "https://127.0.0.1:1", "shop"),
        ("ops", "https://127.0.0.1:1", "ops"),
    )
    fake = Cluster(config)
    monkeypatch.setattr("controller.cli.cluster.read_cluster", fake.read)
    return fake


def explain(orca: Orca, cluster: Cluster, *args: str | Path) -> tuple[int, str, str]:
    return orca("explain", *args, "--kubeconfig", cluster.config)


def document(orca: Orca, cluster: Cluster, *args: str | Path) -> dict[str, Any]:
    code, out, err = explain(orca, cluster, *args, "-o", "json")
    assert (code, err) == (0, ""), err
    result: dict[str, Any] = json.loads(out)
    return result


def placed(name: str, kind: str, cpu: str, *nodes: str, **spec: Any) -> dict[str, Any]:
    """A Workload of ``shop`` with one replica on each of ``nodes``, as the operator records
    them (replica i scores 50 - 10 i)."""
    if kind == "Service":
        spec["count"] = len(nodes)
    obj = workload_obj(name, kind=kind, resources={"cpu": cpu}, **spec)
    obj["status"] = {
        "placements": [
            {"node": n, "allocId": f"shop/{name}-{i}", "score": 50 - 10 * i}
            for i, n in enumerate(nodes)
        ],
        "resources": {"cpu": cpu},
    }
    return obj


def condition(type_: str, reason: str, message: str, status: str = "True") -> dict[str, str]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-12-01T09:00:00Z",
    }


def rows(section: str) -> list[list[str]]:
    """A table's rows as cells (columns are three or more spaces apart)."""
    return [re.split(r" {3,}", line) for line in section.splitlines()]


def sections(out: str) -> dict[str, str]:
    """The table output's sections by title line (the first: the lines before any title)."""
    parts = out.split("\n\n")
    found = {"": parts[0] + "\n"}
    for part in parts[1:]:
        title, _, body = part.partition("\n")
        found[title] = body
    return found


# -- a placed Workload, and one short of room -----------------------------------------------------


@pytest.fixture
def shop(cluster: Cluster) -> Cluster:
    """Two 2-cpu nodes each holding one 1-cpu replica of web, a node offering only wasmtime,
    a cordoned one; ``big`` (a 2-cpu Job) fits nowhere."""
    cluster.nodes = [
        node_object("a", cpu="2"),
        node_object("b", cpu="2"),
        node_object("w", runtimes=("wasmtime",)),
        node_object("off", cordoned=True),
    ]
    cluster.workloads = [
        placed("web", "Service", "1", "a", "b"),
        workload_obj("big", kind="Job", runtime={"oneOf": ["docker"]}, resources={"cpu": "2"}),
    ]
    return cluster


REJECTED = {
    "a": ("ResourcesFit", "Insufficient cpu"),
    "b": ("ResourcesFit", "Insufficient cpu"),
    "w": ("Runtime", "runtime docker not offered"),
    "off": ("NodeEligibility", "node(s) were unschedulable"),
}


def test_the_document_of_a_workload_short_of_room(shop: Cluster, orca: Orca) -> None:
    result = document(orca, shop, "big")
    assert shop.reads == [(shop.config, None)]
    assert (result["workload"], result["kind"]) == ("shop/big", "Job")
    assert (result["phase"], result["desired"], result["placed"]) == ("Unschedulable", 1, 0)
    assert result["message"].startswith("0/4 nodes are available: ")
    for reason in ("2 Insufficient cpu", "1 runtime docker not offered", "1 node(s) were"):
        assert reason in result["message"]
    # The status's reasons, each with its nodes and the filter that rejected them.
    assert sorted(result["unschedulable"], key=lambda r: r["reason"]) == [
        {"reason": "Insufficient cpu", "count": 2, "nodes": ["a", "b"], "plugin": "ResourcesFit"},
        {"reason": "node(s) were unschedulable", "count": 1, "nodes": ["off"],
         "plugin": "NodeEligibility"},
        {"reason": "runtime docker not offered", "count": 1, "nodes": ["w"], "plugin": "Runtime"},
    ]  # fmt: skip
    assert result["errors"] == []
    assert result["priority"] == 0  # no PriorityClass, none a global default: 0, as kube's
    assert (result["preemptedBy"], result["preempted"]) == (None, [])
    # Everything else is at its priority too: preempting has nothing to take.
    assert result["preemption"] == "nothing of lower priority makes room"
    assert (result["replicas"], result["topologySpread"]) == ([], [])
    assert "whatIf" not in result
    # Every node rejected: the first filter that rejects it, in the status's words.
    for n in result["nodes"]:
        assert set(n) == NODE_KEYS | {"filter", "reason"}
        assert (n["passes"], n["replicas"]) == (False, 0)  # replicas: big's own, none
    assert {n["node"]: (n["filter"], n["reason"]) for n in result["nodes"]} == REJECTED


def test_the_document_of_a_placed_workload(shop: Cluster, orca: Orca) -> None:
    result = document(orca, shop, "web", "-n", "shop")
    assert (result["workload"], result["kind"]) == ("shop/web", "Service")
    assert (result["phase"], result["desired"], result["placed"]) == ("Scheduled", 2, 2)
    assert (result["message"], result["unschedulable"]) == ("2/2 replicas placed", [])
    assert result["priority"] == 0
    assert "preemption" not in result  # nothing is short: preempting is not a question
    assert result["replicas"] == [
        {"allocId": "shop/web-0", "node": "a", "score": 50, "kept": True, "why": "kept"},
        {"allocId": "shop/web-1", "node": "b", "score": 40, "kept": True, "why": "kept"},
    ]
    passing = [n for n in result["nodes"] if n["passes"]]
    # Room for a third replica on a, b and w (web asks no runtime); best first: fewest of
    # web's replicas on the node, then the higher total.
    assert passing[0]["node"] == "w"
    assert {n["node"]: n["replicas"] for n in passing} == {"w": 0, "a": 1, "b": 1}
    for n in passing:
        assert set(n) == NODE_KEYS | {"scores", "total"}
        assert n["scores"] and n["total"] == sum(n["scores"].values())
    order = [(n["replicas"], -n["total"], n["node"]) for n in passing]
    assert order == sorted(order)
    (off,) = [n for n in result["nodes"] if not n["passes"]]
    assert off == {
        "node": "off",
        "replicas": 0,
        "passes": False,
        "filter": "NodeEligibility",
        "reason": "node(s) were unschedulable",
    }


def test_yaml_is_the_same_document_in_yaml(shop: Cluster, orca: Orca) -> None:
    code, out, err = explain(orca, shop, "web", "-o", "yaml")
    assert (code, err) == (0, "")
    assert not out.lstrip().startswith("{")  # block style, not JSON (which YAML also reads)
    assert out.startswith("workload: shop/web\n")
    assert yaml.safe_load(out) == document(orca, shop, "web")


def test_the_table_of_a_placed_workload(shop: Cluster, orca: Orca) -> None:
    result = document(orca, shop, "web")
    code, out, err = explain(orca, shop, "web")
    assert (code, err) == (0, "")
    parts = sections(out)
    assert parts[""] == f"Workload shop/web (Service): priority 0, Scheduled, {result['message']}\n"
    assert rows(parts["REPLICAS"]) == [
        ["ALLOC ID", "NODE", "SCORE", "WHY"],
        ["shop/web-0", "a", "50", "kept"],
        ["shop/web-1", "b", "40", "kept"],
    ]
    table = rows(parts["NODES (as the next replica sees them, best first)"])
    names = sorted({name for n in result["nodes"] if n["passes"] for name in n["scores"]})
    assert table[0] == ["NODE", "REPLICAS", *[name.upper() for name in names], "TOTAL", "VERDICT"]
    expected = [
        [n["node"], str(n["replicas"]), *[str(n["scores"][name]) for name in names],
         str(n["total"]), "fits"]
        if n["passes"]
        else [n["node"], str(n["replicas"]), *["-"] * len(names), "-",
              f"{n['reason']} ({n['filter']})"]
        for n in result["nodes"]
    ]  # fmt: skip
    assert table[1:] == expected
    assert table[-1][-1] == "node(s) were unschedulable (NodeEligibility)"
    # Some score part tells the nodes apart (so a column of the wrong part would show).
    assert any(row[2:-2] != table[1][2:-2] for row in table[2:-1])
    assert "TOPOLOGY SPREAD (domains as the next replica sees them)" not in parts


def test_the_table_of_a_workload_short_of_room(shop: Cluster, orca: Orca) -> None:
    code, out, err = explain(orca, shop, "big")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("Workload shop/big (Job): priority 0, Unschedulable, 0/4 nodes")
    assert lines[1] == "  preemption: nothing of lower priority makes room"
    parts = sections(out)
    assert "REPLICAS" not in parts  # nothing placed: no replica section
    table = rows(parts["NODES (as the next replica sees them, best first)"])
    # No node passes: no score columns, every cell a dash but the verdict.
    assert table[0] == ["NODE", "REPLICAS", "TOTAL", "VERDICT"]
    verdicts = {row[0]: row[1:] for row in table[1:]}
    assert verdicts == {
        node: ["0", "-", f"{reason} ({plugin})"] for node, (plugin, reason) in REJECTED.items()
    }


def test_an_invalid_workload_says_why_and_keeps_its_replicas(cluster: Cluster, orca: Orca) -> None:
    """An ill-typed CEL affinity: the API server cannot type-check it, so it is stored; orca
    marks it Invalid (with no priority resolved) and keeps its replicas where they are."""
    cluster.nodes = [node_object("a")]
    cluster.workloads = [
        placed("typo", "Job", "1", "a", affinity=[{"target": 'node.cpu == "x"', "weight": 10}])
    ]
    result = document(orca, cluster, "typo")
    assert result["phase"] == "Invalid" and result["priority"] is None
    message = "found no matching overload for '_==_' applied to '(int, string)' at column 1"
    (error,) = result["errors"]
    assert message in error
    assert result["replicas"] == [
        {"allocId": "shop/typo-0", "node": "a", "score": 50, "kept": True,
         "why": "kept while the spec is invalid"},
    ]  # fmt: skip
    assert result["nodes"] == [] and "preemption" not in result
    code, out, _ = explain(orca, cluster, "typo")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == f"Workload shop/typo (Job): Invalid, {result['message']}"  # no priority
    assert lines[1] == f"  invalid: {error}"
    assert "NODES (as the next replica sees them, best first)" not in sections(out)


# -- topology spread ------------------------------------------------------------------------------


def test_topology_spread_shows_each_domain_as_the_next_replica_sees_it(
    cluster: Cluster, orca: Orca
) -> None:
    zone = "topology.kubernetes.io/zone"
    cluster.nodes = [
        node_object("a", labels={zone: "z1"}),
        node_object("b", labels={zone: "z2"}),
        node_object("c", labels={zone: "z2"}),
    ]
    spread = [{"topologyKey": zone, "maxSkew": 1}]
    cluster.workloads = [placed("web", "Service", "1", "a", "b", topologySpread=spread)]
    result = document(orca, cluster, "web")
    (constraint,) = result["topologySpread"]
    # kube-scheduler's defaults filled in: DoNotSchedule, minDomains 1, nodeAffinityPolicy
    # Honor, nodeTaintsPolicy Ignore.
    assert {k: constraint[k] for k in ("topologyKey", "maxSkew", "whenUnsatisfiable")} == {
        "topologyKey": zone,
        "maxSkew": 1,
        "whenUnsatisfiable": "DoNotSchedule",
    }
    assert (constraint["nodeAffinityPolicy"], constraint["nodeTaintsPolicy"]) == ("Honor", "Ignore")
    assert constraint["minimum"] == 1  # one replica in each zone
    assert [(d["domain"], d["replicas"], d["counted"]) for d in constraint["domains"]] == [
        ("z1", 1, True),
        ("z2", 1, True),
    ]
    code, out, _ = explain(orca, cluster, "web")
    assert code == 0
    body = sections(out)["TOPOLOGY SPREAD (domains as the next replica sees them)"]
    lines = body.splitlines()
    assert lines[0] == (
        f"{zone} maxSkew=1 DoNotSchedule minDomains=1 nodeAffinityPolicy=Honor "
        "nodeTaintsPolicy=Ignore: minimum 1"
    )
    assert [line.split()[:2] for line in lines[1:]] == [
        ["DOMAIN", "REPLICAS"],
        ["z1", "1"],
        ["z2", "1"],
    ]


# -- preemption -----------------------------------------------------------------------------------

BY_HIGH = "1 replica preempted by shop/high (priority 1000) on a"
BY_HIGHER = "1 replica preempted by shop/higher (priority 2000) on b"


@pytest.fixture
def preempted(cluster: Cluster) -> Cluster:
    """``high`` (priority 1000, 3 cpus) waits: the only node large enough, a, is full of
    ``low``. Earlier, ``high`` preempted ``low`` and ``aaa``, and ``higher`` preempted ``mid``;
    each victim's Preempted condition says so (``low``'s after its Ready condition)."""
    cluster.classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "high"}, "value": 1000},
    ]  # fmt: skip
    cluster.nodes = [node_object("a", cpu="4"), node_object("b", cpu="2")]
    low = placed("low", "Job", "4", "a")
    low["status"]["conditions"] = [
        condition("Ready", "AllPlaced", "1/1 replicas placed"),
        condition("Preempted", "PlacedAgain", BY_HIGH, status="False"),
    ]
    mid = placed("mid", "Job", "1", "b")
    mid["status"]["conditions"] = [condition("Preempted", "Preempted", BY_HIGHER)]
    aaa = placed("aaa", "Job", "1", "b")
    aaa["status"]["conditions"] = [condition("Preempted", "Preempted", BY_HIGH)]
    high = workload_obj("high", kind="Job", resources={"cpu": "3"}, priorityClassName="high")
    cluster.workloads = [low, mid, high, aaa]
    return cluster


def test_a_preemptor_lists_whose_replicas_it_preempted(preempted: Cluster, orca: Orca) -> None:
    result = document(orca, preempted, "high")
    assert result["priority"] == 1000 and result["phase"] == "Unschedulable"
    assert result["preemptedBy"] is None  # nobody preempted high
    # By key: aaa before low; mid was preempted by shop/higher, not by shop/high.
    assert result["preempted"] == [
        {"workload": "shop/aaa", "message": BY_HIGH},
        {"workload": "shop/low", "message": BY_HIGH},
    ]
    # Removing low's one replica from a leaves 4 cpus there: high fits.
    assert result["preemption"] == "would remove 1 replica(s) of shop/low, and place 1/1"
    code, out, err = explain(orca, preempted, "high")
    assert (code, err) == (0, "")
    assert out.splitlines()[:4] == [
        f"Workload shop/high (Job): priority 1000, Unschedulable, {result['message']}",
        f"  preempted shop/aaa: {BY_HIGH}",
        f"  preempted shop/low: {BY_HIGH}",
        "  preemption: would remove 1 replica(s) of shop/low, and place 1/1",
    ]


def test_a_victim_says_who_preempted_it_last(preempted: Cluster, orca: Orca) -> None:
    result = document(orca, preempted, "low")
    assert result["preemptedBy"] == BY_HIGH
    assert result["preempted"] == []
    assert "preemption" not in result  # placed: nothing to preempt for
    code, out, _ = explain(orca, preempted, "low")
    assert out.splitlines()[:2] == [
        f"Workload shop/low (Job): priority 0, Scheduled, {result['message']}",
        f"  last preempted: {BY_HIGH}",
    ]
    assert code == 0
    # A Workload neither preempted nor preempting: no such lines, null and [].
    result = document(orca, preempted, "mid")
    assert (result["preemptedBy"], result["preempted"]) == (BY_HIGHER, [])


def test_no_preemption_no_preemption_lines(shop: Cluster, orca: Orca) -> None:
    result = document(orca, shop, "web")
    assert (result["preemptedBy"], result["preempted"]) == (None, [])
    _, out, _ = explain(orca, shop, "web")
    assert "preempt" not in out


# -- what if --------------------------------------------------------------------------------------


@pytest.fixture
def three(cluster: Cluster, tmp_path: Path) -> Cluster:
    """Three 2-cpu nodes (a and c in zone z1): ``api`` fills a, ``web`` fills b (both 2-cpu
    Jobs, of equal priority, api listed first); spare.yaml is a 2-cpu Node to add."""
    zone = {"topology.kubernetes.io/zone": "z1"}
    cluster.nodes = [
        node_object("a", cpu="2", labels=zone),
        node_object("b", cpu="2"),
        node_object("c", cpu="2", labels=zone),
    ]
    cluster.workloads = [placed("api", "Job", "2", "a"), placed("web", "Job", "2", "b")]
    write(tmp_path, "spare.yaml", [node_object("spare", cpu="2")])
    return cluster


def test_without_what_if_flags_the_cluster_as_it_is(three: Cluster, orca: Orca) -> None:
    result = document(orca, three, "web")
    assert "whatIf" not in result
    # The next replica of web (2 cpus) finds room on c only: a holds api, b web's own replica.
    verdicts = {n["node"]: n.get("reason", "fits") for n in result["nodes"]}
    assert verdicts == {"a": "Insufficient cpu", "b": "Insufficient cpu", "c": "fits"}
    _, out, _ = explain(orca, three, "web")
    assert out.startswith("Workload shop/web (Job): ")


def test_drain_explains_the_workload_at_its_turn_in_the_plan(three: Cluster, orca: Orca) -> None:
    """a drained: api, decided before web (equal priority, listed first), moves to c, the one
    node with room; web, at its turn, sees a gone, and no room for another replica: c holds
    api now, b its own."""
    result = document(orca, three, "web", "--drain", "a")
    assert result["whatIf"] == "drained a"
    assert result["replicas"] == [
        {"allocId": "shop/web-0", "node": "b", "score": 50, "kept": True, "why": "kept"}
    ]
    verdicts = {n["node"]: n.get("reason", "fits") for n in result["nodes"]}
    assert verdicts == {"b": "Insufficient cpu", "c": "Insufficient cpu"}
    code, out, err = explain(orca, three, "web", "--drain", "a")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "What if: drained a; shop/web at its turn in that plan:"
    assert lines[1].startswith("Workload shop/web (Job): ")


def test_drain_of_a_selector_names_the_nodes_in_order(three: Cluster, orca: Orca) -> None:
    result = document(orca, three, "web", "--drain", "topology.kubernetes.io/zone=z1")
    assert result["whatIf"] == "drained a, c"
    assert [n["node"] for n in result["nodes"]] == ["b"]
    # api, first, found no place: b still holds web alone, and web's replica stays.
    assert result["replicas"][0]["why"] == "kept"


def test_add_nodes_adds_the_copies_before_the_turn(
    three: Cluster, orca: Orca, tmp_path: Path
) -> None:
    spare = f"{tmp_path / 'spare.yaml'}:2"
    result = document(orca, three, "web", "--drain", "a", "--add-nodes", spare)
    assert result["whatIf"] == "drained a and 2 x spare added"
    # api moved to c or to a copy; either way web sees two 2-cpu copies named after spare.
    assert {"spare-1", "spare-2"} <= {n["node"] for n in result["nodes"]}
    _, out, _ = explain(orca, three, "web", "--add-nodes", spare)
    assert out.splitlines()[0] == "What if: 2 x spare added; shop/web at its turn in that plan:"


def test_add_nodes_auto_explains_with_the_smallest_count(
    three: Cluster, orca: Orca, tmp_path: Path
) -> None:
    """a and b drained: api takes c; web needs one more node, so auto finds 1, and web, at its
    turn, sees that one copy empty."""
    spare = f"{tmp_path / 'spare.yaml'}:auto"
    result = document(orca, three, "web", "--drain", "a", "--drain", "b", "--add-nodes", spare)
    assert result["whatIf"] == "drained a, b and 1 x spare added"
    passing = [n["node"] for n in result["nodes"] if n["passes"]]
    assert passing == ["spare-1"]
    assert result["replicas"][0]["why"] == "moves: the node is gone"


def test_what_if_decides_by_the_clusters_priority_classes(three: Cluster, orca: Orca) -> None:
    """web of a higher PriorityClass is decided first: at its turn, api (displaced from a) has
    not moved yet, so c still has room."""
    three.classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "high"}, "value": 1000},
    ]  # fmt: skip
    three.workloads[1]["spec"]["priorityClassName"] = "high"
    result = document(orca, three, "web", "--drain", "a")
    assert result["priority"] == 1000
    verdicts = {n["node"]: n.get("reason", "fits") for n in result["nodes"]}
    assert verdicts == {"b": "Insufficient cpu", "c": "fits"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--drain", ""], "--drain: give a Node name or a label selector, not ''",
                     id="empty-drain"),
        pytest.param(["--add-nodes", "spare.yaml"],
                     "--add-nodes: 'spare.yaml' is not FILE:COUNT or FILE:auto", id="no-count"),
    ],
)  # fmt: skip
def test_a_bad_what_if_flag_is_one_line_and_exit_2_before_reading(
    three: Cluster, orca: Orca, flags: list[str], message: str
) -> None:
    code, out, err = explain(orca, three, "web", *flags)
    assert (code, out, err) == (2, "", f"error: {message}\n")
    assert three.reads == []


def test_a_drain_matching_no_node_is_one_line_and_exit_2(three: Cluster, orca: Orca) -> None:
    code, out, err = explain(orca, three, "web", "--drain", "zone=nowhere")
    assert (code, out) == (2, "")
    assert err == "error: --drain 'zone=nowhere': matches no Node (3 in all)\n"


# -- namespaces, a missing Workload, an unreadable cluster ----------------------------------------


def test_the_namespace_is_the_flag_else_the_contexts(three: Cluster, orca: Orca) -> None:
    three.workloads.append(workload_obj("web", namespace="ops", kind="Service", count=1))
    assert document(orca, three, "web")["workload"] == "shop/web"  # main's namespace
    assert document(orca, three, "web", "-n", "ops")["workload"] == "ops/web"
    assert document(orca, three, "web", "--context", "ops")["kind"] == "Service"
    assert three.reads == [(three.config, None), (three.config, None), (three.config, "ops")]


def test_a_missing_workload_is_one_line_and_exit_1(three: Cluster, orca: Orca) -> None:
    code, out, err = explain(orca, three, "web", "--context", "ops")  # ops has no web
    assert (code, out) == (1, "")
    assert err == (
        "error: Workload ops/web not found (kubectl get orcawl -n ops lists the Workloads there)\n"
    )
    code, out, err = explain(orca, three, "nope", "-n", "shop", "-o", "json")
    assert (code, out) == (1, "")
    assert err.startswith("error: Workload shop/nope not found (kubectl get orcawl -n shop ")


def test_an_unreadable_cluster_is_one_line_and_exit_2(three: Cluster, orca: Orca) -> None:
    three.error = "cannot reach the API server: Connection refused (https://127.0.0.1:1)"
    code, out, err = explain(orca, three, "web")
    assert (code, out, err) == (2, "", f"error: {three.error}\n")
