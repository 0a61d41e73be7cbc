"""OAuth 2.1 resource-server mode (docs/DESIGN.md §15): a JWT access token from one trusted issuer
stands where a session token stands, on the MCP endpoint and the knowledge routes alike.

A bearer that has the shape of a JWT (three base64url segments: `looks_like_jwt`) is validated
here when an issuer is configured (`OAUTH_ISSUER`); without one it is just an unknown token (401).
On every call:

1. the header: `alg` in `ALGORITHMS` (asymmetric only: never `none`, never HS*), a `kid`;
2. the key: from the issuer's JWKS, found through its OpenID discovery document
   (`<issuer>/.well-known/openid-configuration`, whose `issuer` must be ours), kept per container
   (`JwksCache`) for `JWKS_TTL_SECONDS`; an unknown `kid` refreshes it once (at most once per
   `REFRESH_INTERVAL_SECONDS`), and a `kid` still unknown is refused;
3. the signature (PyJWT, with that one algorithm), `iss`, `aud`; `exp` (required) and `nbf`
   against the caller's clock with `CLOCK_SKEW_SECONDS`;
4. the claims (`identity_from_claims`): `sub` becomes the principal's id, the roles and tenant
   claims its roles and tenant, the client id claim names one of our client records.

Every refusal is a `TokenRefused` (401) with one message that says nothing of the token; the
reason goes to the log (`context()`). Fetching the issuer's documents: HTTPS, or plain HTTP to a
loopback host only (the local test issuer of `agent-knowledge serve --oauth`), a timeout, a size
bound, no redirects. An issuer that cannot be reached before any key is known is
`KnowledgeUnavailable` (503): the caller is not at fault.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from agent_knowledge.core.per_container import per_container_by_key
from agent_knowledge.errors import ConfigurationError, KnowledgeUnavailable, Unauthorized
from agent_knowledge.records import Principal, SessionRecord

if TYPE_CHECKING:  # PyJWT and cryptography are imported only when a JWT arrives (cold start)
    from jwt import PyJWK

    from agent_knowledge.settings import Settings

# Asymmetric algorithms only: the key comes from the issuer's public JWKS, so an HMAC algorithm
# would verify with a public value (the "HS256 signed with the public key" attack), and `none` with nothing.
ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
CLOCK_SKEW_SECONDS: Final = 30
JWKS_TTL_SECONDS: Final = 3600
REFRESH_INTERVAL_SECONDS: Final = 10
FETCH_TIMEOUT_SECONDS: Final = 5
MAX_DOCUMENT_BYTES: Final = 512 * 1024
MAX_ROLES: Final = 100
DEFAULT_CLIENT_ID_CLAIMS: Final = ("client_id", "azp")
DISCOVERY_SUFFIX: Final = "/.well-known/openid-configuration"
METADATA_PREFIX: Final = "/.well-known/oauth-protected-resource"

# Three base64url segments; the third may be empty (an unsigned token, refused by its `alg`).
_JWT: Final = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
# A subject, tenant or role becomes one access entry (`principal:<sub>`, `identity.document_access`):
# printable, no whitespace, bounded.
_NAME: Final = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")
_CLIENT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\-]{0,127}")
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_ROUTE_PATH: Final = re.compile(r"/agent-api/v1/workspaces/([A-Za-z0-9][A-Za-z0-9._\-]{0,127})/")


class TokenRefused(Unauthorized):
    """A JWT access token that does not grant access. One message whatever the reason: the answer
    says nothing of the token; `reason` (logged) says which rule refused it."""

    default_message = "the access token is invalid, expired or not for this API; obtain a new one"
    context_fields = ("reason",)
    reason: str | None


def looks_like_jwt(token: str) -> bool:
    """A compact JWS: what goes to the OAuth validator. Session tokens (`secrets.token_urlsafe`)
    never contain a dot."""
    return _JWT.fullmatch(token) is not None


def loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname
    return host is not None and host.lower() in _LOOPBACK


def check_issuer_url(url: str) -> str:
    """HTTPS, or plain HTTP on a loopback host (the local test issuer); no query or fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError(f"{url!r} is not a URL") from None
    if parts.query or parts.fragment or not parts.hostname:
        raise ValueError(f"{url!r} is not an issuer URL (https://host[/path], no query)")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback_url(url)):
        raise ValueError(f"{url!r} must be https:// (plain http only on localhost, 127.0.0.1 or [::1])")
    return url


