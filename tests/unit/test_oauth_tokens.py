"""The pure parts of OAuth resource-server mode (identity/oauth.py): which bearer is a JWT, what the
claims map to, which issuer URLs are allowed, and — with the JWKS fetched from a dict — the reason
each token rule gives (the answer is the same 401 for all; the reason is what is logged)."""

from __future__ import annotations

import dataclasses
import json
import secrets
from typing import Any

import pytest

from agent_knowledge.identity.oauth import (
    CLOCK_SKEW_SECONDS,
    REFRESH_INTERVAL_SECONDS,
    JwksCache,
    OAuthConfig,
    OAuthValidator,
    TokenRefused,
    check_issuer_url,
    claim,
    identity_from_claims,
    looks_like_jwt,
    roles_of,
)
from agent_knowledge.records import Principal
from agent_knowledge_dev.oauth_issuer import DISCOVERY_PATH, JWKS_PATH, LocalIssuer
from tests.support.oauth import hmac_signed, public_pem, unsigned

NOW = 1_800_000_000.0
ISSUER = LocalIssuer.generate("http://127.0.0.1:9")
CONFIG = OAuthConfig(issuer=ISSUER.issuer, audience=ISSUER.audience)


def test_a_jwt_is_three_base64url_segments_and_a_session_token_never_is():
    token, _ = ISSUER.mint("alice", now=NOW)
    assert looks_like_jwt(token)
    assert looks_like_jwt("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")  # unsigned: still a JWT, refused by its alg
    assert not looks_like_jwt(secrets.token_urlsafe(32))
    assert not looks_like_jwt("demo-local-token-0123456789abcdef")
    assert not looks_like_jwt("a.b")
    assert not looks_like_jwt("a.b.c.d")
    assert not looks_like_jwt("a+b.c.d")


def test_a_claim_is_the_key_itself_else_a_dotted_path():
    claims = {"https://example.com/roles": ["a"], "realm_access": {"roles": ["b"]}, "roles": "c"}
    assert claim(claims, "https://example.com/roles") == ["a"]
    assert claim(claims, "realm_access.roles") == ["b"]
    assert claim(claims, "roles") == "c"
    assert claim(claims, "realm_access.missing") is None
    assert claim(claims, "roles.deeper") is None


def test_roles_are_one_string_or_a_list_of_names():
    assert roles_of(None) == []
    assert roles_of("board") == ["board"]
    assert roles_of(["a", "b", "a"]) == ["a", "b"]
    for bad in (["with space"], [1], {"a": 1}, ["x"] * 101, [""]):
        with pytest.raises(TokenRefused):
            roles_of(bad)


def claims(**overrides: Any) -> dict[str, Any]:
    base = {"iss": ISSUER.issuer, "sub": "alice", "client_id": "demo-agent", "roles": ["member"], "tenant": "acme",
            "exp": int(NOW) + 600}  # fmt: skip
    base.update(overrides)
    return {name: value for name, value in base.items() if value is not None}


def test_the_claims_become_a_principal_and_a_client():
    identity = identity_from_claims(claims(), CONFIG)
    assert identity.principal == Principal(id="alice", tenant="acme", roles=["member"])
    assert identity.client_app_id == "demo-agent" and identity.expires_at == int(NOW) + 600
    session = identity.session("demo")
    assert session.allowed_routes == ["demo"] and session.on_behalf_of is None and not session.task_required
    assert session.principal == identity.principal and session.expires_at == identity.expires_at
    # One stand-in session per (issuer, subject, client): a run started with one token is the caller's with the next.
    assert identity_from_claims(claims(exp=int(NOW) + 60), CONFIG).session_id == identity.session_id
    assert identity_from_claims(claims(client_id="other"), CONFIG).session_id != identity.session_id
    assert identity_from_claims(claims(sub="bob"), CONFIG).session_id != identity.session_id


