"""What keeps ``orca plan``'s start-up short, checked for the same answers as the slow way:
the quantity parser without the kubernetes client, and the ``--timings`` line (the CEL parser
from Lark's cache: ``test_celcache``, where mutation runs see it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api.quantity import parse_quantity
from controller.cli import main
from tests.support.factories import node_object

MODULE_IMPORTED = time.monotonic()


@pytest.mark.parametrize(
    "text",
    ["0", "1", "500m", "0.5", "1.5Gi", "256Mi", "2k", "3M", "1e3", "1E-3", "100n", "7u", "4Ei"],
)
def test_quantities_parse_as_the_kubernetes_client_parses_them(text: str) -> None:
    from kubernetes.utils.quantity import parse_quantity as clients

    assert parse_quantity(text) == clients(text)  # type: ignore[no-untyped-call]
    assert isinstance(parse_quantity(text), Decimal)


def plan_files(
    tmp_path: Path, workloads_yaml: str, node: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    """A Nodes file of one Node (4 cpus, 8Gi unless given) and a Workloads file."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump(node or node_object("a", cpu="4", memory="8Gi")))
    workloads = tmp_path / "workloads.yaml"
    workloads.write_text(workloads_yaml)
    return nodes, workloads


WEB = (
    "apiVersion: orca.cloudinit.dev/v1alpha1\nkind: Workload\n"
    "metadata: {name: web, namespace: shop}\n"
)  # a Workload's head: its spec follows


def test_orca_plan_never_imports_the_kubernetes_client(tmp_path: Path) -> None:
    nodes, workloads = plan_files(
        tmp_path,
        WEB
        + "spec: {kind: Job, resources: {cpu: 500m, memory: 1Gi}, constraints: ['node.cpu > 0']}\n",
    )
    code = (
        "import sys; from controller.cli import main; "
        f"rc = main(['plan', '--nodes', {str(nodes)!r}, '--workloads', {str(workloads)!r}]); "
        "print('imported:', sorted(m for m in ('kubernetes', 'kopf', 'aiohttp', "
        "'prometheus_client') if m in sys.modules)); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "imported: []" in done.stdout
    assert "web" in done.stdout


def test_timings_are_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, workloads = plan_files(tmp_path, WEB + "spec: {kind: Job}\n")
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(workloads), "--timings"]) == 0
    out, err = capsys.readouterr()
    assert "shop/web" in out and "timings" not in out
    (line,) = err.splitlines()
    assert line.startswith("orca plan: timings: start-up ")
    phases = [
        item.rsplit(" ", 2)[0] for item in line.removeprefix("orca plan: timings: ").split(", ")
    ]
    assert phases == [
        "start-up",
        "nodes",
        "workloads",
        "first decision",
        "planning",
        "output",
        "total",
    ]
    # Each "name N.NN s". The phases are consecutive from the process's start and the total
    # is taken right after the last, so they add up to it (each rounded to 0.01 s); the
    # first decision is a point in time since the start, within the total.
    seconds = {}
    for item in line.removeprefix("orca plan: timings: ").split(", "):
        name, value, unit = item.rsplit(" ", 2)
        assert unit == "s" and re.fullmatch(r"\d+\.\d\d", value), item
        seconds[name] = float(value)
    total = seconds.pop("total")
    first = seconds.pop("first decision")
    assert abs(sum(seconds.values()) - total) <= 0.01 * len(seconds) + 0.01
    assert 0 < first <= total


def test_the_collector_pace_is_given_back(tmp_path: Path) -> None:
    """``orca plan`` collects less often while it runs, not after (for a caller in-process)."""
    import gc

    nodes, workloads = plan_files(tmp_path, "kind: Nonsense\n", node_object("a"))
    before = gc.get_threshold()
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(workloads)]) == 2
    assert gc.get_threshold() == before


def test_the_process_age_is_read_from_proc_even_when_its_name_holds_a_parenthesis() -> None:
    """The timings count from the process's start (``/proc/self/stat``'s starttime): at least
    as long as this module has been imported, and what ``ps`` says it has run.
    The name field (2) may hold ``)`` and spaces (a process renames itself with prctl): the
    fields are counted after its last ``)``."""
    import ctypes

    from controller.cli.timings import _process_age

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_name, pr_get_name = 15, 16
    before = ctypes.create_string_buffer(16)
    assert libc.prctl(pr_get_name, before, 0, 0, 0) == 0
    assert libc.prctl(pr_set_name, b"a) b c d e f", 0, 0, 0) == 0
    try:
        assert Path("/proc/self/comm").read_bytes() == b"a) b c d e f\n"
        age = _process_age()
    finally:
        libc.prctl(pr_set_name, before.value, 0, 0, 0)
    # procps's own reading of the same start time, in whole seconds
    ps = subprocess.run(["ps", "-o", "etimes=", "-p", str(os.getpid())], capture_output=True)
    elapsed = int(ps.stdout)
    assert age is not None
    assert time.monotonic() - MODULE_IMPORTED <= age
    assert elapsed - 2 <= age <= elapsed + 2


def test_points_count_from_the_process_start_or_without_proc_from_the_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``first decision`` is a point in time since the process started, as /proc tells it;
    where /proc cannot tell, since ``controller.cli.timings`` was imported (a floor that the
    imports before it leave out)."""
    from controller.cli import timings

    hour = 3600.0  # a process an hour old: far more than any run of this test
    monkeypatch.setattr(timings, "_process_age", lambda: hour)
    timer = timings.PhaseTimer()
    timer.point("first decision")
    ((name, seconds),) = timer.items
    assert name == "first decision"
    assert hour <= seconds < hour + 60

    monkeypatch.setattr(timings, "_process_age", lambda: None)
    before = time.perf_counter() - timings._IMPORTED
    timer = timings.PhaseTimer()
    timer.point("first decision")
    after = time.perf_counter() - timings._IMPORTED
    ((_, seconds),) = timer.items
    assert before <= seconds <= after
