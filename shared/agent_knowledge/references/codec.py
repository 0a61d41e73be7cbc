"""Opaque, expiring, signed tokens: knowledge references and read cursors (docs/DESIGN.md §5).

Pure: no AWS, no clock of its own (callers pass `now`). Modelled on itsdangerous:

- one secret (the existing server token) and a sub-key per purpose, derived with HMAC-SHA256, so a
  cursor can never verify as a reference nor the other way round (domain separation);
- token = base64url_nopad(version ‖ purpose ‖ expires_at ‖ claims ‖ HMAC-SHA256(sub-key, all before));
- MACs compared in constant time; every field is fixed-size or length-prefixed, so any change,
  truncation or extension of a token fails verification;
- verification is split in two so callers can keep the protocol's error order: `open_*` checks
  encoding, version, purpose and MAC (→ TokenInvalid) and returns the claims; `ensure_fresh`
  checks expiry (→ TokenExpired). A token issued at t expires at floor(t) + 300
  (`limits.REFERENCE_TTL_SECONDS`) and is expired from that second on.

Claims hold locators (KB, document, run) in the clear and *digests* of what they bind (identity,
scope, document revision and content): the server recomputes those from current state on every
call, and a short token keeps three hints within the search response's 4096 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass

from agent_knowledge.errors import TokenExpired, TokenInvalid
from agent_knowledge.limits import REFERENCE_TTL_SECONDS as TTL_SECONDS

VERSION = 1
DIGEST_BYTES = 16  # truncated SHA-256 of bound values (128 bits)
MAC_BYTES = 32
_HEADER_BYTES = 6  # version, purpose, expires_at (uint32)
# Longer than any token we issue, so a decoder never works on megabytes of attacker input.
_MAX_TOKEN_CHARS = 4096


def encoded_length(raw_bytes: int) -> int:
    """Characters of unpadded URL-safe base64 for `raw_bytes` bytes."""
    return (4 * raw_bytes + 2) // 3


# Every cursor has the same length: its claims are fixed-size (reference digest, offset, served).
CURSOR_LENGTH = encoded_length(_HEADER_BYTES + DIGEST_BYTES + 4 + 4 + MAC_BYTES)
_KEY_LABEL = b"bailing.agent-knowledge.v1/hmac-subkey/"


class Purpose:
    REFERENCE = 1
    CURSOR = 2

    LABELS = {REFERENCE: b"reference", CURSOR: b"cursor"}


def digest(*parts: str) -> bytes:
    """Truncated SHA-256 of an unambiguous encoding of `parts` (length-prefixed UTF-8)."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        hasher.update(struct.pack(">I", len(data)))
        hasher.update(data)
    return hasher.digest()[:DIGEST_BYTES]


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(token: str) -> bytes:
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_CHARS:
        raise TokenInvalid("malformed token")
    if len(token) % 4 == 1 or not token.isascii():
        raise TokenInvalid("malformed token")
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise TokenInvalid("malformed token") from None
    # Reject non-canonical encodings (stray low bits in the last character) so that exactly one
    # string is valid for each token.
    if _b64encode(raw) != token:
        raise TokenInvalid("malformed token")
    return raw


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def string(self, value: str) -> None:
        data = value.encode("utf-8")
        if len(data) > 255:
            raise ValueError("token string claims are limited to 255 bytes")
        self.parts.append(bytes([len(data)]) + data)

    def fixed(self, value: bytes, size: int) -> None:
        if len(value) != size:
            raise ValueError(f"expected {size} bytes")
        self.parts.append(value)

    def uint32(self, value: int) -> None:
        self.parts.append(struct.pack(">I", value))

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if end > len(self.data):
            raise TokenInvalid("truncated claims")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def string(self) -> str:
        (length,) = self._take(1)
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError:
            raise TokenInvalid("malformed claims") from None

    def fixed(self, size: int) -> bytes:
        return self._take(size)

    def uint32(self) -> int:
        (value,) = struct.unpack(">I", self._take(4))
        return int(value)

    def finish(self) -> None:
        if self.position != len(self.data):
            raise TokenInvalid("trailing claim bytes")


