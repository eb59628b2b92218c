"""How the property tests (hypothesis) run: the same examples on every run by default, or many
random ones on request.

- ``ci`` (the default, what ``make test`` and CI run): derandomized, so every run of the same
  code tries the same examples and a failure is repeatable; no example database, so nothing
  found on one branch or commit changes what another run tries (a mutation run relies on
  both: a mutant is killed or not whatever ran before).
- ``random``: a fresh random seed each run, ``ORCA_HYPOTHESIS_SCALE`` times as many examples
  per test (default 10), still no database; a failure prints the ``@reproduce_failure`` blob
  to pin it down::

      ORCA_HYPOTHESIS=random ORCA_HYPOTHESIS_SCALE=50 .venv/bin/pytest tests/unit

Tests write their own budget as ``@settings(max_examples=examples(300))``: the number that
keeps the default run quick, scaled in the ``random`` profile.
"""

from __future__ import annotations

import os
from typing import Final

from hypothesis import settings

PROFILE_ENV: Final = "ORCA_HYPOTHESIS"
SCALE_ENV: Final = "ORCA_HYPOTHESIS_SCALE"

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile(
    "random", derandomize=False, database=None, print_blob=True, deadline=None
)


def profile() -> str:
    return os.environ.get(PROFILE_ENV, "ci")


def examples(count: int) -> int:
    """A test's example budget: as written in ``ci``, scaled in ``random``."""
    if profile() != "random":
        return count
    return max(1, round(count * float(os.environ.get(SCALE_ENV, "10"))))


def is_property_test(item: object) -> bool:
    """Whether a collected pytest item is a hypothesis test (``@given``)."""
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


def load() -> None:
    """Make the chosen profile the default (from ``tests/conftest.py``, before any test module
    is imported, so every ``@settings`` inherits it)."""
    chosen = profile()
    if chosen not in ("ci", "random"):
        raise ValueError(f"{PROFILE_ENV}={chosen!r}: use ci or random")
    settings.load_profile(chosen)
