"""GET capabilities through the handler, against moto tables built from template.yaml."""

from __future__ import annotations

import pytest

from agent_knowledge.records import AgentClientSettings, AudiencePolicy, KnowledgeConfig, Principal, SourceConfig
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE, DEMO_TOKEN, FOREIGN_ROUTE
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support import protocol

VALID = "capabilities-valid-bearer"
NOT_FOUND_BODY = {"error": "workspace_not_found", "message": "workspace not found"}


def test_valid_session_gets_the_exact_schema(call):
    result = call("capabilities", load_event(VALID))
    assert result.status == 200
    assert result.headers["Cache-Control"] == "no-store"
    assert result.headers["Content-Type"] == "application/json"
    body = result.json()
    revision = body.pop("knowledge_scope_revision")
    assert len(revision) == 64 and int(revision, 16) >= 0
    assert body == {
        "schema_version": "bailing.agent-knowledge-capabilities.v1",
        "protocol": "bailing.agent-knowledge.v1",
        "supported": True,
        "route": DEMO_ROUTE,
        "enabled": True,
        "delivery_modes": ["inline", "on_demand"],
        "limits": protocol.LIMITS,
    }


def _revision(call) -> str:
    return call("capabilities", load_event(VALID)).json()["knowledge_scope_revision"]


def test_scope_revision_is_stable_and_follows_the_knowledge_configuration(call, demo):
    repositories = demo.repositories
    first = _revision(call)
    assert _revision(call) == first

    # Unrelated changes keep it: another KB outside the route, the route's instructions.
    admin.create_knowledge_base(repositories, "elsewhere")
    repositories.knowledge_bases.set_enabled("elsewhere", False)
    route = repositories.routes.get(DEMO_ROUTE)
    assert route is not None
    repositories.routes.put(route.model_copy(update={"instructions": "Be brief."}))
    assert _revision(call) == first

    # Editing the route's knowledge configuration changes it.
    repositories.routes.put(route.model_copy(update={"knowledge": route.knowledge.model_copy(update={"top_k": 5})}))
    edited = _revision(call)
    assert edited != first

    # Disabling a KB in scope changes it; enabling it again restores the previous value.
    repositories.knowledge_bases.set_enabled(DEMO_KB, False)
    disabled = _revision(call)
    assert disabled != edited
    assert call("capabilities", load_event(VALID)).json()["enabled"] is False
    repositories.knowledge_bases.set_enabled(DEMO_KB, True)
    assert _revision(call) == edited


def test_enabled_is_false_without_an_enabled_source(call, demo):
    route = demo.repositories.routes.get(DEMO_ROUTE)
    assert route is not None
    demo.repositories.routes.put(route.model_copy(update={"knowledge": KnowledgeConfig(enabled=True, sources=[])}))
    assert call("capabilities", load_event(VALID)).json()["enabled"] is False
    demo.repositories.routes.put(
        route.model_copy(update={"knowledge": KnowledgeConfig(enabled=False, sources=[SourceConfig(kb_id=DEMO_KB)])})
    )
    assert call("capabilities", load_event(VALID)).json()["enabled"] is False
    demo.repositories.routes.put(
        route.model_copy(update={"knowledge": KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id="missing")])})
    )
    body = call("capabilities", load_event(VALID)).json()
    assert body["enabled"] is False and body["supported"] is True


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Basic dXNlcjpwYXNz",
        f"Bearer {DEMO_TOKEN} extra",
        "Bearer short",
        "Bearer " + "x" * 600,
        "Bearer unknown-token-000000000000000000",
    ],
)
def test_missing_malformed_or_unknown_bearer_is_401(call, authorization):
    result = call("capabilities", with_changes(load_event(VALID), authorization=authorization))
    assert result.status == 401
    assert result.json()["error"] == "unauthorized"
    assert result.headers["Cache-Control"] == "no-store"
    assert result.headers["WWW-Authenticate"].startswith("Bearer")


def test_sample_event_without_bearer_is_401(call):
    assert call("capabilities", load_event("capabilities-missing-bearer")).status == 401


