"""``PendingRead``: a large file read in a child process gives what reading it here gives,
values and errors alike, and ``orca plan`` reports errors in the same order either way."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from controller.cli import main
from controller.inputs import manifests
from controller.inputs.manifests import ManifestError, PendingRead, read_manifests
from tests.support.factories import node_object


def workloads(count: int, bad_at: int | None = None) -> str:
    docs = []
    for i in range(count):
        spec: dict[str, object] = {"kind": "Service", "count": 1 + i % 3}
        spec["constraints"] = ['node.labels["zone"] != "c"', f"node.cpu >= {i % 7}"]
        if i == bad_at:
            spec["count"] = "many"
        docs.append(
            {
                "apiVersion": "orca.cloudinit.dev/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": f"w{i}", "namespace": "shop"},
                "spec": spec,
            }
        )
    return yaml.safe_dump_all(docs)


def test_a_background_read_gives_the_same_objects(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(workloads(300))
    pending = PendingRead(path, min_bytes=0)
    assert pending.in_background
    assert pending.result() == read_manifests(path)
    pending.cancel()  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "a: [1, 2\n",  # invalid YAML
        "a: &a [x]\nb: [*a, *b]\n",  # an undefined alias
        "- " * 150 + "x\n",  # over the depth budget
        "a: \xff\n",
    ],
)
def test_a_background_read_gives_the_same_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ManifestError) as here:
        read_manifests(path)
    pending = PendingRead(path, min_bytes=0)
    assert pending.in_background
    with pytest.raises(ManifestError) as there:
        pending.result()
    assert str(there.value) == str(here.value)


def test_a_child_that_dies_means_reading_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(workloads(5))
    monkeypatch.setattr(manifests, "_read_and_send", lambda *_: os._exit(9))
    pending = PendingRead(path, min_bytes=0)
    assert pending.in_background
    assert pending.result() == read_manifests(path)


def test_small_files_and_pipes_are_read_here(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(workloads(2))
    assert not PendingRead(path).in_background
    assert not PendingRead(Path("/dev/stdin"), min_bytes=0).in_background
    assert not PendingRead(tmp_path / "missing.yaml", min_bytes=0).in_background


def test_orca_plan_reports_errors_in_file_order_with_a_large_workloads_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump_all([node_object(f"n{i}", cpu="64") for i in range(3)]))
    big = tmp_path / "workloads.yaml"
    big.write_text(workloads(6000, bad_at=5999))
    assert big.stat().st_size >= manifests.BACKGROUND_MIN_BYTES
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(big)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "document 6000" in line and "count" in line
    bad_nodes = tmp_path / "bad-nodes.yaml"
    bad_nodes.write_text("kind: Node\nmetadata: {name: UPPER}\n")
    assert main(["plan", "--nodes", str(bad_nodes), "--workloads", str(big)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "bad-nodes.yaml" in line and "UPPER" in line
    good = tmp_path / "good.yaml"
    good.write_text(workloads(6000))
    assert main(["plan", "--nodes", str(nodes), "--workloads", str(good), "-o", "json"]) in (0, 1)
    assert '"workload": "shop/w5999"' in capsys.readouterr().out


def _stuck(path: Path, sender: object) -> None:
    """A child that never sends: as one stuck on a lock held at the fork."""
    time.sleep(3600)


def test_cancel_ends_a_child_that_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked child inherits the parent's signal handlers: one that ignores or catches
    SIGTERM and is stuck (a lock another thread held at the fork) must not make cancel wait
    forever (a full test run once hung 600 s there). It is killed after the grace."""
    path = tmp_path / "w.yaml"
    path.write_text(workloads(3))
    monkeypatch.setattr(manifests, "_read_and_send", _stuck)
    monkeypatch.setattr(manifests, "CANCEL_GRACE", 0.2)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        pending = PendingRead(path, min_bytes=0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert pending.in_background
    child = pending._child
    pending.cancel()
    assert child.exitcode == -signal.SIGKILL  # SIGTERM was ignored: killed
    assert not pending.in_background
