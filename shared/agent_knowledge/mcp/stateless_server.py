"""MCP over Streamable HTTP, stateless: the small JSON-RPC subset two read-only tools need
(docs/DESIGN.md §13). Domain-free: the tools it serves are given to it (`Tool`); `functions/mcp`
gives it `knowledge_search` and `knowledge_read`.

Why not the official SDK's server: its Streamable HTTP transport is an ASGI application driven by
an anyio event loop and a session manager, and it brings starlette, uvicorn, anyio, httpx,
sse-starlette, jsonschema and more into the layer. Importing `mcp.server.mcpserver` with
`mcp.server.streamable_http_manager` costs about 1.2-1.5 s of CPU (this machine, mcp 2.3.0, 466
modules more than pydantic alone) before its first request, where this module adds about 10 ms to
what the search and read functions import anyway; measured in docs/DESIGN.md §13. What an
endpoint without server-to-client messages needs is one POST, one JSON-RPC message, one JSON answer:

- `initialize` (the protocol version the client asks for if it is one of `PROTOCOL_VERSIONS`,
  else the latest), `ping`, `tools/list` (one page, so any `cursor` is invalid: -32602),
  `tools/call`; notifications and responses → 202 with no body; any other method → -32601. No
  session: no `Mcp-Session-Id` is issued and one that is sent is ignored; GET (no server-sent
  stream) and DELETE (no session to end) → 405.
- A batch (a JSON array, allowed by 2025-03-26 only) → 400, -32600.

What a POST goes through, in this order:

1. `Origin`, when present, must be the API's own origin or one the deployment allows → else 403
   (the transport's DNS-rebinding rule: `mcp.origins`).
2. The caller is revalidated — bearer (401), route (404) — before any MCP processing, exactly as
   on the knowledge routes: a well-formed `tools/call` by the tool's own domain call (so a call
   costs what the plain route costs, and nothing more), anything else by `authenticate`.
3. `Content-Type` must be JSON (415); `Accept`, when present, must admit JSON (406);
   `MCP-Protocol-Version`, when present, must be one of `PROTOCOL_VERSIONS` (400; absent means
   2025-03-26, as the specification says); the body must be one strict JSON object (-32700 /
   -32600, 400).
4. The method.

A tool's arguments are the JSON body of the knowledge route the tool stands for, parsed by that
route's own request model and rules (`as_route_body`: strict types, unknown fields refused, the
same messages), once, before the call runs; arguments the route would refuse are a tool error
(`isError: true`, `invalid_request`) as the specification asks of input validation (2025-11-25),
an unknown tool or `arguments` that are no object -32602. A tool's result is the protocol's own
JSON answer: its exact bytes (`wire`, within the protocol's
byte budgets) as the text content, the same object as `structuredContent`. A protocol error of
the call — `knowledge_reference_expired`, `run_not_found`, `invalid_request`, … — is a tool
error (`isError: true`) whose text names the code, its HTTP status and what to do
(`tool_catalog.tool_error_text`), so a model reads it; only a refused bearer or route
(`AccessRefused`) is an HTTP error. HTTP errors carry a JSON-RPC error without an id, whose
`data` is the protocol's error object. Every answer is `Cache-Control: no-store`
(`runtime.http.resolve`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver
from pydantic import BaseModel

from agent_knowledge import errors, wire
from agent_knowledge.core.headers import header
from agent_knowledge.core.observability import logger
from agent_knowledge.limits import REQUEST_MAX_BODY_BYTES
from agent_knowledge.mcp.origins import origin_allowed
from agent_knowledge.mcp.tool_catalog import (
    READ_ONLY_ANNOTATIONS,
    SERVER_NAME,
    ToolSpec,
    protocol_error_text,
    refused_tokens,
    server_instructions,
    server_version,
    tool_error_text,
)
from agent_knowledge.models import ParsedBody
from agent_knowledge.runtime.http import Response, json_response, parse_body_later, raw_body, status_of

# The revisions whose Streamable HTTP transport this endpoint implements, oldest first.
PROTOCOL_VERSIONS: Final = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL_VERSION: Final = PROTOCOL_VERSIONS[-1]
# Assumed for a request without the header (the specification's rule for backwards compatibility).
DEFAULT_PROTOCOL_VERSION: Final = "2025-03-26"
VERSION_HEADER: Final = "MCP-Protocol-Version"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

FOREIGN_ORIGIN: Final = (
    "Forbidden: a page of this Origin may not call this endpoint (its own origin and the deployment's"
    " McpAllowedOrigins may; clients other than browsers send no Origin)"
)

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class Tool:
    """A tool this endpoint serves: its catalog entry, the request model of the route it stands for
    (its arguments are that route's body: `as_route_body`), the model of its answer (whose JSON
    Schema is the tool's `outputSchema`) and what runs it, given the parsed arguments."""

    spec: ToolSpec
    request: type[BaseModel]
    answer: type[BaseModel]
    run: Callable[[ParsedBody[Any]], BaseModel]


def as_route_body(arguments: dict[str, Any], model: type[ModelT]) -> ParsedBody[ModelT]:
    """A tool's arguments as the JSON body of the knowledge route the tool stands for, parsed by that
    route's own rules (`runtime.http.parse_body_later`): the same checks, the same messages."""
    return parse_body_later({"body": wire.dumps(arguments)}, model)


# -- answers ------------------------------------------------------------------------------------


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _tool_failed(tool: str, text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": tool_error_text(tool, text)}], "isError": True}


def _call_error_text(error: errors.KnowledgeError, message: str) -> str:
    """A call's protocol error as the text of its tool error, logged as the routes log it."""
    status = status_of(error)
    _log(error, status)
    return protocol_error_text(error.code, message, status)


@dataclass(frozen=True)
class _Problem:
    """Why a POST cannot be processed as it is: its HTTP status and the JSON-RPC error."""

    status: int
    code: int
    message: str
    data: Any = None
    request_id: Any = None


def _http_error(problem: _Problem, headers: dict[str, str] | None = None) -> Response:
    body = _error(problem.request_id, problem.code, problem.message, problem.data)
    return json_response(problem.status, body, headers)


def method_not_allowed() -> Response:
    """GET and DELETE: no server-sent stream, no session to end (a stateless endpoint)."""
    problem = _Problem(405, INVALID_REQUEST, "Method Not Allowed: POST one JSON-RPC message per request")
    return _http_error(problem, {"Allow": "POST"})


def register_mcp_error_handlers(app: APIGatewayHttpResolver) -> None:
    """Replace `runtime.http`'s error answers on `app` by JSON-RPC errors without an id: the
    statuses are the protocol's (`status_of`), `data` is the protocol's error object."""

    @app.exception_handler(errors.KnowledgeError)
    def _refused(error: errors.KnowledgeError) -> Response:
        status = status_of(error)
        _log(error, status)
        problem = _Problem(
            status,
            INTERNAL_ERROR if status >= 500 else INVALID_REQUEST,
            protocol_error_text(error.code, error.message, status),
            {"error": error.code, "message": error.message},
        )
        headers = {"WWW-Authenticate": 'Bearer realm="agent-api"'} if status == 401 else None
        return _http_error(problem, headers)

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response:
        request_id = getattr(app.lambda_context, "aws_request_id", "unknown")
        logger.exception("unhandled error", extra={"request_id": request_id})
        message = f"internal error (request id {request_id})"
        data = {"error": "internal_error", "message": message}
        return _http_error(_Problem(500, INTERNAL_ERROR, protocol_error_text("internal_error", message, 500), data))


def _log(error: errors.KnowledgeError, status: int) -> None:
    # As runtime/http logs the knowledge routes' refusals: context() carries what the caller is not told.
    extra = {"error_code": error.code, "status": status, **error.context()}
    if status >= 500:
        logger.warning("request failed", extra=extra)
    else:
        logger.info("request refused", extra=extra)


# -- the request --------------------------------------------------------------------------------


def _media_types(value: str) -> list[str]:
    return [part.split(";", 1)[0].strip().lower() for part in value.split(",")]


@dataclass
class _Exchange:
    """One POST, read before the caller is revalidated; what is wrong with it is kept for after."""

    version: str
    message: dict[str, Any] | None = None
    problem: _Problem | None = None

    @property
    def request_id(self) -> Any:
        return None if self.message is None else self.message.get("id")

    @classmethod
    def read(cls, event: dict[str, Any]) -> _Exchange:
        version = header(event, VERSION_HEADER)
        exchange = cls(version if version in PROTOCOL_VERSIONS else DEFAULT_PROTOCOL_VERSION)
        content_type = header(event, "content-type") or ""
        accept = header(event, "accept")
        if _media_types(content_type)[0] != "application/json":
            exchange.problem = _Problem(415, INVALID_REQUEST, "Unsupported Media Type: send application/json")
        elif accept and not {"application/json", "application/*", "*/*"} & set(_media_types(accept)):
            exchange.problem = _Problem(406, INVALID_REQUEST, "Not Acceptable: accept application/json")
        elif version is not None and version not in PROTOCOL_VERSIONS:
            supported = {"supported": list(PROTOCOL_VERSIONS), "requested": version[:64]}
            exchange.problem = _Problem(400, INVALID_REQUEST, f"Bad Request: unsupported {VERSION_HEADER}", supported)
        else:
            exchange.message, exchange.problem = _parse(event)
        return exchange


def _parse(event: dict[str, Any]) -> tuple[dict[str, Any] | None, _Problem | None]:
    try:
        data = raw_body(event, REQUEST_MAX_BODY_BYTES)
    except errors.InvalidRequest as error:
        return None, _Problem(400, PARSE_ERROR, f"Parse error: {error.message}")
    if len(data) > REQUEST_MAX_BODY_BYTES:
        return None, _Problem(400, INVALID_REQUEST, f"request body is larger than {REQUEST_MAX_BODY_BYTES // 1024} KiB")
    try:
        message = wire.loads(data.decode("utf-8"))
    except wire.JsonRejected as error:
        return None, _Problem(400, PARSE_ERROR, f"Parse error: {error}")
    except UnicodeDecodeError:
        return None, _Problem(400, PARSE_ERROR, "Parse error: the body is not UTF-8")
    except (ValueError, RecursionError):
        return None, _Problem(400, PARSE_ERROR, "Parse error: the body is not JSON")
    if isinstance(message, list):
        return None, _Problem(400, INVALID_REQUEST, "Invalid Request: batches are not supported; send one message")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None, _Problem(400, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    request_id = message.get("id")
    valid_id = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    if "method" in message:
        if not isinstance(message["method"], str) or ("id" in message and not valid_id):
            return None, _Problem(400, INVALID_REQUEST, "Invalid Request: method or id of the wrong type")
        if not isinstance(message.get("params", {}), dict):
            return None, _Problem(400, INVALID_REQUEST, "Invalid Request: params must be an object", None, request_id)
        return message, None
    if valid_id and ("result" in message or "error" in message):
        return message, None  # a response; this server never asks anything, so it is only acknowledged
    return None, _Problem(400, INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response")


# -- the server ---------------------------------------------------------------------------------


@functools.cache
def _output_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(mode="serialization")


class StatelessServer:
    """The MCP server of one route: `answer` takes one POST's API Gateway event. `allowed_origins`:
    the normalised origins allowed besides the API's own (`mcp.origins`)."""

    def __init__(
        self, route: str, tools: Sequence[Tool], about: str | None = None, allowed_origins: Collection[str] = ()
    ) -> None:
        self.route = route
        self.about = about
        self.tools = {tool.spec.name: tool for tool in tools}
        self.allowed_origins = allowed_origins

    def answer(self, event: dict[str, Any], authenticate: Callable[[], object]) -> Response:
        """The HTTP answer to one POST. `authenticate` revalidates the caller (raising `AccessRefused`);
        it is not called for a well-formed tools/call, whose tool revalidates as part of its call."""
        if not origin_allowed(event, self.allowed_origins):
            return _http_error(_Problem(403, INVALID_REQUEST, FOREIGN_ORIGIN))
        exchange = _Exchange.read(event)
        call = self._well_formed_call(exchange)
        if call is None:
            authenticate()
        headers = {VERSION_HEADER: exchange.version}
        if exchange.problem is not None:
            return _http_error(exchange.problem, headers)
        message = exchange.message
        assert message is not None
        if "method" not in message or "id" not in message:  # a notification or a response
            return Response(status_code=202, body="", headers=headers)
        if call is not None:
            result = self._run(*call)
        else:
            result = self._dispatch(message, headers)
        return json_response(200, result, headers)

    def _well_formed_call(self, exchange: _Exchange) -> tuple[Tool, ParsedBody[Any], Any] | None:
        """(tool, parsed arguments, request id) when the POST is a tools/call that will run."""
        message = exchange.message
        if exchange.problem is not None or message is None or message.get("method") != "tools/call":
            return None
        if "id" not in message:
            return None
        tool, arguments = self._tool_and_arguments(message.get("params") or {})
        if tool is None or not isinstance(arguments, dict):
            return None
        body = as_route_body(arguments, tool.request)
        if body.model is None:
            return None
        return tool, body, message["id"]

    def _tool_and_arguments(self, params: dict[str, Any]) -> tuple[Tool | None, Any]:
        name = params.get("name")
        return (self.tools.get(name) if isinstance(name, str) else None), params.get("arguments", {})

    def _run(self, tool: Tool, body: ParsedBody[Any], request_id: Any) -> dict[str, Any]:
        try:
            answer = tool.run(body)
        except errors.AccessRefused:
            raise  # the bearer or the route: an HTTP error, as before any other call
        except errors.KnowledgeError as error:
            message = error.message
            if isinstance(error, errors.ReferenceInvalid):
                message = f"{message}; {refused_tokens(bool(getattr(body.model, 'cursor', None)))}"
            return _result(request_id, _tool_failed(tool.spec.name, _call_error_text(error, message)))
        data = answer.wire() if hasattr(answer, "wire") else answer.model_dump(mode="json")
        content = [{"type": "text", "text": wire.dumps(data)}]
        return _result(request_id, {"content": content, "structuredContent": data, "isError": False})

    def _dispatch(self, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        request_id, method, params = message["id"], message["method"], message.get("params") or {}
        if method == "initialize":
            requested = params.get("protocolVersion")
            version = requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
            headers[VERSION_HEADER] = version
            return _result(request_id, self._initialize(version))
        if method == "ping":
            return _result(request_id, {})
        if method == "tools/list":
            if params.get("cursor") is not None:  # the list is one page: no cursor was ever given out
                return _error(request_id, INVALID_PARAMS, "Invalid params: unknown cursor (tools/list has one page)")
            return _result(request_id, {"tools": [self._describe(tool) for tool in self.tools.values()]})
        if method == "tools/call":
            return self._refused_call(request_id, params)
        return _error(request_id, METHOD_NOT_FOUND, "Method not found")

    def _refused_call(self, request_id: Any, params: dict[str, Any]) -> dict[str, Any]:
        """A tools/call that did not run: no such tool, or arguments its route refuses (the route's
        own `invalid_request`, as a tool error: what the tool would answer had it run)."""
        tool, arguments = self._tool_and_arguments(params)
        if tool is None:
            return _error(request_id, INVALID_PARAMS, "Unknown tool", {"tools": list(self.tools)})
        if not isinstance(arguments, dict):
            return _error(request_id, INVALID_PARAMS, "Invalid params: arguments must be an object")
        try:
            as_route_body(arguments, tool.request).get()
        except errors.InvalidRequest as error:
            return _result(request_id, _tool_failed(tool.spec.name, _call_error_text(error, error.message)))
        raise AssertionError("a well-formed call runs")  # pragma: no cover

    def _initialize(self, version: str) -> dict[str, Any]:
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": _version()},
            "instructions": server_instructions(self.route, self.about),
        }

    def _describe(self, tool: Tool) -> dict[str, Any]:
        return {
            "name": tool.spec.name,
            "description": tool.spec.description(self.route, self.about),
            "inputSchema": tool.spec.input_schema(),
            "outputSchema": _output_schema(tool.answer),
            "annotations": READ_ONLY_ANNOTATIONS,
        }


@functools.cache
def _version() -> str:
    return server_version()
