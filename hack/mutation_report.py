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

    python hack/mutation_report.py [--fail-under 95]
"""

from __future__ import annotations

import argparse
import ast
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


def locate(name: str, path: Path, starts: dict[str, int]) -> tuple[int, str]:
    """The source line a mutant changes, and the changed line as the mutant has it."""
    diff = get_diff_for_mutant(name, path=path)
    mangled = name.rpartition(".")[2].partition("__mutmut_")[0]
    offset, changed, line = 0, "", 0
    for text in diff.splitlines():
        hunk = HUNK.match(text)
        if hunk:
            line = int(hunk.group(1)) - 1
        elif text.startswith("-") and not text.startswith("---"):
            line += 1
            offset = offset or line
        elif text.startswith("+") and not text.startswith("+++"):
            changed = changed or text[1:].strip()
        elif not text.startswith(("---", "+++")):
            line += 1
    return starts.get(mangled, 1) + max(offset, 1) - 1, changed


def collect(listed: dict[str, str]) -> tuple[list[Module], set[str]]:
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
            elif name in listed:
                module.equivalent += 1
            else:
                line, changed = locate(name, path, starts)
                module.survivors.append((line, name, f"{status}: {changed}"))
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 below this score")
    args = parser.parse_args()
    modules, stale = collect(load_equivalent(EQUIVALENT))
    if not modules:
        print("no mutation results in mutants/: run `make mutation` first", file=sys.stderr)
        return 1
    score = report(modules, stale)
    return 1 if score < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
