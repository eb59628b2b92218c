"""orca's scheduling plugins, one module each, and the default profile that orders them.

Adding a filter or a score: write one module here with a class that has a ``name`` and the
methods of its extension points (``controller.scheduler.framework``), then add one line to
``default_profile``. Filters run, and are reported, in the order listed.
"""

from __future__ import annotations

from controller.scheduler.celexpr import CelEvaluator
from controller.scheduler.framework import Profile
from controller.scheduler.plugins.capacity import CapacityScore
from controller.scheduler.plugins.cel_affinity import CelAffinity
from controller.scheduler.plugins.constraints import CelConstraints
from controller.scheduler.plugins.eligibility import NodeEligibility
from controller.scheduler.plugins.name_affinity import NameAffinity
from controller.scheduler.plugins.resources import ResourcesFit
from controller.scheduler.plugins.runtime import Runtime
from controller.scheduler.plugins.taints import DefaultTolerations, TaintToleration
from controller.scheduler.plugins.topology_spread import TopologySpread


def default_profile(cel: CelEvaluator, tolerations: DefaultTolerations | None = None) -> Profile:
    """docs/design.md 4's filter order, then the scores (weight 1: the parts add up as documented).
    ``tolerations``: the default not-ready/unreachable toleration seconds (300 s each)."""
    return Profile(
        (
            (NodeEligibility(), 0),
            (TaintToleration(tolerations), 1),
            (Runtime(), 0),
            (CelConstraints(cel), 0),
            (TopologySpread(), 1),
            (ResourcesFit(), 0),
            (CapacityScore(), 1),
            (CelAffinity(cel), 1),
            (NameAffinity(), 1),
        )
    )
