"""What every suite shares: the property tests' profile (``tests/support/properties.py``: the
same examples every run unless asked otherwise), and fixtures used by more than one package."""

from __future__ import annotations

import os

import pytest

from tests.support import properties
from tests.support.imagebuild import built_image

properties.load()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``make mutation`` (mutmut sets ``MUTANT_UNDER_TEST``), the property tests run
    after the table tests: each mutant's run stops at its first failure, and most mutants a
    table test kills are then killed in milliseconds instead of after hundreds of examples.
    Elsewhere the order is pytest's."""
    if "MUTANT_UNDER_TEST" in os.environ:
        items.sort(key=lambda item: properties.is_property_test(item))


__all__ = ["built_image"]
