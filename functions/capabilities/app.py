"""GET /agent-api/v1/workspaces/{route}/knowledge/capabilities — protocol negotiation."""

from __future__ import annotations

from agent_knowledge.knowledge.capabilities import describe_capabilities
from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import Response, create_app, json_response

app = create_app()


@app.get("/agent-api/v1/workspaces/<route>/knowledge/capabilities")
def capabilities(route: str) -> Response:
    request = current_request(app)
    return json_response(200, describe_capabilities(request.open_workspace(route)))


lambda_handler = api_entry_point(app, request_metric="CapabilitiesRequests", clients=("dynamodb",))
