"""The stack's MCP endpoint (`POST /agent-api/v1/workspaces/{route}/mcp`) driven by the official
`mcp` SDK's Streamable HTTP client over real HTTP on loopback (issue 28).

Most tests talk to a real `agent-knowledge serve` (the module's `local_api`); the expiry test runs
the same local server in-process, in front of the demo stack with a clock it moves by hand, since
a reference lives 300 s.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent_knowledge.mcp.tool_catalog import GUIDANCE, READ, SEARCH
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE, DEMO_TOKEN, FOREIGN_ROUTE, SAMPLE_DOCS
from agent_knowledge_dev.functions import load_handler
from agent_knowledge_dev.gateway import Gateway
from agent_knowledge_dev.lambda_context import LambdaContext
from agent_knowledge_dev.server import ApiServer
from agent_knowledge_dev.template import FunctionRoute, function_routes
from tests.host.stdio import read_every_page, text_of
from tests.support.knowledge import put_documents
from tests.support.local_api import ServedApi

Session = Callable[[ClientSession], Awaitable[None]]
SECURITY_BASICS = (SAMPLE_DOCS / "security" / "security-basics.md").read_text(encoding="utf-8")
PATH = "/agent-api/v1/workspaces/{route}/mcp"


def mcp_url(base_url: str, route: str = DEMO_ROUTE) -> str:
    return base_url + PATH.format(route=route)


def run_session(url: str, body: Session, token: str = DEMO_TOKEN) -> None:
    """Connect the SDK's Streamable HTTP client with the bearer, initialize, run `body`."""

    async def main() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await body(session)

    anyio.run(main)


def refused_initialize(url: str, token: str = DEMO_TOKEN) -> MCPError:
    """What `initialize` raises when the endpoint refuses the connection."""
    raised: list[MCPError] = []

    async def main() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    try:
                        await session.initialize()
                    except MCPError as error:
                        raised.append(error)

    anyio.run(main)
    (error,) = raised
    return error


def post(api: ServedApi, message: Any, route: str = DEMO_ROUTE, **options: Any) -> Any:
    headers = {"Accept": "application/json, text/event-stream", **options.pop("headers", {})}
    return api.request("POST", PATH.format(route=route), message, headers=headers, **options)


def test_initialize_list_tools_search_and_read_every_page(local_api: ServedApi) -> None:
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["info"], seen["instructions"] = session.server_info, session.instructions
        seen["capabilities"] = session.server_capabilities
        seen["tools"] = {tool.name: tool for tool in (await session.list_tools()).tools}
        search = await session.call_tool("knowledge_search", {"query": "security basics for every colleague"})
        seen["search"] = search
        ref = next(hint["ref"] for hint in search.structured_content["hints"] if hint["title"] == "Security basics")
        seen["pages"] = await read_every_page(session, ref, 4096)

    run_session(mcp_url(local_api.base_url), body)

    assert seen["info"].name == "agent-knowledge"
    assert f"'{DEMO_ROUTE}'" in seen["instructions"]
    assert seen["capabilities"].tools is not None and seen["capabilities"].prompts is None
    tools = seen["tools"]
    assert set(tools) == {"knowledge_search", "knowledge_read"}
    for spec in (SEARCH, READ):  # one definition: the catalog the stdio server advertises too
        assert tools[spec.name].input_schema == spec.input_schema()
        assert tools[spec.name].description == spec.description(DEMO_ROUTE)
        assert tools[spec.name].output_schema is not None
        assert tools[spec.name].annotations is not None and tools[spec.name].annotations.read_only_hint

    search = seen["search"]
    assert not search.is_error
    answer = search.structured_content
    assert answer["schema_version"] == "bailing.agent-knowledge-search.v1" and answer["trust"] == "reference_only"
    # The tool result is the protocol's answer, its exact bytes within the 4096-byte budget.
    assert json.loads(text_of(search)) == answer
    assert len(text_of(search).encode("utf-8")) <= 4096

    pages = seen["pages"]
    assert len(pages) >= 2
    assert all(len(json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()) <= 4096 for page in pages)
    assert "".join(page["content"] for page in pages) == SECURITY_BASICS


def test_the_sdk_client_in_auto_mode_falls_back_to_the_initialize_handshake(local_api: ServedApi) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {DEMO_TOKEN}"}, timeout=30) as http:
            async with Client(streamable_http_client(mcp_url(local_api.base_url), http_client=http)) as client:
                seen["version"] = client.session.protocol_version
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                seen["search"] = await client.call_tool("knowledge_search", {"query": "vacation"})

    anyio.run(main)

    assert seen["version"] == "2025-11-25"
    assert sorted(seen["tools"]) == ["knowledge_read", "knowledge_search"]
    assert not seen["search"].is_error and seen["search"].structured_content["hints"]


