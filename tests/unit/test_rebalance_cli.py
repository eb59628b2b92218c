"""``orca rebalance`` end to end through ``controller.cli.main``: the dry run's table and JSON,
exit codes, and one line per bad input."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Orca, write
from tests.support.factories import node_object

ROOT = Path(__file__).resolve().parents[2]
ZONE = "topology.kubernetes.io/zone"


def placed_service(name: str, nodes: list[str], rebalance: str = "Allowed") -> dict[str, Any]:
    """A Service with its status as the operator writes it: one replica per listed node."""
    size = {"cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"kind": "Service", "count": len(nodes), "resources": size, "rebalance": rebalance},
        "status": {
            "placements": [
                {"node": n, "allocId": f"shop/{name}-{i}", "score": 50} for i, n in enumerate(nodes)
            ],
            "resources": size,
        },
    }


@pytest.fixture
def drifted(tmp_path: Path) -> tuple[Path, Path]:
    """Four busy nodes, four new empty ones, two Allowed Services and one Never."""
    nodes = [node_object(f"old-{i}") for i in range(4)] + [
        node_object(f"new-{i}") for i in range(4)
    ]
    old = [f"old-{i}" for i in range(4)]
    workloads = [
        placed_service("web", old),
        placed_service("api", old),
        placed_service("db", old, rebalance="Never"),
    ]
    return write(tmp_path, "nodes.yaml", nodes), write(tmp_path, "workloads.yaml", workloads)


@pytest.fixture
def zone_a(tmp_path: Path) -> tuple[Path, Path]:
    """docs/workloads.md's example: four nodes of 4 cpu and 8Gi, two in zone a and two in
    zone b, and shop/web's four replicas (1 cpu, 1Gi, maxSkew 1 over the zones) all in zone a."""
    nodes = [node_object(name, labels={ZONE: name[0]}) for name in ("a-1", "a-2", "b-1", "b-2")]
    web = placed_service("web", ["a-1", "a-2", "a-1", "a-2"])
    web["spec"]["topologySpread"] = [
        {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
    ]
    return write(tmp_path, "nodes.yaml", nodes), write(tmp_path, "workloads.yaml", [web])


def documented(command: str) -> str:
    """What docs/workloads.md shows ``command`` printing (the console block it opens)."""
    text = (ROOT / "docs" / "workloads.md").read_text()
    blocks: list[str] = re.findall(r"^```console\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    for block in blocks:
        first, _, printed = block.partition("\n")
        if first == f"$ {command}":
            return printed
    raise AssertionError(f"docs/workloads.md shows no `{command}`")


def test_the_table_is_the_documented_one(zone_a: tuple[Path, Path], orca: Orca) -> None:
    """Numbered from 1 in the order of the moves, each column under its heading, the objective
    as the Event says it (``skew 4, utilisationStddev 0.1875``), the totals ``complete``."""
    nodes, workloads = zone_a
    code, out, err = orca("rebalance", "--nodes", nodes, "--workloads", workloads)
    assert (code, err) == (0, "")
    assert out == documented("orca rebalance --nodes nodes.yaml --workloads workloads.yaml")


def test_the_json_is_the_documented_document(zone_a: tuple[Path, Path], orca: Orca) -> None:
    """A script reads these keys (``totals.nodesFreed``, ``totals.overMaxSkew.after``...):
    every key and figure as docs/workloads.md shows them for its example."""
    nodes, workloads = zone_a
    code, out, err = orca("rebalance", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert (code, err) == (0, "")
    shown = documented("orca rebalance --nodes nodes.yaml --workloads workloads.yaml -o json")
    assert json.loads(out) == json.loads(shown)


def test_json_lists_the_moves_in_order_with_objectives_and_totals(
    drifted: tuple[Path, Path], orca: Orca
) -> None:
    nodes, workloads = drifted
    code, out, err = orca("rebalance", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert (code, err) == (0, "")
    plan = json.loads(out)
    moves = plan["moves"]
    assert len(moves) == 4  # 12 replicas on 8 nodes: one from each old node to a new one
    assert {m["workload"] for m in moves} == {"shop/web", "shop/api"}  # db is Never
    assert all(m["from"].startswith("old-") and m["to"].startswith("new-") for m in moves)
    assert {m["to"] for m in moves} == {f"new-{i}" for i in range(4)}
    assert set(moves[0]) == {
        "workload", "allocId", "from", "to", "score", "strategy", "before", "after"
    }  # fmt: skip
    # In order: each move starts from where the one before it left the objective.
    stddevs = [moves[0]["before"]["utilisationStddev"]] + [
        m["after"]["utilisationStddev"] for m in moves
    ]
    assert stddevs == sorted(stddevs, reverse=True) and len(set(stddevs)) == 5
    assert all(m["before"] == p["after"] for p, m in itertools.pairwise(moves))
    totals = plan["totals"]
    assert totals["moves"] == 4 and totals["complete"] is True
    assert totals["utilisationStddev"]["before"] == stddevs[0]
    assert totals["utilisationStddev"]["after"] == stddevs[-1]
    assert totals["nodesInUse"] == {"before": 4, "after": 8, "ffd": 3}  # 12 cpus on 4-cpu nodes


def test_table_shows_each_move_and_the_totals(drifted: tuple[Path, Path], orca: Orca) -> None:
    nodes, workloads = drifted
    code, out, _ = orca("rebalance", "--nodes", nodes, "--workloads", workloads, "--max-moves", "2")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[:5] == ["#", "WORKLOAD", "ALLOC", "ID", "FROM"]
    assert len(lines) == 4  # header, two moves, totals
    assert lines[1].split()[1] == "shop/api"  # Workloads in key order
    assert "2 move(s) (budget of 2 reached, more to do)" in lines[-1]


def test_no_moves_is_exit_0_and_says_so(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "n.yaml", [node_object("a"), node_object("b")])
    workloads = write(tmp_path, "w.yaml", [placed_service("web", ["a", "b"])])
    code, out, err = orca("rebalance", "--nodes", nodes, "--workloads", workloads)
    assert (code, err) == (0, "")
    assert out.startswith("No moves:")
    code, out, _ = orca("rebalance", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert code == 0 and json.loads(out)["moves"] == []


#: The one line for a wrong choice of input, naming the flags as the usage line does.
EITHER = "give either --nodes FILE and --workloads FILE, or --from-cluster"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--nodes", "{nodes}"], EITHER, id="nodes-without-workloads"),
        pytest.param(["--workloads", "{w}"], EITHER, id="workloads-without-nodes"),
        pytest.param([], EITHER, id="nothing"),
        pytest.param(
            ["--nodes", "{nodes}", "--workloads", "{w}", "--from-cluster"],
            EITHER,
            id="files-and-cluster",
        ),
        pytest.param(["--nodes", "{nodes}", "--from-cluster"], EITHER, id="nodes-and-cluster"),
        pytest.param(["--workloads", "{w}", "--from-cluster"], EITHER, id="workloads-and-cluster"),
        pytest.param(
            ["--nodes", "{nodes}", "--workloads", "{w}", "--max-moves", "ten"],
            "--max-moves: 'ten' is not a whole number",
            id="max-moves-not-a-number",
        ),
        pytest.param(
            ["--nodes", "{nodes}", "--workloads", "{w}", "--max-moves", "100000"],
            "--max-moves: 100000 is out of range (0..10000)",
            id="max-moves-too-many",
        ),
        pytest.param(
            ["--nodes", "{nodes}", "--workloads", "{missing}"], "missing.yaml", id="missing-file"
        ),
        pytest.param(["--nodes", "{nodes}", "--workloads", "{bad}"], "bad.yaml", id="bad-yaml"),
        pytest.param(
            ["--nodes", "{nodes}", "--workloads", "{twice}"],
            "twice.yaml: document 3: Workload shop/web appears twice",
            id="duplicate",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    drifted: tuple[Path, Path],
    orca: Orca,
    args: list[str],
    message: str,
) -> None:
    nodes, workloads = drifted
    paths = {
        "nodes": nodes,
        "w": workloads,
        "missing": tmp_path / "missing.yaml",
        "bad": write(tmp_path, "bad.yaml", "kind: [unclosed"),
        "twice": write(
            tmp_path,
            "twice.yaml",
            [placed_service("api", ["old-0"]), *[placed_service("web", ["old-0"])] * 2],
        ),
    }
    code, out, err = orca("rebalance", *[a.format(**paths) for a in args])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_kubectl_plugin_entry_point_runs_rebalance(drifted: tuple[Path, Path]) -> None:
    """``kubectl orca rebalance`` runs the ``kubectl-orca`` script: the same ``main``."""
    nodes, workloads = drifted
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "rebalance",
            "--nodes",
            str(nodes),
            "--workloads",
            str(workloads),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["moves"]) == 4
