"""docs/benchmarks.md and docs/faults.md are made from the benches' docstrings and recorded
results (``python -m bench.report``), and the results are data a reader can trust: written by
``bench.common.record`` with the commit, the machine and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import common, report

DOCS = common.REPO_ROOT / "docs"


def test_the_benchmarks_page_is_generated_from_the_results() -> None:
    page = DOCS / "benchmarks.md"
    assert page.read_text() == report.benchmarks_page(), (
        "docs/benchmarks.md drifted from bench/results/ or a bench's docstring: "
        "run `make bench-docs`"
    )


def test_the_faults_page_is_generated_from_the_chaos_suite() -> None:
    page = DOCS / "faults.md"
    assert page.read_text() == report.faults_page(), (
        "docs/faults.md drifted from bench/results/chaos.json or a scenario's docstring: "
        "run `make bench-docs`"
    )


def test_every_bench_and_scenario_is_on_its_page() -> None:
    from bench.chaos import SCENARIOS

    benchmarks = report.benchmarks_page()
    for path in sorted((common.REPO_ROOT / "bench").glob("*.py")):
        if path.stem not in report.NOT_BENCHES:
            assert f"### {path.stem}\n" in benchmarks, path.name
    faults = report.faults_page()
    for name in SCENARIOS:
        assert f"### {name}\n" in faults, name


def test_every_checked_in_result_says_what_it_was_measured_on() -> None:
    results = sorted(common.RESULTS.glob("*.json"))
    assert results, "bench/results/ holds no recorded run"
    for path in results:
        result = json.loads(path.read_text())
        assert result["bench"] == path.stem
        assert result["command"].startswith("python bench/")
        assert len(result["commit"]["sha"]) == 40 and isinstance(result["commit"]["dirty"], bool)
        machine = result["machine"]
        assert machine["cores"] >= 1 and machine["python"] and machine["kernel"]
        assert {"load_average_start", "load_average_end"} <= set(machine)
        assert result["figures"], path.name


def test_a_bench_without_a_result_is_listed_with_no_recorded_run(tmp_path: Path) -> None:
    """Nothing recorded yet: every bench's section says so, and no figure appears."""
    page = report.benchmarks_page(results=tmp_path)
    sections = page.split("\n### ")[1:]
    assert sections
    for section in sections:
        assert "No recorded run." in section
        assert "| figure |" not in section


def test_record_writes_figures_with_their_provenance(tmp_path: Path) -> None:
    figures = {"1000 nodes": {"plan_ms": 12.345678, "placed": 7}, "peak RSS_mb": 99.96}
    path = common.record("bench_x", figures, "python bench/bench_x.py --n 3", tmp_path)
    result = json.loads(path.read_text())
    assert path == tmp_path / "bench_x.json"
    assert result["figures"] == {
        "1000 nodes": {"plan_ms": 12.35, "placed": 7},
        "peak RSS_mb": 99.96,
    }
    assert result["command"] == "python bench/bench_x.py --n 3"
    assert len(result["commit"]["sha"]) == 40
    assert result["machine"]["load_average_start"] == round(common.LOAD_AT_START, 2)
    # The page shows them with their units and where they came from.
    lines = "\n".join(report._latest(result))
    assert "`python bench/bench_x.py --n 3`" in lines
    assert "| peak RSS | 100 MB |" in lines
    assert "| plan | 12.3 ms |" in lines and "| placed | 7 |" in lines


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("peak RSS_mb", ("peak RSS", "MB")),
        ("cold_workloads_per_s", ("cold", "workloads/s")),
        ("etcd_cpu_s_per_s", ("etcd", "CPU s/s")),
        ("CPU per event_us", ("CPU per event", "µs")),
        ("replicas placed", ("replicas placed", "")),
        ("kube_apiserver_cpu_s_per_s", ("kube_apiserver", "CPU s/s")),
        ("cold_us_per_pair", ("cold", "µs per (workload, node)")),
        ("orca_series", ("orca_series", "")),
    ],
)
def test_a_figures_unit_is_its_names_suffix(key: str, shown: tuple[str, str]) -> None:
    assert report.split_unit(key) == shown


def test_groups_with_the_same_figures_share_one_table() -> None:
    figures = {
        "500 nodes": {"warm_ms": 1.0, "ok": True},
        "5000 nodes": {"warm_ms": 10.0, "ok": False},
    }
    assert list(report.figure_tables(figures)) == [
        "| figure | unit | 500 nodes | 5000 nodes |",
        "|---|---|---:|---:|",
        "| warm | ms | 1.00 | 10.0 |",
        "| ok |  | yes | no |",
        "",
    ]


