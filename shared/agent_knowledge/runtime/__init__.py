"""What every Lambda function shares at run time: the HTTP adapter, container wiring, observability, the clock.

Lazy on purpose: the local runtime imports `container` before it sets a function's environment,
and `observability` must not create the Powertools Logger and Metrics (which read that
environment) before then.
"""

from typing import TYPE_CHECKING

from agent_knowledge import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "clock": "Clock system_clock",
        "container": "Dependencies default_dependencies reset_container_caches",
        "entry_point": "ApiRequest api_entry_point current_request",
        "http": "create_app header json_response parse_body resolve status_of",
        "observability": "logger metrics traced",
    },
)

if TYPE_CHECKING:
    from agent_knowledge.runtime.clock import Clock as Clock
    from agent_knowledge.runtime.clock import system_clock as system_clock
    from agent_knowledge.runtime.container import Dependencies as Dependencies
    from agent_knowledge.runtime.container import default_dependencies as default_dependencies
    from agent_knowledge.runtime.container import reset_container_caches as reset_container_caches
    from agent_knowledge.runtime.entry_point import ApiRequest as ApiRequest
    from agent_knowledge.runtime.entry_point import api_entry_point as api_entry_point
    from agent_knowledge.runtime.entry_point import current_request as current_request
    from agent_knowledge.runtime.http import create_app as create_app
    from agent_knowledge.runtime.http import header as header
    from agent_knowledge.runtime.http import json_response as json_response
    from agent_knowledge.runtime.http import parse_body as parse_body
    from agent_knowledge.runtime.http import resolve as resolve
    from agent_knowledge.runtime.http import status_of as status_of
    from agent_knowledge.runtime.observability import logger as logger
    from agent_knowledge.runtime.observability import metrics as metrics
    from agent_knowledge.runtime.observability import traced as traced
