"""What the commands read: Node, Workload and PriorityClass manifests (``manifests``) through
a YAML loader for untrusted files (``safeyaml``), and listed cluster objects as the scheduler's
inputs (``fromcluster``). Nothing here writes to a cluster or imports the operator."""
