"""orca-controller: runtime-aware workload placement for Kubernetes.

Layers, top to bottom (enforced by import-linter, see pyproject.toml); a folder says what
may be touched there:

- ``controller.cli``: the ``orca`` command line, one module per command.
- ``controller.operator``: ``orca run``, the runtime (kopf lifecycle, informers, the
  scheduling loop, status writes, Events, leader election, metrics). Effects live here.
- ``controller.devcluster``: a living cluster on loopback for development and tests.
- ``controller.inputs``: what the commands read (manifests, safe YAML, listed objects).
- ``controller.scheduler``: the pure scheduler (kube-scheduler's framework in miniature),
  the ledger, and the pure planners (offline plans, preemption, rebalancing, explanations).
- ``controller.api``: the Workload API's pydantic models and the CRD generated from them.

``controller.version`` (the installed version) sits beside them, read by the CLI and the
operator's metrics.
"""
