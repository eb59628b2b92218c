"""Benchmarks: scripts that measure orca through the path a user takes, and print the figures.

Each bench is a script: ``.venv/bin/python bench/<name>.py`` (``--help`` for its sizes). It
prints its figures as it goes and, at its end, writes them to ``bench/results/<name>.json``
with what they were measured on: the commit (and whether the tree had uncommitted changes),
the machine (cores, CPU model, kernel, Python), the load average at the start and at the end,
the exact command line and the date (``bench.common.record``). This page is made from those
files and from each bench's docstring (``make bench-docs``), so the figures below are the
latest recorded run's, never typed by hand; a run overwrites its file and git keeps the
history. A bench run one size or mode at a time (``bench_scale``, ``bench_vs_kube_scheduler``)
merges its figures into its file instead, and each group of figures keeps the command, commit
and load of the run that measured it. After a run: ``make bench-docs`` and commit the result
with the page.

How to read the figures:

- **The machine is noisy.** The development machine is a shared 2-core VM; wall times there
  spread by 20-50% between runs. A bench measures what it compares side by side in the same
  run (orca and kube-scheduler, webhook on and off, before and after), and the ratios hold
  where the absolute figures drift. Read a figure against the load average recorded with it.
- **CPU time is the steadier figure**: a process's utime + stime (``/proc/<pid>/stat`` for
  another process, ``getrusage`` for a child or this one), where other processes stretch the
  wall clock. "Best of N" runs take the fastest, the one least disturbed.
- **Peak RSS** is the resident set's high-water mark: ``VmHWM`` of a process the bench
  started, ``ru_maxrss`` of a child (``wait4``) or of the bench itself. Benches that fork a
  child to measure it write their inputs in a process of their own first, since a child's
  ``ru_maxrss`` counts the memory of the parent it was forked from.
- **Units are in the figures' names**: ``_s``, ``_ms``, ``_us`` (seconds, milliseconds,
  microseconds), ``_mb``/``_mib``, ``_per_s``; ``CPU s/s`` is CPU seconds per second (1.0 =
  one core busy).

The benches that start a cluster start a living one, as ``orca dev-cluster`` does: etcd,
kube-apiserver, kube-controller-manager and kwok heartbeating every Node (a Lease renewal per
Node every 10 s). They wait until the controller manager has lifted the new Nodes'
``node.kubernetes.io/not-ready`` taint before the clock starts (it writes at most 20
requests/s, kube-controller-manager's default ``--kube-api-qps``: about a minute for 1,000
new Nodes). The heartbeats cost the cluster CPU beside whatever is measured, on both sides of
a comparison alike: "API server + etcd CPU" figures are those two processes' alone,
heartbeats included, and ``bench_living_cluster`` measures what the heartbeats cost at rest.

Tests never assert on a bench's timings; a bench that checks a result (every placement valid,
the same plan as a saved run) exits 1 when the check fails.
"""
