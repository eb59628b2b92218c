"""pydantic's validation errors in the user's words: the field path as written in YAML.

Shared by everything that reports a refused object: ``orca plan`` (manifests), the dry run
(``fromcluster``) and the operator (the ``Invalid`` message), so one object gets one message.
"""

from __future__ import annotations

from pydantic import ValidationError


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in part or part.startswith("function-"):
            continue  # pydantic's union/validator branch labels, not user fields
        else:
            out += f".{part}" if out else part
    return out or "(object)"


def validation_message(exc: ValidationError) -> str:
    """The first pydantic error in the user's field names: ``spec.count: must be >= 1``. A
    message that starts with a map key in brackets (``[nvidia.com/gpu]: ...``, from a map
    checked as a whole) names it after the field: ``spec.resources[nvidia.com/gpu]: ...``,
    as the API server names a key."""
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    field = _field(tuple(first["loc"]))
    if message.startswith("[") and "]: " in message:
        return f"{field}{message}"
    return f"{field}: {message}"
