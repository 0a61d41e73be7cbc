"""Knowledge read: one page of a referenced document's body, revalidated on every call.

Checks, in the protocol's order (docs/DESIGN.md §2, §4, §5): bearer (401) → route (404) → request
body (400) → run → token encoding, MAC, purpose and cursor binding (400) → expiry (410) → bound
identity and run (400) → scope revision (409 scope changed) → document record and content digests
(409 knowledge changed) and the document's current access for the caller (lost access: the same
409 as a document gone, `identity/document_access`). Storage failures anywhere are 503.

`read_knowledge` is the operation (the read route and the MCP tool) and owns that order. Round
trips (issue 16): the reference is opened first, so the document record joins the identity's
first batch; the ranged body GET (a key per write, never overwritten; `IfMatch` on the ETag recorded at
ingest, SHA-256 as bound) starts beside the second batch and is used only once every check passed.
"""

from __future__ import annotations

import hmac
from concurrent.futures import Future
from dataclasses import dataclass

from agent_knowledge.core.concurrency import background
from agent_knowledge.dependencies import Dependencies
from agent_knowledge.errors import (
    KnowledgeChanged,
    KnowledgeError,
    KnowledgeUnavailable,
    ReferenceExpired,
    ReferenceInvalid,
    ScopeChanged,
)
from agent_knowledge.identity.caller import Caller, Prefetch, Workspace, open_workspace
from agent_knowledge.identity.document_access import visible
from agent_knowledge.identity.run_access import authorize_run
from agent_knowledge.knowledge.body_window import BodyWindow, read_body_window
from agent_knowledge.knowledge.read_budget import plan_page, window_end
from agent_knowledge.limits import READ_CHAIN_MAX_BYTES
from agent_knowledge.models import ParsedBody, ReadRequest, ReadResponse
from agent_knowledge.records import DocumentRecord, SessionRecord
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


def _open_tokens(
    codec: TokenCodec, request: ReadRequest
) -> tuple[ReferenceClaims, CursorClaims | None, ReferenceInvalid | None]:
    """The reference (its error raised now), and the cursor or why it is refused (raised by
    `read_knowledge` only once the reference passed its own checks, see `ReferenceInvalid`)."""
    # Reasons are the codec's fixed phrases (never token text); they reach the logs only.
    try:
        reference = codec.open_reference(request.ref)
    except TokenInvalid as exc:
        raise ReferenceInvalid(f"reference: {exc}", token="reference") from None
    if not request.cursor:
        return reference, None, None
    try:
        cursor = codec.open_cursor(request.cursor)
    except TokenInvalid as exc:
        return reference, None, ReferenceInvalid(f"cursor: {exc}", token="cursor")
    if not hmac.compare_digest(cursor.reference, reference_digest(request.ref)):
        return reference, None, ReferenceInvalid("the cursor belongs to another reference", token="cursor")
    if cursor.offset != cursor.served or cursor.served > READ_CHAIN_MAX_BYTES:
        return reference, None, ReferenceInvalid("the cursor's offsets are out of bounds", token="cursor")
    return reference, cursor, None


def _ensure_bound(reference: ReferenceClaims, caller: Caller, run_id: str | None) -> None:
    if run_id != reference.run_id or not hmac.compare_digest(
        identity_digest(caller, reference.run_id), reference.identity
    ):
        raise ReferenceInvalid("issued to another caller or run", token="reference")


def _ensure_fresh(reference: ReferenceClaims, cursor: CursorClaims | None, now: float) -> None:
    # Both clocks count: a cursor is issued fresh on every page, so checking it alone would let a
    # chain refresh itself forever; the reference's 300 s bound the whole chain.
    try:
        ensure_fresh(reference.expires_at, now)
        if cursor is not None:
            ensure_fresh(cursor.expires_at, now)
    except TokenExpired as expired:
        raise ReferenceExpired(expires_at=expired.expires_at) from None


@dataclass
class _Tokens:
    """The reference and cursor, opened before the identity is read (the document's key is in the
    reference); an error opening them is raised later, in the protocol's order."""

    reference: ReferenceClaims | None = None
    cursor: CursorClaims | None = None
    cursor_error: ReferenceInvalid | None = None  # raised after the reference's own checks
    error: KnowledgeError | None = None

    def get(self) -> tuple[ReferenceClaims, CursorClaims | None]:
        if self.error is not None:
            raise self.error
        assert self.reference is not None
        return self.reference, self.cursor


