"""POST /agent-api/v1/workspaces/{route}/knowledge/search — bounded hints with signed references."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from agent_knowledge.identity.caller import open_workspace
from agent_knowledge.identity.runs import authorize_run
from agent_knowledge.knowledge.search import search_knowledge
from agent_knowledge.models import SearchRequest
from agent_knowledge.runtime.container import Dependencies, create_clients_at_init, default_dependencies
from agent_knowledge.runtime.http import create_app, header, json_response, parse_body_later, resolve
from agent_knowledge.runtime.observability import logger, metrics, traced

app = create_app()
create_clients_at_init("dynamodb", "s3", "secretsmanager")


@app.post("/agent-api/v1/workspaces/<route>/knowledge/search")
def search(route: str) -> Response:
    deps: Dependencies = app.context["deps"]
    event = app.current_event.raw_event
    body = parse_body_later(event, SearchRequest)
    run_id = body.model.run_id if body.model else None
    workspace = open_workspace(deps.repositories, header(event, "authorization"), route, deps.clock(), run_id=run_id)
    request = body.get()
    run = authorize_run(deps.repositories, workspace.caller, request.run_id, deps.clock(), workspace=workspace)
    outcome = search_knowledge(deps, workspace.caller, request.query, request.limit, run, scope=workspace.scope)
    return json_response(200, outcome.response)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, Any]:
    metrics.add_metric(name="SearchRequests", unit="Count", value=1)
    return resolve(app, event, context, deps=deps or default_dependencies())
