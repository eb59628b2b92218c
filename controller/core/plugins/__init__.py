"""orca's scheduling plugins, one module each, and the default profile that orders them.

Adding a filter or a score: write one module here with a class that has a ``name`` and the
methods of its extension points (``controller.core.framework``), then add one line to
``default_profile``. Filters run, and are reported, in the order listed.
"""

from __future__ import annotations

from controller.core.celexpr import CelEvaluator
from controller.core.framework import Profile
from controller.core.plugins.capacity import CapacityScore
from controller.core.plugins.cel_affinity import CelAffinity
from controller.core.plugins.constraints import CelConstraints
from controller.core.plugins.eligibility import NodeEligibility
from controller.core.plugins.name_affinity import NameAffinity
from controller.core.plugins.resources import ResourcesFit
from controller.core.plugins.runtime import Runtime
from controller.core.plugins.taints import TaintToleration
from controller.core.plugins.topology_spread import TopologySpread


def default_profile(cel: CelEvaluator) -> Profile:
    """DESIGN.md 4's filter order, then the scores (weight 1: the parts add up as documented)."""
    return Profile(
        (
            (NodeEligibility(), 0),
            (TaintToleration(), 1),
            (Runtime(), 0),
            (CelConstraints(cel), 0),
            (TopologySpread(), 1),
            (ResourcesFit(), 0),
            (CapacityScore(), 1),
            (CelAffinity(cel), 1),
            (NameAffinity(), 1),
        )
    )