def test_the_configured_claims_are_read_and_azp_stands_for_a_missing_client_id():
    keycloak = dataclasses.replace(CONFIG, roles_claim="realm_access.roles", tenant_claim="org", client_id_claim="")
    identity = identity_from_claims(
        claims(client_id=None, azp="vscode", roles=None, tenant=None, realm_access={"roles": ["hr"]}, org="acme"),
        keycloak,
    )
    assert (identity.client_app_id, identity.principal.roles, identity.principal.tenant) == ("vscode", ["hr"], "acme")
    no_tenant = dataclasses.replace(CONFIG, tenant_claim="")
    assert identity_from_claims(claims(), no_tenant).principal.tenant is None


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"sub": None}, "missing subject"),
        ({"sub": ""}, "missing subject"),
        ({"sub": "two words"}, "malformed subject"),
        ({"sub": 7}, "malformed subject"),
        ({"client_id": None}, "missing or malformed client id"),
        ({"client_id": "a b"}, "missing or malformed client id"),
        ({"tenant": ["acme"]}, "malformed tenant claim"),
        ({"roles": [None]}, "malformed roles claim"),
    ],
)
def test_a_missing_or_malformed_claim_refuses_the_token(overrides, reason):
    with pytest.raises(TokenRefused) as refused:
        identity_from_claims(claims(**overrides), CONFIG)
    assert refused.value.reason == reason
    assert refused.value.message == TokenRefused.default_message  # the same answer whatever the reason


def test_issuer_urls_are_https_or_loopback_http():
    assert check_issuer_url("https://login.example.com/tenant/v2.0")
    assert check_issuer_url("http://127.0.0.1:3000/local-oauth")
    assert check_issuer_url("http://localhost:8080")
    assert check_issuer_url("http://[::1]:8080/x")
    for bad in ("http://login.example.com", "ftp://x", "https://x/?q=1", "https://x/#f", "not a url", "https://"):
        with pytest.raises(ValueError):
            check_issuer_url(bad)


class Documents:
    """The issuer's documents as `fetch` sees them, every fetch counted."""

    def __init__(self, *published: LocalIssuer) -> None:
        self.published = list(published)
        self.fetched: list[str] = []

    def __call__(self, url: str) -> dict[str, Any]:
        self.fetched.append(url)
        if url.endswith(DISCOVERY_PATH.removeprefix("/local-oauth")):
            return ISSUER.discovery()
        assert url.endswith(JWKS_PATH.removeprefix("/local-oauth"))
        return {"keys": [issuer.public_jwk() for issuer in self.published]}


def validator(documents: Documents) -> OAuthValidator:
    return OAuthValidator(CONFIG, JwksCache(CONFIG, fetch=documents))


def reason(token: str, documents: Documents | None = None, now: float = NOW) -> str | None:
    try:
        validator(documents or Documents(ISSUER)).validate(token, now)
    except TokenRefused as refused:
        return refused.reason
    return None


def test_each_signature_and_lifetime_rule_has_its_reason():
    valid, _ = ISSUER.mint("alice", ["member"], now=NOW)
    assert reason(valid) is None
    assert reason(ISSUER.mint("alice", now=NOW - 700, ttl_seconds=600)[0]) == "expired"
    assert reason(ISSUER.mint("alice", now=NOW - 600 - CLOCK_SKEW_SECONDS + 5, ttl_seconds=600)[0]) is None  # skew
    assert reason(ISSUER.mint("alice", now=NOW, nbf=int(NOW) + 120)[0]) == "not yet valid"
    assert reason(ISSUER.mint("alice", now=NOW, nbf=int(NOW) + CLOCK_SKEW_SECONDS - 5)[0]) is None
    assert reason(ISSUER.mint("alice", now=NOW, exp=None)[0]) == "missing exp"
    stranger = dataclasses.replace(ISSUER, issuer="https://login.example.com/")
    assert reason(stranger.mint("alice", now=NOW)[0]) == "wrong issuer"
    assert reason(dataclasses.replace(ISSUER, audience="other").mint("alice", now=NOW)[0]) == "wrong audience"
    assert reason(unsigned(valid)) == "algorithm not allowed"
    assert reason(hmac_signed(valid, ISSUER, public_pem(ISSUER))) == "algorithm not allowed"
    assert reason(hmac_signed(valid, ISSUER, json.dumps(ISSUER.public_jwk()).encode())) == "algorithm not allowed"
    signing_input, signature = valid.rsplit(".", 1)
    forged = f"{signing_input}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"
    assert reason(forged) == "InvalidSignatureError"
    assert reason("a.b.c") == "malformed token"


def test_an_unknown_key_id_refreshes_once_per_interval_then_is_refused():
    documents = Documents(ISSUER)
    checker = validator(documents)
    checker.validate(ISSUER.mint("alice", now=NOW)[0], NOW)
    assert len(documents.fetched) == 2  # discovery, then the JWKS
    rotated = LocalIssuer.generate("http://127.0.0.1:9")
    token = rotated.mint("alice", now=NOW)[0]
    with pytest.raises(TokenRefused) as refused:
        checker.validate(token, NOW)  # just fetched: not again
    assert refused.value.reason == "unknown key id" and len(documents.fetched) == 2
    later = NOW + REFRESH_INTERVAL_SECONDS
    with pytest.raises(TokenRefused):
        checker.validate(token, later)
    assert len(documents.fetched) == 3  # one refresh (the discovery document is kept)
    documents.published.append(rotated)
    assert checker.validate(token, later + REFRESH_INTERVAL_SECONDS).principal.id == "alice"
    assert len(documents.fetched) == 4


