"""``orca run``: the runtime around the pure scheduler. Effects (watches, status writes,
Events, the Lease, metrics) live here and nowhere else.

The path of one Workload, module by module:

- ``kube.informer``: the Workload informer lists and watches its collection (the Node and
  PriorityClass informers theirs) and delivers each change to its handler.
- ``handlers``: the Workload's handler records it in ``state.ClusterState`` (its bookings in
  the ledger, from its status) and queues its key in ``workqueue.WorkQueue`` (highest
  priority first, from ``priorities``), once the start-up gate has opened.
- ``loop``: a worker takes the key, decides it with the scheduler (``preemption`` may take
  replicas of lower-priority Workloads), and compares the status it implies with the one
  the object has.
- ``transaction``: a status that differs is written: assumed in the ledger, one fenced and
  preconditioned status write (``kube.client``), then confirmed, forgotten or held, and the
  Event queued (``events``); the loop marks the key done.

Around them: ``app`` (kopf's lifecycle and the wiring of these parts), ``rebalancer`` (moves
through the same transaction), ``kube.leader`` (Lease-based leader election and the write
fence), ``heap`` (the collector's pace while the view is built), ``telemetry`` (metrics,
gauges, the dashboard's generator).
"""