def test_bearer_scheme_is_case_insensitive(call):
    result = call("capabilities", with_changes(load_event(VALID), authorization=f"bearer {DEMO_TOKEN}"))
    assert result.status == 200


def _session(demo, **overrides) -> str:
    arguments = {
        "client_app_id": DEMO_CLIENT,
        "routes": [DEMO_ROUTE],
        "principal": Principal(id="alice", tenant="acme", roles=["analyst"]),
        "now": demo.clock(),
    }
    arguments.update(overrides)
    _, token = admin.issue_session(demo.repositories, **arguments)
    return token


def test_expired_session_is_401_exactly_at_expiry(call, demo):
    token = _session(demo, ttl_seconds=60)
    event = with_changes(load_event(VALID), authorization=f"Bearer {token}")
    demo.clock.advance(59)
    assert call("capabilities", event).status == 200
    demo.clock.advance(1)
    assert call("capabilities", event).status == 401


def test_expired_access_token_of_a_live_session_is_401(call, demo):
    record, token = admin.issue_session(
        demo.repositories, client_app_id=DEMO_CLIENT, routes=[DEMO_ROUTE], principal=None, now=demo.clock()
    )
    demo.repositories.sessions.put(record.model_copy(update={"access_token_expires_at": int(demo.clock()) - 1}))
    assert call("capabilities", with_changes(load_event(VALID), authorization=f"Bearer {token}")).status == 401


def test_revoked_session_is_401(call, demo):
    record, token = admin.issue_session(
        demo.repositories, client_app_id=DEMO_CLIENT, routes=[DEMO_ROUTE], principal=None, now=demo.clock()
    )
    event = with_changes(load_event(VALID), authorization=f"Bearer {token}")
    assert call("capabilities", event).status == 200
    assert demo.repositories.sessions.revoke(record.session_id) is True
    assert call("capabilities", event).status == 401


def _assert_not_found(result) -> None:
    assert result.status == 404
    assert result.json() == NOT_FOUND_BODY
    assert result.headers["Cache-Control"] == "no-store"


def test_foreign_route_sample_event_is_404(call):
    _assert_not_found(call("capabilities", load_event("capabilities-foreign-route")))


def test_unknown_route_gives_the_same_404_as_a_forbidden_one(call):
    unknown = call("capabilities", with_changes(load_event(VALID), route="no-such-route"))
    forbidden = call("capabilities", load_event("capabilities-foreign-route"))
    _assert_not_found(unknown)
    assert unknown.body == forbidden.body


def test_disabled_client_is_404(call, demo):
    admin.put_client(demo.repositories, DEMO_CLIENT, [DEMO_ROUTE], enabled=False)
    _assert_not_found(call("capabilities", load_event(VALID)))


def test_route_missing_from_the_clients_allowed_routes_is_404(call, demo):
    admin.put_client(demo.repositories, DEMO_CLIENT, [FOREIGN_ROUTE])
    _assert_not_found(call("capabilities", load_event(VALID)))


def test_route_missing_from_the_sessions_allowed_routes_is_404(call, demo):
    admin.put_client(demo.repositories, DEMO_CLIENT, [DEMO_ROUTE, FOREIGN_ROUTE])
    # The demo session is only allowed the demo route.
    _assert_not_found(call("capabilities", with_changes(load_event(VALID), route=FOREIGN_ROUTE)))


def test_disabled_route_is_404(call, demo):
    route = demo.repositories.routes.get(DEMO_ROUTE)
    demo.repositories.routes.put(route.model_copy(update={"enabled": False}))
    _assert_not_found(call("capabilities", load_event(VALID)))


def test_route_without_agent_client_enabled_is_404(call, demo):
    route = demo.repositories.routes.get(DEMO_ROUTE)
    demo.repositories.routes.put(route.model_copy(update={"agent_client": AgentClientSettings(enabled=False)}))
    _assert_not_found(call("capabilities", load_event(VALID)))


def _with_audience(demo, policy: AudiencePolicy | None) -> None:
    route = demo.repositories.routes.get(DEMO_ROUTE)
    demo.repositories.routes.put(route.model_copy(update={"audience": policy}))


