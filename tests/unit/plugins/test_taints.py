"""TaintToleration: kube-scheduler's toleration matching, filter reasons, eviction, score."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.models import Toleration
from controller.scheduler.nodes import NodeTable, Taint
from controller.scheduler.plugins import taints as taints_module
from controller.scheduler.plugins.taints import TaintToleration
from tests.support.factories import NOW, cycle_for, ledger_for, node, rejected, workload
from tests.support.properties import examples

CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
DEDICATED_ML = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
EVICTING = {"key": "maintenance", "value": "now", "effect": "NoExecute"}
SOFT = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"}, DEDICATED_ML, True),
        ({"key": "dedicated", "value": "web", "effect": "NoSchedule"}, DEDICATED_ML, False),
        ({"key": "dedicated", "operator": "Exists"}, DEDICATED_ML, True),
        ({"key": "dedicated", "value": "ml", "effect": "NoExecute"}, DEDICATED_ML, False),
        ({"key": "dedicated", "value": "ml"}, DEDICATED_ML, True),  # empty effect: all
        ({"operator": "Exists"}, DEDICATED_ML, True),  # empty key + Exists: everything
        ({"operator": "Exists", "effect": "NoExecute"}, DEDICATED_ML, False),
        (
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
            CONTROL_PLANE,
            True,
        ),
        ({"key": "node-role.kubernetes.io/control-plane"}, CONTROL_PLANE, True),  # Equal ""
        ({"key": "other", "operator": "Exists"}, CONTROL_PLANE, False),
    ],
    ids=[
        "equal",
        "other-value",
        "exists",
        "other-effect",
        "any-effect",
        "wildcard",
        "wildcard-other-effect",
        "control-plane-exists",
        "control-plane-equal-empty",
        "other-key",
    ],
)
def test_toleration_matching(toleration: dict[str, Any], taint: dict[str, Any], tolerated: bool):
    assert Toleration.model_validate(toleration).tolerates(Taint.model_validate(taint)) is tolerated


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        ({"key": "a", "operator": "Exists", "value": "x"}, "value must be empty"),
        ({"value": "x"}, "operator must be Exists when key is empty"),
    ],
    ids=["exists-with-value", "equal-without-key"],
)
def test_invalid_tolerations_are_refused(toleration: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Toleration.model_validate(toleration)


def test_untolerated_taints_filter_with_kube_scheduler_wording() -> None:
    ledger = ledger_for(
        node("a"),
        node("cp", taints=[CONTROL_PLANE]),
        node("ml", taints=[DEDICATED_ML]),
        node("soft", taints=[SOFT]),
    )
    verdict = TaintToleration().filter(cycle_for(workload(kind="Job"), ledger))
    assert rejected(verdict) == {
        "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }": [1],
        "node(s) had untolerated taint {dedicated: ml}": [2],
    }
    tolerating = workload(kind="Job", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert rejected(TaintToleration().filter(cycle_for(tolerating, ledger))) == {
        "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }": [1],
    }


def test_only_noexecute_moves_existing_replicas() -> None:
    ledger = ledger_for(node("a", taints=[DEDICATED_ML]), node("b", taints=[EVICTING]), node("c"))
    verdict = TaintToleration().filter(cycle_for(workload(kind="Job"), ledger))
    assert verdict.keeps is not None
    assert verdict.keeps.tolist() == [True, False, True]
    tolerant = workload(kind="Job", tolerations=[{"key": "maintenance", "operator": "Exists"}])
    keeps = TaintToleration().filter(cycle_for(tolerant, ledger)).keeps
    assert keeps is not None and keeps.tolist() == [True, True, True]


def test_prefer_no_schedule_lowers_the_score_and_nothing_else() -> None:
    ledger = ledger_for(
        node("a"), node("b", taints=[SOFT]), node("c", taints=[SOFT, {**SOFT, "key": "x"}])
    )
    plugin = TaintToleration()
    cycle = cycle_for(workload(kind="Job"), ledger)
    assert rejected(plugin.filter(cycle)) == {}
    part = plugin.score(cycle, np.arange(3))
    assert part is not None and part.tolist() == [0, -50, -100]
    assert part.dtype == np.int64  # kube's integer normalisation, not a fraction
    # normalised over the candidates scored: without c, b has the most (1) and scores -100
    part = plugin.score(cycle, np.arange(2))
    assert part is not None and part.tolist() == [0, -100]
    assert plugin.score(cycle, np.arange(0)) is None  # no candidate: nothing to add
    tolerant = cycle_for(workload(kind="Job", tolerations=[{"operator": "Exists"}]), ledger)
    assert plugin.score(tolerant, np.arange(3)) is None  # adds nothing


def test_the_score_counts_again_the_rows_a_node_change_replaced() -> None:
    """The same plugin scores a table whose row a was replaced: a now has two untolerated
    PreferNoSchedule taints, b still one, so a scores -100 and b -(1 * 100 // 2) = -50;
    then a loses them and b is the worst again (-100)."""
    ledger = ledger_for(node("a"), node("b", taints=[SOFT]))
    plugin = TaintToleration()
    web = workload(kind="Job")
    part = plugin.score(cycle_for(web, ledger), np.arange(2))
    assert part is not None and part.tolist() == [0, -100]
    ledger.rebind(ledger.table.replaced([node("a", taints=[SOFT, {**SOFT, "key": "x"}])]))
    part = plugin.score(cycle_for(web, ledger), np.arange(2))
    assert part is not None and part.tolist() == [-100, -50]
    ledger.rebind(ledger.table.replaced([node("a")]))
    part = plugin.score(cycle_for(web, ledger), np.arange(2))
    assert part is not None and part.tolist() == [0, -100]
    ledger.rebind(ledger.table.replaced([node("b")]))
    assert plugin.score(cycle_for(web, ledger), np.arange(2)) is None  # no node has any


def test_a_cycle_counts_the_preferred_taints_once_for_all_its_replicas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The score asks the rows once per cycle, whatever the candidates: the same counts for
    every replica (normalised over each call's candidates), a cycle without any untolerated
    PreferNoSchedule taint remembers that too, and a new cycle asks again."""
    ledger = ledger_for(node("a"), node("b", taints=[SOFT]))
    plugin = TaintToleration()
    asked: list[str] = []
    real = plugin._rows_for

    def counting(cycle: Any) -> Any:
        asked.append(cycle.name)
        return real(cycle)

    monkeypatch.setattr(plugin, "_rows_for", counting)
    web = cycle_for(workload("web", kind="Job"), ledger)
    scored = [plugin.score(web, np.arange(2)), plugin.score(web, np.arange(1, 2))]
    assert [s.tolist() for s in scored if s is not None] == [[0, -100], [-100]]
    tolerant = cycle_for(
        workload("tolerant", kind="Job", tolerations=[{"operator": "Exists"}]), ledger
    )
    assert plugin.score(tolerant, np.arange(2)) is None
    assert plugin.score(tolerant, np.arange(2)) is None
    again = plugin.score(cycle_for(workload("web", kind="Job"), ledger), np.arange(2))
    assert again is not None and again.tolist() == [0, -100]
    assert asked == ["web", "tolerant", "web"]


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Taint, ...]]:
    """Every taints tuple the plugin judges (``_judge``: the work its caches spare), in order."""
    calls: list[tuple[Taint, ...]] = []
    real = taints_module._judge

    def counting(taints: tuple[Taint, ...], *args: Any) -> Any:
        calls.append(taints)
        return real(taints, *args)

    monkeypatch.setattr(taints_module, "_judge", counting)
    return calls


