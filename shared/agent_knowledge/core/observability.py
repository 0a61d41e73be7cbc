"""Logger, tracer and metrics, created once per container.

Tracing never captures responses (document bodies must stay out of traces); the logger never
logs request bodies, tokens or references.

The Tracer is created on the first invocation, not at import, and only when tracing is on:
importing the X-Ray SDK builds a sampler with its own botocore client (~300 ms here), and
Powertools builds its recorder even with `POWERTOOLS_TRACE_DISABLED=true` (114-126 ms on the
first request, issue 16). With tracing off (that variable, or outside Lambda, or under
`sam local`) the X-Ray SDK is never imported and handlers run unwrapped.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics

from agent_knowledge.core.per_container import per_container

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

logger = Logger()
metrics = Metrics()


def tracing_enabled() -> bool:
    """Powertools' own rule: off when disabled by variable, outside Lambda, or under sam/chalice local."""
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    if "AWS_SAM_LOCAL" in os.environ or "CHALICE_LOCAL" in os.environ:
        return False
    return "AWS_LAMBDA_FUNCTION_NAME" in os.environ


@per_container
def tracer() -> Tracer:
    from aws_lambda_powertools import Tracer

    # Only AWS SDK calls get subsegments; nothing else is patched.
    return Tracer(patch_modules=["botocore"])


Handler = Callable[..., dict[str, Any]]


def traced(handler: Handler) -> Handler:
    """`tracer.capture_lambda_handler(capture_response=False)`, with the Tracer created lazily —
    or the handler itself when tracing is off."""
    wrapped: Handler | None = None

    @functools.wraps(handler)
    def wrapper(event: dict[str, Any], context: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal wrapped
        if wrapped is None:
            if not tracing_enabled():
                wrapped = handler
            else:
                wrapped = tracer().capture_lambda_handler(handler, capture_response=False)
        return wrapped(event, context, **kwargs)

    return wrapper


SERVICE_DIMENSION = "Service"


def emit_service_metric(name: str, unit: str, value: float, **properties: str | int | float) -> None:
    """One CloudWatch metric (embedded metric format) whose only dimension is Service.

    Alarms match a metric's exact dimension set, and the Powertools metrics add their own
    `service` dimension; metrics an alarm watches (IndexLagSeconds) are written here instead, one
    stdout line each, with `properties` as searchable context (never a dimension).
    """
    if os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() == "true":
        return
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentKnowledge")
    service = os.environ.get("POWERTOOLS_SERVICE_NAME", "agent-knowledge")
    document = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {"Namespace": namespace, "Dimensions": [[SERVICE_DIMENSION]], "Metrics": [{"Name": name, "Unit": unit}]}
            ],
        },
        SERVICE_DIMENSION: service,
        name: value,
        **properties,
    }
    print(json.dumps(document, separators=(",", ":")), file=sys.stdout, flush=True)
