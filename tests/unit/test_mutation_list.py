"""The checked-in list of equivalent mutants (``tests/mutation/equivalent.txt``, read by
``make mutation``'s report) stays well-formed between mutation runs, which are too slow for
``make test``: each line names one mutant of a mutated module once and says why, and every pin
belongs to a listed mutant (docs/development.md, "Adding an equivalent mutant")."""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LISTED = ROOT / "tests" / "mutation" / "equivalent.txt"
PINS = ROOT / "tests" / "mutation" / "equivalent.pins.json"


def _entries() -> list[tuple[str, str]]:
    """(name, reason) per line that is not blank or a comment."""
    entries = []
    for raw in LISTED.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition("|")
            entries.append((name.strip(), reason.strip()))
    return entries


def _mutated_modules() -> list[str]:
    """``only_mutate`` of pyproject's ``[tool.mutmut]`` as prefixes of mutant names: a
    module's ``controller.cli.plan.``; a package's ``__init__.py`` is the package, whose
    mutants mutmut names ``controller.cli.x_main__mutmut_1`` (or ``xǁClassǁ...``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    prefixes = []
    for pattern in config["only_mutate"]:
        module = pattern.removesuffix("*").removesuffix(".py").replace("/", ".").rstrip(".")
        package = module.removesuffix(".__init__")
        prefixes.append(f"{package}.x" if package != module else f"{module}.")
    return prefixes


def test_each_listed_mutant_is_one_of_a_mutated_module_listed_once_with_its_reason() -> None:
    entries = _entries()
    assert entries, "the list is read"
    assert [name for name, reason in entries if not name or not reason] == []
    prefixes = _mutated_modules()
    assert [n for n, _ in entries if not any(n.startswith(p) for p in prefixes)] == []
    assert [n for n, _ in entries if "__mutmut_" not in n] == []
    assert [n for n, count in Counter(n for n, _ in entries).items() if count > 1] == []


def test_every_pin_belongs_to_a_listed_mutant() -> None:
    listed = {name for name, _ in _entries()}
    pins = json.loads(PINS.read_text())
    assert sorted(set(pins) - listed) == []
