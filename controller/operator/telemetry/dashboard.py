"""The Grafana dashboard for the operator, generated as code (``orca dashboard``).

Built with ``grafana-foundation-sdk`` (Grafana's own typed builders; a dev dependency, since
it only generates the checked-in ``manifests/monitoring/grafana-dashboard.json``, which
``tests/unit/test_dashboard.py`` compares with this module's output). Grafana 10+ schema, a
Prometheus datasource variable and a ``job`` variable, so one JSON works in any Grafana.

Every expression uses only metrics declared in ``controller.operator.telemetry.metrics``; the unit
test checks the names, and the Prometheus integration test runs every expression against a
real Prometheus scraping a real operator.
"""

from __future__ import annotations

import json
from typing import Final, Protocol, Self, TypeVar

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import (
    ReduceDataOptions,
    StackingConfig,
    VizLegendOptions,
    VizTooltipOptions,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BarGaugeDisplayMode,
    LegendDisplayMode,
    LegendPlacement,
    SortOrder,
    StackingMode,
    TooltipDisplayMode,
    VizOrientation,
)
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    VariableRefresh,
)

UID: Final = "orca-controller"
TITLE: Final = "orca-controller"
DATASOURCE: Final = DataSourceRef(type_val="prometheus", uid="${datasource}")
JOB: Final = 'job=~"$job"'
RATE: Final = "$__rate_interval"

Panel = timeseries.Panel | bargauge.Panel | stat.Panel


class _Ids:
    """Panel ids in build order, so the JSON is the same on every run."""

    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


def _row(ids: _Ids, title: str) -> dashboard.Row:
    return dashboard.Row(title).id(ids.next())


def _query(expr: str, legend: str = "__auto", ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)


class _Framed(Protocol):
    """What every panel builder of the SDK has: its id, texts, data source and place."""

    def id(self, id_val: int) -> Self: ...
    def title(self, title: str) -> Self: ...
    def description(self, description: str) -> Self: ...
    def datasource(self, datasource: DataSourceRef) -> Self: ...
    def unit(self, unit: str) -> Self: ...
    def min(self, min_val: float) -> Self: ...
    def span(self, w: int) -> Self: ...
    def height(self, h: int) -> Self: ...


_P = TypeVar("_P", bound=_Framed)


def _framed(panel: _P, ids: _Ids, title: str, description: str, unit: str, width: int) -> _P:
    """A panel's frame, the same for every kind: its id, title, description, data source,
    unit (from zero), width, and the one height."""
    return (
        panel.id(ids.next())
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .span(width)
        .height(8)
    )


def _timeseries(
    ids: _Ids,
    title: str,
    description: str,
    queries: list[prometheus.Dataquery],
    unit: str = "short",
    width: int = 8,
    stacked: bool = False,
) -> timeseries.Panel:
    panel = (
        _framed(timeseries.Panel(), ids, title, description, unit, width)
        .legend(
            VizLegendOptions()
            .display_mode(LegendDisplayMode.LIST)
            .placement(LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(VizTooltipOptions().mode(TooltipDisplayMode.MULTI).sort(SortOrder.DESCENDING))
    )
    if stacked:
        panel = panel.stacking(StackingConfig().mode(StackingMode.NORMAL)).fill_opacity(30)
    for query in queries:
        panel = panel.with_target(query)
    return panel


def _bars(
    ids: _Ids,
    title: str,
    description: str,
    query: prometheus.Dataquery,
    unit: str = "short",
    width: int = 8,
    maximum: float | None = None,
) -> bargauge.Panel:
    panel = (
        _framed(bargauge.Panel(), ids, title, description, unit, width)
        .orientation(VizOrientation.HORIZONTAL)
        .display_mode(BarGaugeDisplayMode.GRADIENT)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(query.instant())
    )
    if maximum is not None:
        panel = panel.max(maximum)
    return panel


def _quantiles(metric: str) -> list[prometheus.Dataquery]:
    return [
        _query(
            f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{JOB}}}[{RATE}])))",
            f"p{int(q * 100)}",
            ref,
        )
        for q, ref in ((0.5, "A"), (0.9, "B"), (0.99, "C"))
    ]


