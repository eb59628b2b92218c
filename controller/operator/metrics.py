"""Every metric the operator exports, declared in one place (names prefixed ``orca_``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

SCHEDULING_ATTEMPTS = Counter(
    "orca_scheduling_attempts_total",
    "Scheduling decisions made, by result (the phase decided, or 'unchanged').",
    ["result"],
)
SCHEDULING_LATENCY = Histogram(
    "orca_scheduling_duration_seconds",
    "Time to compute one decision (the pure scheduler, not the status write).",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
STATUS_WRITES = Counter("orca_status_writes_total", "Status PATCHes, by outcome.", ["outcome"])
STATUS_WRITE_FAILURES = Counter(
    "orca_status_write_failures_total", "Status PATCHes that failed, by HTTP status.", ["code"]
)
API_REQUESTS = Counter(
    "orca_api_requests_total",
    "API requests made by the scheduling loop itself (watches are kopf's), by verb.",
    ["verb", "resource"],
)
QUEUE_DEPTH = Gauge("orca_queue_depth", "Workloads waiting in the scheduling queue.")
WORKLOADS = Gauge("orca_workloads", "Workloads known to the operator, by phase.", ["phase"])
NODES = Gauge("orca_nodes", "Nodes known to the operator, by eligibility.", ["eligible"])
CEL_ERRORS = Counter(
    "orca_cel_evaluation_errors_total", "CEL evaluations that raised (per distinct value)."
)
EVENTS_DROPPED = Counter(
    "orca_events_dropped_total", "Kubernetes Events not posted because the queue was full."
)
IS_LEADER = Gauge("orca_leader", "1 while this replica holds the leader Lease.")
