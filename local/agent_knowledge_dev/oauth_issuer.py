"""The local test issuer of `agent-knowledge serve --oauth`: an OAuth authorization server reduced to
what a resource server needs from one — an OpenID discovery document and a JWKS, served by the
local gateway on loopback — and `agent-knowledge token issue`, which mints access tokens with its
key, so the OAuth path is tested end to end without AWS or an identity provider.

The signing key (EC P-256, ES256) is generated when `serve --oauth` starts, never written to the
repository: it is kept in the serve's state dir (`oauth-signing-key.pem`, mode 0600, removed when
serve stops) for `token issue`, which runs in another process. It signs tokens for this local stack
only; restart serve and the old tokens no longer verify.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ISSUER_PATH = "/local-oauth"
DISCOVERY_PATH = ISSUER_PATH + "/.well-known/openid-configuration"
JWKS_PATH = ISSUER_PATH + "/jwks.json"
KEY_FILE = "oauth-signing-key.pem"
ALGORITHM = "ES256"
# The audience the local stack's tokens name (OAUTH_AUDIENCE of `serve --oauth`).
LOCAL_AUDIENCE = "agent-knowledge-local"
# The claims the local tokens carry roles, tenant and client in: the template's defaults.
ROLES_CLAIM = "roles"
TENANT_CLAIM = "tenant"
CLIENT_ID_CLAIM = "client_id"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class LocalIssuer:
    issuer: str
    private_key_pem: bytes
    audience: str = LOCAL_AUDIENCE

    @classmethod
    def generate(cls, base_url: str) -> LocalIssuer:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(base_url.rstrip("/") + ISSUER_PATH, pem)

    def public_jwk(self) -> dict[str, str]:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = serialization.load_pem_private_key(self.private_key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        numbers = key.public_key().public_numbers()
        jwk = {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64url(numbers.x.to_bytes(32, "big")),
            "y": _b64url(numbers.y.to_bytes(32, "big")),
        }
        # RFC 7638 thumbprint as the key id: the required members, sorted, no whitespace.
        thumbprint = hashlib.sha256(json.dumps(jwk, sort_keys=True, separators=(",", ":")).encode()).digest()
        return {**jwk, "kid": _b64url(thumbprint), "use": "sig", "alg": ALGORITHM}

    @property
    def kid(self) -> str:
        return self.public_jwk()["kid"]

    def discovery(self) -> dict[str, Any]:
        """What a resource server reads of an OpenID discovery document; no authorization or token
        endpoint (tokens come from `agent-knowledge token issue`)."""
        return {
            "issuer": self.issuer,
            "jwks_uri": self.issuer + "/jwks.json",
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "subject_types_supported": ["public"],
            "response_types_supported": [],
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.public_jwk()]}

    def mint(
        self,
        principal_id: str,
        roles: Sequence[str] = (),
        tenant: str | None = None,
        client: str = "demo-agent",
        ttl_seconds: int = 3600,
        now: float | None = None,
        **extra: Any,
    ) -> tuple[str, int]:
        """An access token and its expiry (epoch seconds)."""
        import jwt

        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": principal_id,
            CLIENT_ID_CLAIM: client,
            ROLES_CLAIM: list(roles),
            "iat": issued,
            "nbf": issued,
            "exp": issued + ttl_seconds,
            "jti": secrets.token_urlsafe(12),
        }
        if tenant is not None:
            claims[TENANT_CLAIM] = tenant
        claims.update(extra)
        token = jwt.encode(claims, self.private_key_pem, algorithm=ALGORITHM, headers={"kid": self.kid})
        return token, issued + ttl_seconds

    def environment(self) -> dict[str, str]:
        """The stack's OAuth variables (the template's, with this issuer)."""
        return {
            "OAUTH_ISSUER": self.issuer,
            "OAUTH_AUDIENCE": self.audience,
            "OAUTH_ROLES_CLAIM": ROLES_CLAIM,
            "OAUTH_TENANT_CLAIM": TENANT_CLAIM,
            "OAUTH_CLIENT_ID_CLAIM": CLIENT_ID_CLAIM,
        }

    def save(self, directory: Path) -> Path:
        """The key file for `token issue`, readable by its owner only."""
        path = directory / KEY_FILE
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(self.private_key_pem)
        return path

    @classmethod
    def load(cls, directory: Path, issuer: str, audience: str) -> LocalIssuer | None:
        try:
            return cls(issuer, (directory / KEY_FILE).read_bytes(), audience)
        except OSError:
            return None


def remove_key(directory: Path) -> None:
    (directory / KEY_FILE).unlink(missing_ok=True)


class ServedIssuer:
    """A LocalIssuer whose discovery document and JWKS a loopback HTTP server of its own answers (the
    validator fetches them with urllib, as on Lambda), every fetch counted; for tests and benchmarks,
    which run the OAuth path without `serve`. `published`: the issuers whose keys the JWKS lists."""

    def __init__(self) -> None:
        owner = self
        self.fetches: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.fetches.append(self.path)
                documents = {DISCOVERY_PATH: owner.issuer.discovery(), JWKS_PATH: owner.jwks()}
                body = json.dumps(documents[self.path]).encode() if self.path in documents else b"{}"
                self.send_response(200 if self.path in documents else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = LocalIssuer.generate(f"http://127.0.0.1:{self.server.server_address[1]}")
        self.published = [self.issuer]

    def jwks(self) -> dict[str, Any]:
        return {"keys": [issuer.public_jwk() for issuer in self.published]}

    def another_key(self) -> LocalIssuer:
        """The same issuer with a key its JWKS does not (yet) list: a rotation."""
        return LocalIssuer.generate(self.issuer.issuer.removesuffix(ISSUER_PATH))

    def environment(self) -> dict[str, str]:
        return self.issuer.environment()

    def jwks_fetches(self) -> int:
        return sum(path == JWKS_PATH for path in self.fetches)


@contextmanager
def served_issuer() -> Iterator[ServedIssuer]:
    served = ServedIssuer()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.server.server_close()
