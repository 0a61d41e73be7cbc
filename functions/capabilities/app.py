"""GET /agent-api/v1/workspaces/{route}/knowledge/capabilities — protocol negotiation."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from agent_knowledge.identity.caller import open_workspace
from agent_knowledge.knowledge.capabilities import describe_capabilities
from agent_knowledge.runtime.container import Dependencies, create_clients_at_init, default_dependencies
from agent_knowledge.runtime.http import create_app, header, json_response, resolve
from agent_knowledge.runtime.observability import logger, metrics, traced

app = create_app()
create_clients_at_init("dynamodb")


@app.get("/agent-api/v1/workspaces/<route>/knowledge/capabilities")
def capabilities(route: str) -> Response:
    deps: Dependencies = app.context["deps"]
    authorization = header(app.current_event.raw_event, "authorization")
    workspace = open_workspace(deps.repositories, authorization, route, deps.clock())
    return json_response(200, describe_capabilities(workspace))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, Any]:
    metrics.add_metric(name="CapabilitiesRequests", unit="Count", value=1)
    return resolve(app, event, context, deps=deps or default_dependencies())
