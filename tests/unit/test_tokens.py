"""Reference and cursor tokens: tamper-evident, purpose-bound, exact expiry."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge.references.codec import (
    DIGEST_BYTES,
    TTL_SECONDS,
    CursorClaims,
    ReferenceClaims,
    TokenCodec,
    TokenExpired,
    TokenInvalid,
    digest,
    ensure_fresh,
    reference_digest,
)

SECRET = b"server-token-for-tests-0123456789"
NOW = 1_800_000_000.25

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40)
digests = st.binary(min_size=DIGEST_BYTES, max_size=DIGEST_BYTES)


@st.composite
def references(draw) -> ReferenceClaims:
    return ReferenceClaims(
        kb_id=draw(names),
        doc_id=draw(names),
        run_id=draw(st.none() | names),
        identity=draw(digests),
        scope=draw(digests),
        document=draw(digests),
    )


@st.composite
def cursors(draw) -> CursorClaims:
    return CursorClaims(
        reference=draw(digests),
        offset=draw(st.integers(0, 2**32 - 1)),
        served=draw(st.integers(0, 2**32 - 1)),
    )


CODEC = TokenCodec(SECRET)


def _raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@given(references())
def test_reference_round_trips(claims):
    token, expires_at = CODEC.issue_reference(claims, NOW)
    assert expires_at == int(NOW) + TTL_SECONDS
    opened = CODEC.open_reference(token)
    assert opened == ReferenceClaims(**{**claims.__dict__, "expires_at": expires_at})
    assert "=" not in token and "+" not in token and "/" not in token


@given(cursors())
def test_cursor_round_trips(claims):
    token, expires_at = CODEC.issue_cursor(claims, NOW)
    assert CODEC.open_cursor(token) == CursorClaims(**{**claims.__dict__, "expires_at": expires_at})


@settings(max_examples=300)
@given(references(), st.data())
def test_any_single_byte_change_is_rejected(claims, data):
    token, _ = CODEC.issue_reference(claims, NOW)
    raw = bytearray(_raw(token))
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(_encode(bytes(raw)))


@settings(max_examples=300)
@given(references(), st.data())
def test_any_character_change_of_the_string_is_rejected(claims, data):
    token, _ = CODEC.issue_reference(claims, NOW)
    position = data.draw(st.integers(0, len(token) - 1))
    replacement = data.draw(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=.+/ "))
    if replacement == token[position]:
        return
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(token[:position] + replacement + token[position + 1 :])


@settings(max_examples=200)
@given(references(), st.data())
def test_truncation_and_extension_are_rejected(claims, data):
    token, _ = CODEC.issue_reference(claims, NOW)
    cut = data.draw(st.integers(0, len(token) - 1))
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(token[:cut])
    suffix = data.draw(st.text("ABCabc012-_", min_size=1, max_size=8))
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(token + suffix)
    raw = _raw(token)
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(_encode(raw + data.draw(st.binary(min_size=1, max_size=8))))
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(_encode(raw[: data.draw(st.integers(0, len(raw) - 1))]))


@given(references(), cursors())
def test_purposes_never_cross(reference, cursor):
    reference_token, _ = CODEC.issue_reference(reference, NOW)
    cursor_token, _ = CODEC.issue_cursor(cursor, NOW)
    with pytest.raises(TokenInvalid):
        CODEC.open_cursor(reference_token)
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(cursor_token)


@given(references())
def test_a_token_verifies_only_under_the_secret_that_issued_it(claims):
    token, _ = CODEC.issue_reference(claims, NOW)
    with pytest.raises(TokenInvalid):
        TokenCodec(SECRET + b"-rotated").open_reference(token)


def test_relabelled_purpose_byte_with_the_other_key_is_rejected():
    cursor_token, _ = CODEC.issue_cursor(CursorClaims(reference=b"r" * 16, offset=1, served=1), NOW)
    raw = bytearray(_raw(cursor_token))
    raw[1] = 1  # claim to be a reference
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(_encode(bytes(raw)))


@given(st.floats(min_value=0, max_value=2**31, allow_nan=False))
def test_expiry_is_exact_to_the_second(issued_at):
    token, expires_at = CODEC.issue_reference(
        ReferenceClaims("kb", "doc", None, b"i" * 16, b"s" * 16, b"d" * 16), issued_at
    )
    assert expires_at == int(issued_at) + TTL_SECONDS
    ensure_fresh(CODEC.open_reference(token).expires_at, expires_at - 0.001)
    with pytest.raises(TokenExpired):
        ensure_fresh(expires_at, expires_at)
    with pytest.raises(TokenExpired):
        ensure_fresh(expires_at, expires_at + 1)


@pytest.mark.parametrize("junk", ["", "=", "a", "!!!!", "é" * 10, "A" * 5000, "AAAA" * 3, None, 12])
def test_junk_is_invalid_not_a_crash(junk):
    with pytest.raises(TokenInvalid):
        CODEC.open_reference(junk)  # type: ignore[arg-type]
    with pytest.raises(TokenInvalid):
        CODEC.open_cursor(junk)  # type: ignore[arg-type]


@settings(max_examples=2000)
@given(st.text(max_size=300) | st.binary(max_size=200).map(_encode))
def test_random_input_only_ever_raises_token_invalid(candidate):
    for open_token in (CODEC.open_reference, CODEC.open_cursor):
        with pytest.raises(TokenInvalid):
            open_token(candidate)


def test_digests_are_unambiguous():
    assert digest("ab", "c") != digest("a", "bc")
    assert len(digest("x")) == DIGEST_BYTES
    assert reference_digest("a") != digest("a")


def test_short_secrets_are_refused():
    with pytest.raises(ValueError):
        TokenCodec(b"short")


@given(offset=st.integers(0, 2**32 - 1), served=st.integers(0, 2**32 - 1), now=st.floats(0, 4e9))
def test_every_cursor_has_the_computed_constant_length(offset, served, now):
    from agent_knowledge.references.codec import CURSOR_LENGTH

    cursor, _ = TokenCodec(SECRET).issue_cursor(
        CursorClaims(reference=bytes(DIGEST_BYTES), offset=offset, served=served), now
    )
    assert len(cursor) == CURSOR_LENGTH
