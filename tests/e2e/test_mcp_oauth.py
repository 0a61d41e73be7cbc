"""OAuth resource-server mode end to end (issue 34, item 3): `agent-knowledge serve --oauth` as the
test issuer, `agent-knowledge token issue` minting an access token, and the official `mcp` SDK's
Streamable HTTP client searching and reading with it over real HTTP on loopback; the 401 that
points at the protected-resource metadata, and the metadata, discovery document and JWKS a client
follows from there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.client.session import ClientSession

from agent_knowledge_dev.demo import DEMO_ROUTE, FOREIGN_ROUTE, SAMPLE_DOCS
from agent_knowledge_dev.oauth_issuer import KEY_FILE
from tests.e2e.test_mcp_http import mcp_url, post, refused_initialize, run_session
from tests.host.stdio import read_every_page
from tests.support.local_api import ServedApi, start_server

SECURITY_BASICS = (SAMPLE_DOCS / "security" / "security-basics.md").read_text(encoding="utf-8")
METADATA = "/.well-known/oauth-protected-resource/agent-api/v1/workspaces/{route}/mcp"


@pytest.fixture(scope="module")
def oauth_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    directory = tmp_path_factory.mktemp("serve-oauth")
    api = start_server(
        directory / "state", directory / "serve.out", serve_options=("--oauth", "--embedding-provider", "none")
    )
    try:
        yield api
    finally:
        status = api.stop()
    assert status == 0, api.output_text()
    assert not (directory / "state" / KEY_FILE).exists()  # the signing key goes with the serve


def issue(api: ServedApi, *arguments: str) -> dict[str, Any]:
    done = api.cli("token", "issue", *arguments)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_sdk_client_searches_and_reads_with_an_access_token(oauth_api: ServedApi) -> None:
    issued = issue(oauth_api, "--principal-id", "alice", "--role", "member", "--tenant", "demo", "--route", DEMO_ROUTE)
    assert issued["token_type"] == "Bearer" and issued["access_token"].count(".") == 2
    assert issued["mcp_urls"] == {DEMO_ROUTE: mcp_url(oauth_api.base_url)}
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["tools"] = {tool.name for tool in (await session.list_tools()).tools}
        search = await session.call_tool("knowledge_search", {"query": "security basics for every colleague"})
        seen["search"] = search
        ref = next(hint["ref"] for hint in search.structured_content["hints"] if hint["title"] == "Security basics")
        seen["pages"] = await read_every_page(session, ref, 4096)

    run_session(mcp_url(oauth_api.base_url), body, token=issued["access_token"])

    assert seen["tools"] == {"knowledge_search", "knowledge_read"}
    assert not seen["search"].is_error
    assert "".join(page["content"] for page in seen["pages"]) == SECURITY_BASICS


def test_a_401_points_at_the_metadata_which_points_at_the_issuer_and_its_keys(oauth_api: ServedApi) -> None:
    refused = post(oauth_api, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, token=None)
    metadata_url = oauth_api.base_url + METADATA.format(route=DEMO_ROUTE)
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    metadata = oauth_api.request("GET", METADATA.format(route=DEMO_ROUTE), token=None)
    assert metadata.status == 200
    document = metadata.json()
    assert document["resource"] == mcp_url(oauth_api.base_url)
    assert document["bearer_methods_supported"] == ["header"]
    (issuer,) = document["authorization_servers"]
    discovery = oauth_api.request(
        "GET", issuer.removeprefix(oauth_api.base_url) + "/.well-known/openid-configuration", token=None
    )
    assert discovery.status == 200 and discovery.json()["issuer"] == issuer
    keys = oauth_api.request("GET", discovery.json()["jwks_uri"].removeprefix(oauth_api.base_url), token=None)
    assert keys.status == 200 and [key["kty"] for key in keys.json()["keys"]] == ["EC"]
    assert "d" not in keys.json()["keys"][0]  # the public half only


def test_a_token_for_a_route_its_client_may_not_use_is_refused(oauth_api: ServedApi) -> None:
    token = issue(oauth_api, "--principal-id", "alice")["access_token"]
    error = refused_initialize(mcp_url(oauth_api.base_url, FOREIGN_ROUTE), token=token)
    assert "401" in str(error) or "unauthorized" in str(error)
    refused = oauth_api.cli("token", "issue", "--principal-id", "alice", "--route", FOREIGN_ROUTE)
    assert refused.returncode == 1 and "may not use route(s) payroll" in refused.stderr


def test_the_session_token_still_works_beside_oauth(oauth_api: ServedApi) -> None:
    reply = oauth_api.search({"query": "security basics"})
    assert reply.status == 200 and reply.json()["hints"]
