"""Test-session settings shared by every suite: the property tests' profile
(``tests/support/properties.py``: the same examples every run unless asked otherwise)."""

from __future__ import annotations

from tests.support import properties

properties.load()