@dataclass(frozen=True)
class OAuthConfig:
    """The deployment's trusted issuer and what its tokens' claims mean (template parameters
    OAuthIssuer, OAuthAudience, OAuthRolesClaim, OAuthTenantClaim, OAuthClientIdClaim, OAuthScopes)."""

    issuer: str
    audience: str
    roles_claim: str = "roles"
    tenant_claim: str = "tenant"
    client_id_claim: str = ""  # empty: `client_id`, else `azp`
    scopes: tuple[str, ...] = ()

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + DISCOVERY_SUFFIX


@dataclass(frozen=True)
class TokenIdentity:
    """What a validated access token says about its caller."""

    issuer: str
    subject: str
    client_app_id: str
    principal: Principal
    expires_at: int

    @property
    def session_id(self) -> str:
        """The caller's stand-in session id: one per (issuer, subject, client), stable across the
        tokens the issuer hands out, so a run started with one token is the caller's with the next."""
        key = "\0".join((self.issuer, self.subject, self.client_app_id)).encode("utf-8")
        return "oauth-" + hashlib.sha256(key).hexdigest()[:32]

    def session(self, route: str) -> SessionRecord:
        """A session record as a session token would have it: this route, the token's lifetime,
        no on-behalf-of, no managed task (docs/DESIGN.md §15)."""
        return SessionRecord(
            token_hash="",
            session_id=self.session_id,
            client_app_id=self.client_app_id,
            principal=self.principal,
            allowed_routes=[route],
            expires_at=self.expires_at,
            access_token_expires_at=self.expires_at,
        )


# -- the claims ---------------------------------------------------------------------------------


def claim(claims: Mapping[str, Any], name: str) -> Any:
    """The claim `name`: the key itself (namespaced claims such as `https://example.com/roles`
    contain dots), else a dotted path into nested objects (`realm_access.roles`); None if absent."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise TokenRefused(reason=f"malformed {what}")
    return value


def roles_of(value: Any) -> list[str]:
    """A roles claim: absent, one string, or a list of strings (each a valid access name)."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > MAX_ROLES:
        raise TokenRefused(reason="malformed roles claim")
    return list(dict.fromkeys(_name(item, "roles claim") for item in items))


def identity_from_claims(claims: Mapping[str, Any], config: OAuthConfig) -> TokenIdentity:
    """The caller a verified token's claims describe (`TokenRefused` when one is missing or malformed)."""
    subject = claims.get("sub")
    if subject is None or subject == "":
        raise TokenRefused(reason="missing subject")
    subject = _name(subject, "subject")
    names = (config.client_id_claim,) if config.client_id_claim else DEFAULT_CLIENT_ID_CLAIMS
    client = next((claim(claims, name) for name in names if claim(claims, name) is not None), None)
    if not isinstance(client, str) or not _CLIENT_ID.fullmatch(client):
        raise TokenRefused(reason="missing or malformed client id")
    tenant = claim(claims, config.tenant_claim) if config.tenant_claim else None
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise TokenRefused(reason="missing expiry")
    principal = Principal(
        id=subject,
        tenant=None if tenant is None else _name(tenant, "tenant claim"),
        roles=roles_of(claim(claims, config.roles_claim)),
    )
    return TokenIdentity(str(claims.get("iss")), subject, client, principal, int(exp))


# -- the issuer's keys --------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an error: it could leave HTTPS


_opener = urllib.request.build_opener(_NoRedirect)


def fetch_json(url: str) -> dict[str, Any]:
    """One JSON object over HTTPS (plain HTTP to loopback only); OSError/ValueError on failure."""
    check_issuer_url(url)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with _opener.open(request, timeout=FETCH_TIMEOUT_SECONDS) as response:
        data = response.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"larger than {MAX_DOCUMENT_BYTES} bytes")
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return document


