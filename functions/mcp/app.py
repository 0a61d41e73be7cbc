"""POST /agent-api/v1/workspaces/{route}/mcp — MCP over Streamable HTTP (stateless, JSON answers):
the tools knowledge_search and knowledge_read, each call revalidated like the knowledge routes.
GET and DELETE answer 405. Transport and JSON-RPC: `agent_knowledge.mcp.stateless_server`; the
Origins a browser may call it from: `agent_knowledge.mcp.origins` (`MCP_ALLOWED_ORIGINS`, in the settings).

GET /.well-known/oauth-protected-resource/agent-api/v1/workspaces/{route}/mcp — its OAuth protected-
resource metadata (RFC 9728) in OAuth mode; 404 in bearer-token mode (`agent_knowledge.identity.oauth`)."""

from __future__ import annotations

from agent_knowledge.identity.caller import valid_route_name
from agent_knowledge.identity.oauth import METADATA_PREFIX, resource_metadata
from agent_knowledge.knowledge.read import read_knowledge
from agent_knowledge.knowledge.search import search_knowledge
from agent_knowledge.mcp.stateless_server import StatelessServer, Tool, method_not_allowed, register_mcp_error_handlers
from agent_knowledge.mcp.tool_catalog import READ, SEARCH
from agent_knowledge.models import ReadRequest, ReadResponse, SearchRequest, SearchResponse
from agent_knowledge.runtime.entry_point import api_entry_point, current_request
from agent_knowledge.runtime.http import Response, create_app, error_response, json_response

PATH = "/agent-api/v1/workspaces/<route>/mcp"
METADATA_PATH = METADATA_PREFIX + PATH

app = create_app()
register_mcp_error_handlers(app)


@app.post(PATH)
def mcp(route: str) -> Response:
    request = current_request(app)
    deps, authorization = request.deps, request.authorization
    # The routes' own operations, the tool's arguments being the request body (parsed by the
    # route's rules: `stateless_server.as_route_body`).
    server = StatelessServer(
        route,
        [
            Tool(
                SEARCH,
                SearchRequest,
                SearchResponse,
                lambda body: search_knowledge(deps, authorization, route, body).response,
            ),
            Tool(READ, ReadRequest, ReadResponse, lambda body: read_knowledge(deps, authorization, route, body)),
        ],
        allowed_origins=deps.settings.allowed_origins,
    )
    return server.answer(request.event, authenticate=lambda: request.open_workspace(route))


@app.route(PATH, method=["GET", "DELETE"])
def stream_or_session(route: str) -> Response:
    return method_not_allowed()


@app.get(METADATA_PATH)
def protected_resource_metadata(route: str) -> Response:
    request = current_request(app)
    config = request.deps.oauth()
    if config is None or not valid_route_name(route):  # bearer-token mode publishes nothing
        return error_response(404, "not_found", "no such endpoint")
    return json_response(200, resource_metadata(config, request.event, route))


lambda_handler = api_entry_point(app, request_metric="McpRequests", clients=("dynamodb", "s3", "secretsmanager"))
