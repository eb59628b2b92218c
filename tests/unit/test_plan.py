"""``orca plan`` end to end through ``controller.cli.main``: inputs, outputs, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from controller.api.models import Phase, Workload
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeTable
from controller.scheduler.plan import plan as plan_api
from controller.scheduler.priority import PriorityClass, PriorityClasses
from tests.support.cli import Orca, write
from tests.support.factories import node, node_object, workload
from tests.support.factories import workload_obj as wl
from tests.unit.test_status_body import nulls

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_shipped_examples_plan_with_one_unplaceable_workload(
    orca: Orca,
) -> None:
    code, out, err = orca(
        "plan", "--nodes", EXAMPLES / "nodes.yaml", "--workloads", EXAMPLES / "workloads.yaml"
    )
    assert code == 1  # ml/trainer asks for 12 cores: nothing that big
    lines = out.split("\n\n")[0].splitlines()  # the table, before the sections below it
    assert lines[0].split() == ["WORKLOAD", "KIND", "PLACED", "PHASE", "NODES", "REASON"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert "5/5" in rows["shop/web"]
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in yaml.safe_load(EXAMPLES.joinpath("nodes.yaml").read_text())["items"]
    }
    api_nodes = [cell.split("(")[0] for cell in rows["shop/api"].split()[4:]]
    assert sorted(zones[n] for n in api_nodes) == ["eu-1a", "eu-1a", "eu-1b", "eu-1b"]
    assert "edge-1" in rows["shop/thumbnailer"]
    assert "pve-1" in rows["ci/build-vm"]
    assert "Unschedulable" in rows["ml/trainer"]
    assert "control-1" in rows["monitoring/node-exporter"]  # it tolerates the taint
    assert "control-1" not in rows["shop/web"]
    assert "0/7 nodes are available" in rows["ml/trainer"]
    assert "1 node(s) had untolerated taint" in rows["ml/trainer"]
    assert err == ""


def test_the_gpu_example_places_one_gang_whole_and_the_other_not_at_all(orca: Orca) -> None:
    """examples/gpu-nodes.yaml has 8 GPUs (gpu-a, gpu-b: 4 each); each training gang wants
    all 8. The first is placed whole; the second (minCount 4) finds no GPU left, so none of
    its replicas is placed; inference asks for none and is placed; cpu-1 (pods: 4) takes it."""
    code, out, _ = orca(
        "plan",
        "--nodes",
        EXAMPLES / "gpu-nodes.yaml",
        "--workloads",
        EXAMPLES / "gpu-training.yaml",
        "-o",
        "json",
    )
    assert code == 1
    results = {r["workload"]: r for r in json.loads(out)["results"]}
    pretrain = results["ml/llm-pretrain"]
    assert (pretrain["placed"], pretrain["phase"]) == (8, "Scheduled")
    assert sorted({p["node"] for p in pretrain["placements"]}) == ["gpu-a", "gpu-b"]
    finetune = results["ml/vision-finetune"]
    assert (finetune["placed"], finetune["phase"]) == (0, "Unschedulable")
    assert finetune["message"].startswith("gang minCount 4: 0 of 8 replicas would fit")
    assert results["ml/inference"]["placed"] == 3


def test_the_budget_example_keeps_the_job_waiting_and_names_the_budget(orca: Orca) -> None:
    """examples/budget.yaml: checkout holds 3 cpu on node-a, node-b and node-c (minAvailable
    3); the Job needs 6 cpu, which only node-c (8) has once checkout's replica is gone: the
    budget forbids it. A drain of node-c would leave checkout 2 of 3: named, exit 1."""
    args = ("plan", "--nodes", EXAMPLES / "nodes.yaml", "--workloads", EXAMPLES / "budget.yaml")
    code, out, _ = orca(*args, "-o", "json")
    assert code == 1
    results = {r["workload"]: r for r in json.loads(out)["results"]}
    assert results["shop/nightly-report"]["placed"] == 0
    assert results["shop/nightly-report"]["message"].endswith(
        "Preempting would break the disruption budget of shop/checkout (minAvailable 3)."
    )
    assert results["shop/checkout"]["placed"] == 3
    code, out, _ = orca(*args, "--drain", "node-c", "-o", "json")
    assert code == 1
    assert json.loads(out)["budgets"] == [
        {"workload": "shop/checkout", "budget": "minAvailable 3", "keeps": 2, "needs": 3}
    ]
    code, out, _ = orca(*args, "--drain", "node-c")
    assert "BUDGETS: Workloads left below their budget (1)" in out
    assert "1 Workload(s) below their budget" in out.splitlines()[-1]


def test_json_output_has_the_status_fields(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a"), node_object("b")])
    workloads = write(tmp_path, "w.yaml", [wl("web", kind="Service", count=2)])
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert code == 0
    (result,) = json.loads(out)["results"]
    assert result["workload"] == "shop/web"
    assert result["phase"] == "Scheduled"
    assert (result["desired"], result["placed"]) == (2, 2)
    assert [p["node"] for p in result["placements"]] == ["a", "b"]
    assert [p["allocId"] for p in result["placements"]] == ["shop/web-0", "shop/web-1"]
    assert all(isinstance(p["score"], int) for p in result["placements"])
    conditions = {c["type"]: (c["status"], c["reason"]) for c in result["conditions"]}
    assert conditions["Ready"] == conditions["Scheduled"] == ("True", "AllPlaced")
    assert result["nodes"] == "a,b"  # the summary kubectl -o wide shows


def test_workloads_see_the_placements_before_them(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a", cpu="1")])
    docs = [wl(f"j{i}", kind="Job", resources={"cpu": "600m"}) for i in range(2)]
    workloads = write(tmp_path, "w.yaml", docs)
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert code == 1
    phases = [r["phase"] for r in json.loads(out)["results"]]
    assert phases == ["Scheduled", "Unschedulable"]


def test_kubectl_list_output_is_accepted(tmp_path: Path, orca: Orca) -> None:
    nodes = write(
        tmp_path,
        "nodes.yaml",
        [{"apiVersion": "v1", "kind": "List", "items": [node_object("a"), node_object("b")]}],
    )
    workloads = write(
        tmp_path,
        "w.yaml",
        [{"apiVersion": "v1", "kind": "List", "items": [wl("d", kind="DaemonSet")]}],
    )
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert code == 0
    assert json.loads(out)["results"][0]["placed"] == 2


def test_existing_status_placements_are_kept(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a"), node_object("b", cpu="64")])
    placed = wl("web", kind="Job")
    placed["status"] = {"placements": [{"node": "a", "allocId": "shop/web-0", "score": 7}]}
    workloads = write(tmp_path, "w.yaml", [placed])
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert code == 0
    assert json.loads(out)["results"][0]["placements"] == [
        {"node": "a", "allocId": "shop/web-0", "score": 7}
    ]


BAD_INPUTS = [
    ("missing-file", None, "no such file"),
    ("broken-yaml", "kind: [Node\n", "invalid YAML"),
    ("not-a-workload", [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}], "Pod p"),
    ("unknown-kind", [wl("x", kind="CronJob")], "spec.kind: Input should be"),
    ("negative-count", [wl("x", kind="Service", count=-1)], "spec.count"),
    ("weight-500", [wl("x", kind="Job", affinity=[{"target": "a", "weight": 500}])], "weight"),
    ("count-on-job", [wl("x", kind="Job", count=2)], "count is only allowed"),
    ("unknown-field", [wl("x", kind="Job", replicas=3)], "spec.replicas"),
    ("bad-quantity", [wl("x", kind="Job", resources={"cpu": "lots"})], "spec.resources[cpu]"),
    ("long-expression", [wl("x", kind="Job", constraints=["true" + " " * 2000])], "constraints"),
    ("duplicate", [wl("x", kind="Job"), wl("x", kind="Job")], "appears twice"),
]


@pytest.mark.parametrize(
    ("content", "expected"),
    [(c, e) for _, c, e in BAD_INPUTS],
    ids=[i for i, _, _ in BAD_INPUTS],
)
def test_bad_workload_input_exits_2_with_one_line(
    tmp_path: Path,
    orca: Orca,
    content: list[dict[str, object]] | str | None,
    expected: str,
) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a")])
    path = tmp_path / "absent.yaml" if content is None else write(tmp_path, "w.yaml", content)
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", path)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and str(path) in err
    assert expected in err


def test_bad_node_input_names_the_node(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a", cpu="many")])
    workloads = write(tmp_path, "w.yaml", [wl("x", kind="Job")])
    code, _, err = orca("plan", "--nodes", nodes, "--workloads", workloads)
    assert code == 2
    assert "Node a: status.allocatable" in err


def test_console_script_prints_no_traceback_on_bad_input(tmp_path: Path) -> None:
    """As a user runs it: a real process, its stderr, its exit code."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "plan",
            "--nodes",
            "no.yaml",
            "--workloads",
            "x",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == "error: no.yaml: no such file\n"


