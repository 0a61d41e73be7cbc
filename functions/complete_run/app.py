"""POST /agent-api/v1/runs/{run_id}/complete — finish a run; its knowledge access ends."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from agent_knowledge.runtime.container import Dependencies, create_clients_at_init, default_dependencies
from agent_knowledge.runtime.http import create_app, header, json_response, parse_body, resolve
from agent_knowledge.runtime.observability import logger, metrics, traced
from agent_knowledge.turns.completion import complete_run, run_of_caller
from agent_knowledge.turns.models import CompleteRunRequest

app = create_app()
create_clients_at_init("dynamodb")


@app.post("/agent-api/v1/runs/<run_id>/complete")
def complete(run_id: str) -> Response:
    deps: Dependencies = app.context["deps"]
    event = app.current_event.raw_event
    run = run_of_caller(deps, header(event, "authorization"), run_id)
    request = parse_body(event, CompleteRunRequest)
    return json_response(200, complete_run(deps, run, request))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, Any]:
    metrics.add_metric(name="CompleteRunRequests", unit="Count", value=1)
    return resolve(app, event, context, deps=deps or default_dependencies())
