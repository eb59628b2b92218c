"""The kopf operator: watches Nodes and Workloads, schedules through one loop, writes status.

Modules, from the edge inwards:

- ``app``: the process behind ``orca run`` (``controller.cli.run``): logging, kopf settings,
  background tasks.
- ``handlers``: the informers' handlers; they only feed ``ClusterState`` and the queue, once
  the start-up gate has opened.
- ``reconciler``: the one scheduling loop (decide, assume, write ``/status``, confirm/forget).
- ``state``: the in-memory view (NodeInfos, the node table, the ledger, Workload records).
- ``workqueue``: a de-duplicating priority work queue with per-key backoff (client-go's, in
  small; higher priorities first, as kube-scheduler's PrioritySort).
- ``priorities``: the PriorityClasses watched, and who to decide again when one changes.
- ``preemption``: a preemption booked in the loop; the victims' writes before the preemptor's.
- ``kube``: the API client (status PATCH, Events, Leases, LISTs and watches), the informers
  (``kube.informer``: Nodes, Workloads, PriorityClasses), and Lease-based leader election
  (``kube.leader``).
- ``telemetry``: every metric, the snapshot gauges, and the Grafana dashboard's generator.
"""