def build() -> dashboard.Dashboard:
    """The dashboard, row by row: placements and pending, attempts, latency, nodes, failure
    domains, why not placed, errors, rebalancing."""
    ids = _Ids()
    board = (
        dashboard.Dashboard(TITLE)
        .uid(UID)
        .description("orca places Workloads onto Nodes: decisions, queues, capacity, errors.")
        .tags(["orca", "kubernetes", "scheduler"])
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .editable()
        .with_variable(
            dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
        )
        .with_variable(
            dashboard.QueryVariable("job")
            .label("Job")
            .datasource(DATASOURCE)
            .query("label_values(orca_build_info, job)")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .include_all(True)
            .all_value(".*")
            .multi(True)
        )
    )
    rows = (
        ("Placements and pending", _placements),
        ("Scheduling attempts and latency", _attempts),
        ("Nodes", _nodes),
        ("Failure domains", _failure_domains),
        ("Why Workloads are not placed", _unschedulable),
        ("Errors", _errors),
        ("Rebalancing", _rebalancing),
    )
    for title, panels in rows:
        board = board.with_row(_row(ids, title))
        for panel in panels(ids):
            board = board.with_panel(panel)
    return board


def _placements(ids: _Ids) -> list[Panel]:
    return [
        _timeseries(
            ids,
            "Placements",
            "Replicas placed, over all Nodes (the ledger of the leader).",
            [_query(f"max by (job) (sum by (job, instance) (orca_node_placements{{{JOB}}}))")],
        ),
        _timeseries(
            ids,
            "Pending Workloads",
            "Waiting for the scheduling loop (active), a retry delay (backoff), or a change "
            "in capacity, spec or Nodes (unschedulable): kube-scheduler's pending pods.",
            [_query(f"max by (queue) (orca_pending_workloads{{{JOB}}})", "{{queue}}")],
            stacked=True,
        ),
        _timeseries(
            ids,
            "Workloads by phase",
            "Every Workload the operator knows of, by status.phase.",
            [
                _query(
                    f"sum by (phase) (max by (namespace, phase) (orca_workloads{{{JOB}}}))",
                    "{{phase}}",
                )
            ],
            stacked=True,
        ),
    ]


def _attempts(ids: _Ids) -> list[Panel]:
    return [
        _timeseries(
            ids,
            "Scheduling attempts by result",
            "Decisions per second: scheduled, partial, unschedulable, invalid, error.",
            [
                _query(
                    f"sum by (result) (rate(orca_schedule_attempts_total{{{JOB}}}[{RATE}]))",
                    "{{result}}",
                ),
                _query(
                    f"sum(rate(orca_schedule_unchanged_total{{{JOB}}}[{RATE}]))",
                    "of which unchanged (nothing to write)",
                    "B",
                ),
            ],
            unit="ops",
        ),
        _timeseries(
            ids,
            "Decision latency",
            "The pure scheduler's time per decision (quantiles over the histogram).",
            _quantiles("orca_scheduling_algorithm_duration_seconds"),
            unit="s",
        ),
        _timeseries(
            ids,
            "End-to-end latency",
            "From a Workload event seen to its status written, retries included.",
            _quantiles("orca_e2e_scheduling_duration_seconds"),
            unit="s",
        ),
    ]


