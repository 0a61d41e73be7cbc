"""A test issuer on loopback: the local issuer's discovery document and JWKS served over real HTTP
(the validator fetches them with urllib, as on Lambda), every fetch counted; and tokens no honest
library would sign (`unsigned`, `hmac_signed`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_knowledge_dev.oauth_issuer import DISCOVERY_PATH, JWKS_PATH, LocalIssuer


class IssuerServer:
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

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = LocalIssuer.generate(f"http://127.0.0.1:{self._server.server_address[1]}")
        self.published = [self.issuer]  # the issuers whose keys the JWKS lists

    def jwks(self) -> dict[str, Any]:
        return {"keys": [issuer.public_jwk() for issuer in self.published]}

    def another_key(self) -> LocalIssuer:
        """The same issuer with a key its JWKS does not (yet) list: a rotation."""
        return LocalIssuer.generate(self.issuer.issuer.removesuffix("/local-oauth"))

    def environment(self) -> dict[str, str]:
        return self.issuer.environment()

    def jwks_fetches(self) -> int:
        return sum(path == JWKS_PATH for path in self.fetches)


@contextmanager
def issuer_server() -> Iterator[IssuerServer]:
    server = IssuerServer()
    thread = threading.Thread(target=server._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server._server.shutdown()
        server._server.server_close()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _segments(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def unsigned(token: str) -> str:
    """`token`'s claims with `alg: none` and no signature."""
    return _segments({"alg": "none", "typ": "JWT"}, claims_of(token)) + "."


def hmac_signed(token: str, issuer: LocalIssuer, key: bytes) -> str:
    """`token`'s claims signed HS256 with `key` (the issuer's public key: the algorithm-confusion attack)."""
    signing_input = _segments({"alg": "HS256", "typ": "JWT", "kid": issuer.kid}, claims_of(token))
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + _b64url(signature)


def public_pem(issuer: LocalIssuer) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(issuer.private_key_pem, password=None).public_key()
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
