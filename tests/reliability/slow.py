"""The `slow` marker of this suite: long runs are opt-in (`RUN_SLOW=1 pytest -m slow tests/reliability`)."""

from __future__ import annotations

import os

import pytest

ENABLED = os.environ.get("RUN_SLOW") == "1"

slow = pytest.mark.slow
only_when_slow = [slow, pytest.mark.skipif(not ENABLED, reason="long run: set RUN_SLOW=1")]


def scaled(default: int, long_run: int) -> int:
    """A case count: short in the default run, long when RUN_SLOW=1."""
    return long_run if ENABLED else default
