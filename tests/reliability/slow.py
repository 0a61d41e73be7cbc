"""Long runs of this suite are opt-in: `RUN_SLOW=1 pytest -m slow tests/reliability`
(bench/reliability/fuzz.py and bench/reliability/soak.py do that)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

ENABLED = os.environ.get("RUN_SLOW") == "1"


def long_run(test: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a test `slow` and skip it unless RUN_SLOW=1."""
    return pytest.mark.slow(pytest.mark.skipif(not ENABLED, reason="long run: set RUN_SLOW=1")(test))


def scaled(default: int, long_run: int) -> int:
    """A case count: short in the default run, long when RUN_SLOW=1."""
    return long_run if ENABLED else default