def test_process_counters_are_read_from_proc() -> None:
    """The helpers every bench uses read this process's own counters sensibly."""
    import os

    pid = os.getpid()
    assert common.cpu_seconds(pid) > 0
    assert common.peak_rss_mb(pid) > 1
    assert common.own_peak_rss_mb() >= common.peak_rss_mb(pid) * 0.5


def test_merged_runs_keep_each_groups_figures_and_provenance(tmp_path: Path) -> None:
    """A bench run one size at a time (``record(merge=True)``): a run replaces the groups it
    measured and keeps the others, each group with the command that measured it, and the page
    names every run beside its groups."""
    first = {"1000 nodes": {"cpu_ms": 1.0}, "5000 nodes": {"cpu_ms": 2.0}}
    common.record("bench_x", first, "python bench/bench_x.py --nodes 1000,5000", tmp_path)
    common.record(
        "bench_x",
        {"15000 nodes": {"cpu_ms": 3.0}, "5000 nodes": {"cpu_ms": 2.5}},
        "python bench/bench_x.py --nodes 5000,15000",
        tmp_path,
        merge=True,
        order=lambda group: int(group.split()[0]),
    )
    result = json.loads((tmp_path / "bench_x.json").read_text())
    assert result["figures"] == {
        "1000 nodes": {"cpu_ms": 1.0},
        "5000 nodes": {"cpu_ms": 2.5},
        "15000 nodes": {"cpu_ms": 3.0},
    }
    commands = {group: run["command"] for group, run in result["runs"].items()}
    assert commands == {
        "1000 nodes": "python bench/bench_x.py --nodes 1000,5000",
        "5000 nodes": "python bench/bench_x.py --nodes 5000,15000",
        "15000 nodes": "python bench/bench_x.py --nodes 5000,15000",
    }
    assert result["command"] == "python bench/bench_x.py --nodes 5000,15000"  # the latest
    lines = report._latest(result)
    runs = [line for line in lines if line.startswith("- *")]
    assert len(runs) == 2
    assert runs[0].startswith("- *1000 nodes*: `python bench/bench_x.py --nodes 1000,5000`")
    assert runs[1].startswith(
        "- *5000 nodes*, *15000 nodes*: `python bench/bench_x.py --nodes 5000,15000`"
    )
    assert "| cpu | ms | 1.00 | 2.50 | 3.00 |" in lines


def test_a_merge_takes_only_groups(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="groups"):
        common.record("bench_x", {"cpu_ms": 1.0}, "python bench/bench_x.py", tmp_path, merge=True)


def test_groups_of_two_shapes_are_two_tables_of_alike_groups() -> None:
    """A backlog's sides and a burst's ratio recorded together: the sides side by side, the
    ratio on its own under its name."""
    figures = {
        "backlog: kube": {"rate_per_s": 100.0, "ok": True},
        "ratio": {"lowest_x": 0.9},
        "backlog: orca": {"rate_per_s": 300.0, "ok": True},
    }
    assert list(report.figure_tables(figures)) == [
        "| figure | unit | backlog: kube | backlog: orca |",
        "|---|---|---:|---:|",
        "| rate | per s | 100 | 300 |",
        "| ok |  | yes | yes |",
        "",
        "*ratio*",
        "",
        "| figure | value |",
        "|---|---:|",
        "| lowest | 0.9 x |",
        "",
    ]


def test_a_profiles_top_functions_by_own_and_inclusive_time() -> None:
    """``bench.stacks`` reads py-spy's collapsed stacks: a function's own time is where it is
    innermost, its inclusive time where it is anywhere (once per stack, recursion or not);
    ``under`` keeps only the stacks through a function, from it down."""
    from bench import stacks

    lines = [
        "main (/r/a.py:1);run (/r/loop.py:10);decide (/r/s.py:5);decide (/r/s.py:9) 30\n",
        "main (/r/a.py:1);run (/r/loop.py:10);write (/r/tx.py:7) 10\n",
        "main (/r/a.py:2);idle (/r/io.py:3) 60\n",
    ]
    whole = stacks.read(lines)
    assert whole.total == 100
    assert whole.own == {"decide (s.py)": 30, "write (tx.py)": 10, "idle (io.py)": 60}
    assert whole.inclusive["main (a.py)"] == 100 and whole.inclusive["decide (s.py)"] == 30
    under = stacks.read(lines, under="run")
    assert under.total == 40 and "main (a.py)" not in under.inclusive
    assert stacks.show(under, 1).splitlines()[:3] == [
        "40 samples",
        "-- own time",
        "  75.0 %  decide (s.py)",
    ]
