"""Where a process's time went: the top functions of a py-spy profile (``--py-spy FILE`` of
``bench_vs_kube_scheduler``, ``bench_scale``), by their own time and with what they call.

py-spy's raw format is one collapsed stack per line (``outer (file:line);...;inner
(file:line) COUNT``, COUNT samples at its ``--rate``, 100 a second here); a function's *own*
share counts the samples where it is the innermost frame, its *inclusive* share those where it
is anywhere in the stack (once per stack, however deep it recurses). Line numbers are dropped:
a function is its name and file.

    python -m bench.stacks /tmp/profile.txt                 # the top 25 of each
    python -m bench.stacks /tmp/profile.txt --top 40 --under SchedulingLoop.process
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME = re.compile(r"^(.*?) \((.*?)(?::\d+)?\)$")


@dataclass(frozen=True)
class Profile:
    total: int
    own: Counter[str]
    inclusive: Counter[str]


def function(frame: str) -> str:
    """``name (path/to/file.py:12)`` -> ``name (file.py)``."""
    found = _FRAME.match(frame.strip())
    if not found:
        return frame.strip()
    name, path = found.groups()
    return f"{name} ({path.rsplit('/', 1)[-1]})"


def read(lines: Iterable[str], under: str | None = None) -> Profile:
    """A profile from py-spy's raw lines; ``under``: only the stacks through a function whose
    name holds it (and what is above it left out)."""
    total, own, inclusive = 0, Counter[str](), Counter[str]()
    for line in lines:
        found = _LINE.match(line.rstrip("\n"))
        if not found:
            continue
        stack, count = found.group(1), int(found.group(2))
        frames = [function(f) for f in stack.split(";") if f]
        if under is not None:
            at = next((i for i, f in enumerate(frames) if under in f), None)
            if at is None:
                continue
            frames = frames[at:]
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    return Profile(total, own, inclusive)


def show(profile: Profile, top: int) -> str:
    out = [f"{profile.total} samples"]
    for title, counts in (("own time", profile.own), ("inclusive", profile.inclusive)):
        out.append(f"-- {title}")
        for name, count in counts.most_common(top):
            out.append(f"{count / profile.total * 100:6.1f} %  {name}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy's raw output (--format raw)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--under", help="only the stacks through this function (a substring)")
    args = parser.parse_args(argv)
    with args.profile.open() as lines:
        print(show(read(lines, args.under), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