def test_a_nodes_taints_are_judged_once_and_their_deadline_still_follows_the_clock(
    judged: list[tuple[Taint, ...]],
) -> None:
    """Between two decisions a few nodes change (a table with rows replaced): the taints of
    the others are not judged again, yet a deadline that has passed since is enforced, and a
    node whose taint changed is judged anew."""

    def unreachable(ago: float) -> dict[str, str]:
        stamp = datetime.fromtimestamp(NOW - ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": stamp}

    ledger = ledger_for(
        node("old", taints=[unreachable(100)]), node("new", taints=[unreachable(10)]), node("ok")
    )
    web = workload(
        kind="Job",
        tolerations=[
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 60,
            }
        ],
    )
    plugin = TaintToleration()
    first = plugin.filter(cycle_for(web, ledger))
    assert first.keeps is not None and first.keeps.tolist() == [True, True, False]  # new, ok, old
    reason = "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    assert rejected(first) == {reason: [2]}  # "new" is tolerated for 50 s more
    assert len(judged) == 2
    ledger.rebind(ledger.table.replaced([node("ok", cordoned=True)]))
    later = cycle_for(web, ledger)
    later.now = NOW + 55  # "new"'s 60 s ran out 5 s ago
    second = plugin.filter(later)
    assert len(judged) == 2  # nothing judged again
    assert second.keeps is not None and second.keeps.tolist() == [False, True, False]
    assert rejected(second) == {reason: [0, 2]}
    ledger.rebind(ledger.table.replaced([node("new", taints=[unreachable(-40)])]))
    third = plugin.filter(cycle_for(web, ledger))
    assert len(judged) == 3  # its new taint, only
    assert third.keeps is not None and third.keeps.tolist() == [True, True, False]
    assert rejected(third) == {reason: [2]}


