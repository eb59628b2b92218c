"""What every bench measures the same way, and how it keeps its figures.

CPU and memory: ``cpu_seconds(pid)`` and ``peak_rss_mb(pid)`` read another process's counters
from ``/proc`` (utime + stime; ``VmHWM``, the resident set's high-water mark), ``own_peak_rss_mb``
this process's from ``getrusage``, ``child_usage`` a child's CPU and peak RSS as ``wait4``
returns them. ``load_average`` is the 1-minute load: the machine is shared, and a figure is
read against the load it was taken at.

Results: ``record(name, figures, command)`` writes ``bench/results/<name>.json`` with the
figures and what they were measured on (the commit and whether the tree had changes, the
machine, the load average at the bench's start and end, the command line, the date).
``python -m bench.report`` makes docs/benchmarks.md and docs/faults.md from those files, so a
figure in the docs is never typed by hand. Each run overwrites its file: the history is git's.
A bench whose sizes or modes are run one at a time (the scaling table, a burst beside a
backlog) records with ``merge=True`` instead: the groups this run measured replace those of
the same name, the others stay, and ``runs`` keeps each group's own command, commit, machine,
load and date, so every figure on the page still says how it was made.

Figures are a flat mapping of name to number (or short text), or a mapping of group (one size
of a run, one side of a comparison) to such a mapping. Every name carries its unit as a suffix
(``_s``, ``_ms``, ``_us``, ``_mb``, ``_per_s``, ...) so the data reads without the bench's
source.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results"

#: name -> number (or short text), or group -> {name -> number}; see the module's docstring.
Figures = Mapping[str, Any]


def load_average() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


#: The load when the bench started (this module is imported before any work is done).
LOAD_AT_START = load_average()


# -- CPU and memory -------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (``/proc/<pid>/stat``)."""
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """A running process's peak resident set (``VmHWM``), in MB; NaN if it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def own_peak_rss_mb() -> float:
    """This process's peak resident set, in MB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_usage(usage: resource.struct_rusage) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of a child from the rusage ``os.wait4`` returned."""
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


# -- reporting ------------------------------------------------------------------------------


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Rows under headers: a column of numbers right-aligned, any other left-aligned."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        bool(rows) and all(isinstance(row[i], int | float) for row in rows)
        for i in range(len(headers))
    ]
    for row in cells:
        line = "  ".join(
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(row, widths, numeric, strict=True)
        )
        print(line.rstrip(), flush=True)


def _cell(value: object) -> str:
    return format_figure(value) if isinstance(value, float) else str(value)


def format_figure(value: object) -> str:
    """A figure as the docs show it: three significant digits at most, thousands separated."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    value = float(f"{value:.3g}")  # 99.96 -> 100.0, shown as 100
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def command_line(argv: Sequence[str] | None = None) -> str:
    """How this bench was started, as a shell line from the repository's root: ``python``, the
    script's path and its arguments (``argv``; default: this process's)."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(REPO_ROOT) if script.is_relative_to(REPO_ROOT) else script
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", str(shown), *args])


def record(
    name: str,
    figures: Figures,
    command: str,
    directory: Path = RESULTS,
    merge: bool = False,
    order: Callable[[str], Any] | None = None,
) -> Path:
    """Write ``<directory>/<name>.json``: the figures and what they were measured on.

    ``merge``: ``figures`` is a mapping of groups, merged into the file's (see the module's
    docstring); ``order`` sorts the merged groups by their names (default: where they were)."""
    provenance = {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": COMMIT_AT_START,
        "machine": _machine(),
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    result: dict[str, Any] = {"bench": name, "figures": _rounded(figures), **provenance}
    if merge:
        if not all(isinstance(group, Mapping) for group in figures.values()):
            raise ValueError("record(merge=True) takes groups of figures, not figures")
        groups, runs = _earlier_runs(path)
        groups.update(result["figures"])
        runs.update({group: provenance for group in figures})
        names = sorted(groups, key=order) if order is not None else list(groups)
        result["figures"] = {group: groups[group] for group in names}
        result["runs"] = {group: runs[group] for group in names}
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"(figures recorded in {_shown(path)})", flush=True)
    return path


def _earlier_runs(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The groups a results file holds, and each one's provenance (a file written without
    ``merge``: its run's, for every group)."""
    if not path.exists():
        return {}, {}
    earlier = json.loads(path.read_text())
    groups = {k: v for k, v in earlier["figures"].items() if isinstance(v, Mapping)}
    same = {k: earlier[k] for k in ("command", "date", "commit", "machine") if k in earlier}
    runs = earlier.get("runs") or {}
    return groups, {group: runs.get(group, same) for group in groups}


def _rounded(figures: Any) -> Any:
    """Four significant digits: more is the machine's noise."""
    if isinstance(figures, Mapping):
        return {str(k): _rounded(v) for k, v in figures.items()}
    if isinstance(figures, float) and math.isfinite(figures) and figures != 0:
        return round(figures, 3 - math.floor(math.log10(abs(figures))))
    return figures


def _commit() -> dict[str, Any]:
    """HEAD and whether the tree differed from it (results files aside: a bench run before
    this one may have written its own)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        changes = git("status", "--porcelain", "--", ".", ":(exclude)bench/results")
    except (OSError, subprocess.CalledProcessError) as e:
        return {"sha": None, "dirty": None, "error": str(e).splitlines()[0]}
    return {"sha": head, "dirty": bool(changes)}


#: The code the bench runs: HEAD when it started, and whether the tree differed from it.
COMMIT_AT_START = _commit()


def _machine() -> dict[str, Any]:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average_start": round(LOAD_AT_START, 2),
        "load_average_end": round(load_average(), 2),
    }


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
