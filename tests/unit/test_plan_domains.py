"""``orca plan --resilience KEY`` and ``--consolidate``, through the command a user runs.

The oracle of ``--resilience`` is ``--drain``, asked once per domain with the selector that
names the domain's nodes: each entry must be that drain's answer, section by section.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Orca, write
from tests.support.factories import node_object
from tests.support.factories import workload_obj as wl

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
NOW = "2026-12-01T10:00:00Z"
HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def zone_node(name: str, zone: str | None, cpu: str = "4", **kwargs: Any) -> dict[str, Any]:
    labels = {HOSTNAME: name, **({ZONE: zone} if zone else {})}
    return node_object(name, cpu=cpu, memory="8Gi", labels=labels, **kwargs)


def plan(orca: Orca, nodes: Path, workloads: Path, *args: str) -> tuple[int, Any, str]:
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", workloads, "--now", NOW, *args)
    if "-o" in args and code != 2:
        return code, json.loads(out), err
    return code, out, err


def a_cluster(tmp_path: Path, seed: int = 1) -> tuple[Path, Path]:
    """Nine nodes over zones a, b, c and one without a zone; Jobs, Services (one spread over
    zones), a DaemonSet and a high-priority Job, placed by a first ``orca plan`` (its
    statuses written back, as ``kubectl get`` shows a placed cluster)."""
    rng = random.Random(seed)
    nodes = [zone_node(f"n{i}", "abc"[i % 3], cpu=rng.choice(["2", "4"])) for i in range(8)]
    nodes.append(zone_node("loose", None))
    docs: list[dict[str, Any]] = [HIGH]
    for i in range(12):
        kind = rng.choice(["Job", "Service"])
        extra: dict[str, Any] = {"count": rng.randint(1, 3)} if kind == "Service" else {}
        docs.append(wl(f"w{i}", kind=kind, resources={"cpu": rng.choice(["500m", "1"])}, **extra))
    spread = [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
    docs.append(wl("web", kind="Service", count=3, resources={"cpu": "1"}, topologySpread=spread))
    docs.append(wl("agent", kind="DaemonSet", resources={"cpu": "100m"}))
    docs.append(wl("boss", kind="Job", resources={"cpu": "2"}, priorityClassName="high"))
    nodes_file = write(tmp_path, "nodes.yaml", nodes)
    fresh = write(tmp_path, "fresh.yaml", docs)
    return nodes_file, fresh


def settled(orca: Orca, tmp_path: Path, nodes: Path, fresh: Path) -> Path:
    """The Workloads of ``fresh`` with the statuses a plan gives them."""
    code, first, _ = plan(orca, nodes, fresh, "-o", "json")
    assert code in (0, 1)
    statuses = {r["workload"]: r for r in first["results"]}
    import yaml

    docs = list(yaml.safe_load_all(fresh.read_text()))
    for doc in docs:
        if doc["kind"] == "Workload":
            r = statuses[f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"]
            doc["status"] = {"placements": r.get("placements", []), "resources": r["resources"]}
    return write(tmp_path, "settled.yaml", docs)


def drain_sections(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: answer[k] for k in ("displaced", "moved", "unplaced")}


def test_each_domains_entry_is_the_drain_of_its_nodes(tmp_path: Path, orca: Orca) -> None:
    nodes, fresh = a_cluster(tmp_path)
    workloads = settled(orca, tmp_path, nodes, fresh)
    for key, selector_of in (
        (ZONE, lambda domain: f"{ZONE}={domain}" if domain != "<none>" else f"!{ZONE}"),
        (HOSTNAME, lambda domain: domain),
    ):
        code, answer, _ = plan(orca, nodes, workloads, "--resilience", key, "-o", "json")
        assert answer["topologyKey"] == key
        entries = answer["resilience"]
        stranding = False
        for entry in entries:
            drain_code, drained, _ = plan(
                orca, nodes, workloads, "--drain", selector_of(entry["domain"]), "-o", "json"
            )
            assert entry["nodes"] == drained["drained"]
            assert {k: entry[k] for k in ("displaced", "moved", "unplaced")} == drain_sections(
                drained
            ), entry["domain"]
            stranding = stranding or drain_code == 1
        assert code == (1 if stranding else 0)
    zones = [
        e["domain"]
        for e in plan(orca, nodes, workloads, "--resilience", ZONE, "-o", "json")[1]["resilience"]
    ]
    assert zones == ["a", "b", "c", "<none>"]  # sorted, the nodes without the label last


def test_the_table_has_one_line_per_domain_worst_first(tmp_path: Path, orca: Orca) -> None:
    # Zone a: a1 (4 cores) holds a 3-core Job; zone b: b1 (4 cores) holds a 3-core Job and
    # b2 (4 cores) holds nothing. Losing a: x finds b2. Losing b: y and nothing else... y
    # has no place (a1 has 1 core left), z (1 core, on b2) moves to a1.
    nodes = write(
        tmp_path,
        "nodes.yaml",
        [zone_node("a1", "a"), zone_node("b1", "b"), zone_node("b2", "b")],
    )
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            wl("x", placed={0: "a1"}, kind="Job", resources={"cpu": "3"}),
            wl("y", placed={0: "b1"}, kind="Job", resources={"cpu": "3"}),
            wl("z", placed={0: "b2"}, kind="Job", resources={"cpu": "1"}),
        ],
    )
    code, table, _ = plan(orca, nodes, workloads, "--resilience", ZONE)
    assert code == 1
    lines = table.splitlines()
    assert lines[0] == f"LOSS OF EACH {ZONE} (2 domain(s)), worst first"
    assert lines[1].split() == [
        "DOMAIN",
        "NODES",
        "DISPLACED",
        "MOVED",
        "UNPLACED",
        "FIRST",
        "WITHOUT",
        "A",
        "PLACE",
    ]
    assert lines[2].split()[:5] == ["b", "2", "2", "1", "1"]
    assert "shop/y-0 (on b1): 0/1 nodes are available: 1 Insufficient cpu." in lines[2]
    assert lines[3].split() == ["a", "1", "1", "1", "0"]
    assert lines[-1] == (
        "the loss of 1 of 2 domain(s) leaves replicas without a place (the most: 1, losing b)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--resilience", "zone=a"), "--resilience 'zone=a' is not a valid label key"),
        (("--resilience", ""), "--resilience '' is not a valid label key"),
        (("--resilience", "Bad_/x"), "--resilience 'Bad_/x' has a prefix that is not a DNS-1123"),
        (
            ("--consolidate", "--select", "zone=nowhere"),
            "--select 'zone=nowhere': matches no Node (2 in all)",
        ),
        (("--consolidate", "--select", "a in b"), "--select 'a in b': found 'b' expected: '('"),
        (("--select", "a1"), "--select needs --consolidate"),
        (("--resilience", ZONE, "--consolidate"), "--resilience and --consolidate are separate"),
        (("--resilience", ZONE, "--drain", "a1"), "--resilience asks of the cluster as it is"),
        (
            ("--consolidate", "--add-nodes", "x.yaml:1"),
            "--consolidate asks of the cluster as it is",
        ),
    ],
)
def test_bad_questions_are_one_line_and_exit_2(
    tmp_path: Path, orca: Orca, args: tuple[str, ...], message: str
) -> None:
    nodes = write(tmp_path, "nodes.yaml", [zone_node("a1", "a"), zone_node("b1", "b")])
    workloads = write(tmp_path, "workloads.yaml", [wl("j", kind="Job")])
    code, out, err = plan(orca, nodes, workloads, *args)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


@pytest.mark.timeout(300)
def test_ten_thousand_domains_each_have_a_line(tmp_path: Path, orca: Orca) -> None:
    """N-1 of 10,000 nodes (``kubernetes.io/hostname``): a line each, in bounded time (no
    replica anywhere, so each domain's what-if is a lookup: planning stays bounded)."""
    count = 10_000
    nodes = write(
        tmp_path,
        "nodes.yaml",
        "".join(
            f"---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i:05}, labels: "
            f"{{{HOSTNAME}: n{i:05}}}}}\nstatus: {{allocatable: {{cpu: '1', memory: 1Gi}}}}\n"
            for i in range(count)
        ),
    )
    workloads = write(tmp_path, "workloads.yaml", [wl("j", kind="Job", resources={"cpu": "2"})])
    code, table, _ = plan(orca, nodes, workloads, "--resilience", HOSTNAME)
    assert code == 0
    lines = table.splitlines()
    assert len(lines) == 2 + count + 2
    assert lines[-1] == f"the loss of any one of {count} domain(s) leaves every replica a place"


# -- consolidation ------------------------------------------------------------------------------


def test_consolidation_names_what_can_go_and_the_rest_plans_without_it(
    tmp_path: Path, orca: Orca
) -> None:
    # Five 4-core nodes: p and q hold a 1-core Job each (25 %), r a 2-core one (50 %); s is
    # cordoned (empty), t annotated not to be consolidated and full (a 4-core Job). Both
    # are kept. All of p, q, r cannot go (s takes nothing, t has no room): jp, planned
    # first, finds no place. p alone can; p and q together too (both Jobs to r: 4 cores).
    t = zone_node("t", "a")
    t["metadata"]["annotations"] = {"orca.cloudinit.dev/do-not-consolidate": "true"}
    node_docs = [
        zone_node("p", "a"),
        zone_node("q", "a"),
        zone_node("r", "a"),
        zone_node("s", "a", cordoned=True),
        t,
    ]
    nodes = write(tmp_path, "nodes.yaml", node_docs)
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            wl("jp", placed={0: "p"}, kind="Job", resources={"cpu": "1"}),
            wl("jq", placed={0: "q"}, kind="Job", resources={"cpu": "1"}),
            wl("jr", placed={0: "r"}, kind="Job", resources={"cpu": "2"}),
            wl("jt", placed={0: "t"}, kind="Job", resources={"cpu": "4"}),
        ],
    )
    code, answer, _ = plan(orca, nodes, workloads, "--consolidate", "-o", "json")
    assert code == 0
    c = answer["consolidation"]
    assert c["removable"] == ["p", "q"]
    assert c["moves"] == [
        {"workload": "shop/jp", "allocId": "shop/jp-0", "from": "p", "to": "r"},
        {"workload": "shop/jq", "allocId": "shop/jq-0", "from": "q", "to": "r"},
    ]
    assert c["blocked"] == [
        {"node": "s", "replica": None, "reason": "cordoned (spec.unschedulable): kept"},
        {
            "node": "t",
            "replica": None,
            "reason": 'annotated orca.cloudinit.dev/do-not-consolidate: "true": kept',
        },
        {
            "node": "r",
            "replica": "shop/jp-0",
            "reason": "0/2 nodes are available: 1 node(s) were unschedulable, 1 Insufficient cpu.",
        },
    ]
    # Planned again without them, every Workload is placed (exit 0), jp and jq on r.
    kept = [n for n in node_docs if n["metadata"]["name"] not in c["removable"]]
    code, again, _ = plan(orca, write(tmp_path, "rest.yaml", kept), workloads, "-o", "json")
    assert code == 0
    placed = {r["workload"]: [p["node"] for p in r["placements"]] for r in again["results"]}
    assert placed == {"shop/jp": ["r"], "shop/jq": ["r"], "shop/jr": ["r"], "shop/jt": ["t"]}
    code, table, _ = plan(orca, nodes, workloads, "--consolidate")
    assert code == 0
    assert "REMOVABLE (2 of 5 node(s))\np, q\n" in table
    # what-ifs: the cluster as it is, all three, p, p and q, then the set's for its moves
    assert table.splitlines()[-1] == (
        "2 node(s) can go together, 2 replica(s) move; 3 stay (5 what-ifs)"
    )


