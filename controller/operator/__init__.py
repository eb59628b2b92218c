"""The kopf operator: watches Nodes and Workloads, schedules through one loop, writes status.

Modules, from the edge inwards:

- ``main``: ``orca run`` flags; ``app``: the process (logging, kopf settings, background tasks).
- ``handlers``: kopf event handlers; they only feed ``ClusterState`` and the queue.
- ``reconciler``: the one scheduling loop (decide, assume, write ``/status``, confirm/forget).
- ``state``: the in-memory view (NodeInfos, the node table, the ledger, Workload records).
- ``workqueue``: a de-duplicating work queue with per-key backoff (client-go's, in small).
- ``kube``: the few API calls the loop makes itself (status PATCH, Events, Leases).
- ``leader``: Lease-based leader election so a second replica stands by.
"""
