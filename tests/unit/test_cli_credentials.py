"""The flags every command that talks to a cluster shares (``--kubeconfig``, ``--context``) and
the namespace rules of ``explain`` and ``rebalance``: bad input is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from tests.unit.test_kube_credentials import kubeconfig


@pytest.mark.parametrize(
    "command",
    [["run"], ["plan", "--workloads", "w.yaml"], ["explain", "x"], ["rebalance"]],
    ids=["run", "plan", "explain", "rebalance"],
)
def test_every_cluster_command_takes_kubeconfig_and_context(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command[0], "--help"])
    out = capsys.readouterr().out
    assert "--kubeconfig" in out and "--context" in out


def test_a_missing_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["explain", "web", "--kubeconfig", str(tmp_path / "absent.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "absent.yaml" in err, err


def test_an_unknown_context_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = kubeconfig(tmp_path / "k.yaml", ("a", "https://127.0.0.1:1", "ns-a"))
    code = main(["explain", "web", "--kubeconfig", config, "--context", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "nope" in err, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-cluster", "-n", "a", "-A"], "give -n NS or -A, not both"),
        (
            ["--nodes", "n.yaml", "--workloads", "w.yaml", "-n", "a"],
            "-n and -A go with --from-cluster (a file plans all it holds)",
        ),
        (
            ["--nodes", "n.yaml", "--workloads", "w.yaml", "-A"],
            "-n and -A go with --from-cluster (a file plans all it holds)",
        ),
    ],
    ids=["both", "namespace-with-files", "all-with-files"],
)
def test_rebalance_namespace_flags_are_checked(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line naming both flags as the usage line does, before any file or cluster is read."""
    code = main(["rebalance", *args])
    assert (code, capsys.readouterr().err) == (2, f"error: {message}\n")