@dataclass(frozen=True)
class ReferenceClaims:
    kb_id: str
    doc_id: str
    run_id: str | None
    identity: bytes  # digest of client, session, principal, on_behalf_of, route, run
    scope: bytes  # digest of the scope revision
    document: bytes  # digest of document revision, title SHA-256 and body SHA-256
    expires_at: int = 0


@dataclass(frozen=True)
class CursorClaims:
    reference: bytes  # digest of the exact reference token this cursor continues
    offset: int  # byte offset into the body where the next page starts
    served: int  # body bytes already served on this chain
    expires_at: int = 0


class TokenCodec:
    """Issues and opens references and cursors under sub-keys of one server secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the server token must be at least 16 bytes")
        self._keys = {
            purpose: hmac.new(secret, _KEY_LABEL + label, hashlib.sha256).digest()
            for purpose, label in Purpose.LABELS.items()
        }

    # -- framing -----------------------------------------------------------------------------

    def _seal(self, purpose: int, now: float, claims: bytes) -> tuple[str, int]:
        expires_at = int(now) + TTL_SECONDS
        body = bytes([VERSION, purpose]) + struct.pack(">I", expires_at) + claims
        mac = hmac.new(self._keys[purpose], body, hashlib.sha256).digest()
        return _b64encode(body + mac), expires_at

    def _open(self, purpose: int, token: str) -> tuple[_Reader, int]:
        raw = _b64decode(token)
        if len(raw) < _HEADER_BYTES + MAC_BYTES:
            raise TokenInvalid("truncated token")
        body, mac = raw[:-MAC_BYTES], raw[-MAC_BYTES:]
        if body[0] != VERSION:
            raise TokenInvalid("unsupported token version")
        if body[1] != purpose:
            raise TokenInvalid("token issued for another purpose")
        expected = hmac.new(self._keys[purpose], body, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise TokenInvalid("bad signature")
        (expires_at,) = struct.unpack(">I", body[2:_HEADER_BYTES])
        return _Reader(body[_HEADER_BYTES:]), int(expires_at)

    # -- references --------------------------------------------------------------------------

    def issue_reference(self, claims: ReferenceClaims, now: float) -> tuple[str, int]:
        writer = _Writer()
        writer.string(claims.kb_id)
        writer.string(claims.doc_id)
        writer.string(claims.run_id or "")
        writer.fixed(claims.identity, DIGEST_BYTES)
        writer.fixed(claims.scope, DIGEST_BYTES)
        writer.fixed(claims.document, DIGEST_BYTES)
        return self._seal(Purpose.REFERENCE, now, writer.bytes())

    def open_reference(self, token: str) -> ReferenceClaims:
        reader, expires_at = self._open(Purpose.REFERENCE, token)
        claims = ReferenceClaims(
            kb_id=reader.string(),
            doc_id=reader.string(),
            run_id=reader.string() or None,
            identity=reader.fixed(DIGEST_BYTES),
            scope=reader.fixed(DIGEST_BYTES),
            document=reader.fixed(DIGEST_BYTES),
            expires_at=expires_at,
        )
        reader.finish()
        return claims

    # -- cursors -----------------------------------------------------------------------------

    def issue_cursor(self, claims: CursorClaims, now: float) -> tuple[str, int]:
        writer = _Writer()
        writer.fixed(claims.reference, DIGEST_BYTES)
        writer.uint32(claims.offset)
        writer.uint32(claims.served)
        return self._seal(Purpose.CURSOR, now, writer.bytes())

    def open_cursor(self, token: str) -> CursorClaims:
        reader, expires_at = self._open(Purpose.CURSOR, token)
        claims = CursorClaims(
            reference=reader.fixed(DIGEST_BYTES),
            offset=reader.uint32(),
            served=reader.uint32(),
            expires_at=expires_at,
        )
        reader.finish()
        return claims


def ensure_fresh(expires_at: int, now: float) -> None:
    if now >= expires_at:
        raise TokenExpired(expires_at)


def reference_digest(reference: str) -> bytes:
    """What a cursor binds: the exact reference string it continues."""
    return digest("reference", reference)
