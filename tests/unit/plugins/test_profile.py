"""The default profile (``controller.scheduler.plugins.default_profile``): every score part
counts once, and the default toleration seconds reach the taints plugin."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from controller.scheduler.ledger import Booking
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, GiB, ledger_for, node, workload


def test_every_score_part_of_the_default_profile_weighs_once() -> None:
    """docs/design.md 4: the score is the capacity part (0..100) plus the affinity parts, with
    the taints' and the spread's parts in -100..0; each plugin's weight in the profile is 1, so
    the part in the total is the plugin's own, worked out here by hand per node."""
    ledger = ledger_for(
        node(
            "a",
            labels={"zone": "z1"},
            tags=("gpu",),
            taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}],
        ),
        node("b", labels={"zone": "z2"}),
    )
    web = workload(
        kind="Service",
        count=2,
        resources={"cpu": "1", "memory": "2Gi"},
        affinity=[
            {"target": '"gpu" in node.tags', "weight": 30},
            {"target": "redis", "weight": 25},
        ],
        topologySpread=[
            {"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    )
    ledger.load(web.key, [Booking("a", "shop/web-0", 1000, 2 * GiB)])
    ledger.load("shop/redis", [Booking("b", "shop/redis-0", 0, 0)])
    scheduler = Scheduler()
    prepared = scheduler.prepare(web, ledger, now=NOW)
    parts = scheduler.framework.score_parts(prepared.cycle, np.arange(2))
    assert {name: part.tolist() for name, part in parts.items()} == {
        # a holds web's replica, 1 of 4 cpu and 2 of 8 GiB: (4-1-1)/4 and (8-2-2)/8 free after
        # placing one more, 50 each; b: 3/4 and 6/8, 75 each.
        "CapacityScore": [50, 75],
        # One untolerated PreferNoSchedule taint on a, the most of any candidate: -100.
        "TaintToleration": [-100, 0],
        # Zone z1 holds 1 replica, z2 none: raw round(1 * ln(2 + 2)) = 1 and 0, normalised
        # 100 * (1 + 0 - raw) / 1 and shifted down by 100.
        "TopologySpread": [-100, 0],
        "CelAffinity": [30, 0],
        "NameAffinity": [0, 25],
    }


def test_the_profile_passes_the_default_toleration_seconds_on() -> None:
    """``orca run --default-unreachable-toleration-seconds 60``: a Job's replica on a node
    unreachable for 120 s has outstayed its default toleration and must go; with
    kube-apiserver's 300 s it stays (docs/design.md 5)."""
    since = datetime.fromtimestamp(NOW - 120, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    ledger = ledger_for(node("a", ready="Unknown", taints=[{**unreachable, "timeAdded": since}]))
    job = workload(kind="Job")
    ledger.load(job.key, [Booking("a", "shop/web-0", 0, 0)])
    short = Scheduler(tolerations=DefaultTolerations(not_ready=300, unreachable=60))
    for scheduler, stays in ((Scheduler(), True), (short, False)):
        filtered = scheduler.prepare(job, ledger, now=NOW).filtered
        assert filtered is not None and filtered.keeps.tolist() == [stays]
