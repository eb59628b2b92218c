"""The one line a refused CEL expression gives, shared by the CEL tests."""

from __future__ import annotations

import pytest

from controller.scheduler.celexpr import CelCompileError, compile_expression


def refusal(source: str) -> str:
    """``compile_expression``'s refusal of ``source``, asserted to be one line. Called past the
    memo (a refusal is never memoised anyway: the cache keeps only what compiled)."""
    with pytest.raises(CelCompileError) as refused:
        compile_expression.__wrapped__(source)
    message = str(refused.value)
    assert "\n" not in message
    return message
