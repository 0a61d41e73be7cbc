"""POST /agent-api/v1/workspaces/{route}/knowledge/search — bounded hints with signed references."""

from __future__ import annotations

from agent_knowledge.identity.run_access import authorize_run
from agent_knowledge.knowledge.search import search_ahead, search_knowledge
from agent_knowledge.models import SearchRequest
from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import Response, create_app, json_response, parse_body_later

app = create_app()


@app.post("/agent-api/v1/workspaces/<route>/knowledge/search")
def search(route: str) -> Response:
    request = current_request(app)
    ahead = search_ahead(parse_body_later(request.event, SearchRequest))
    workspace = request.open_workspace(route, run_id=ahead.run_id, after_session=ahead.embed_query)
    query = ahead.body.get()
    deps = request.deps
    run = authorize_run(deps.repositories, workspace, query.run_id, deps.clock())
    outcome = search_knowledge(deps, workspace, query.query, query.limit, run, ahead)
    return json_response(200, outcome.response)


lambda_handler = api_entry_point(app, request_metric="SearchRequests", clients=("dynamodb", "s3", "secretsmanager"))