# -- priority and preemption ---------------------------------------------------------------------


def priority_class(name: str, value: int, **extra: object) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def test_plan_orders_by_priority_then_file_order(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a", cpu="2"), priority_class("hi", 100)])
    workloads = write(
        tmp_path,
        "w.yaml",
        [
            wl("first", kind="Job", resources={"cpu": "1"}),
            wl("late", kind="Job", resources={"cpu": "1"}, priorityClassName="hi"),
            wl("second", kind="Job", resources={"cpu": "1"}),
        ],
    )
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    results = json.loads(out)["results"]
    assert [(r["workload"], r["priority"], r["phase"]) for r in results] == [
        ("shop/late", 100, "Scheduled"),
        ("shop/first", 0, "Scheduled"),
        ("shop/second", 0, "Unschedulable"),
    ]
    assert (code, err) == (1, "")


def test_plan_preempts_lower_priority_replicas_and_says_so(tmp_path: Path, orca: Orca) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a", cpu="2"), node_object("b", cpu="2")])
    placed = {
        "placements": [
            {"node": "a", "allocId": "shop/low-0", "score": 0},
            {"node": "b", "allocId": "shop/low-1", "score": 0},
        ],
        "resources": {"cpu": "2"},
    }
    low = {**wl("low", kind="Service", count=2, resources={"cpu": "2"}), "status": placed}
    docs = [
        priority_class("batch", -10, globalDefault=True),
        priority_class("urgent", 1000),
        priority_class("polite", 1000, preemptionPolicy="Never"),
        wl("waits", kind="Job", resources={"cpu": "1"}, priorityClassName="polite"),
        low,
        wl("urgent", kind="Job", resources={"cpu": "1"}, priorityClassName="urgent"),
    ]
    workloads = write(tmp_path, "w.yaml", docs)
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    results = {r["workload"]: r for r in json.loads(out)["results"]}
    assert results["shop/waits"]["phase"] == "Unschedulable"  # Never: no preemption
    urgent = results["shop/urgent"]
    assert [p["node"] for p in urgent["placements"]] == ["a"]
    assert urgent["victims"] == [
        {"workload": "shop/low", "allocId": "shop/low-0", "node": "a", "priority": -10}
    ]
    low_result = results["shop/low"]
    assert [p["allocId"] for p in low_result["placements"]] == ["shop/low-1"]
    assert low_result["preemptedBy"] == [
        {"allocId": "shop/low-0", "node": "a", "by": "shop/urgent", "priority": 1000}
    ]
    assert code == 1
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads)
    assert out.split("PREEMPTED\n")[1] == (
        "shop/low-0 (priority -10) on a by shop/urgent (priority 1000)\n"
    )