@dataclass
class JwksCache:
    """The issuer's signing keys by `kid`, per container. `fetch` is injectable for tests."""

    config: OAuthConfig
    fetch: Callable[[str], dict[str, Any]] = fetch_json
    _jwks_uri: str | None = None
    _keys: dict[str, SigningKey] = field(default_factory=dict)
    _fetched_at: float | None = None
    # Whether the last fetch failed: with no key known, a token is then the issuer's outage (503),
    # not the caller's fault (a 401 would send clients to authorize again for nothing).
    _failed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def key(self, kid: str, now: float) -> SigningKey:
        with self._lock:
            if self._fetched_at is None:
                self._refresh(now, required=True)
            elif now - self._fetched_at >= JWKS_TTL_SECONDS:
                self._refresh(now, required=False)  # a failure keeps the keys known so far
            if kid not in self._keys and now - (self._fetched_at or now) >= REFRESH_INTERVAL_SECONDS:
                self._refresh(now, required=False)  # a rotated key: once, then refused
            found = self._keys.get(kid)
            unreachable = self._failed and not self._keys
        if found is None and unreachable:
            raise KnowledgeUnavailable.of("the OAuth issuer's signing keys")
        if found is None:
            raise TokenRefused(reason="unknown key id")
        return found

    def _refresh(self, now: float, required: bool) -> None:
        from agent_knowledge.core.observability import logger

        try:
            if self._jwks_uri is None:
                self._jwks_uri = self._discover()
            self._keys = _signing_keys(self.fetch(self._jwks_uri))
            self._failed = False
        except (OSError, ValueError, urllib.error.URLError) as exc:
            logger.warning("the OAuth issuer's keys could not be fetched", extra={"reason": type(exc).__name__})
            self._failed = True
            if required:
                raise KnowledgeUnavailable.of("the OAuth issuer's signing keys") from None
        finally:
            self._fetched_at = now

    def _discover(self) -> str:
        document = self.fetch(self.config.discovery_url)
        if document.get("issuer") != self.config.issuer:
            raise ValueError("the discovery document names another issuer")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ValueError("the discovery document has no jwks_uri")
        return check_issuer_url(jwks_uri)


@dataclass(frozen=True)
class SigningKey:
    """A key of the issuer's JWKS and the algorithm it declares (`alg`, optional in a JWK)."""

    jwk: PyJWK
    algorithm: str | None


def _signing_keys(jwks: dict[str, Any]) -> dict[str, SigningKey]:
    """The JWKS's signature keys with a `kid` and a type PyJWT supports; others are skipped."""
    from jwt import PyJWK, PyJWKError

    keys = {}
    for entry in jwks.get("keys") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str) or entry.get("use", "sig") != "sig":
            continue
        declared = entry.get("alg")
        try:
            keys[entry["kid"]] = SigningKey(PyJWK(entry), declared if isinstance(declared, str) else None)
        except (PyJWKError, ValueError, TypeError, KeyError):
            continue
    if not keys and jwks.get("keys") is None:
        raise ValueError("not a JWKS")
    return keys


# -- the validator ------------------------------------------------------------------------------