def _nodes(ids: _Ids) -> list[Panel]:
    cpu_used = (
        f"1 - orca_node_free_cpu_cores{{{JOB}}} / (orca_node_allocatable_cpu_cores{{{JOB}}} > 0)"
    )
    memory_used = (
        f"1 - orca_node_free_memory_bytes{{{JOB}}}"
        f" / (orca_node_allocatable_memory_bytes{{{JOB}}} > 0)"
    )
    return [
        _bars(
            ids,
            "CPU booked per Node",
            "Share of allocatable cpu held by placements (the leader's ledger).",
            _query(f"max by (node) ({cpu_used})", "{{node}}"),
            unit="percentunit",
            maximum=1,
        ),
        _bars(
            ids,
            "Memory booked per Node",
            "Share of allocatable memory held by placements.",
            _query(f"max by (node) ({memory_used})", "{{node}}"),
            unit="percentunit",
            maximum=1,
        ),
        _bars(
            ids,
            "Replicas per Node",
            "Placements on each Node.",
            _query(f"max by (node) (orca_node_placements{{{JOB}}})", "{{node}}"),
        ),
        _timeseries(
            ids,
            "Free CPU per Node",
            "Allocatable minus booked, in cores.",
            [_query(f"max by (node) (orca_node_free_cpu_cores{{{JOB}}})", "{{node}}")],
            width=12,
        ),
        _timeseries(
            ids,
            "Free memory per Node",
            "Allocatable minus booked.",
            [_query(f"max by (node) (orca_node_free_memory_bytes{{{JOB}}})", "{{node}}")],
            unit="bytes",
            width=12,
        ),
        _timeseries(
            ids,
            "Free share by resource",
            "Free over allocatable on the eligible Nodes, per resource: cpu, memory, pods, and "
            "every resource a Node offers (ephemeral-storage, huge pages, GPUs...).",
            [
                _query(
                    f"max by (resource) (orca_resource_free{{{JOB}}}) / "
                    f"(max by (resource) (orca_resource_allocatable{{{JOB}}}) > 0)",
                    "{{resource}}",
                )
            ],
            unit="percentunit",
        ),
    ]


def _failure_domains(ids: _Ids) -> list[Panel]:
    """``orca run --resilience-key``'s answer (every ``--resilience-interval``)."""
    return [
        _bars(
            ids,
            "Replicas each domain's loss would strand",
            "If every node of a failure domain (a value of the node label --resilience-key, "
            "zones by default; <none>: the nodes without it) were lost at once, how many "
            "replicas placed now would find no other node: the drain what-if of its nodes, "
            "what OrcaZoneLossWouldStrandReplicas alerts on. kubectl orca plan --from-cluster "
            "--resilience KEY lists them and why.",
            _query(
                "max by (topology_key, domain) "
                f"(orca_failure_domain_unplaceable_replicas{{{JOB}}})",
                "{{domain}}",
            ),
            width=8,
        ),
        _timeseries(
            ids,
            "Stranded and displaced by a domain's loss",
            "Per domain over time: the replicas its loss would displace (Job and Service "
            "replicas on its nodes) and, of the replicas placed now, how many would find no "
            "place.",
            [
                _query(
                    f"max by (domain) (orca_failure_domain_unplaceable_replicas{{{JOB}}})",
                    "{{domain}} stranded",
                ),
                _query(
                    f"max by (domain) (orca_failure_domain_displaced_replicas{{{JOB}}})",
                    "{{domain}} displaced",
                    "B",
                ),
            ],
            width=10,
        ),
        _timeseries(
            ids,
            "Failure domains' what-if: CPU per answer",
            "CPU seconds one answer took (quantiles); the operator spreads it so that it "
            "takes at most a tenth of a core, and answers no more often than the cluster "
            "changes.",
            _quantiles("orca_failure_domain_computation_cpu_seconds"),
            unit="s",
            width=6,
        ),
    ]


def _unschedulable(ids: _Ids) -> list[Panel]:
    return [
        _bars(
            ids,
            "Top reasons Workloads are short of replicas",
            "Workloads not fully placed, by the filter that rejected Nodes for them (a "
            "Workload counts under each). kubectl describe orcawl shows the full reasons.",
            _query(
                f"topk(10, max by (plugin) (orca_unschedulable_workloads{{{JOB}}}) > 0)",
                "{{plugin}}",
            ),
            width=8,
        ),
        _timeseries(
            ids,
            "Workloads not fully placed, by namespace",
            "Unschedulable and PartiallyScheduled Workloads over time, per namespace (what "
            "OrcaWorkloadsNotPlaced alerts on): kubectl get orcawl -n NAMESPACE "
            "--field-selector status.phase=PHASE lists them.",
            [
                _query(
                    "max by (namespace, phase) "
                    f'(orca_workloads{{{JOB}, phase=~"Unschedulable|PartiallyScheduled"}}) > 0',
                    "{{namespace}} {{phase}}",
                )
            ],
            width=8,
        ),
        _timeseries(
            ids,
            "Preemptions",
            "Preemption attempts per second (a Workload short of room looked for lower-priority "
            "replicas) and replicas preempted per second (kube-scheduler's "
            "scheduler_preemption_attempts_total and scheduler_preemption_victims).",
            [
                _query(f"sum(rate(orca_preemption_attempts_total{{{JOB}}}[{RATE}]))", "attempts"),
                _query(
                    f"sum(rate(orca_preemption_victims_sum{{{JOB}}}[{RATE}]))",
                    "replicas preempted",
                    "B",
                ),
            ],
            unit="ops",
            width=8,
        ),
    ]


