"""Overlapping independent AWS calls: a small per-container thread pool.

Latency on AWS is the sum of sequential round trips; calls that do not depend on each other (a
body read beside the identity's second batch, the bodies of an inline turn) run at the same time.
botocore clients are thread-safe. Each task runs in a copy of the submitter's context variables.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

ResultT = TypeVar("ResultT")

# Threads start on first use; a request never has more than a few calls in flight.
_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="aws-call")


def background(function: Callable[..., ResultT], *args: Any) -> Future[ResultT]:
    """Start `function(*args)` now; `.result()` waits for it (and raises what it raised)."""
    context = contextvars.copy_context()
    return _pool.submit(context.run, function, *args)