@dataclass
class OAuthValidator:
    config: OAuthConfig
    keys: JwksCache

    def validate(self, token: str, now: float) -> TokenIdentity:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused(reason="malformed token") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in ALGORITHMS:
            raise TokenRefused(reason="algorithm not allowed")
        if not isinstance(kid, str):
            raise TokenRefused(reason="no key id")
        key = self.keys.key(kid, now)
        if key.algorithm is not None and key.algorithm != algorithm:
            raise TokenRefused(reason="algorithm not the key's")
        try:
            claims = jwt.decode(
                token,
                key.jwk.key,  # the key object: its type must fit the algorithm (else InvalidKeyError)
                algorithms=[algorithm],
                audience=self.config.audience,
                issuer=self.config.issuer,
                # exp and nbf are checked below against the caller's clock (the protocol's `now`).
                options={
                    "require": ["exp", "iss", "aud"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.MissingRequiredClaimError as error:
            raise TokenRefused(reason=f"missing {error.claim}") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(reason="wrong audience") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused(reason="wrong issuer") from None
        except jwt.PyJWTError as error:
            raise TokenRefused(reason=type(error).__name__) from None
        except (TypeError, ValueError):  # PyJWT's answer to a key of another type than the algorithm's
            raise TokenRefused(reason="key does not fit the algorithm") from None
        _check_lifetime(claims, now)
        return identity_from_claims(claims, self.config)


def _check_lifetime(claims: Mapping[str, Any], now: float) -> None:
    exp, nbf = _number(claims.get("exp")), _number(claims.get("nbf", 0))
    if exp <= now - CLOCK_SKEW_SECONDS:
        raise TokenRefused(reason="expired")
    if nbf > now + CLOCK_SKEW_SECONDS:
        raise TokenRefused(reason="not yet valid")


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TokenRefused(reason="malformed exp or nbf")
    return float(value)


@per_container_by_key
def validator_for(config: OAuthConfig) -> OAuthValidator:
    """This container's validator of `config` (one issuer in a deployment), made on first use and
    kept with its issuer's keys (`JwksCache`)."""
    return OAuthValidator(config, JwksCache(config))


def oauth_config(settings: Settings) -> OAuthConfig | None:
    """The trusted issuer of `settings`, or None when none is configured (bearer-token mode)."""
    if not settings.oauth_issuer:
        return None
    if not settings.oauth_audience:
        raise ConfigurationError("invalid or missing environment variables: OAUTH_AUDIENCE (OAUTH_ISSUER is set)")
    return OAuthConfig(
        issuer=settings.oauth_issuer,
        audience=settings.oauth_audience,
        roles_claim=settings.oauth_roles_claim,
        tenant_claim=settings.oauth_tenant_claim,
        client_id_claim=settings.oauth_client_id_claim,
        scopes=tuple(settings.oauth_scopes.split()),
    )


def token_identity(token: str, now: float, oauth: Callable[[], OAuthConfig | None]) -> TokenIdentity | None:
    """None for a session token; the caller a JWT names, validated now against the issuer `oauth`
    gives (asked only for a JWT; None, bearer-token mode: no JWT is known); else 401."""
    if not looks_like_jwt(token):
        return None
    config = oauth()
    if config is None:
        raise Unauthorized("unknown bearer token")
    return validator_for(config).validate(token, now)


# -- RFC 9728: protected-resource metadata --------------------------------------------------------


def resource_base(event: Mapping[str, Any]) -> str:
    """The origin the request reached: `https://{requestContext.domainName}` on API Gateway; the
    local gateway (plain HTTP on loopback, whose Host it has checked) answers at `http://{Host}`."""
    from agent_knowledge.core.headers import header

    context = event.get("requestContext") or {}
    domain = str(context.get("domainName") or "")
    host = header(dict(event), "host") or domain
    if header(dict(event), "x-forwarded-proto") == "http" and domain in {"localhost", "127.0.0.1", "[::1]"}:
        return f"http://{host}"
    return f"https://{domain}"


def mcp_url(event: Mapping[str, Any], route: str) -> str:
    return f"{resource_base(event)}/agent-api/v1/workspaces/{route}/mcp"


def metadata_url(event: Mapping[str, Any], route: str) -> str:
    return f"{resource_base(event)}{METADATA_PREFIX}/agent-api/v1/workspaces/{route}/mcp"


def resource_metadata(config: OAuthConfig, event: Mapping[str, Any], route: str) -> dict[str, Any]:
    """The route's MCP endpoint as an OAuth protected resource (RFC 9728, section 2)."""
    return {
        "resource": mcp_url(event, route),
        "authorization_servers": [config.issuer],
        "scopes_supported": list(config.scopes),
        "bearer_methods_supported": ["header"],
    }


def challenge(event: Mapping[str, Any], settings: Settings) -> str | None:
    """`WWW-Authenticate` of a 401 in OAuth mode: where the metadata of the route's MCP endpoint is
    (the route named in the path); None in bearer-token mode, for a path without a route, and when
    the OAuth settings are unusable (a 401's header must never turn into a 500)."""
    path = str(event.get("rawPath") or "")
    found = _ROUTE_PATH.match(path + "/" if not path.endswith("/") else path)
    if found is None:
        return None
    try:
        if oauth_config(settings) is None:
            return None
    except ConfigurationError:
        return None
    return f'Bearer resource_metadata="{metadata_url(event, found.group(1))}"'
