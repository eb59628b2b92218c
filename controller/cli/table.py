"""The one table renderer of the command line (``orca plan``, ``orca rebalance``, ``orca
explain``): kubectl's look."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO


def write_table(out: TextIO, rows: Sequence[Sequence[str]]) -> None:
    """``rows`` (the header first) in columns padded to their widest cell, three spaces apart;
    the last column is not padded (a reason or a verdict may be long), trailing blanks go."""
    if not rows:
        return
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        out.write("   ".join([*cells, row[-1]]).rstrip() + "\n")