def test_only_the_selected_nodes_may_go(tmp_path: Path, orca: Orca) -> None:
    # p (4 cores) holds a 1-core Job, q and r a 1-core and a 2-core one: selecting q and r,
    # both go together onto p (1 + 1 + 2 = 4 cores); p, not selected, stays.
    node_docs = [zone_node("p", "a"), zone_node("q", "a"), zone_node("r", "b")]
    nodes = write(tmp_path, "nodes.yaml", node_docs)
    workloads = write(
        tmp_path,
        "workloads.yaml",
        [
            wl("jp", placed={0: "p"}, kind="Job", resources={"cpu": "1"}),
            wl("jq", placed={0: "q"}, kind="Job", resources={"cpu": "1"}),
            wl("jr", placed={0: "r"}, kind="Job", resources={"cpu": "2"}),
        ],
    )
    args = ("--consolidate", "--select", "q", "--select", f"{ZONE}=b", "-o", "json")
    code, answer, _ = plan(orca, nodes, workloads, *args)
    assert code == 0
    c = answer["consolidation"]
    assert c["removable"] == ["q", "r"] and c["blocked"] == []
    assert [(m["allocId"], m["to"]) for m in c["moves"]] == [
        ("shop/jq-0", "p"),
        ("shop/jr-0", "p"),
    ]


@pytest.mark.parametrize("question", [("--resilience", ZONE), ("--consolidate",)])
def test_timings_of_a_question_are_one_line_on_stderr(
    tmp_path: Path, orca: Orca, question: tuple[str, ...]
) -> None:
    """``--timings`` (start-up, reading each file, planning, output) holds for these
    questions too: one line on stderr, its phases in order; there is no first decision to
    time (no plan of the files is made), and the answer on stdout is the same without it."""
    nodes, fresh = a_cluster(tmp_path)
    code, out, err = plan(orca, nodes, fresh, *question, "--timings")
    assert plan(orca, nodes, fresh, *question) == (code, out, "")
    (line,) = err.splitlines()
    assert line.startswith("orca plan: timings: ")
    items = line.removeprefix("orca plan: timings: ").split(", ")
    names = [item.rsplit(" ", 2)[0] for item in items]
    assert names == ["start-up", "nodes", "workloads", "planning", "output", "total"]
