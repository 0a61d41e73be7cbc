"""Opaque signed tokens: the codec, what references bind, and the container's signing codec."""

from agent_knowledge.references.binding import document_digest as document_digest
from agent_knowledge.references.binding import identity_digest as identity_digest
from agent_knowledge.references.binding import reference_claims as reference_claims
from agent_knowledge.references.binding import scope_digest as scope_digest
from agent_knowledge.references.codec import CURSOR_LENGTH as CURSOR_LENGTH
from agent_knowledge.references.codec import CursorClaims as CursorClaims
from agent_knowledge.references.codec import ReferenceClaims as ReferenceClaims
from agent_knowledge.references.codec import TokenCodec as TokenCodec
from agent_knowledge.references.codec import TokenError as TokenError
from agent_knowledge.references.codec import TokenExpired as TokenExpired
from agent_knowledge.references.codec import TokenInvalid as TokenInvalid
from agent_knowledge.references.codec import ensure_fresh as ensure_fresh
from agent_knowledge.references.codec import reference_digest as reference_digest
from agent_knowledge.references.server_token import default_codec as default_codec
from agent_knowledge.references.server_token import reset_codec as reset_codec
