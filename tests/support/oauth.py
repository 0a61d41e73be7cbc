"""A test issuer on loopback (`oauth_issuer.ServedIssuer`: its discovery document and JWKS over real
HTTP, every fetch counted), and tokens no honest library would sign (`unsigned`, `hmac_signed`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from agent_knowledge_dev.oauth_issuer import LocalIssuer, ServedIssuer, served_issuer

# The loopback issuer lives with the local issuer (the OAuth benchmark serves it too).
IssuerServer = ServedIssuer
issuer_server = served_issuer


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