def test_a_table_built_anew_from_the_same_nodes_judges_no_taint_again(
    judged: list[tuple[Taint, ...]],
) -> None:
    """A table built from scratch (no rows of an earlier version to start from) whose nodes
    are the NodeInfos already judged: their taints are looked up, not judged again."""
    nodes = [node("a", taints=[DEDICATED_ML]), node("b", taints=[EVICTING]), node("c")]
    ledger = ledger_for(*nodes)
    plugin = TaintToleration()
    web = workload(kind="Job")
    first = rejected(plugin.filter(cycle_for(web, ledger)))
    assert len(judged) == 2
    ledger.rebind(NodeTable(nodes))
    assert rejected(plugin.filter(cycle_for(web, ledger))) == first
    assert len(judged) == 2


def test_every_row_replaced_is_judged_again_whichever_lost_its_taints() -> None:
    """Two nodes change at once: a loses its taint, b (after it) gains one. Both rows are
    judged again: b is rejected now, a no longer."""
    ledger = ledger_for(node("a", taints=[DEDICATED_ML]), node("b"), node("c"))
    plugin = TaintToleration()
    web = workload(kind="Job")
    reason = "node(s) had untolerated taint {dedicated: ml}"
    assert rejected(plugin.filter(cycle_for(web, ledger))) == {reason: [0]}
    ledger.rebind(ledger.table.replaced([node("a"), node("b", taints=[DEDICATED_ML])]))
    assert rejected(plugin.filter(cycle_for(web, ledger))) == {reason: [1]}


TAINT_CHOICES = [
    None,  # no taints
    [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}],  # no time: from now
    [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "T-100"}],
    [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "T-10"}],
    [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "T-30"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    ],
    [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
    [{"key": "maintenance", "effect": "NoExecute", "timeAdded": "T+5"}],
    [{"key": "soft", "effect": "PreferNoSchedule"}],
    [  # two the score counts for most, one of them tolerated by the Service
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "maintenance", "effect": "PreferNoSchedule"},
    ],
]


