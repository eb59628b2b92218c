"""The locks against pyproject.toml, offline. (``make lock-check``, part of ``make lint``,
re-resolves with uv and fails on any difference; this is the quick, local half.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def pins(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a ``uv pip compile --generate-hashes`` file."""
    found: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in lock.read_text().splitlines():
        if match := PIN.match(line):
            current = str(canonicalize_name(match[1]))
            found[current] = (match[2], [])
        elif line.strip().startswith("--hash=sha256:"):
            found[current][1].append(line.strip().removeprefix("--hash=sha256:").rstrip(" \\"))
    return found


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize(
    ("lock", "section"),
    [("requirements.lock", "dependencies"), ("requirements-build.lock", "build-system")],
)
def test_every_requirement_is_pinned_to_an_allowed_version_with_hashes(
    lock: str, section: str
) -> None:
    data = pyproject()
    project = data["project"]
    assert isinstance(project, dict)
    build = data["build-system"]
    assert isinstance(build, dict)
    requirements = project["dependencies"] if section == "dependencies" else build["requires"]
    locked = pins(REPO_ROOT / lock)
    for text in requirements:
        req = Requirement(text)
        name = str(canonicalize_name(req.name))
        assert name in locked, f"{lock} lacks {text}: run make requirements.lock"
        version, _ = locked[name]
        assert req.specifier.contains(version, prereleases=True), f"{lock}: {name}=={version}"
    for name, (version, hashes) in locked.items():
        assert hashes and all(len(h) == 64 for h in hashes), f"{lock}: {name}=={version}"


def test_the_runtime_lock_holds_nothing_only_development_needs() -> None:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    dev = {
        str(canonicalize_name(Requirement(r).name)) for r in project["optional-dependencies"]["dev"]
    }
    runtime = {str(canonicalize_name(Requirement(r).name)) for r in project["dependencies"]}
    locked = set(pins(REPO_ROOT / "requirements.lock"))
    # cryptography is a runtime dependency since orca run makes its serving certificate.
    assert "cryptography" in runtime and "cryptography" in locked
    # No development tool is in the image (none is a dependency of a runtime requirement).
    assert not (dev - runtime) & locked, (dev - runtime) & locked
