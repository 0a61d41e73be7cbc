"""Knowledge read: one page of a referenced document's body, revalidated on every call.

Checks, in the protocol's order (docs/DESIGN.md §5): token encoding, MAC, purpose and cursor binding
(400) → expiry (410) → bound identity and run (400) → scope revision (409 scope changed) →
document record and content digests (409 knowledge changed). Storage failures anywhere are 503.
The body is read with a ranged GET of the object recorded at ingest (immutable key per revision,
`IfMatch` on its ETag) whose recorded SHA-256 must equal the one the reference binds.
"""

from __future__ import annotations

import hmac

from agent_knowledge.errors import (
    KnowledgeChanged,
    KnowledgeUnavailable,
    ReferenceExpired,
    ReferenceInvalid,
    ScopeChanged,
)
from agent_knowledge.identity.caller import Caller
from agent_knowledge.identity.scope import load_scope
from agent_knowledge.knowledge.body_window import BodyWindow, read_body_window
from agent_knowledge.knowledge.read_budget import plan_page, window_end
from agent_knowledge.limits import READ_CHAIN_MAX_BYTES
from agent_knowledge.models import ReadRequest, ReadResponse
from agent_knowledge.records import DocumentRecord
from agent_knowledge.references.binding import document_digest, identity_digest, scope_digest
from agent_knowledge.references.codec import (
    CURSOR_LENGTH,
    CursorClaims,
    ReferenceClaims,
    TokenCodec,
    TokenExpired,
    TokenInvalid,
    ensure_fresh,
    reference_digest,
)
from agent_knowledge.repositories.bodies import BodyMissing, BodyReplaced
from agent_knowledge.runtime.container import Dependencies


def _open_tokens(codec: TokenCodec, request: ReadRequest) -> tuple[ReferenceClaims, CursorClaims | None]:
    try:
        reference = codec.open_reference(request.ref)
        cursor = codec.open_cursor(request.cursor) if request.cursor else None
    except TokenInvalid:
        raise ReferenceInvalid() from None
    if cursor is not None:
        if not hmac.compare_digest(cursor.reference, reference_digest(request.ref)):
            raise ReferenceInvalid("the cursor belongs to another reference")
        if cursor.offset != cursor.served or cursor.served > READ_CHAIN_MAX_BYTES:
            raise ReferenceInvalid()
    return reference, cursor


def _ensure_fresh(reference: ReferenceClaims, cursor: CursorClaims | None, now: float) -> None:
    # A chain continues on its cursor's clock: each page issues a cursor valid for 300 s.
    try:
        ensure_fresh(cursor.expires_at if cursor else reference.expires_at, now)
    except TokenExpired as expired:
        raise ReferenceExpired(expires_at=expired.expires_at) from None


def _current_document(deps: Dependencies, caller: Caller, reference: ReferenceClaims) -> tuple[DocumentRecord, str]:
    scope = load_scope(deps.repositories, caller)
    if not hmac.compare_digest(scope_digest(scope.revision), reference.scope):
        raise ScopeChanged()
    if reference.kb_id not in scope.enabled_kb_ids():
        raise KnowledgeChanged()
    document = deps.repositories.documents.get(reference.kb_id, reference.doc_id)
    if (
        document is None
        or document.status != "ready"
        or not hmac.compare_digest(document_digest(document), reference.document)
    ):
        raise KnowledgeChanged()
    return document, scope.revision


def _still_current(deps: Dependencies, document: DocumentRecord) -> bool:
    current = deps.repositories.documents.get(document.kb_id, document.doc_id)
    return current is not None and current.status == "ready" and current.revision == document.revision


def _window(deps: Dependencies, document: DocumentRecord, start: int, end: int) -> BodyWindow:
    try:
        return read_body_window(deps.repositories.bodies, document, start, end)
    except BodyReplaced:
        raise KnowledgeChanged() from None
    except BodyMissing:
        # An update or delete that landed after the record check removes the old revision's body:
        # that is a changed document, not an outage. Only a body missing under a current record is.
        if _still_current(deps, document):
            raise KnowledgeUnavailable("the document body is temporarily unavailable") from None
        raise KnowledgeChanged() from None


def read_knowledge(deps: Dependencies, caller: Caller, request: ReadRequest) -> ReadResponse:
    codec = deps.token_codec()
    reference, cursor = _open_tokens(codec, request)
    _ensure_fresh(reference, cursor, deps.clock())
    if request.run_id != reference.run_id or not hmac.compare_digest(
        identity_digest(caller, reference.run_id), reference.identity
    ):
        raise ReferenceInvalid("the reference was issued to another caller or run")

    document, scope_revision = _current_document(deps, caller, reference)
    offset = cursor.offset if cursor else 0
    served = cursor.served if cursor else 0
    if offset > document.body_bytes:
        raise ReferenceInvalid()

    end = window_end(offset, served, document.body_bytes, request.max_bytes)
    window = _window(deps, document, offset, end)

    # One response model: its wire form (content still empty) sizes the envelope, then it takes the page.
    response = ReadResponse(
        route=caller.route.route,
        run_id=reference.run_id,
        knowledge_scope_revision=scope_revision,
        ref=request.ref,
        revision=document.revision,
        title=document.title,
        content="",
        next_cursor=None,
        truncated=False,
        budget_exhausted=False,
        total_content_bytes=document.body_bytes,
        read_chain_max_bytes=READ_CHAIN_MAX_BYTES,
    )
    plan = plan_page(
        response.wire(), window.data, offset, served, document.body_bytes, request.max_bytes, CURSOR_LENGTH
    )
    if not plan.last:
        next_offset = offset + plan.consumed
        claims = CursorClaims(reference=reference_digest(request.ref), offset=next_offset, served=next_offset)
        response.next_cursor, _ = codec.issue_cursor(claims, deps.clock())
    response.content = plan.content
    response.truncated = plan.truncated
    response.budget_exhausted = plan.budget_exhausted
    return response