def test_a_bad_bearer_is_401_before_any_mcp_processing(local_api: ServedApi) -> None:
    error = refused_initialize(mcp_url(local_api.base_url), token="not-a-session-token-0123456789")
    assert error.message.startswith("unauthorized (HTTP 401): ")

    for token in ("not-a-session-token-0123456789", None):
        reply = post(local_api, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=token)
        assert reply.status == 401 and reply.headers["www-authenticate"].startswith("Bearer")
        assert reply.headers["cache-control"] == "no-store"
        assert reply.json()["error"]["data"]["error"] == "unauthorized"
    # Even a body that is not JSON at all: the bearer is checked first.
    reply = local_api.request(
        "POST", PATH.format(route=DEMO_ROUTE), raw=b"{oops", token=None, headers={"Content-Type": "application/json"}
    )
    assert reply.status == 401


def test_a_route_the_session_may_not_use_is_404_like_a_route_that_does_not_exist(local_api: ServedApi) -> None:
    for route in (FOREIGN_ROUTE, "no-such-route"):
        error = refused_initialize(mcp_url(local_api.base_url, route))
        assert error.message.startswith("workspace_not_found (HTTP 404): ")
        reply = post(local_api, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, route=route)
        assert reply.status == 404 and reply.json()["error"]["data"]["error"] == "workspace_not_found"


def test_bad_refs_and_arguments_are_tool_errors_naming_the_code(local_api: ServedApi) -> None:
    seen: dict[str, types.CallToolResult] = {}

    async def body(session: ClientSession) -> None:
        seen["garbage"] = await session.call_tool("knowledge_read", {"ref": "garbage"})
        seen["blank"] = await session.call_tool("knowledge_search", {"query": "   "})
        seen["limit"] = await session.call_tool("knowledge_search", {"query": "vacation", "limit": 4})
        seen["run"] = await session.call_tool("knowledge_search", {"query": "vacation", "run_id": "run_nobody"})

    run_session(mcp_url(local_api.base_url), body)

    expected = {
        "garbage": "Error executing tool knowledge_read: knowledge_reference_invalid (HTTP 400): ",
        "blank": "Error executing tool knowledge_search: invalid_request (HTTP 400): query: ",
        "limit": "Error executing tool knowledge_search: invalid_request (HTTP 400): limit: ",  # the route's rules
        "run": "Error executing tool knowledge_search: run_not_found (HTTP 404): ",
    }
    for name, start in expected.items():
        result = seen[name]
        assert result.is_error and result.structured_content is None, name
        assert text_of(result).startswith(start), text_of(result)
    assert text_of(seen["garbage"]).endswith(GUIDANCE["knowledge_reference_invalid"])


def test_the_transport_rules(local_api: ServedApi) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}

    answered = post(local_api, initialize)
    assert answered.status == 200 and answered.headers["mcp-protocol-version"] == "2025-06-18"
    assert "mcp-session-id" not in answered.headers  # stateless: no session is ever issued
    notified = post(local_api, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (notified.status, notified.body) == (202, b"")
    for method in ("GET", "DELETE"):
        refused = local_api.request(method, PATH.format(route=DEMO_ROUTE))
        assert refused.status == 405 and refused.headers["allow"] == "POST"
    assert post(local_api, ping, headers={"Origin": "https://attacker.example"}).status == 403
    assert post(local_api, ping, headers={"Origin": local_api.base_url}).status == 200
    assert post(local_api, ping, headers={"MCP-Protocol-Version": "1999-01-01"}).status == 400
    assert post(local_api, [ping]).status == 400  # no batches
    for reply in (answered, notified, refused):
        assert reply.headers["cache-control"] == "no-store"


# -- expiry, with a clock moved by hand ---------------------------------------------------------


@pytest.fixture
def clocked_api(demo: Any) -> Iterator[str]:
    """The local server in this process, in front of the demo stack, the functions on its clock."""
    put_documents(
        demo.repositories, DEMO_KB, {"hr/vacation.md": ("Vacation", "# Vacation\n\nAsk early.\n")}, demo.clock()
    )
    deps = demo.dependencies()

    def invoke(route: FunctionRoute, event: dict[str, Any], request_id: str) -> dict[str, Any]:
        handler: Any = load_handler(route)  # the handlers' own signature: (event, context, deps=None)
        return handler(event, LambdaContext.for_function(route.function, request_id), deps=deps)

    api = ApiServer(("127.0.0.1", 0), Gateway(function_routes(), invoke), quiet=True)
    thread = threading.Thread(target=api.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield api.base_url
    finally:
        api.shutdown()
        api.server_close()
        thread.join(timeout=10)


def test_an_expired_ref_is_a_tool_error_saying_search_again(clocked_api: str, demo: Any) -> None:
    seen: dict[str, types.CallToolResult] = {}

    async def body(session: ClientSession) -> None:
        search = await session.call_tool("knowledge_search", {"query": "vacation"})
        ref = search.structured_content["hints"][0]["ref"]
        seen["fresh"] = await session.call_tool("knowledge_read", {"ref": ref, "max_bytes": 4096})
        demo.clock.advance(301)
        seen["expired"] = await session.call_tool("knowledge_read", {"ref": ref, "max_bytes": 4096})

    run_session(mcp_url(clocked_api), body)

    assert not seen["fresh"].is_error
    expired = seen["expired"]
    assert expired.is_error
    assert text_of(expired).startswith("Error executing tool knowledge_read: knowledge_reference_expired (HTTP 410): ")
    assert "Search again" in text_of(expired)
