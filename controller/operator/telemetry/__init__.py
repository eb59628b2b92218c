"""What the operator tells Prometheus and Grafana: every metric (``metrics``), the snapshot
gauges refreshed from the state (``gauges``), and the dashboard generated from them
(``dashboard``, a dev-only dependency)."""
