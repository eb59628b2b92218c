"""Flag values every command reads the same way, with one wording for what is wrong."""

from __future__ import annotations


def whole_number(flag: str, text: str, low: int, high: int) -> int:
    """``text`` as a whole number ``low..high``, or a ``ValueError`` of one line:
    ``--flag: 'ten' is not a whole number`` or ``--flag: 100000 is out of range (0..10000)``."""
    try:
        value = int(text, 10)
    except ValueError:
        raise ValueError(f"{flag}: {text[:40]!r} is not a whole number") from None
    if not low <= value <= high:
        raise ValueError(f"{flag}: {value} is out of range ({low}..{high})")
    return value
