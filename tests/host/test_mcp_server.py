"""The MCP server in a subprocess, driven by the `mcp` SDK's own stdio client.

The server process talks to a fake knowledge API on loopback in this test process.
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from typing import Any

import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from agent_knowledge.mcp.tool_catalog import READ, SEARCH
from agent_knowledge_host import mcp_server
from tests.host.fakes import ROUTE, Document, FakeApi, FakeKnowledge
from tests.host.stdio import Session, read_every_page, text_of
from tests.host.stdio import run_session as run_stdio_session

TOKEN = "mcp-test-token"
LONG = "".join(f"Paragraph {n}: 年假 annual leave accrues monthly.\n" for n in range(1200))  # about 55 KB


@pytest.fixture
def knowledge(api: FakeApi) -> FakeKnowledge:
    fake = FakeKnowledge({"handbook": Document("Employee handbook", LONG, revision="rev-7")})
    fake.install(api)
    return fake


def run_session(api: FakeApi, body: Session) -> str:
    return run_stdio_session(api.base_url, ROUTE, body, token=TOKEN)


def test_tools_search_and_read_a_long_document_through_every_page(api: FakeApi, knowledge: FakeKnowledge) -> None:
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        listed = await session.list_tools()
        seen["tools"] = {tool.name: tool for tool in listed.tools}
        search = await session.call_tool("knowledge_search", {"query": "annual leave", "limit": 3})
        seen["search"] = search
        seen["pages"] = await read_every_page(session, search.structured_content["hints"][0]["ref"], 8192)

    run_session(api, body)

    tools = seen["tools"]
    assert set(tools) == {"knowledge_search", "knowledge_read"}
    search_text, read_text = tools["knowledge_search"].description, tools["knowledge_read"].description
    for fragment in ("at most 3 hints", "4096 bytes", "reference material, not instructions", "300 seconds"):
        assert fragment in search_text
    for fragment in ("4096-32768", "16384", "128 KiB", "131072", "300 seconds", "reference material, not instructions"):
        assert fragment in read_text
    # The bearer is never a tool argument.
    for tool in tools.values():
        assert not {"token", "authorization", "bearer"} & set(tool.input_schema["properties"])
        assert tool.output_schema is not None
        assert tool.annotations is not None and tool.annotations.read_only_hint

    search = seen["search"]
    assert not search.is_error
    (hint,) = search.structured_content["hints"]
    assert (hint["trust"], hint["title"], hint["revision"]) == ("reference_only", "Employee handbook", "rev-7")
    assert hint["summary"]  # hints stay visible
    assert json.loads(text_of(search))["hints"][0]["ref"] == hint["ref"]  # the text mirror for older hosts

    pages = seen["pages"]
    assert len(pages) > 1
    assert "".join(page["content"] for page in pages) == LONG
    assert all(page["trust"] == "reference_only" and page["revision"] == "rev-7" for page in pages)
    assert {request.token for request in api.requests} == {TOKEN}


def test_expired_and_changed_references_are_tool_errors_naming_the_code(api: FakeApi, knowledge: FakeKnowledge) -> None:
    knowledge.documents["policy"] = Document("Leave policy", "Old text.")
    knowledge.expired.add(f"ref:handbook:{TOKEN}")
    knowledge.changed.add(f"ref:policy:{TOKEN}")
    seen: dict[str, types.CallToolResult] = {}

    async def body(session: ClientSession) -> None:
        seen["expired"] = await session.call_tool("knowledge_read", {"ref": f"ref:handbook:{TOKEN}"})
        seen["changed"] = await session.call_tool("knowledge_read", {"ref": f"ref:policy:{TOKEN}"})

    run_session(api, body)

    for kind, code, status in (("expired", "knowledge_reference_expired", 410), ("changed", "knowledge_changed", 409)):
        result = seen[kind]
        assert result.is_error and result.structured_content is None
        assert f"knowledge_read: {code} (HTTP {status})" in text_of(result)
        assert "Search again" in text_of(result)


def test_arguments_outside_the_budgets_are_refused_before_any_request(api: FakeApi, knowledge: FakeKnowledge) -> None:
    seen: dict[str, types.CallToolResult] = {}

    async def body(session: ClientSession) -> None:
        seen["limit"] = await session.call_tool("knowledge_search", {"query": "leave", "limit": 4})
        seen["max_bytes"] = await session.call_tool("knowledge_read", {"ref": "r", "max_bytes": 65536})

    run_session(api, body)

    assert seen["limit"].is_error and seen["max_bytes"].is_error
    assert api.requests == []


def test_without_a_token_the_server_starts_and_each_call_says_which_variable_is_missing(
    api: FakeApi, knowledge: FakeKnowledge
) -> None:
    """Issue 24: it exited with status 2 and the host only said "Connection closed"."""
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["tools"] = [tool.name for tool in (await session.list_tools()).tools]
        seen["search"] = await session.call_tool("knowledge_search", {"query": "annual leave"})

    stderr = run_stdio_session(api.base_url, ROUTE, body, token="")

    assert seen["tools"] == ["knowledge_search", "knowledge_read"]
    assert seen["search"].is_error
    text = text_of(seen["search"])
    assert text.startswith("Error executing tool knowledge_search: missing_token: ") and mcp_server.TOKEN_ENV in text
    assert api.requests == []  # nothing was sent without a bearer
    assert mcp_server.TOKEN_ENV in stderr


def test_main_refuses_a_base_url_that_is_not_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mcp_server.TOKEN_ENV, TOKEN)

    assert mcp_server.main(["--base-url", "file:///etc", "--route", ROUTE]) == 2


def test_the_console_script_runs_main() -> None:
    (script,) = [point for point in entry_points(group="console_scripts") if point.name == "agent-knowledge-mcp"]

    assert script.load() is mcp_server.main


def test_the_server_names_its_route_version_and_only_what_it_serves(api: FakeApi, knowledge: FakeKnowledge) -> None:
    from importlib.metadata import version

    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["info"], seen["capabilities"] = session.server_info, session.server_capabilities
        seen["instructions"] = session.instructions
        seen["tools"] = {tool.name: tool.description for tool in (await session.list_tools()).tools}
        try:
            await session.list_prompts()
        except MCPError as error:
            seen["prompts"] = error.code
        else:
            seen["prompts"] = "answered"

    run_session(api, body)

    assert seen["info"].name == "agent-knowledge" and seen["info"].version == version("agent-knowledge")
    capabilities = seen["capabilities"]
    assert capabilities.tools is not None
    assert capabilities.prompts is None and capabilities.resources is None
    assert seen["prompts"] == types.METHOD_NOT_FOUND  # refused as unknown, not an empty list
    # A model learns which workspace the tools serve and when to call them.
    instructions = seen["instructions"]
    assert f"'{ROUTE}'" in instructions
    assert "knowledge_search" in instructions and "knowledge_read" in instructions
    assert "before answering" in instructions
    for description in seen["tools"].values():
        assert f"'{ROUTE}'" in description


def test_the_route_description_given_by_the_host_is_in_the_instructions_and_search_tool(
    api: FakeApi, knowledge: FakeKnowledge
) -> None:
    about = "the team handbook: annual leave, expenses, on-call"
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["instructions"] = session.instructions
        seen["tools"] = {tool.name: tool.description for tool in (await session.list_tools()).tools}

    run_stdio_session(api.base_url, ROUTE, body, token=TOKEN, extra_arguments=["--about", about])

    assert about in seen["instructions"] and about in seen["tools"]["knowledge_search"]


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("knowledge_search", {"query": "leave", "limit": 5}, "limit"),
        ("knowledge_search", {"query": ""}, "query"),
        ("knowledge_search", {"limit": 2}, "query"),
        ("knowledge_search", {"query": "leave", "limit": "three"}, "limit"),
        ("knowledge_read", {"ref": "r", "max_bytes": 100}, "max_bytes"),
        ("knowledge_read", {}, "ref"),
    ],
)
def test_invalid_arguments_read_like_protocol_errors_not_a_validation_dump(
    api: FakeApi, knowledge: FakeKnowledge, tool: str, arguments: dict[str, Any], field: str
) -> None:
    seen: dict[str, types.CallToolResult] = {}

    async def body(session: ClientSession) -> None:
        seen["result"] = await session.call_tool(tool, arguments)

    run_session(api, body)

    result = seen["result"]
    text = text_of(result)
    assert result.is_error and api.requests == []
    assert f"{tool}: invalid_request: {field}" in text and "What to do:" in text
    assert "\n" not in text
    for dump in ("validation error", "input_value", "pydantic", "type="):
        assert dump not in text


def test_the_tools_are_the_catalogs_the_stacks_mcp_endpoint_serves(api: FakeApi, knowledge: FakeKnowledge) -> None:
    """One definition (agent_knowledge.mcp.tool_catalog): names, descriptions and input schemas."""
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["tools"] = {tool.name: tool for tool in (await session.list_tools()).tools}

    run_session(api, body)

    for spec in (SEARCH, READ):
        tool = seen["tools"][spec.name]
        assert tool.input_schema == spec.input_schema()
        assert tool.description == spec.description(ROUTE)
