"""POST /agent-api/v1/workspaces/{route}/turns — start a turn: one frozen run and knowledge context."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths

from agent_knowledge.identity.caller import open_workspace
from agent_knowledge.runtime.container import Dependencies, create_clients_at_init, default_dependencies
from agent_knowledge.runtime.http import JSON, create_app, header, parse_body_later, resolve
from agent_knowledge.runtime.observability import logger, metrics, traced
from agent_knowledge.settings import get_settings
from agent_knowledge.turns.models import TURN_MAX_BODY_BYTES, TurnRequest
from agent_knowledge.turns.start import start_turn

app = create_app()
create_clients_at_init("dynamodb", "s3", "secretsmanager")


@app.post("/agent-api/v1/workspaces/<route>/turns")
def turns(route: str) -> Response:
    deps: Dependencies = app.context["deps"]
    event = app.current_event.raw_event
    body = parse_body_later(event, TurnRequest, max_bytes=TURN_MAX_BODY_BYTES)
    binding = body.model.task_binding if body.model else None
    task_id = binding.task_id if binding else None
    workspace = open_workspace(deps.repositories, header(event, "authorization"), route, deps.clock(), task_id=task_id)
    request = body.get()
    outcome = start_turn(deps, workspace.caller, request, get_settings().run_ttl_seconds, workspace=workspace)
    logger.info("turn context delivered", extra={"run_id": outcome.run_id, "replayed": outcome.replayed})
    # The stored bytes as they are: a replay answers exactly what the first request got.
    return Response(status_code=200, content_type=JSON, body=outcome.body)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> dict[str, Any]:
    metrics.add_metric(name="TurnRequests", unit="Count", value=1)
    return resolve(app, event, context, deps=deps or default_dependencies())