def _timed(choice: list[dict[str, str]] | None) -> list[dict[str, str]] | None:
    if choice is None:
        return None
    out = []
    for taint in choice:
        taint = dict(taint)
        if "timeAdded" in taint:
            offset = float(taint["timeAdded"][1:])
            stamp = datetime.fromtimestamp(NOW + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            taint["timeAdded"] = stamp
        out.append(taint)
    return out


def _verdict_parts(verdict: Any) -> tuple[Any, ...]:
    return (
        [(r.reason, r.passed.tolist()) for r in verdict.rejections],
        None if verdict.keeps is None else verdict.keeps.tolist(),
        None if verdict.leaves is None else verdict.leaves.tolist(),
        verdict.since,
        verdict.until,
    )


@settings(max_examples=examples(120))
@given(
    st.lists(st.sampled_from(range(len(TAINT_CHOICES))), min_size=6, max_size=6),
    st.lists(
        st.tuples(
            st.sets(st.integers(0, 5), max_size=3),  # rows changed before this decision
            st.lists(st.sampled_from(range(len(TAINT_CHOICES))), min_size=3, max_size=3),
            st.integers(0, 120),  # seconds after NOW the decision is made
            st.sampled_from([0, 1, 2]),  # which Workload decides
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_the_taint_verdict_kept_row_by_row_is_the_one_judged_afresh(
    start: list[int], steps: list[tuple[set[int], list[int], int, int]], tight: bool
) -> None:
    """Whatever rows change between decisions, whatever the clock and whichever Workload (with
    its own tolerations) decides, the verdict the plugin gives from the rows it kept equals a
    new plugin's on the same table at the same time. ``tight``: the same with the plugin's
    caches bounded to a single entry, so they start over nearly every decision (as a long-lived
    operator's do once full): starting over never changes a verdict."""
    with ExitStack() as stack:
        if tight:
            stack.enter_context(patch.object(taints_module, "MAX_REASONS", 1))
            stack.enter_context(patch.object(taints_module, "MAX_CACHED", 0))
        kept_row_by_row(start, steps)


def kept_row_by_row(start: list[int], steps: list[tuple[set[int], list[int], int, int]]) -> None:
    names = [f"n{i}" for i in range(6)]
    infos = [node(n, taints=_timed(TAINT_CHOICES[c])) for n, c in zip(names, start, strict=True)]
    ledger = ledger_for(*infos)
    workloads = [
        workload(kind="Job"),
        workload(kind="DaemonSet"),
        workload(
            kind="Service",
            tolerations=[
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 20,
                },
                {"key": "maintenance", "operator": "Exists"},
            ],
        ),
    ]
    kept = TaintToleration()
    for changed, choices, later, who in steps:
        replaced = [
            node(names[i], taints=_timed(TAINT_CHOICES[choices[j % 3]]))
            for j, i in enumerate(sorted(changed))
        ]
        if replaced:
            ledger.rebind(ledger.table.replaced(replaced))
        cycle = cycle_for(workloads[who], ledger)
        cycle.now = NOW + later
        fresh_cycle = cycle_for(workloads[who], ledger)
        fresh_cycle.now = NOW + later
        fresh = TaintToleration()
        assert _verdict_parts(kept.filter(cycle)) == _verdict_parts(fresh.filter(fresh_cycle))
        # The score's count of untolerated PreferNoSchedule taints comes from the same rows.
        every = np.arange(len(ledger.table))
        kept_score, fresh_score = kept.score(cycle, every), fresh.score(fresh_cycle, every)
        assert (kept_score is None) == (fresh_score is None)
        if kept_score is not None and fresh_score is not None:
            assert kept_score.tolist() == fresh_score.tolist()


def test_judgements_of_taints_a_flapping_node_no_longer_has_are_let_go() -> None:
    """Every change of a Node brings a new taints tuple; the plugin's memory of judgements
    stays bounded by the table, not by how often its nodes flapped."""
    ledger = ledger_for(node("a", taints=[{"key": "k", "effect": "NoSchedule"}]), node("b"))
    web = workload(kind="Job")
    plugin = TaintToleration()
    most = 0
    for i in range(500):
        taint = {"key": f"k{i % 7}", "effect": "NoSchedule"}
        ledger.rebind(ledger.table.replaced([node("a", taints=[taint])]))
        plugin.filter(cycle_for(web, ledger))
        most = max(most, sum(len(judged) for judged in plugin._judged.values()))
    assert most == 2 * len(ledger.table.tainted) + taints_module.MIN_JUDGED  # at no time more
