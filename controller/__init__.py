"""orca-controller: runtime-aware workload placement for Kubernetes.

Layers (enforced by import-linter, see pyproject.toml):

- ``controller.api``: pydantic models of the Workload API and the generated CRD. Pure.
- ``controller.core``: NodeInfo mapping, CEL, the ledger and the scheduler. Pure.
- ``controller.plan``: ``orca plan`` (offline scheduling of YAML files).
- ``controller.devcluster``: a real kube-apiserver + etcd on loopback for dev and tests.
- ``controller.operator``: the kopf operator (effects: watches, status writes, metrics).
"""
