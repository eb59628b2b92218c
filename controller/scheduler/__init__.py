"""The pure scheduler: one Workload and the cluster in, the status it should have out.

kube-scheduler's framework in miniature (``framework``, one module per plugin in
``plugins/``, the pipeline in ``scheduler``), the node table (``nodes``), the placement
ledger (``ledger``), the status a decision implies (``decision``, ``status``,
``vocabulary``), CEL (``celexpr``, ``celcheck``, and ``celcache`` for its parser's start-up),
PriorityClasses (``priority``) and topology domains (``topology``); and the pure planners
built on the cycle: ``plan`` (a batch offline), ``preemption``, ``rebalance``, ``explain``.
No kopf, HTTP or metrics here (import-linter holds the line); callers book decisions.
"""
