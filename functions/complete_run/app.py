"""POST /agent-api/v1/runs/{run_id}/complete — finish a run; its knowledge access ends."""

from __future__ import annotations

from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import Response, create_app, json_response, parse_body
from agent_knowledge.turns.completion import complete_run
from agent_knowledge.turns.payloads import CompleteRunRequest

app = create_app()


@app.post("/agent-api/v1/runs/<run_id>/complete")
def complete(run_id: str) -> Response:
    request = current_request(app)
    run = request.open_run(run_id)
    return json_response(200, complete_run(request.deps, run, parse_body(request.event, CompleteRunRequest)))


lambda_handler = api_entry_point(app, request_metric="CompleteRunRequests", clients=("dynamodb",))
