"""The report of ``make mutation``: per module, how many of mutmut's mutants the unit tests
killed, and every survivor by file and line, less the mutants listed as equivalent.

mutmut keeps its verdicts in ``mutants/<file>.meta`` (an exit code per mutant); this reads
them through mutmut itself (the diff of a mutant against its function), so it needs the same
working directory as ``mutmut run``: the repository root.

The score of a module is detected / (checked - equivalent), where *detected* is killed by a
test, by a timeout (a mutant that loops forever is caught) or by a crash; a mutant with no test
that calls its function counts as a survivor, since nothing would notice it. A mutant listed in
``tests/mutation/equivalent.txt`` (one line each: the mutant's name, ``|``, why no behaviour can
tell it apart) is left out of the score; a listed mutant that no longer exists or is now
killed is reported as stale so the list does not rot.

A mutant's name carries its number within its function, so an edit of that function renumbers
its mutants, and a listed name can come to mean another mutant, which the list would then
excuse for a reason written about a different change. So each listed mutant is pinned to its
diff (the lines it removes and adds) in ``tests/mutation/equivalent.pins.json``: a listed
survivor whose diff is not the pinned one is scored as a survivor again and reported as
changed until someone reads it, fixes the reason and pins it again (``--pin PATTERN...``, which
pins the listed survivors matching the patterns as they are now; no pattern: all of them).

    python hack/mutation_report.py [--fail-under 95] [--pin [PATTERN ...]]
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.mutation.trampoline_templates import CLASS_NAME_SEPARATOR
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files

EQUIVALENT = Path("tests/mutation/equivalent.txt")
PINS = Path("tests/mutation/equivalent.pins.json")
DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
UNCHECKED = {"not checked", "skipped", "check was interrupted by user"}
HUNK = re.compile(r"^@@ -(\d+)")


@dataclass
class Module:
    """The verdicts of one source file's mutants."""

    path: Path
    detected: int = 0
    equivalent: int = 0
    unchecked: int = 0
    survivors: list[tuple[int, str, str]] = field(default_factory=list)
    #: Listed survivors as they are now: name -> their diff (``Mutant.edit``).
    listed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def scored(self) -> int:
        return self.detected + len(self.survivors)

    @property
    def score(self) -> float:
        return 100.0 * self.detected / self.scored if self.scored else 100.0


def load_equivalent(path: Path) -> dict[str, str]:
    """``mutant name | reason`` per line; a line starting with ``#`` is a comment. A line
    without a reason is an error: the list exists to say why."""
    listed: dict[str, str] = {}
    if not path.exists():
        return listed
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, reason = (part.strip() for part in line.partition("|"))
        if not sep or not reason:
            raise SystemExit(f"{path}:{number}: write 'mutant name | why it is equivalent'")
        if name in listed:
            raise SystemExit(f"{path}:{number}: {name} is listed already: one line per mutant")
        listed[name] = reason
    return listed


def function_lines(source: str) -> dict[str, int]:
    """mutmut's mangled name of every function and method -> the line its source starts on
    (its first decorator, as mutmut's copy of the function starts there)."""
    lines: dict[str, int] = {}

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                sep = CLASS_NAME_SEPARATOR
                name = f"x{sep}{owner}{sep}{child.name}" if owner else f"x_{child.name}"
                lines.setdefault(name, start)

    visit(ast.parse(source), None)
    return lines


@dataclass(frozen=True)
class Mutant:
    """Where a mutant is and what it changes."""

    line: int  # the source line it changes
    changed: str  # that line as the mutant has it
    edit: list[str]  # the lines it removes and adds, as in its diff ("-..." and "+...")


def locate(name: str, path: Path, starts: dict[str, int]) -> Mutant:
    """The source line a mutant changes, the changed line as the mutant has it, and its edit."""
    diff = get_diff_for_mutant(name, path=path)
    mangled = name.rpartition(".")[2].partition("__mutmut_")[0]
    offset, changed, line = 0, "", 0
    edit: list[str] = []
    for text in diff.splitlines():
        hunk = HUNK.match(text)
        if hunk:
            line = int(hunk.group(1)) - 1
        elif text.startswith("-") and not text.startswith("---"):
            line += 1
            offset = offset or line
            edit.append("-" + text[1:].strip())
        elif text.startswith("+") and not text.startswith("+++"):
            changed = changed or text[1:].strip()
            edit.append("+" + text[1:].strip())
        elif not text.startswith(("---", "+++")):
            line += 1
    return Mutant(starts.get(mangled, 1) + max(offset, 1) - 1, changed, edit)


