"""Fixtures shared by more than one test package."""

from tests.imagebuild import built_image

__all__ = ["built_image"]
