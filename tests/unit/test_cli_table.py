"""``write_table``, the one table of the command line (``orca plan``, ``orca rebalance``,
``orca explain``): kubectl's look, columns padded to their widest cell three spaces apart, the
last column as it is, no blanks at the end of a line (a terminal, ``diff`` and ``grep '$'``
see none)."""

from __future__ import annotations

import io

from controller.cli.table import write_table


def test_columns_are_padded_to_their_widest_cell_and_lines_end_without_blanks() -> None:
    rows = [
        ("WORKLOAD", "PLACED", "REASON"),
        ("shop/web", "2/2", ""),  # fully placed: no reason
        ("ml/trainer-long", "0/1", "0/7 nodes are available"),
    ]
    out = io.StringIO()
    write_table(out, rows)
    lines = out.getvalue().split("\n")
    assert lines[-1] == ""  # each row ends its line
    first, second = (max(len(row[i]) for row in rows) for i in range(2))
    starts = (0, first + 3, first + 3 + second + 3)  # where each column begins
    for line, row in zip(lines[:-1], rows, strict=True):
        assert line == line.rstrip(), f"blanks at the end of {line!r}"
        for start, cell in zip(starts, row, strict=True):
            assert line[start : start + len(cell)] == cell, (line, cell)
        assert line.split() == " ".join(row).split()  # nothing but blanks between the cells
    assert len(lines[2]) == starts[2] + len(rows[2][2])  # the last column is not padded


def test_no_rows_write_nothing() -> None:
    out = io.StringIO()
    write_table(out, [])
    assert out.getvalue() == ""
