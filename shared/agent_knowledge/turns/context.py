"""Server-side turn preparation: the knowledge context of a run while it is still `preparing`.

- legacy (no `knowledge_delivery`) and `"inline"`: up to `max_docs` document bodies, each cut to
  8,000 characters (`content_truncated` says so), plus run-bound references to the same documents;
  `"inline"` also echoes `context.knowledge_delivery`.
- `"on_demand"`: no bodies and no references; `context.knowledge_delivery` carries run-bound
  hints produced by the same code as the search endpoint, bounded to the same 4096 bytes.

The retrieval query is the user input, bounded like a search query (its first 2,000 characters).
Bodies come from the object recorded at ingest (`IfMatch` on its ETag) and must carry the
SHA-256 the document record holds; a body that cannot be served that way is left out and the
status says `partial` (or `unavailable` if none could be), never a silent "no knowledge".
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_knowledge import wire
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.identity.caller import Caller
from agent_knowledge.identity.scope import Scope
from agent_knowledge.identity.workspace import load_scope
from agent_knowledge.knowledge.read_budget import decode_window
from agent_knowledge.knowledge.search import iso_utc, search_knowledge, status_of
from agent_knowledge.knowledge.search_budget import SEARCH_MAX_BYTES, shrink_to_fit
from agent_knowledge.models import LIMITS, Hint, SearchStatus
from agent_knowledge.records import RunRecord
from agent_knowledge.references.binding import reference_claims
from agent_knowledge.repositories.bodies import SHA256_METADATA, BodyMissing
from agent_knowledge.retrieval import RetrievedDocument, retrieve
from agent_knowledge.runtime.container import Dependencies
from agent_knowledge.turns.models import (
    INLINE_CONTENT_MAX_CHARS,
    KnowledgeDelivery,
    KnowledgeDeliveryContext,
    KnowledgeItem,
    KnowledgeRef,
    TurnContext,
    TurnResponse,
)

QUERY_MAX_CHARS = 2000
# A UTF-8 character is at most 4 bytes: this many bytes always hold the first 8,000 characters.
INLINE_WINDOW_BYTES = INLINE_CONTENT_MAX_CHARS * 4


def retrieval_query(user_input: str) -> str:
    return user_input.strip()[:QUERY_MAX_CHARS]


@dataclass(frozen=True)
class InlineKnowledge:
    items: list[KnowledgeItem]
    refs: list[KnowledgeRef]
    status: SearchStatus


def _body_excerpt(deps: Dependencies, found: RetrievedDocument) -> tuple[str, bool] | None:
    """The first 8,000 characters of the current body and whether it was cut; None if unservable."""
    document = found.document
    end = min(document.body_bytes, INLINE_WINDOW_BYTES)
    try:
        window, metadata = deps.repositories.bodies.read_range(
            document.body_key, 0, end, etag=document.body_etag or None
        )
    except (BodyMissing, KnowledgeUnavailable):
        return None
    if len(window) != end or (metadata and metadata.get(SHA256_METADATA) != document.body_sha256):
        return None
    try:
        text = decode_window(window)
    except UnicodeDecodeError:
        return None
    cut = end < document.body_bytes or len(text) > INLINE_CONTENT_MAX_CHARS
    return text[:INLINE_CONTENT_MAX_CHARS], cut


def inline_knowledge(deps: Dependencies, caller: Caller, run: RunRecord, scope: Scope, query: str) -> InlineKnowledge:
    if not scope.enabled:
        return InlineKnowledge([], [], "disabled")
    result = retrieve(
        deps.repositories.bodies, deps.repositories.documents, scope, query, max_docs=scope.config.max_docs
    )
    status = status_of(result)
    codec = deps.token_codec()
    now = deps.clock()
    items: list[KnowledgeItem] = []
    refs: list[KnowledgeRef] = []
    for found in result.documents:
        excerpt = _body_excerpt(deps, found)
        if excerpt is None:
            continue
        content, cut = excerpt
        document = found.document
        score = round(found.score, 4)
        items.append(
            KnowledgeItem(
                title=document.title, content=content, score=score, revision=document.revision, content_truncated=cut
            )
        )
        ref, expires_at = codec.issue_reference(reference_claims(caller, run.run_id, scope.revision, document), now)
        refs.append(
            KnowledgeRef(
                ref=ref, title=document.title, revision=document.revision, score=score, expires_at=iso_utc(expires_at)
            )
        )
    if len(items) < len(result.documents):
        status = "unavailable" if not items else "partial"
    return InlineKnowledge(items, refs, status)


def on_demand_delivery(
    deps: Dependencies, caller: Caller, run: RunRecord, scope: Scope, query: str
) -> KnowledgeDeliveryContext:
    outcome = search_knowledge(deps, caller, query, LIMITS.search_max_results, run, scope=scope)
    delivery = KnowledgeDeliveryContext(
        mode="on_demand",
        knowledge_scope_revision=scope.revision,
        status=outcome.response.status,
        hints=outcome.response.hints,
        truncated=outcome.response.truncated,
    )
    # The search response fit 4096 bytes; this envelope is about as large. Guarantee the bound.
    if wire.size(delivery) > SEARCH_MAX_BYTES:
        fitted = shrink_to_fit(delivery.wire())
        delivery = delivery.model_copy(
            update={"hints": [Hint(**hint) for hint in fitted["hints"]], "truncated": fitted["truncated"]}
        )
    return delivery


def prepare_context(
    deps: Dependencies, caller: Caller, run: RunRecord, user_input: str, mode: KnowledgeDelivery | None
) -> TurnResponse:
    scope = load_scope(deps.repositories, caller)
    query = retrieval_query(user_input)
    response = TurnResponse(
        run_id=run.run_id,
        knowledge_scope_revision=scope.revision,
        instructions=caller.route.instructions,
        knowledge=[],
        knowledge_refs=[],
        context=TurnContext(),
    )
    if mode == "on_demand":
        delivery = on_demand_delivery(deps, caller, run, scope, query)
        return response.model_copy(update={"context": TurnContext(knowledge_delivery=delivery)})

    inline = inline_knowledge(deps, caller, run, scope, query)
    context = TurnContext()
    if mode == "inline":
        context = TurnContext(
            knowledge_delivery=KnowledgeDeliveryContext(
                mode="inline", knowledge_scope_revision=scope.revision, status=inline.status
            )
        )
    return response.model_copy(update={"knowledge": inline.items, "knowledge_refs": inline.refs, "context": context})
