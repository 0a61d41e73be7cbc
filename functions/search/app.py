"""POST /agent-api/v1/workspaces/{route}/knowledge/search — bounded hints with signed references."""

from __future__ import annotations

from agent_knowledge.knowledge.search import search_knowledge
from agent_knowledge.models import SearchRequest
from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import Response, create_app, json_response, parse_body_later

app = create_app()


@app.post("/agent-api/v1/workspaces/<route>/knowledge/search")
def search(route: str) -> Response:
    request = current_request(app)
    body = parse_body_later(request.event, SearchRequest)
    return json_response(200, search_knowledge(request.deps, request.authorization, route, body).response)


lambda_handler = api_entry_point(app, request_metric="SearchRequests", clients=("dynamodb", "s3", "secretsmanager"))
