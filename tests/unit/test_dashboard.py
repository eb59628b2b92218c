"""The Grafana dashboard is generated from controller/operator/telemetry/dashboard.py and
checked in without drift; it has the datasource variable and the rows users look for, and
queries only metrics the operator exports."""

from __future__ import annotations

import pytest

from controller.operator.telemetry.dashboard import dashboard_json
from tests.monitoring import (
    DASHBOARD,
    dashboard,
    dashboard_expressions,
    exported_names,
    metric_names,
)


def test_checked_in_dashboard_matches_the_generator() -> None:
    assert DASHBOARD.read_text() == dashboard_json(), (
        "manifests/monitoring/grafana-dashboard.json drifted from "
        "controller/operator/telemetry/dashboard.py: "
        f"run `orca dashboard > {DASHBOARD}`"
    )


def test_datasource_variable_and_every_panel_uses_it() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]


def test_rows_cover_what_operators_look_for() -> None:
    rows = [p["title"] for p in dashboard()["panels"] if p["type"] == "row"]
    assert rows == [
        "Placements and pending",
        "Scheduling attempts and latency",
        "Nodes",
        "Failure domains",
        "Why Workloads are not placed",
        "Errors",
        "Rebalancing",
    ]
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("expr", dashboard_expressions())
def test_panels_use_only_metrics_the_operator_exports(expr: str) -> None:
    used = metric_names(expr)
    assert used, "no metric found in the expression"
    assert used <= exported_names(), used - exported_names()


def test_orca_dashboard_command_prints_the_dashboard(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main

    assert main(["dashboard"]) == 0
    assert capsys.readouterr().out == dashboard_json()
