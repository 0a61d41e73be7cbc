"""The stateless MCP endpoint's JSON-RPC and transport rules (`agent_knowledge.mcp.stateless_server`),
without AWS: fake tools, a fake revalidation, events built by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agent_knowledge import errors
from agent_knowledge.mcp.stateless_server import (
    DEFAULT_PROTOCOL_VERSION,
    FOREIGN_ORIGIN,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    StatelessServer,
    Tool,
    method_not_allowed,
)
from agent_knowledge.mcp.tool_catalog import GUIDANCE, READ, SEARCH
from agent_knowledge.models import ParsedBody, ReadRequest, SearchRequest
from agent_knowledge.runtime.http import Response


class Answer(BaseModel):
    echoed: dict[str, Any]


class Calls:
    """Records the revalidations and tool runs; `refuse` makes both raise."""

    def __init__(self) -> None:
        self.authenticated = 0
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.refuse: errors.KnowledgeError | None = None

    def authenticate(self) -> None:
        self.authenticated += 1
        if isinstance(self.refuse, errors.AccessRefused):
            raise self.refuse

    def tool(self, name: str):  # type: ignore[no-untyped-def]
        def run(body: ParsedBody[Any]) -> Answer:
            arguments = body.get().model_dump(exclude_unset=True)  # the route's request model
            self.runs.append((name, arguments))
            if self.refuse is not None:
                raise self.refuse
            return Answer(echoed=arguments)

        return run


@pytest.fixture
def calls() -> Calls:
    return Calls()


def post(calls: Calls, body: Any, *, raw: str | None = None, **headers: str) -> Response:
    sent = {"host": "127.0.0.1:3000", "x-forwarded-proto": "http", "content-type": "application/json"}
    sent.update({name.replace("_", "-").lower(): value for name, value in headers.items()})
    event = {
        "headers": sent,
        "body": raw if raw is not None else json.dumps(body),
        "isBase64Encoded": False,
        "requestContext": {"domainName": "127.0.0.1"},
    }
    server = StatelessServer(
        "demo",
        [
            Tool(SEARCH, SearchRequest, Answer, calls.tool(SEARCH.name)),
            Tool(READ, ReadRequest, Answer, calls.tool(READ.name)),
        ],
        allowed_origins={"http://127.0.0.1:3000"},
    )
    return server.answer(event, calls.authenticate)


def body_of(response: Response) -> Any:
    assert isinstance(response.body, str)
    return json.loads(response.body)


def request(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(name: str, arguments: Any) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments})


def test_initialize_negotiates_the_version_and_names_the_route(calls: Calls) -> None:
    asked = post(calls, request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}))
    unknown = post(calls, request("initialize", {"protocolVersion": "2024-01-01", "capabilities": {}}))

    result = body_of(asked)["result"]
    assert result["protocolVersion"] == "2025-06-18" and asked.headers["MCP-Protocol-Version"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "agent-knowledge"
    assert "'demo'" in result["instructions"] and "knowledge_search" in result["instructions"]
    assert body_of(unknown)["result"]["protocolVersion"] == LATEST_PROTOCOL_VERSION
    assert calls.authenticated == 2


def test_tools_list_advertises_the_catalog(calls: Calls) -> None:
    tools = {tool["name"]: tool for tool in body_of(post(calls, request("tools/list")))["result"]["tools"]}

    assert set(tools) == {"knowledge_search", "knowledge_read"}
    for spec in (SEARCH, READ):
        tool = tools[spec.name]
        assert tool["inputSchema"] == spec.input_schema()
        assert tool["description"] == spec.description("demo")
        assert tool["outputSchema"]["type"] == "object"
        assert tool["annotations"]["readOnlyHint"] is True
        assert not {"token", "authorization", "bearer"} & set(tool["inputSchema"]["properties"])


def test_a_well_formed_call_runs_its_tool_which_revalidates_itself(calls: Calls) -> None:
    response = post(calls, call("knowledge_read", {"ref": "r", "max_bytes": 4096}))

    assert calls.authenticated == 0  # the tool's own domain call revalidates: one revalidation, not two
    assert calls.runs == [("knowledge_read", {"ref": "r", "max_bytes": 4096})]  # unset arguments left out
    result = body_of(response)["result"]
    assert result["isError"] is False
    assert result["structuredContent"] == {"echoed": {"ref": "r", "max_bytes": 4096}}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_a_protocol_error_of_the_call_is_a_tool_error_naming_its_code(calls: Calls) -> None:
    calls.refuse = errors.ReferenceExpired()
    response = post(calls, call("knowledge_read", {"ref": "r"}))

    assert response.status_code == 200
    result = body_of(response)["result"]
    assert result["isError"] is True and "structuredContent" not in result
    (content,) = result["content"]
    assert content["text"] == (
        "Error executing tool knowledge_read: knowledge_reference_expired (HTTP 410): "
        f"{errors.ReferenceExpired.default_message}. What to do: {GUIDANCE['knowledge_reference_expired']}"
    )


@pytest.mark.parametrize("refusal", [errors.Unauthorized(), errors.WorkspaceNotFound()])
def test_a_refused_bearer_or_route_is_never_a_tool_result(calls: Calls, refusal: errors.AccessRefused) -> None:
    calls.refuse = refusal
    with pytest.raises(type(refusal)):  # → HTTP 401/404 by the function's error handlers
        post(calls, call("knowledge_search", {"query": "leave"}))
    with pytest.raises(type(refusal)):
        post(calls, request("tools/list"))


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        ("{not json", 400, PARSE_ERROR),
        ('{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', 400, PARSE_ERROR),  # strict JSON
        ('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', 400, INVALID_REQUEST),  # a batch
        ('"ping"', 400, INVALID_REQUEST),
        ('{"jsonrpc": "1.0", "id": 1, "method": "ping"}', 400, INVALID_REQUEST),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', 400, INVALID_REQUEST),
        ('{"jsonrpc": "2.0", "id": 1}', 400, INVALID_REQUEST),
        ("", 400, PARSE_ERROR),
    ],
)
def test_what_is_not_one_json_rpc_message_is_refused_after_revalidation(
    calls: Calls, raw: str, status: int, code: int
) -> None:
    response = post(calls, None, raw=raw)

    assert (response.status_code, body_of(response)["error"]["code"]) == (status, code)
    assert body_of(response)["id"] is None
    assert calls.authenticated == 1 and calls.runs == []


def test_a_bad_bearer_wins_over_a_bad_body(calls: Calls) -> None:
    calls.refuse = errors.Unauthorized()
    with pytest.raises(errors.Unauthorized):
        post(calls, None, raw="{not json")


def test_unknown_methods_tools_and_arguments(calls: Calls) -> None:
    unknown_method = body_of(post(calls, request("resources/list", request_id="a")))
    unknown_tool = body_of(post(calls, call("knowledge_delete", {})))
    not_an_object = body_of(post(calls, call("knowledge_search", ["leave"])))
    refused = body_of(post(calls, call("knowledge_search", {"query": "leave", "limit": 4})))

    assert (unknown_method["id"], unknown_method["error"]["code"]) == ("a", METHOD_NOT_FOUND)
    assert unknown_tool["error"]["code"] == INVALID_PARAMS
    assert not_an_object["error"]["code"] == INVALID_PARAMS
    text = refused["result"]["content"][0]["text"]
    assert refused["result"]["isError"] is True
    assert text.startswith("Error executing tool knowledge_search: invalid_request (HTTP 400): limit: ")
    assert text.endswith(f"What to do: {GUIDANCE['invalid_request']}")
    assert calls.runs == [] and calls.authenticated == 4


def test_notifications_and_responses_are_accepted_without_a_body(calls: Calls) -> None:
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 5, "result": {}},
    ):
        response = post(calls, message)
        assert (response.status_code, response.body) == (202, "")
    assert calls.authenticated == 3


def test_ping(calls: Calls) -> None:
    assert body_of(post(calls, request("ping", request_id=9))) == {"jsonrpc": "2.0", "id": 9, "result": {}}


def test_a_foreign_origin_is_refused_before_anything_else(calls: Calls) -> None:
    calls.refuse = errors.Unauthorized()
    response = post(calls, call("knowledge_search", {"query": "leave"}), origin="https://attacker.example")

    assert response.status_code == 403 and body_of(response)["error"]["code"] == INVALID_REQUEST
    assert body_of(response)["error"]["message"] == FOREIGN_ORIGIN
    assert calls.authenticated == 0 and calls.runs == []


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://127.0.0.1:3000", 200),  # allowed_origins
        ("https://127.0.0.1", 200),  # the API's own origin (requestContext.domainName)
        ("http://localhost:3000", 403),
        ("http://127.0.0.1:3001", 403),
        # The Host header is the attacker's to choose: naming it in Origin too opens nothing.
        ("http://evil.example:3000", 403),
    ],
)
def test_the_server_applies_the_origin_rule(calls: Calls, origin: str, status: int) -> None:
    response = post(calls, request("ping"), origin=origin, host="evil.example:3000")
    assert response.status_code == status


def test_the_protocol_version_header_is_answered_and_checked(calls: Calls) -> None:
    absent = post(calls, request("ping"))
    known = post(calls, request("ping"), mcp_protocol_version="2025-06-18")
    unknown = post(calls, request("ping"), mcp_protocol_version="2026-07-28")

    assert absent.headers["MCP-Protocol-Version"] == DEFAULT_PROTOCOL_VERSION
    assert known.headers["MCP-Protocol-Version"] == "2025-06-18"
    assert unknown.status_code == 400
    error = body_of(unknown)["error"]
    assert error["code"] == INVALID_REQUEST and error["data"]["requested"] == "2026-07-28"
    assert LATEST_PROTOCOL_VERSION in error["data"]["supported"]
    assert calls.authenticated == 3


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"content_type": "text/plain"}, 415),
        ({"content_type": "application/json; charset=utf-8"}, 200),
        ({"accept": "text/event-stream"}, 406),
        ({"accept": "application/json, text/event-stream"}, 200),
        ({"accept": "*/*"}, 200),
    ],
)
def test_content_type_and_accept(calls: Calls, headers: dict[str, str], status: int) -> None:
    assert post(calls, request("ping"), **headers).status_code == status


def test_get_and_delete_are_not_allowed_on_a_stateless_endpoint() -> None:
    response = method_not_allowed()
    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    assert body_of(response)["error"]["code"] == INVALID_REQUEST


def test_no_session_is_ever_issued(calls: Calls) -> None:
    response = post(calls, request("initialize", {"protocolVersion": "2025-11-25"}), mcp_session_id="abc")
    assert not {name.lower() for name in response.headers} & {"mcp-session-id"}
