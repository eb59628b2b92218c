"""Disruption budgets and gangs: how many of a Workload's replicas orca's own moves may take.

A Workload's ``spec.disruption`` is a PodDisruptionBudget for it, with kube's meaning
(pkg/controller/disruption/disruption.go): the desired healthy count is ``minAvailable``
(a number, or a percentage of the desired replicas rounded up), or the desired replicas less
``maxUnavailable`` (the same rounding); the disruptions allowed are the replicas available
less that count, never below 0. Preemption and the rebalancer pass as available the replicas
on Ready nodes (``Ledger.healthy``: kube counts Ready Pods); the what-ifs, the replicas a
drain leaves placed. kube-scheduler honours budgets only as a preference when it
preempts (it prefers victims whose eviction breaks none); orca makes every voluntary move
itself, so the budget is a rule: preemption never takes a Workload below it, the rebalancer
never moves a replica it would take below it, and ``orca plan --drain`` names a drain that
would. A node lost by failure is not a voluntary disruption: nothing waits on a budget for it.

A gang (``spec.gang``) is placed with at least ``minCount`` replicas or none, so preemption
takes from a placed gang at most the replicas above ``minCount`` (it never leaves a gang half
placed; evicting a whole gang is not something orca's preemption does).

Pure: the numbers come from the spec, the desired count and the replicas placed.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.api.models import Workload, WorkloadKind


@dataclass(frozen=True, slots=True)
class Budget:
    """How many replicas of Workload ``key`` orca's voluntary moves may take now."""

    key: str
    placed: int  # the replicas available now (the caller's count: see the module's docstring)
    needs: int  # the replicas that must stay placed
    text: str  # the rule, as messages name it: ``minAvailable 3``, ``gang minCount 4``

    @property
    def allowed(self) -> int:
        """Disruptions allowed now: kube's ``disruptionsAllowed``, never below 0."""
        return max(self.placed - self.needs, 0)

    def describe(self) -> str:
        """``shop/web (minAvailable 3)``: whose budget, and what it is."""
        return f"{self.key} ({self.text})"


def expected(workload: Workload) -> int:
    """The replicas a budget's percentages are of: the desired count (kube's
    ``getExpectedScale`` reads the controller's scale). A DaemonSet's is read from its status
    here; a preemption passes the nodes it is for instead (``preemption.victim_budget``)."""
    if workload.spec.kind is WorkloadKind.DAEMONSET:
        status = workload.status
        return (status.desired or 0) if status is not None else 0
    return workload.spec.replicas


def budgeted(workload: Workload) -> bool:
    """Whether the Workload has a budget a preemption or a drain may break: a disruption
    budget or a gang (``spec.disruption``, ``spec.gang``)."""
    spec = workload.spec
    return spec.disruption is not None or spec.gang is not None


def broken_by(
    workload: Workload, before: int, after: int, desired: int | None = None
) -> Budget | None:
    """The budget ``workload`` breaks holding ``after`` of the ``before`` replicas it held
    (``budget_of``'s, its percentages of ``desired`` when given); None when it keeps it, or
    when nothing was taken from it. The what-if's and the failure domains' one test."""
    if after >= before or not budgeted(workload):
        return None
    budget = budget_of(workload, after, desired=desired)
    return budget if budget is not None and after < budget.needs else None


def budget_of(
    workload: Workload, placed: int, *, gang: bool = True, desired: int | None = None
) -> Budget | None:
    """The budget of ``workload`` with ``placed`` replicas placed: its disruption budget, or
    (with ``gang``: what preemption and a drain ask; a move leaves the count as it is) a
    gang's ``minCount``, the stricter of the two when it has both; None when it has none.
    ``desired``, when given, is the count its percentages are of instead of ``expected``'s
    (a DaemonSet's after a what-if's plan, which keeps no status for it)."""
    spec = workload.spec
    needs: list[tuple[int, str]] = []
    if spec.disruption is not None:
        of = expected(workload) if desired is None else desired
        needs.append((spec.disruption.desired_healthy(of), spec.disruption.describe()))
    if gang and spec.gang is not None:
        needs.append((spec.gang.min_count, f"gang minCount {spec.gang.min_count}"))
    if not needs:
        return None
    count, text = max(needs, key=lambda n: n[0])
    return Budget(workload.key, placed, count, text)
