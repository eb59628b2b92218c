"""What every suite shares: the property tests' profile (``tests/support/properties.py``: the
same examples every run unless asked otherwise), and fixtures used by more than one package."""

from __future__ import annotations

import os

import pytest

from tests.support import properties
from tests.support.imagebuild import built_image

properties.load()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``make mutation`` (mutmut sets ``MUTANT_UNDER_TEST`` to the mutant's name, e.g.
    ``controller.scheduler.plugins.taints.x_leave_time__mutmut_3``), the table tests of the
    mutated module's own test files (``test_taints.py``, ``test_kube_client.py`` for
    ``client``) run first and the property tests last: each mutant's run stops at its first
    failure, and most mutants are killed by their own module's table tests, in milliseconds,
    instead of after every other file that calls the function (nearly all of them for the
    scheduler core) and hundreds of examples. The set of tests is the same, so the verdicts
    are too. Elsewhere the order is pytest's."""
    mutant = os.environ.get("MUTANT_UNDER_TEST")
    if mutant is None:
        return
    module = mutant.partition(".x")[0].rpartition(".")[2] if ".x" in mutant else ""

    def order(item: pytest.Item) -> tuple[bool, bool]:
        own = bool(module) and module in item.path.stem.removeprefix("test_")
        return properties.is_property_test(item), not own

    items.sort(key=order)


__all__ = ["built_image"]
