"""POST /agent-api/v1/workspaces/{route}/turns — start a turn: one frozen run and knowledge context."""

from __future__ import annotations

from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import JSON, Response, create_app, parse_body_later
from agent_knowledge.turns.payloads import TURN_MAX_BODY_BYTES, TurnRequest
from agent_knowledge.turns.start import start_turn

app = create_app()


@app.post("/agent-api/v1/workspaces/<route>/turns")
def turns(route: str) -> Response:
    request = current_request(app)
    body = parse_body_later(request.event, TurnRequest, max_bytes=TURN_MAX_BODY_BYTES)
    outcome = start_turn(request.deps, request.authorization, route, body, request.deps.settings.run_ttl_seconds)
    # The stored bytes as they are: a replay answers exactly what the first request got.
    return Response(status_code=200, content_type=JSON, body=outcome.body)


lambda_handler = api_entry_point(app, request_metric="TurnRequests", clients=("dynamodb", "s3", "secretsmanager"))
