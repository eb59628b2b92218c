"""The commands' ``-o/--output`` (``orca plan``, ``orca explain``, ``orca rebalance``), as
kubectl's: ``table`` for people, and one document in ``json`` or ``yaml`` for programs, the
same content either way. A command builds its document once (a dict of plain values) and hands
it here; whatever sections it grows are written in every structured format without the command
knowing the formats.
"""

from __future__ import annotations

import argparse
from typing import Any, Final, TextIO

import orjson
import yaml

TABLE: Final = "table"
JSON: Final = "json"
YAML: Final = "yaml"
#: The formats that write the command's document rather than its table.
STRUCTURED: Final = (JSON, YAML)

#: libyaml's emitter when PyYAML was built with it (its wheels are), many times the pure one's
#: speed; the same safe representers either way.
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    """``-o/--output {table,json,yaml}``, default table."""
    parser.add_argument(
        "-o",
        "--output",
        choices=(TABLE, *STRUCTURED),
        default=TABLE,
        help="json and yaml print the same document; default: %(default)s",
    )


def write_document(document: dict[str, Any], output: str, out: TextIO) -> None:
    """``document`` as ``output`` (``json`` or ``yaml``) on ``out``: JSON indented by two,
    keys in the order the command built them; YAML in block style, keys in the same order,
    strings that would read as another type quoted (PyYAML's safe dumper)."""
    if output == JSON:
        # orjson: the standard encoder is pure Python when indenting (0.5 s for 5,000 results)
        out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
        out.write("\n")
    elif output == YAML:
        out.write(
            yaml.dump(
                document,
                Dumper=_DUMPER,
                sort_keys=False,
                default_flow_style=False,
                allow_unicode=True,
                width=100_000,  # one line per string, as the JSON has it
            )
        )
    else:
        raise ValueError(f"not a document format: {output!r}")
