"""Fuzzing the token decoders: whatever arrives as `ref` or `cursor`, decoding ends in a value or a
`TokenInvalid` — never another exception (struct.error, IndexError, UnicodeDecodeError, ...).

tests/unit/test_tokens.py proves tamper evidence on well-formed tokens; this file aims at the parser
behind the MAC as well: bodies sealed with the real key but holding arbitrary claim bytes (what a
bug in issuing, or a leaked key, would produce), splices of two tokens, and arbitrary text.

Default run: ~2,600 cases. `RUN_SLOW=1` (bench/reliability/fuzz.py): ~26,000.
"""

from __future__ import annotations

import base64

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_knowledge.references.codec import (
    DIGEST_BYTES,
    CursorClaims,
    Purpose,
    ReferenceClaims,
    TokenCodec,
    TokenInvalid,
)
from tests.reliability.fuzzcount import count
from tests.reliability.slow import scaled

SECRET = b"fuzzing-server-token-0123456789abcdef"
OTHER_SECRET = b"another-server-token-0123456789abcdef"
NOW = 1_800_000_000
codec = TokenCodec(SECRET)

fuzz = settings(
    max_examples=scaled(500, 5000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
names = st.text(max_size=60).filter(lambda s: len(s.encode("utf-8")) <= 255)
digests = st.binary(min_size=DIGEST_BYTES, max_size=DIGEST_BYTES)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def open_either(token: str) -> None:
    """Decode as both purposes; anything but a value or TokenInvalid fails the property."""
    for opener in (codec.open_reference, codec.open_cursor):
        try:
            opener(token)
        except TokenInvalid:
            pass


@st.composite
def valid_reference(draw) -> str:
    claims = ReferenceClaims(
        kb_id=draw(names),
        doc_id=draw(names),
        run_id=draw(st.none() | names.filter(bool)),
        identity=draw(digests),
        scope=draw(digests),
        document=draw(digests),
    )
    return codec.issue_reference(claims, NOW)[0]


@fuzz
@given(st.text(max_size=600))
def test_arbitrary_text(token):
    count("token")
    open_either(token)


@fuzz
@given(st.binary(max_size=400))
def test_arbitrary_bytes_in_canonical_base64url(raw):
    count("token")
    open_either(_b64(raw))


@fuzz
@given(st.sampled_from([Purpose.REFERENCE, Purpose.CURSOR]), st.binary(max_size=300))
def test_arbitrary_claims_sealed_with_the_real_key(purpose, claims):
    """Past the MAC, the claim parser sees arbitrary bytes: a value or TokenInvalid only."""
    count("token")
    token, _ = codec._seal(purpose, NOW, claims)  # noqa: SLF001 - the only way past the MAC
    open_either(token)
    opener = codec.open_reference if purpose == Purpose.REFERENCE else codec.open_cursor
    try:
        opened = opener(token)
    except TokenInvalid:
        return
    assert opened.expires_at == NOW + 300


@fuzz
@given(valid_reference(), st.data())
def test_mutations_of_a_valid_reference(token, data):
    count("token")
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    mutation = data.draw(st.sampled_from(["flip", "insert", "delete", "splice", "text"]))
    if mutation == "flip":
        position = data.draw(st.integers(0, len(raw) - 1))
        bit = data.draw(st.integers(0, 7))
        mutated = _b64(raw[:position] + bytes([raw[position] ^ (1 << bit)]) + raw[position + 1 :])
    elif mutation == "insert":
        position = data.draw(st.integers(0, len(raw)))
        mutated = _b64(raw[:position] + data.draw(st.binary(min_size=1, max_size=8)) + raw[position:])
    elif mutation == "delete":
        start = data.draw(st.integers(0, len(raw) - 1))
        mutated = _b64(raw[:start] + raw[start + data.draw(st.integers(1, 8)) :])
    elif mutation == "splice":
        other = data.draw(valid_reference())
        cut = data.draw(st.integers(1, min(len(token), len(other)) - 1))
        mutated = token[:cut] + other[cut:]
        if mutated in (token, other):
            return
    else:
        position = data.draw(st.integers(0, len(token) - 1))
        mutated = token[:position] + data.draw(st.text(min_size=1, max_size=3)) + token[position + 1 :]
        if mutated == token:
            return
    try:
        codec.open_reference(mutated)
    except TokenInvalid:
        pass
    else:
        raise AssertionError(f"a {mutation} of a valid reference verified")
    open_either(mutated)


@fuzz
@given(valid_reference())
def test_a_reference_is_never_a_cursor_nor_valid_under_another_key(token):
    count("token")
    other = TokenCodec(OTHER_SECRET)
    for opener in (codec.open_cursor, other.open_reference, other.open_cursor):
        try:
            opener(token)
        except TokenInvalid:
            continue
        raise AssertionError("a reference verified where it must not")


@fuzz
@given(digests, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.data())
def test_cursors_round_trip_and_reject_every_bit_flip(reference, offset, served, data):
    count("token")
    token, _ = codec.issue_cursor(CursorClaims(reference=reference, offset=offset, served=served), NOW)
    opened = codec.open_cursor(token)
    assert (opened.reference, opened.offset, opened.served) == (reference, offset, served)
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= 1 << data.draw(st.integers(0, 7))
    try:
        codec.open_cursor(_b64(bytes(raw)))
    except TokenInvalid:
        return
    raise AssertionError("a bit-flipped cursor verified")
