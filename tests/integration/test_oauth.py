"""OAuth resource-server mode on moto (issue 34, item 3): JWT access tokens of a loopback test
issuer on the MCP endpoint and the knowledge routes — every token rule refused with 401 and nothing
of the token in the answer, the JWKS fetched once per container and refreshed once on an unknown
key id, the token's roles feeding the document access rules, revocation on the next call, the
protected-resource metadata, and bearer-token mode without an issuer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.records import DocumentAccess
from agent_knowledge.runtime.container import reset_container_caches
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE, DEMO_TOKEN, FOREIGN_ROUTE
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.oauth import IssuerServer, claims_of, hmac_signed, issuer_server, public_pem, unsigned

METADATA = "/.well-known/oauth-protected-resource/agent-api/v1/workspaces/{route}/mcp"


@pytest.fixture
def oauth(demo, monkeypatch) -> Iterator[IssuerServer]:
    with issuer_server() as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        reset_container_caches()  # a new container: it reads the settings and fetches the keys anew
        yield server
    reset_container_caches()


def mint(server: IssuerServer, demo, **overrides: Any) -> str:
    arguments: dict[str, Any] = {"principal_id": "alice", "roles": ["member"], "tenant": "demo", "now": demo.clock()}
    arguments.update(overrides)
    issuer = arguments.pop("issuer", server.issuer)
    return issuer.mint(**arguments)[0]


def mcp_search(call, token: str, query: str = "How do I request vacation days?", route: str = DEMO_ROUTE):
    message = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "knowledge_search", "arguments": {"query": query, "limit": 3}}}  # fmt: skip
    return call(
        "mcp", with_changes(load_event("mcp-search"), route=route, body=message, authorization=f"Bearer {token}")
    )


def plain_search(call, token: str, query: str, route: str = DEMO_ROUTE):
    event = with_changes(
        load_event("search-english-query"), route=route, body={"query": query}, authorization=f"Bearer {token}"
    )
    return call("search", event)


def metadata_event(route: str = DEMO_ROUTE) -> dict[str, Any]:
    event = with_changes(load_event("mcp-get-stream"), authorization=None)
    path = METADATA.format(route=route)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["routeKey"] = event["requestContext"]["routeKey"] = "GET " + METADATA
    event["pathParameters"] = {"route": route}
    return event


def test_a_valid_token_searches_and_reads_through_mcp_and_the_plain_routes(call, demo, oauth):
    ingestor = Ingestor(demo.repositories, clock=demo.clock)
    published(
        demo.repositories,
        ingestor.put(DEMO_KB, "vacation.md", None, "# Vacation\n\nVacation days are requested in the portal.\n"),
    )
    token = mint(oauth, demo)
    found = mcp_search(call, token)
    assert found.status == 200, found.body
    hints = found.json()["result"]["structuredContent"]["hints"]
    assert hints
    plain = plain_search(call, token, "How do I request vacation days?")
    assert plain.status == 200 and [h["title"] for h in plain.json()["hints"]] == [h["title"] for h in hints]
    read = call(
        "read",
        with_changes(load_event("read-first-page"), body={"ref": hints[0]["ref"]}, authorization=f"Bearer {token}"),
    )
    assert read.status == 200 and read.json()["content"]


def test_the_tokens_roles_and_tenant_feed_the_document_access_rules(call, demo, oauth):
    ingestor = Ingestor(demo.repositories, clock=demo.clock)
    ingestor.put(DEMO_KB, "board.md", None, "# Board quokka\n\nThe quokka board minutes.\n",
                 access=DocumentAccess(allow=["role:board"]))  # fmt: skip
    ingestor.put(DEMO_KB, "acme.md", None, "# Acme quokka\n\nThe quokka plans of acme.\n",
                 access=DocumentAccess(allow=["tenant:acme"], deny=["principal:mallory"]))  # fmt: skip
    publish_rebuild(demo.repositories, DEMO_KB, vector_space=process_vector_space())

    def titles(token: str) -> set[str]:
        result = mcp_search(call, token, "quokka")
        assert result.status == 200, result.body
        return {hint["title"] for hint in result.json()["result"]["structuredContent"]["hints"]}

    assert titles(mint(oauth, demo, roles=["member"], tenant="demo")) == set()
    assert titles(mint(oauth, demo, roles=["board"], tenant="demo")) == {"Board quokka"}
    assert titles(mint(oauth, demo, roles=["board"], tenant="acme")) == {"Board quokka", "Acme quokka"}
    assert titles(mint(oauth, demo, principal_id="mallory", roles=["board"], tenant="acme")) == {"Board quokka"}


def refused_tokens(server: IssuerServer, demo) -> dict[str, str]:
    now = demo.clock()
    valid = mint(server, demo)
    stranger = dataclasses.replace(server.issuer, issuer="https://login.example.com/other")
    return {
        "wrong issuer": mint(server, demo, issuer=stranger),
        "wrong audience": mint(server, demo, issuer=dataclasses.replace(server.issuer, audience="another-api")),
        "expired": mint(server, demo, now=now - 3600, ttl_seconds=600),
        "not yet valid": mint(server, demo, nbf=int(now) + 600),
        "alg none": unsigned(valid),
        "HS256 with the public key": hmac_signed(valid, server.issuer, public_pem(server.issuer)),
        "HS256 with the JWK": hmac_signed(valid, server.issuer, json.dumps(server.issuer.public_jwk()).encode()),
        "missing subject": mint(server, demo, principal_id=""),
        "unknown client": mint(server, demo, client="nobody-we-know"),
        "malformed roles": mint(server, demo, roles=[{"role": "board"}]),
    }


@pytest.mark.parametrize(
    "rule",
    ["wrong issuer", "wrong audience", "expired", "not yet valid", "alg none", "HS256 with the public key",
     "HS256 with the JWK", "missing subject", "unknown client", "malformed roles"],
)  # fmt: skip
def test_every_token_rule_refuses_with_401_and_nothing_of_the_token(call, demo, oauth, rule):
    assert mcp_search(call, mint(oauth, demo)).status == 200  # the keys are fetched, the container warm
    token = refused_tokens(oauth, demo)[rule]
    for result in (mcp_search(call, token), plain_search(call, token, "vacation")):
        assert result.status == 401, (rule, result.body)
        metadata_url = "http://127.0.0.1:3000" + METADATA.format(route=DEMO_ROUTE)
        assert result.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        assert token not in result.body
        for value in claims_of(token).values():
            if isinstance(value, str) and len(value) > 3 and value not in {"demo"}:
                assert value not in result.body, (rule, value)
        assert oauth.issuer.kid not in result.body


def test_a_disabled_client_and_a_route_the_client_may_not_use_are_401_on_the_next_call(call, demo, oauth):
    token = mint(oauth, demo)
    assert mcp_search(call, token).status == 200
    for route in (FOREIGN_ROUTE, "no-such-route"):
        refused = mcp_search(call, token, route=route)
        assert refused.status == 401 and token not in refused.body
    admin.put_client(demo.repositories, DEMO_CLIENT, [DEMO_ROUTE], enabled=False)
    assert mcp_search(call, token).status == 401
    assert plain_search(call, token, "vacation").status == 401
    admin.put_client(demo.repositories, DEMO_CLIENT, [DEMO_ROUTE])
    assert mcp_search(call, token).status == 200
    route = demo.repositories.routes.get(DEMO_ROUTE)
    demo.repositories.routes.put(route.model_copy(update={"enabled": False}))
    disabled = mcp_search(call, token)  # a route the operator disabled: as for sessions, the same 404
    assert disabled.status == 404 and disabled.json()["error"]["data"]["error"] == "workspace_not_found"


def test_an_unknown_key_id_refreshes_the_jwks_once_then_is_refused(call, demo, oauth):
    assert mcp_search(call, mint(oauth, demo)).status == 200
    assert mcp_search(call, mint(oauth, demo)).status == 200
    assert oauth.jwks_fetches() == 1  # cached per container
    rotated = oauth.another_key()
    demo.clock.advance(60)
    assert mcp_search(call, mint(oauth, demo, issuer=rotated)).status == 401
    assert oauth.jwks_fetches() == 2  # one refresh, then refused
    assert mcp_search(call, mint(oauth, demo, issuer=rotated)).status == 401
    assert oauth.jwks_fetches() == 2  # not again right away: a flood of unknown kids costs the issuer nothing
    oauth.published.append(rotated)  # the issuer publishes its new key
    demo.clock.advance(60)
    assert mcp_search(call, mint(oauth, demo, issuer=rotated)).status == 200
    assert oauth.jwks_fetches() == 3


def test_the_protected_resource_metadata_names_the_issuer(call, demo, oauth):
    result = call("mcp", metadata_event())
    assert result.status == 200
    assert result.json() == {
        "resource": "http://127.0.0.1:3000/agent-api/v1/workspaces/demo/mcp",
        "authorization_servers": [oauth.issuer.issuer],
        "scopes_supported": [],
        "bearer_methods_supported": ["header"],
    }


def test_a_session_token_still_works_in_oauth_mode(call, demo, oauth):
    assert mcp_search(call, DEMO_TOKEN).status == 200
    assert plain_search(call, DEMO_TOKEN, "vacation").status == 200


def test_without_an_issuer_a_jwt_is_an_unknown_token_and_no_metadata_is_published(call, demo):
    with issuer_server() as server:
        token = server.issuer.mint("alice", ["member"], now=demo.clock())[0]
        refused = mcp_search(call, token)
        assert refused.status == 401 and refused.headers["WWW-Authenticate"] == 'Bearer realm="agent-api"'
        assert token not in refused.body
        assert server.fetches == []
    assert call("mcp", metadata_event()).status == 404


def complete_event(run_id: str, token: str) -> dict[str, Any]:
    event = with_changes(load_event("complete-run"), authorization=f"Bearer {token}")
    event["pathParameters"]["run_id"] = run_id
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/agent-api/v1/runs/{run_id}/complete"
    return event


def test_a_run_is_its_subjects_and_clients_across_tokens_and_nobody_elses(call, demo, oauth):
    first = mint(oauth, demo)
    turn = call("turns", with_changes(load_event("turns-on-demand"), authorization=f"Bearer {first}"))
    assert turn.status == 200, turn.body
    run_id = turn.json()["run_id"]
    demo.clock.advance(30)
    refreshed = mint(oauth, demo)  # the issuer's next token for the same user and client

    def search_in_run(token: str):
        body = {"query": "vacation", "run_id": run_id}
        return call("search", with_changes(load_event("search-run-bound"), body=body, authorization=f"Bearer {token}"))

    assert search_in_run(refreshed).status == 200
    for stranger in (mint(oauth, demo, principal_id="bob"), DEMO_TOKEN):
        refused = search_in_run(stranger)
        assert refused.status == 404 and refused.json()["error"] == "run_not_found"
        assert call("complete_run", complete_event(run_id, stranger)).status == 404
    assert call("complete_run", complete_event(run_id, refreshed)).status == 200
    admin.put_client(demo.repositories, DEMO_CLIENT, [DEMO_ROUTE], enabled=False)
    assert call("complete_run", complete_event(run_id, refreshed)).status == 401
