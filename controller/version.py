"""The version orca reports: ``orca version``, ``orca --version`` and the operator's
``orca_build_info{version}``.

Read from the installed distribution's metadata (``importlib.metadata``), so the number lives
in one place, ``pyproject.toml``, and an image built from a tagged tree reports that tag.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version

DISTRIBUTION = "orca-controller"

#: What a source tree that was never installed reports (PEP 440 local version, sorts lowest).
UNKNOWN = "0+unknown"


def version() -> str:
    """The installed orca-controller version, or ``0+unknown`` when it is not installed."""
    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN


def version_line() -> str:
    """One line for humans and scripts: ``orca <version>``."""
    return f"orca {version()}"