def test_a_discovery_document_of_another_issuer_is_unavailable_not_trusted():
    from agent_knowledge.errors import KnowledgeUnavailable

    def liar(url: str) -> dict[str, Any]:
        return {**ISSUER.discovery(), "issuer": "https://evil.example.com"}

    with pytest.raises(KnowledgeUnavailable):
        OAuthValidator(CONFIG, JwksCache(CONFIG, fetch=liar)).validate(ISSUER.mint("alice", now=NOW)[0], NOW)


def test_an_issuer_that_cannot_be_reached_is_unavailable_until_it_answers():
    """Not a 401 on the calls after the failed fetch either: a client told 'unauthorized' would
    authorize again for nothing while the issuer is down."""
    from agent_knowledge.errors import KnowledgeUnavailable

    documents, down = Documents(ISSUER), [True]

    def flaky(url: str) -> dict[str, Any]:
        if down[0]:
            raise OSError("connection refused")
        return documents(url)

    checker = OAuthValidator(CONFIG, JwksCache(CONFIG, fetch=flaky))
    token = ISSUER.mint("alice", now=NOW)[0]
    for now in (NOW, NOW + 1, NOW + REFRESH_INTERVAL_SECONDS):
        with pytest.raises(KnowledgeUnavailable):
            checker.validate(token, now)
    down[0] = False
    assert checker.validate(token, NOW + 2 * REFRESH_INTERVAL_SECONDS).principal.id == "alice"


def test_the_metadata_names_the_domain_the_request_reached():
    from agent_knowledge.identity.oauth import resource_metadata

    deployed = {
        "headers": {"host": "attacker.example", "x-forwarded-proto": "https"},
        "requestContext": {"domainName": "abc123.execute-api.eu-west-1.amazonaws.com"},
    }
    assert resource_metadata(CONFIG, deployed, "hr") == {
        "resource": "https://abc123.execute-api.eu-west-1.amazonaws.com/agent-api/v1/workspaces/hr/mcp",
        "authorization_servers": [CONFIG.issuer],
        "scopes_supported": [],
        "bearer_methods_supported": ["header"],
    }
    # Plain HTTP only behind the local gateway (a loopback domain, whose Host it checked).
    spoofed = {**deployed, "headers": {"host": "attacker.example", "x-forwarded-proto": "http"}}
    assert resource_metadata(CONFIG, spoofed, "hr")["resource"].startswith("https://abc123.")
    local = {
        "headers": {"host": "127.0.0.1:3000", "x-forwarded-proto": "http"},
        "requestContext": {"domainName": "127.0.0.1"},
    }
    scoped = dataclasses.replace(CONFIG, scopes=("api://agent-knowledge/search",))
    assert (
        resource_metadata(scoped, local, "demo")["resource"] == "http://127.0.0.1:3000/agent-api/v1/workspaces/demo/mcp"
    )
    assert resource_metadata(scoped, local, "demo")["scopes_supported"] == ["api://agent-knowledge/search"]


def test_a_token_must_use_the_algorithm_its_key_declares_and_fits():
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    valid, _ = ISSUER.mint("alice", now=NOW)

    class Declared(Documents):
        def __call__(self, url: str) -> dict[str, Any]:
            found = super().__call__(url)
            return {"keys": [{**key, "alg": "ES384"} for key in found["keys"]]} if "keys" in found else found

    assert reason(valid, Declared(ISSUER)) == "algorithm not the key's"
    # An RS256 token naming the EC key's kid: the EC key cannot verify RS256.
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    undeclared = {**ISSUER.public_jwk()}
    undeclared.pop("alg")

    class Undeclared(Documents):
        def __call__(self, url: str) -> dict[str, Any]:
            found = super().__call__(url)
            return {"keys": [undeclared]} if "keys" in found else found

    other = jwt.encode(claims(aud=ISSUER.audience), rsa_key, algorithm="RS256", headers={"kid": ISSUER.kid})
    assert reason(other, Undeclared(ISSUER)) == "key does not fit the algorithm"  # a 401, never a 500
