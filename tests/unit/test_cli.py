"""The ``orca`` command line as a kubectl plugin: it says how it was called, and names the
Workload resource the way that cannot collide (``orcawl``, ``workloads.orca.cloudinit.dev``)."""

from __future__ import annotations

import pytest

from controller.cli import main


@pytest.mark.parametrize(
    ("argv0", "usage"),
    [
        ("/usr/local/bin/kubectl-orca", "usage: kubectl orca "),
        ("/usr/local/bin/orca", "usage: orca "),
    ],
)
def test_help_names_the_command_as_called_and_the_resource(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv0: str, usage: str
) -> None:
    monkeypatch.setattr("sys.argv", [argv0])
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(usage)
    assert "kubectl get orcawl -A" in out
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert out.startswith(usage + "explain")
    assert "kubectl get orcawl -n NS" in out
