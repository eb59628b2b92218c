"""What keeps ``orca plan``'s start-up short, checked for the same answers as the slow way:
the CEL parser from Lark's cache, the quantity parser without the kubernetes client, and the
``--timings`` line."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from celpy import celparser

from controller.api.quantity import parse_quantity
from controller.cli import main
from controller.scheduler.celcache import build_cel_parser, cache_path, ship
from tests.support.factories import node_object

EXPRESSIONS = [
    '"ssd" in node.tags',
    '!("gpu" in node.tags) && node.cpu >= 8000',
    'node.labels["topology.kubernetes.io/zone"].startsWith("eu-")',
    'node.labels["node.kubernetes.io/instance-type"] in ["m5.xlarge", "m5.2xlarge"]',
    "size(node.runtimes) >= 2 || node.freeMemory > 1024 * 1024",
    'node.tags.exists(t, t == "edge") ? 1.5 : -2u == 3u',
    "node.labels.all(k, k.size() < 64) && has(node.labels.zone)",
    "b'bytes' == b\"\\x00\" || r'raw' != 'x' || [1, 2][0] == {'a': 1}['a']",
]


def test_the_cached_cel_parser_parses_as_cel_pythons_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cel-python's own parser, built the usual way (whatever this process installed before)
    monkeypatch.setattr(celparser.CELParser, "CEL_PARSER", None)
    celparser.CELParser()
    own = celparser.CELParser.CEL_PARSER
    assert own is not None
    cache = tmp_path / "cel.cache"
    cold = build_cel_parser(cache)  # builds and writes the cache
    assert cache.stat().st_size > 0
    warm = build_cel_parser(cache)  # loads it
    for source in EXPRESSIONS:
        expected = own.parse(source)
        assert cold.parse(source) == expected, source
        assert warm.parse(source) == expected, source


def test_an_unwritable_cache_is_no_cache(tmp_path: Path) -> None:
    parser = build_cel_parser(tmp_path / "missing-dir" / "cel.cache")
    assert parser.parse(EXPRESSIONS[0]) is not None


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


def test_the_collector_pace_is_given_back(tmp_path: Path) -> None:
    """``orca plan`` collects less often while it runs, not after (for a caller in-process)."""
    import gc

    nodes, workloads = plan_files(tmp_path, "kind: Nonsense\n", node_object("a"))
    before = gc.get_threshold()
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(workloads)]) == 2
    assert gc.get_threshold() == before


def test_the_cache_is_used_only_where_no_one_else_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))  # an installation without one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = cache_path()
    assert path is not None and path.parent == tmp_path / "orca"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    path.write_bytes(b"")
    path.chmod(0o666)  # anyone could have put a pickle there
    assert cache_path() is None
    path.chmod(0o600)
    assert cache_path() == path
    path.parent.chmod(0o777)
    assert cache_path() is None


def test_an_installations_cache_comes_first_and_only_when_no_one_else_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    shipped = ship()
    assert shipped == tmp_path / "venv" / "share" / "orca" / shipped.name
    assert (shipped.stat().st_mode & 0o777, shipped.parent.stat().st_mode & 0o777) == (
        0o644,
        0o755,
    )
    assert cache_path() == shipped
    tree = build_cel_parser(shipped).parse('"a" in node.tags')
    assert tree == build_cel_parser(None).parse('"a" in node.tags')
    shipped.parent.chmod(0o775)  # a group could have swapped the pickle
    assert cache_path() == tmp_path / "home-cache" / "orca" / shipped.name
    shipped.parent.chmod(0o755)
    shipped.chmod(0o664)
    assert cache_path() == tmp_path / "home-cache" / "orca" / shipped.name