@dataclass
class ReadAhead:
    """What a read does before the caller's identity is read: its tokens opened (an error is kept
    and raised later, in the protocol's order), so that the document the reference names joins the
    identity's first round trip and its body fetch starts beside the second (`fetch_body`, run by
    `open_workspace` once the session is valid): its `prefetch`."""

    deps: Dependencies
    body: ParsedBody[ReadRequest]
    tokens: _Tokens
    fetches: list[Future[BodyWindow]]

    @property
    def prefetch(self) -> Prefetch:
        reference = self.tokens.reference
        return Prefetch(
            run_id=self.body.model.run_id if self.body.model else None,
            document=(reference.kb_id, reference.doc_id) if reference else None,
            after_session=self.fetch_body,
        )

    def fetch_body(self, session: SessionRecord, document: DocumentRecord | None) -> None:
        """Start the body read if the record read with the session is what the reference names;
        the bytes are used only once every check passed."""
        reference, cursor = self.tokens.reference, self.tokens.cursor
        if reference is None or document is None or self.tokens.cursor_error or not _fetchable(document, reference):
            return
        offset = cursor.offset if cursor else 0
        served = cursor.served if cursor else 0
        if offset <= document.body_bytes:
            end = window_end(offset, served, document.body_bytes, self.body.get().max_bytes)
            self.fetches.append(background(read_body_window, self.deps.repositories.bodies, document, offset, end))


def read_ahead(deps: Dependencies, body: ParsedBody[ReadRequest]) -> ReadAhead:
    """Open the request's tokens before the identity is read (see `ReadAhead`)."""
    tokens = _Tokens()
    if body.model is not None:
        try:
            tokens = _Tokens(*_open_tokens(deps.token_codec(), body.model))
        except (ReferenceInvalid, KnowledgeUnavailable) as error:
            tokens = _Tokens(error=error)
    return ReadAhead(deps, body, tokens, [])


def _fetchable(document: DocumentRecord, reference: ReferenceClaims) -> bool:
    return document.status == "ready" and hmac.compare_digest(document_digest(document), reference.document)


def _matches(document: DocumentRecord | None, reference: ReferenceClaims) -> DocumentRecord:
    if document is None or not _fetchable(document, reference):
        raise KnowledgeChanged()
    return document


def _still_current(deps: Dependencies, document: DocumentRecord) -> bool:
    current = deps.repositories.documents.get(document.kb_id, document.doc_id)
    return current is not None and current.status == "ready" and current.revision == document.revision


def _window(
    deps: Dependencies, document: DocumentRecord, fetch: Future[BodyWindow] | None, start: int, end: int
) -> BodyWindow:
    try:
        if fetch is not None:
            return fetch.result()
        return read_body_window(deps.repositories.bodies, document, start, end)
    except BodyReplaced:
        raise KnowledgeChanged() from None
    except BodyMissing:
        # An update or delete that landed after the record check removes the old revision's body:
        # that is a changed document, not an outage. Only a body missing under a current record is.
        if _still_current(deps, document):
            raise KnowledgeUnavailable("the document body is temporarily unavailable") from None
        raise KnowledgeChanged() from None


def read_knowledge(
    deps: Dependencies, authorization: str | None, route: str, body: ParsedBody[ReadRequest]
) -> ReadResponse:
    """One page, its steps in the protocol's order (the module's docstring): the tokens opened, the
    caller revalidated with the run and the document read alongside (the body parsed before, its
    error kept: 401/404 come before 400), the body's error, the run's access, then the page."""
    ahead = read_ahead(deps, body)
    workspace = open_workspace(deps.repositories, authorization, route, deps.clock(), ahead.prefetch, oauth=deps.oauth)
    request = body.get()
    authorize_run(deps.repositories, workspace, request.run_id, deps.clock())
    return _read_page(deps, workspace, request, ahead)


def _read_page(deps: Dependencies, workspace: Workspace, request: ReadRequest, ahead: ReadAhead) -> ReadResponse:
    """The reference's checks and the page, for the workspace opened with `ahead.prefetch`."""
    caller = workspace.caller
    reference, cursor = ahead.tokens.get()
    fetches = ahead.fetches
    codec = deps.token_codec()
    if ahead.tokens.cursor_error is not None:
        # The cursor is blamed only to the reference's own caller (see `ReferenceInvalid`).
        _ensure_bound(reference, caller, request.run_id)
        raise ahead.tokens.cursor_error
    _ensure_fresh(reference, cursor, deps.clock())
    _ensure_bound(reference, caller, request.run_id)
    scope = workspace.scope
    if not hmac.compare_digest(scope_digest(scope.revision), reference.scope):
        raise ScopeChanged()
    if reference.kb_id not in scope.enabled_kb_ids():
        raise KnowledgeChanged()
    document = _matches(workspace.document, reference)
    # The document's current access, every page: lost access is answered as a document gone.
    if not visible(document.access, scope.knowledge_bases[reference.kb_id].default_access, caller.viewer):
        raise KnowledgeChanged()
    scope_revision = scope.revision
    offset = cursor.offset if cursor else 0
    served = cursor.served if cursor else 0
    if offset > document.body_bytes:
        raise ReferenceInvalid("the cursor's offset is past the end of the body", token="cursor")

    end = window_end(offset, served, document.body_bytes, request.max_bytes)
    window = _window(deps, document, fetches[0] if fetches else None, offset, end)

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