AUDIENCE_CASES = [
    # (policy, principal, admitted)
    (AudiencePolicy(tenants=["acme"]), Principal(id="a", tenant="acme"), True),
    (AudiencePolicy(tenants=["acme"]), Principal(id="a", tenant="globex"), False),
    (AudiencePolicy(tenants=["acme"]), Principal(id="a"), False),
    (AudiencePolicy(roles=["admin", "analyst"]), Principal(id="a", roles=["viewer", "analyst"]), True),
    (AudiencePolicy(roles=["admin"]), Principal(id="a", roles=["viewer"]), False),
    (AudiencePolicy(roles=["*"]), Principal(id="a", roles=["anything"]), True),
    (AudiencePolicy(roles=["*"]), Principal(id="a", roles=[]), False),
    (AudiencePolicy(tenants=["acme"], roles=["admin"]), Principal(id="a", tenant="acme", roles=["viewer"]), False),
    (AudiencePolicy(tenants=["*"], roles=["admin"]), Principal(id="a", tenant="x", roles=["admin"]), True),
    (AudiencePolicy(principals=["alice"]), Principal(id="alice"), True),
    (AudiencePolicy(principals=["alice"]), Principal(id="bob"), False),
    (AudiencePolicy(audiences=["internal"]), Principal(id="a", audience="internal"), True),
    (AudiencePolicy(audiences=["internal"]), Principal(id="a", audience="public"), False),
    (AudiencePolicy(clients=[DEMO_CLIENT]), Principal(id="a"), True),
    (AudiencePolicy(clients=["other-client"]), Principal(id="a"), False),
    (AudiencePolicy(tenants=[]), Principal(id="a"), True),
    (AudiencePolicy(enabled=False, tenants=["nobody"]), Principal(id="a"), True),
    (AudiencePolicy(tenants=["acme"]), None, False),
    (AudiencePolicy(anonymous=True, tenants=["acme"]), None, True),
    (AudiencePolicy(anonymous=True, clients=["other-client"]), None, False),
    (AudiencePolicy(), None, False),
    (None, None, True),
]


@pytest.mark.parametrize(("policy", "principal", "admitted"), AUDIENCE_CASES)
def test_audience_policy_through_the_handler(call, demo, policy, principal, admitted):
    _with_audience(demo, policy)
    token = _session(demo, principal=principal)
    result = call("capabilities", with_changes(load_event(VALID), authorization=f"Bearer {token}"))
    if admitted:
        assert result.status == 200
    else:
        _assert_not_found(result)


def test_unknown_path_is_404_with_no_store(call):
    event = load_event(VALID)
    event["rawPath"] = "/agent-api/v1/nowhere"
    event["requestContext"]["http"]["path"] = "/agent-api/v1/nowhere"
    result = call("capabilities", event)
    assert result.status == 404
    assert result.json()["error"] == "not_found"
    assert result.headers["Cache-Control"] == "no-store"


def test_storage_failure_is_503_without_details(call, demo, monkeypatch):
    from botocore.exceptions import EndpointConnectionError

    def broken(**_):
        raise EndpointConnectionError(endpoint_url="http://dynamodb.internal:8000")

    # The session is read in the first batch of every endpoint (with the route).
    monkeypatch.setattr(demo.repositories.dynamodb, "batch_get_item", broken)
    result = call("capabilities", load_event(VALID))
    assert result.status == 503
    assert result.json() == {
        "error": "knowledge_unavailable",
        "message": "session storage is temporarily unavailable",
    }
    assert result.headers["Cache-Control"] == "no-store"


def test_unexpected_error_is_500_with_request_id_only(call, demo, monkeypatch):
    def explode(*_, **__):
        raise RuntimeError("secret detail /var/task/app.py")

    monkeypatch.setattr(demo.repositories.routes, "lookup", explode)
    result = call("capabilities", load_event(VALID))
    assert result.status == 500
    assert result.json() == {"error": "internal_error", "message": "internal error (request id test-request-id)"}
    assert "secret" not in result.body
    assert result.headers["Cache-Control"] == "no-store"
