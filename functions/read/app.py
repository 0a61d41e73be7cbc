"""POST /agent-api/v1/workspaces/{route}/knowledge/read — paged, revision-bound body reads."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from agent_knowledge.identity.caller import revalidate
from agent_knowledge.identity.runs import authorize_run
from agent_knowledge.knowledge.read import read_knowledge
from agent_knowledge.models import ReadRequest
from agent_knowledge.runtime.container import Dependencies, default_dependencies
from agent_knowledge.runtime.http import create_app, header, json_response, parse_body, resolve
from agent_knowledge.runtime.observability import logger, metrics, traced

app = create_app()


@app.post("/agent-api/v1/workspaces/<route>/knowledge/read")
def read(route: str) -> Response:
    deps: Dependencies = app.context["deps"]
    event = app.current_event.raw_event
    caller = revalidate(deps.repositories, header(event, "authorization"), route, deps.clock())
    request = parse_body(event, ReadRequest)
    authorize_run(deps.repositories, caller, request.run_id, deps.clock())
    return json_response(200, read_knowledge(deps, caller, request))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, Any]:
    metrics.add_metric(name="ReadRequests", unit="Count", value=1)
    return resolve(app, event, context, deps=deps or default_dependencies())