def _errors(ids: _Ids) -> list[Panel]:
    return [
        _timeseries(
            ids,
            "Status writes that did not land",
            "Per second, by outcome: conflict (retried), not_found (Workload gone), failed.",
            [
                _query(
                    "sum by (outcome) "
                    f'(rate(orca_status_writes_total{{{JOB}, outcome!="written"}}[{RATE}]))',
                    "{{outcome}}",
                )
            ],
            unit="ops",
        ),
        _timeseries(
            ids,
            "API errors",
            "The operator's own API requests that failed, by resource and status code.",
            [
                _query(
                    "sum by (resource, code) "
                    f'(rate(orca_api_requests_total{{{JOB}, code!~"2.."}}[{RATE}]))',
                    "{{resource}} {{code}}",
                )
            ],
            unit="ops",
        ),
        _timeseries(
            ids,
            "CEL, watches, Events",
            "CEL evaluation errors and cost-limit hits, watch restarts, failed relists, "
            "Events dropped.",
            [
                _query(f"sum(rate(orca_cel_evaluation_errors_total{{{JOB}}}[{RATE}]))", "CEL"),
                _query(
                    f"sum(rate(orca_cel_cost_limit_hits_total{{{JOB}}}[{RATE}]))",
                    "CEL cost limit",
                    "B",
                ),
                _query(
                    f"sum by (reason) (rate(orca_watch_restarts_total{{{JOB}}}[{RATE}]))",
                    "watch restart ({{reason}})",
                    "C",
                ),
                _query(
                    f'sum(rate(orca_relists_total{{{JOB}, outcome="failed"}}[{RATE}]))',
                    "relist failed",
                    "D",
                ),
                _query(
                    f"sum(rate(orca_events_dropped_total{{{JOB}}}[{RATE}]))",
                    "Events dropped",
                    "E",
                ),
            ],
            unit="ops",
        ),
        stat.Panel()
        .id(ids.next())
        .title("Leader")
        .description("Replicas holding the leader Lease: 1 is healthy, 0 means nothing decides.")
        .datasource(DATASOURCE)
        .span(12)
        .height(4)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(_query(f"sum(orca_leader{{{JOB}}})", "leaders").instant()),
        stat.Panel()
        .id(ids.next())
        .title("Version")
        .description("orca_build_info of the scraped replicas.")
        .datasource(DATASOURCE)
        .span(12)
        .height(4)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(_query(f"count by (version) (orca_build_info{{{JOB}}})", "{{version}}")),
    ]


def _rebalancing(ids: _Ids) -> list[Panel]:
    """Only with ``orca run --rebalance-interval``: empty otherwise."""
    return [
        _timeseries(
            ids,
            "Rebalancing moves",
            "Replica moves per second, by outcome: moved (written), changed or conflict (the "
            "Workload changed since the plan: re-planned), stale (no longer valid or improving "
            "when checked again), failed.",
            [
                _query(
                    f"sum by (outcome) (rate(orca_rebalance_moves_total{{{JOB}}}[{RATE}]))",
                    "{{outcome}}",
                )
            ],
            unit="ops",
            width=12,
            stacked=True,
        ),
        _timeseries(
            ids,
            "Rebalance planning time",
            "Time to plan one rebalancing pass over the ledger (quantiles).",
            _quantiles("orca_rebalance_planning_duration_seconds"),
            unit="s",
            width=12,
        ),
    ]


def dashboard_json() -> str:
    """The dashboard as the checked-in file holds it (sorted keys, two-space indent, no
    nulls: the SDK writes ``"options": null`` on rows, which Grafana does not need)."""
    encoded = JSONEncoder(sort_keys=True).encode(build().build())
    return json.dumps(_without_nulls(json.loads(encoded)), sort_keys=True, indent=2) + "\n"


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
