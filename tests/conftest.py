"""What every suite shares: the property tests' profile (``tests/support/properties.py``: the
same examples every run unless asked otherwise), and fixtures used by more than one package."""

from __future__ import annotations

from tests.support import properties
from tests.support.imagebuild import built_image

properties.load()

__all__ = ["built_image"]
