"""A real `agent-knowledge serve` refuses what a DNS-rebinding page sends (issue 34): a `Host` that
is not a loopback name with the server's port, on every route; on the MCP route, an `Origin` that
is not one of the server's loopback origins, whichever loopback name the request is addressed to.

The attack: a page of evil.example, whose DNS the attacker points at 127.0.0.1 after it loaded,
calls `http://evil.example:PORT/...` from the victim's browser. The request reaches the local server
with `Host: evil.example:PORT` and `Origin: http://evil.example:PORT` (so a rule that compares
Origin with Host lets it through), and with the demo bearer, which the README prints.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agent_knowledge_dev.demo import DEMO_ROUTE
from agent_knowledge_dev.gateway import LOOPBACK_NAMES, loopback_origins
from agent_knowledge_dev.template import function_routes
from tests.support.local_api import Reply, ServedApi

MCP = f"/agent-api/v1/workspaces/{DEMO_ROUTE}/mcp"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
SEARCH_TOOL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "knowledge_search", "arguments": {"query": "vacation"}},
}


def mcp(api: ServedApi, message: Any, **headers: str) -> Reply:
    sent = {"Accept": "application/json, text/event-stream", **headers}
    return api.request("POST", MCP, message, headers=sent)


def rebinding(api: ServedApi) -> dict[str, str]:
    return {"Host": f"evil.example:{api.port}", "Origin": f"http://evil.example:{api.port}"}


def assert_refused_host(reply: Reply, port: int) -> None:
    assert reply.status == 403, reply.body
    body = reply.json()
    assert body["error"] == "forbidden"
    assert f"localhost, 127.0.0.1 or [::1] on port {port}" in body["message"]
    assert reply.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("route", function_routes(), ids=lambda route: f"{route.method} {route.path}")
def test_a_foreign_host_is_refused_on_every_route(lexical_local_api: ServedApi, route: Any) -> None:
    path = re.sub(r"\{run_id\}", "run-1", route.path.replace("{route}", DEMO_ROUTE))
    reply = lexical_local_api.request(
        route.method, path, {}, headers={"Host": f"evil.example:{lexical_local_api.port}"}
    )
    assert_refused_host(reply, lexical_local_api.port)


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "evil.example", "localhost:{other}", "localhost", "127.0.0.1.nip.io:{port}"],
)
def test_a_host_that_is_not_a_loopback_name_with_the_port_is_refused(lexical_local_api: ServedApi, host: str) -> None:
    port = lexical_local_api.port
    sent = host.format(port=port, other=port + 1)
    assert_refused_host(lexical_local_api.capabilities(headers={"Host": sent}), port)
    assert_refused_host(lexical_local_api.request("GET", "/nowhere", headers={"Host": sent}), port)


def test_a_rebinding_request_with_the_demo_token_reads_nothing(lexical_local_api: ServedApi) -> None:
    api, attack = lexical_local_api, rebinding(lexical_local_api)
    # What the same requests get when addressed to the server by its own name: knowledge.
    found = api.search({"query": "vacation"})
    assert found.status == 200 and found.json()["hints"]
    ref = found.json()["hints"][0]["ref"]
    assert mcp(api, SEARCH_TOOL).json()["result"]["structuredContent"]["hints"]

    refused = [
        api.capabilities(headers=attack),
        api.search({"query": "vacation"}, headers=attack),
        api.read({"ref": ref}, headers=attack),
        mcp(api, SEARCH_TOOL, **attack),
        mcp(api, PING, **attack),
    ]
    for reply in refused:
        assert_refused_host(reply, api.port)
        assert set(reply.json()) == {"error", "message"}  # no hint, no document, no workspace detail
    assert ref not in json.dumps([reply.json() for reply in refused])


@pytest.mark.parametrize("name", LOOPBACK_NAMES)
def test_every_loopback_origin_is_accepted_whichever_loopback_name_addresses_the_server(
    lexical_local_api: ServedApi, name: str
) -> None:
    host = f"{name}:{lexical_local_api.port}"
    for origin in loopback_origins(lexical_local_api.port):
        reply = mcp(lexical_local_api, PING, Host=host, Origin=origin)
        assert (reply.status, reply.json().get("result")) == (200, {}), (host, origin, reply.body)
    assert mcp(lexical_local_api, PING, Host=host).status == 200  # no Origin: not a browser


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example:{port}",
        "http://localhost:{other}",
        "https://localhost:{port}",
        "http://127.0.0.1",
        "null",
        "http://localhost:{port}/",
    ],
)
def test_any_other_origin_is_refused_on_the_mcp_route(lexical_local_api: ServedApi, origin: str) -> None:
    port = lexical_local_api.port
    reply = mcp(lexical_local_api, PING, Host=f"127.0.0.1:{port}", Origin=origin.format(port=port, other=port + 1))
    assert reply.status == 403
    assert reply.json()["error"]["message"].startswith("Forbidden: a page of this Origin may not call this endpoint")