def collect(listed: dict[str, str], pins: dict[str, list[str]]) -> tuple[list[Module], set[str]]:
    """Every mutated module's verdicts, and the listed names that are stale (gone or killed).
    A listed survivor whose edit is not its pin is scored as a survivor (``changed since
    listed``)."""
    modules: list[Module] = []
    seen: set[str] = set()
    stale: set[str] = set()
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        if not data.exit_code_by_key:
            continue
        module = Module(path)
        starts = function_lines(path.read_text())
        for name, code in sorted(data.exit_code_by_key.items()):
            seen.add(name)
            status = status_by_exit_code[code]
            if status in DETECTED:
                module.detected += 1
                if name in listed:
                    stale.add(name)
            elif status in UNCHECKED:
                module.unchecked += 1
            else:
                mutant = locate(name, path, starts)
                if name in listed:
                    module.listed[name] = mutant.edit
                    if pins.get(name) == mutant.edit:
                        module.equivalent += 1
                        continue
                    status = "changed since listed" if name in pins else "listed, not pinned"
                module.survivors.append((mutant.line, name, f"{status}: {mutant.changed}"))
        modules.append(module)
    return modules, stale | {name for name in listed if name not in seen}


def report(modules: list[Module], stale: set[str]) -> float:
    width = max((len(str(m.path)) for m in modules), default=10)
    print(f"{'module':<{width}}  detected/scored  score  equivalent  unchecked")
    totals = Module(Path("total"))
    for m in modules:
        score = f"{m.score:5.1f}" if m.scored else "  n/a"  # nothing checked yet
        print(
            f"{m.path!s:<{width}}  {m.detected:>8}/{m.scored:<6}  {score}"
            f"  {m.equivalent:>10}  {m.unchecked:>9}"
        )
        totals.detected += m.detected
        totals.equivalent += m.equivalent
        totals.unchecked += m.unchecked
        totals.survivors += m.survivors
    print(
        f"{'total':<{width}}  {totals.detected:>8}/{totals.scored:<6}  {totals.score:5.1f}"
        f"  {totals.equivalent:>10}  {totals.unchecked:>9}"
    )
    for m in modules:
        if m.survivors:
            print(f"\nsurvivors in {m.path} (`mutmut show NAME` for the diff):")
        for line, name, what in sorted(m.survivors):
            print(f"  {m.path}:{line}  {name}  {what}")
    for name in sorted(stale):
        print(f"stale in {EQUIVALENT}: {name} (gone or killed now: remove the line)")
    return totals.score


def load_pins(path: Path) -> dict[str, list[str]]:
    """The pinned edit of each listed mutant (``--pin`` writes them)."""
    if not path.exists():
        return {}
    pins: dict[str, list[str]] = json.loads(path.read_text())
    return pins


def pin(
    modules: list[Module],
    listed: dict[str, str],
    pins: dict[str, list[str]],
    patterns: list[str],
) -> int:
    """Pin the edit of every listed survivor whose name matches one of ``patterns`` (fnmatch;
    none: all) as it is now; pins of names no longer listed go. The other pins are kept as
    they were."""
    now = {
        name: edit
        for m in modules
        for name, edit in m.listed.items()
        if not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)
    }
    kept = {name: edit for name, edit in pins.items() if name in listed and name not in now}
    merged = dict(sorted({**kept, **now}.items()))
    PINS.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n")
    print(f"pinned {len(now)} listed survivors' edits ({len(kept)} kept as they were) in {PINS}")
    return len(now)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 below this score")
    parser.add_argument(
        "--pin",
        nargs="*",
        metavar="PATTERN",
        help="pin the edit of the listed survivors matching PATTERN (fnmatch; none: every "
        "one) as it is now, after reading each",
    )
    args = parser.parse_args()
    listed, pins = load_equivalent(EQUIVALENT), load_pins(PINS)
    modules, stale = collect(listed, pins)
    if not modules:
        print("no mutation results in mutants/: run `make mutation` first", file=sys.stderr)
        return 1
    if args.pin is not None:
        pin(modules, listed, pins, args.pin)
        modules, stale = collect(listed, load_pins(PINS))
    score = report(modules, stale)
    return 1 if score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
