"""POST /agent-api/v1/workspaces/{route}/knowledge/read — paged, revision-bound body reads."""

from __future__ import annotations

from agent_knowledge.knowledge.read import read_knowledge
from agent_knowledge.models import ReadRequest
from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import Response, create_app, json_response, parse_body_later

app = create_app()


@app.post("/agent-api/v1/workspaces/<route>/knowledge/read")
def read(route: str) -> Response:
    request = current_request(app)
    body = parse_body_later(request.event, ReadRequest)
    return json_response(200, read_knowledge(request.deps, request.authorization, route, body))


lambda_handler = api_entry_point(app, request_metric="ReadRequests", clients=("dynamodb", "s3", "secretsmanager"))
