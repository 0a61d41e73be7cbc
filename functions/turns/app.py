"""POST /agent-api/v1/workspaces/{route}/turns — start a turn: one frozen run and knowledge context."""

from __future__ import annotations

from agent_knowledge.core.observability import logger
from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import JSON, Response, create_app, parse_body_later
from agent_knowledge.turns.payloads import TURN_MAX_BODY_BYTES, TurnRequest
from agent_knowledge.turns.start import start_turn

app = create_app()


@app.post("/agent-api/v1/workspaces/<route>/turns")
def turns(route: str) -> Response:
    request = current_request(app)
    body = parse_body_later(request.event, TurnRequest, max_bytes=TURN_MAX_BODY_BYTES)
    binding = body.model.task_binding if body.model else None
    task_id = binding.task_id if binding else None
    workspace = request.open_workspace(route, task_id=task_id)
    outcome = start_turn(request.deps, workspace, body.get(), request.deps.settings.run_ttl_seconds)
    logger.info("turn context delivered", extra={"run_id": outcome.run_id, "replayed": outcome.replayed})
    # The stored bytes as they are: a replay answers exactly what the first request got.
    return Response(status_code=200, content_type=JSON, body=outcome.body)


lambda_handler = api_entry_point(app, request_metric="TurnRequests", clients=("dynamodb", "s3", "secretsmanager"))
