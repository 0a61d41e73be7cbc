"""functions/mcp in-process on moto, with the sample events of events/mcp-*.json: what the function
answers beyond the JSON-RPC rules the unit tests pin (tests/unit/test_mcp_stateless_server.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_knowledge import errors
from agent_knowledge_dev.handlers import load_event, load_function, with_changes


def tool_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return with_changes(load_event("mcp-search"), body=message)


def test_the_sample_search_answers_the_protocols_search_answer(call) -> None:  # type: ignore[no-untyped-def]
    mcp = call("mcp", load_event("mcp-search"))
    plain = call("search", load_event("search-english-query"))

    assert mcp.status == plain.status == 200
    assert mcp.headers["Cache-Control"] == "no-store"
    result = mcp.json()["result"]
    answer = result["structuredContent"]
    assert answer.keys() == plain.json().keys()
    assert [hint["title"] for hint in answer["hints"]] == [hint["title"] for hint in plain.json()["hints"]]
    assert json.loads(result["content"][0]["text"]) == answer


def test_a_missing_bearer_is_401_with_the_protocols_error_as_data(call) -> None:  # type: ignore[no-untyped-def]
    result = call("mcp", load_event("mcp-missing-bearer"))

    assert result.status == 401
    assert result.headers["WWW-Authenticate"] == 'Bearer realm="agent-api"'
    body = result.json()
    assert body["id"] is None and body["error"]["data"]["error"] == "unauthorized"
    assert body["error"]["message"].startswith("unauthorized (HTTP 401): ")


def test_storage_failing_during_a_call_is_a_tool_error_saying_retry_later(call, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def unavailable(*_: Any, **__: Any) -> Any:
        raise errors.KnowledgeUnavailable.of("document storage")

    monkeypatch.setattr(load_function("mcp"), "search_knowledge", unavailable)
    result = call("mcp", tool_call("knowledge_search", {"query": "vacation"}))

    assert result.status == 200
    text = result.json()["result"]["content"][0]["text"]
    assert result.json()["result"]["isError"] is True
    assert text.startswith("Error executing tool knowledge_search: knowledge_unavailable (HTTP 503): ")
    assert "retry later" in text


def test_a_bug_is_a_500_naming_the_request_id_and_nothing_else(call, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(load_function("mcp"), "search_knowledge", broken)
    result = call("mcp", tool_call("knowledge_search", {"query": "vacation"}))

    assert result.status == 500 and result.headers["Cache-Control"] == "no-store"
    error = result.json()["error"]
    assert error["data"]["error"] == "internal_error" and "request id" in error["message"]
    assert "secret detail" not in result.body


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_405(call, method: str) -> None:  # type: ignore[no-untyped-def]
    event = load_event("mcp-get-stream")
    event["requestContext"]["http"]["method"] = method
    event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} /agent-api/v1/workspaces/{{route}}/mcp"
    result = call("mcp", event)

    assert result.status == 405 and result.headers["Allow"] == "POST"


@pytest.mark.parametrize(
    ("tool", "route_event", "arguments"),
    [
        ("knowledge_search", "search-english-query", {"query": "vacation", "limit": "2"}),
        ("knowledge_search", "search-english-query", {"query": "vacation", "limit": True}),
        ("knowledge_search", "search-english-query", {"query": "vacation", "limit": 2.0}),
        ("knowledge_search", "search-english-query", {"query": "vacation", "colour": "red"}),
        ("knowledge_search", "search-english-query", {"query": "vacation", "limit": None}),
        ("knowledge_read", "read-first-page", {"ref": "x", "max_bytes": "4096"}),
        ("knowledge_read", "read-first-page", {"ref": "x", "page": 2}),
    ],
)
def test_tool_arguments_are_parsed_by_the_routes_own_rules(call, tool: str, route_event: str, arguments) -> None:  # type: ignore[no-untyped-def]
    # Issue 35, finding 5: these ran through MCP (coerced, or the unknown key dropped) but were 400 on
    # the plain route. The tool's refusal is the route's, word for word, as a tool error.
    plain = call(route_event.split("-")[0], with_changes(load_event(route_event), body=arguments))
    assert plain.status == 400 and plain.json()["error"] == "invalid_request"

    result = call("mcp", tool_call(tool, arguments))

    assert result.status == 200
    answer = result.json()["result"]
    assert answer["isError"] is True and "structuredContent" not in answer
    (content,) = answer["content"]
    assert content["text"].startswith(
        f"Error executing tool {tool}: invalid_request (HTTP 400): {plain.json()['message']}."
    )


def test_tools_list_with_a_cursor_it_never_gave_is_invalid_params(call) -> None:  # type: ignore[no-untyped-def]
    # Issue 35, finding 7: the list is one page (no nextCursor), so any cursor is invalid (-32602,
    # as the MCP specification says of an invalid cursor); it returned the full list before.
    listed = call("mcp", load_event("mcp-tools-list")).json()
    assert "nextCursor" not in listed["result"]
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"cursor": "junk"}}

    result = call("mcp", with_changes(load_event("mcp-tools-list"), body=message))

    assert result.status == 200
    assert result.json()["id"] == 7 and result.json()["error"]["code"] == -32602
    assert "cursor" in result.json()["error"]["message"] and "result" not in result.json()


def test_a_json_rpc_id_of_5000_digits_is_refused_for_what_it_is(call) -> None:  # type: ignore[no-untyped-def]
    # Issue 35, finding 7: refused before as "the body is not UTF-8 JSON".
    raw = '{"jsonrpc": "2.0", "id": ' + "7" * 5000 + ', "method": "ping"}'

    result = call("mcp", with_changes(load_event("mcp-tools-list"), raw_body=raw))

    assert result.status == 400
    error = result.json()["error"]
    assert error["code"] == -32700 and result.json()["id"] is None
    assert error["message"] == "Parse error: request body: an integer of more than 100 digits"