def test_plan_missing_class_is_invalid_and_a_bad_class_is_bad_input(
    tmp_path: Path, orca: Orca
) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a")])
    workloads = write(tmp_path, "w.yaml", [wl("x", kind="Job", priorityClassName="gold")])
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    (result,) = json.loads(out)["results"]
    assert (code, result["phase"], result["message"]) == (
        1,
        "Invalid",
        "spec.priorityClassName: no PriorityClass with name gold was found",
    )
    bad = write(tmp_path, "bad.yaml", [priority_class("gold", 10, preemptionPolicy="Sometimes")])
    code, out, err = orca("plan", "--nodes", bad, "--workloads", workloads)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "preemptionPolicy 'Sometimes' is not one of PreemptLowerPriority, Never" in err


def test_now_makes_a_plan_of_an_unreachable_node_reproducible(tmp_path: Path, orca: Orca) -> None:
    """A replica on a node Unknown since 10:00:00 with a 15 s toleration: kept (and announced)
    at 10:00:10, moved at 10:00:20, whatever the time the plan runs (issue 21)."""
    since = "2026-12-01T10:00:00Z"
    nodes = write(
        tmp_path,
        "nodes.yaml",
        [node_object("a", cpu="8", ready="Unknown", since=since), node_object("b")],
    )
    toleration = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 15,
    }
    web = wl("web", kind="Service", count=1, tolerations=[toleration])
    web["status"] = {"placements": [{"node": "a", "allocId": "shop/web-0", "score": 0}]}
    workloads = write(tmp_path, "workloads.yaml", [web])

    def planned(now: str) -> dict[str, object]:
        code, out, err = orca(
            "plan", "--nodes", nodes, "--workloads", workloads, "--now", now, "-o", "json"
        )
        assert (code, err) == (0, "")  # every replica placed
        (result,) = json.loads(out)["results"]
        status: dict[str, object] = result
        return status

    early = planned("2026-12-01T10:00:10Z")
    assert [p["node"] for p in early["placements"]] == ["a"]  # type: ignore[attr-defined]
    (pending,) = [c for c in early["conditions"] if c["type"] == "MovePending"]  # type: ignore[attr-defined]
    assert pending["reason"] == "NodeUnreachable"
    assert "shop/web-0 on a moves at 2026-12-01T10:00:15Z" in pending["message"]
    assert planned("2026-12-01T10:00:10Z") == early  # the same files and --now: the same plan
    late = planned("2026-12-01T10:00:20Z")
    assert [p["node"] for p in late["placements"]] == ["b"]  # type: ignore[attr-defined]
    assert all(c["type"] != "MovePending" for c in late["conditions"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("now", ["yesterday", "2026-12-01T10:00:00"])
def test_a_bad_now_is_one_line_and_exit_2(tmp_path: Path, orca: Orca, now: str) -> None:
    nodes = write(tmp_path, "nodes.yaml", [node_object("a")])
    workloads = write(tmp_path, "workloads.yaml", [wl("j", kind="Job")])
    code, out, err = orca("plan", "--nodes", nodes, "--workloads", workloads, "--now", now)
    assert (code, out) == (2, "")
    assert err.startswith("error: --now: ") and err.count("\n") == 1, err


def test_plan_calls_back_before_each_decision_in_planning_order() -> None:
    # top (priority 1000) is planned before low although listed after it: both empty 1-cpu
    # nodes tie, so top takes a (the lower hostname) and low b; typo is Invalid, its
    # topologySpread has no domains to show. before_each sees the ledger just before each
    # decision; on_first_decision is called once, after the first.
    classes = PriorityClasses.of([PriorityClass("high", 1000)])
    spread = [{"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
    workloads = [
        workload("low", kind="Job", resources={"cpu": "1"}),
        workload("top", kind="Job", resources={"cpu": "1"}, priorityClassName="high"),
        workload(
            "typo", kind="Service", count=2, constraints=['node.cpu == "x"'], topologySpread=spread
        ),
    ]
    seen: list[tuple[str, dict[str, list[str]]]] = []
    first: list[int] = []

    def before_each(w: Workload, ledger: Ledger) -> None:
        held = {k: [b.node for b in ledger.bookings(k)] for k in ledger.workload_keys()}
        seen.append((w.key, held))

    results = plan_api(
        [node("a", cpu="1"), node("b", cpu="1")],
        workloads,
        now="2026-12-01T10:00:00Z",
        classes=classes,
        before_each=before_each,
        on_first_decision=lambda: first.append(len(seen)),
    )
    assert seen == [
        ("shop/top", {}),
        ("shop/low", {"shop/top": ["a"]}),
        ("shop/typo", {"shop/top": ["a"], "shop/low": ["b"]}),
    ]
    assert first == [1]
    assert [(r.workload.key, r.status.phase, r.spread) for r in results] == [
        ("shop/top", Phase.SCHEDULED, ()),
        ("shop/low", Phase.SCHEDULED, ()),
        ("shop/typo", Phase.INVALID, ()),
    ]


def test_plan_preempts_known_workloads_the_one_started_last_first() -> None:
    """Workloads in the ledger that are not planned (the cluster's others) are preemptible at
    the priority given for them; between two equal candidate nodes, the victim started last
    goes (kube's DefaultPreemption: the later start is less important). Without their
    priorities nothing can be preempted."""
    classes = PriorityClasses.of([PriorityClass("high", 1000)])
    boss = workload("boss", kind="Job", resources={"cpu": "4"}, priorityClassName="high")
    old, young = datetime(2020, 1, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)

    def planned(
        known: dict[str, int] | None, started: dict[str, datetime] | None
    ) -> tuple[list[str], list[tuple[str, str]]]:
        ledger = Ledger(NodeTable([node("n1"), node("n2")]))  # 4 cpus each, both full
        ledger.load("shop/old", [Booking("n1", "shop/old-0", 4000, 0)])
        ledger.load("shop/young", [Booking("n2", "shop/young-0", 4000, 0)])
        (result,) = plan_api(
            [],
            [boss],
            ledger=ledger,
            now="2026-12-01T10:00:00Z",
            classes=classes,
            known_priorities=known,
            known_started=started,
        )
        victims = [(v.victim.key, v.victim.booking.node) for v in result.victims]
        return [p.node for p in result.status.placements], victims

    both = {"shop/old": 0, "shop/young": 0}
    assert planned(both, {"shop/old": old, "shop/young": young}) == (
        ["n2"],
        [("shop/young", "n2")],
    )
    assert planned(both, {"shop/old": young, "shop/young": old}) == (
        ["n1"],
        [("shop/old", "n1")],
    )
    assert planned(None, {"shop/old": old, "shop/young": young}) == ([], [])


def test_each_status_is_the_one_the_operator_would_write() -> None:
    # web (generation 3) was placed on a, Ready since T0, with a condition of another
    # controller. Planned again at NOW it stays on a: its status is observed at generation
    # 3, Ready keeps T0 (its status did not change), Scheduled (new to this status) is dated
    # NOW, the other controller's condition is kept, and the selector is the one /scale
    # reports.
    t0, now = "2026-11-30T08:00:00Z", "2026-12-01T10:00:00Z"
    previous = {
        "placements": [{"node": "a", "allocId": "shop/web-0", "score": 0}],
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "AllPlaced", "lastTransitionTime": t0},
            {"type": "Audited", "status": "True", "reason": "Ok", "lastTransitionTime": t0},
        ],
    }
    web = workload("web", generation=3, status=previous, kind="Service", count=1)
    (result,) = plan_api([node("a")], [web], now=now)
    status = result.status
    times = {c.type: c.last_transition_time for c in status.conditions}
    assert status.observed_generation == 3
    assert (times["Ready"], times["Scheduled"], times["Audited"]) == (t0, now, t0)
    assert status.selector == "orca.cloudinit.dev/workload=web"


def test_the_nodes_come_from_one_place_exactly(tmp_path: Path, orca: Orca) -> None:
    """``--nodes FILE`` or ``--from-cluster``: neither or both is bad input, said in one line
    on stderr (stdout stays empty for a script that reads it)."""
    nodes = write(tmp_path, "nodes.yaml", [node_object("a")])
    workloads = write(tmp_path, "w.yaml", [wl("j", kind="Job")])
    for where in ((), ("--nodes", nodes, "--from-cluster")):
        code, out, err = orca("plan", *where, "--workloads", workloads)
        assert (code, out) == (2, "")
        assert err == "error: give exactly one of --nodes FILE and --from-cluster\n"


@pytest.mark.parametrize(
    "question", [("--drain", "a"), ()], ids=["a-what-if-from-files", "a-plan-of-the-cluster"]
)
def test_the_workloads_file_is_needed_but_for_a_question_to_the_cluster(
    tmp_path: Path, orca: Orca, question: tuple[str, ...]
) -> None:
    """Only a what-if (or --resilience, --consolidate) asked of the cluster plans the
    cluster's own Workloads; from files, and for a plain plan of the cluster, there is nothing
    to plan without --workloads. Refused before anything is read: no cluster is asked."""
    nodes = write(tmp_path, "nodes.yaml", [node_object("a")])
    where = ("--nodes", nodes) if question else ("--from-cluster", "--kubeconfig", tmp_path)
    code, out, err = orca("plan", *where, *question)
    assert (code, out) == (2, "")
    assert err == (
        "error: --workloads FILE is needed (with --from-cluster and --drain, --add-nodes, "
        "--resilience or --consolidate it may be left out: the cluster's Workloads are "
        "planned)\n"
    )


def test_one_line_joins_lines_and_cuts_at_the_limit() -> None:
    """Bad input is one line on stderr whatever the message quotes: its lines joined by a
    blank, and at most ``limit`` characters, a cut one ending in "..." so it shows."""
    from controller.cli.plan import MAX_ERROR_CHARS, one_line

    assert one_line("in file.yaml\n  line 3\nbad") == "in file.yaml   line 3 bad"
    whole = "x" * MAX_ERROR_CHARS
    assert one_line(whole) == whole
    cut = one_line("y" * 7 + whole)
    assert len(cut) == MAX_ERROR_CHARS
    assert cut == ("y" * 7 + whole)[: MAX_ERROR_CHARS - 3] + "..."
    assert one_line("abcdefghij", limit=8) == "abcde..."


def test_json_results_leave_out_the_fields_with_nothing_to_say(tmp_path: Path, orca: Orca) -> None:
    """No ``null`` for a script to step around: a status field with nothing to say is left
    out, as in the status the operator writes (``status_body``), so a Workload whose manifest
    has no ``metadata.generation`` has no observedGeneration."""
    nodes = write(tmp_path, "nodes.yaml", [node_object("a")])
    workloads = write(tmp_path, "w.yaml", [wl("web", kind="Service", count=1)])
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    assert code == 0
    (result,) = json.loads(out)["results"]
    assert result["placed"] == 1
    assert "observedGeneration" not in result  # the manifest has no metadata.generation
    assert nulls(result, "result") == []


def test_the_nodes_column_names_six_nodes_then_how_many_more(tmp_path: Path, orca: Orca) -> None:
    """A table row stays readable for a large Workload: its first nodes (six) and how many
    placements it leaves out (``-o json`` lists them all); a Workload placed nowhere shows
    ``-`` there, as kubectl shows an empty column."""
    from controller.cli.plan import MAX_NODES_SHOWN

    names = [f"n{i:02}" for i in range(MAX_NODES_SHOWN + 3)]
    nodes = write(tmp_path, "nodes.yaml", [node_object(n) for n in names])
    workloads = write(
        tmp_path,
        "w.yaml",
        [
            wl("six", kind="Service", count=MAX_NODES_SHOWN, resources={"cpu": "10m"}),
            wl("nine", kind="Service", count=len(names), resources={"cpu": "10m"}),
            wl("huge", kind="Job", resources={"cpu": "64"}),
        ],
    )
    code, out, _ = orca("plan", "--nodes", nodes, "--workloads", workloads)
    assert code == 1  # huge fits nowhere
    _, js, _ = orca("plan", "--nodes", nodes, "--workloads", workloads, "-o", "json")
    placed = {
        r["workload"]: [p["node"] for p in r["placements"]] for r in json.loads(js)["results"]
    }
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    # WORKLOAD KIND PLACED PHASE NODES..., each node as name(score)
    six = [cell.split("(")[0] for cell in rows["shop/six"][4:]]
    assert six == placed["shop/six"]  # all of them: nothing to add
    nine = rows["shop/nine"][4:]
    assert [cell.split("(")[0] for cell in nine[:MAX_NODES_SHOWN]] == placed["shop/nine"][
        :MAX_NODES_SHOWN
    ]
    assert nine[MAX_NODES_SHOWN:] == [f"+{len(names) - MAX_NODES_SHOWN}", "more"]
    assert rows["shop/huge"][4] == "-"
    assert rows["shop/huge"][5:7] == [f"0/{len(names)}", "nodes"]  # the reason follows
