"""Server-side turn preparation: the knowledge context of a run while it is still `preparing`.

- legacy (no `knowledge_delivery`) and `"inline"`: up to `max_docs` document bodies, each cut to
  8,000 characters (`content_truncated` says so), plus run-bound references to the same documents;
  `"inline"` also echoes `context.knowledge_delivery`.
- `"on_demand"`: no bodies and no references; `context.knowledge_delivery` carries run-bound
  hints produced by the same code as the search endpoint, bounded to the same 4096 bytes.

The retrieval query is the user input, bounded like a search query (its first 2,000 characters).
Bodies are fetched in parallel and come from the object recorded at ingest (`IfMatch` on its ETag) and must carry the
SHA-256 the document record holds; a body that cannot be served that way is left out and the
status says `partial` (or `unavailable` if none could be), never a silent "no knowledge".
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_knowledge import wire
from agent_knowledge.core.concurrency import background
from agent_knowledge.dependencies import Dependencies
from agent_knowledge.errors import KnowledgeChanged, KnowledgeUnavailable
from agent_knowledge.identity.caller import Caller, Workspace
from agent_knowledge.identity.scope import Scope
from agent_knowledge.knowledge.body_window import read_body_window
from agent_knowledge.knowledge.hints import issue_reference, score_of, search_status
from agent_knowledge.knowledge.search import search_workspace
from agent_knowledge.limits import QUERY_MAX_CHARS, SEARCH_MAX_BYTES, SEARCH_MAX_RESULTS
from agent_knowledge.models import SearchStatus
from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.bodies import BodyMissing
from agent_knowledge.retrieval.query import RetrievedDocument, retrieve
from agent_knowledge.turns.payloads import (
    INLINE_CONTENT_MAX_CHARS,
    KnowledgeDelivery,
    KnowledgeDeliveryContext,
    KnowledgeItem,
    KnowledgeRef,
    TurnContext,
    TurnResponse,
)

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
        text = read_body_window(deps.repositories.bodies, document, 0, end).text
    except (BodyMissing, KnowledgeChanged, KnowledgeUnavailable):
        return None
    cut = end < document.body_bytes or len(text) > INLINE_CONTENT_MAX_CHARS
    return text[:INLINE_CONTENT_MAX_CHARS], cut


def inline_knowledge(deps: Dependencies, caller: Caller, run: RunRecord, scope: Scope, query: str) -> InlineKnowledge:
    if not scope.enabled:
        return InlineKnowledge([], [], "disabled")
    result = retrieve(
        deps.repositories.bodies,
        deps.repositories.documents,
        scope,
        query,
        max_docs=scope.config.max_docs,
        cache=deps.index_cache(),
        embedder=deps.embedder(),
        reranker=deps.reranker(),
        viewer=caller.viewer,
    )
    status = search_status(result)
    codec = deps.token_codec()
    now = deps.clock()
    items: list[KnowledgeItem] = []
    refs: list[KnowledgeRef] = []
    # The bodies are independent reads: fetched at once, one round trip for all of them.
    fetches = [background(_body_excerpt, deps, found) for found in result.documents]
    for found, fetch in zip(result.documents, fetches, strict=True):
        excerpt = fetch.result()
        if excerpt is None:
            continue
        content, cut = excerpt
        document = found.document
        score = score_of(found)
        items.append(
            KnowledgeItem(
                title=document.title, content=content, score=score, revision=document.revision, content_truncated=cut
            )
        )
        ref, expires_at = issue_reference(codec, caller, run.run_id, scope.revision, document, now)
        refs.append(
            KnowledgeRef(ref=ref, title=document.title, revision=document.revision, score=score, expires_at=expires_at)
        )
    if len(items) < len(result.documents):
        status = "unavailable" if not items else "partial"
    return InlineKnowledge(items, refs, status)


def on_demand_delivery(
    deps: Dependencies, workspace: Workspace, run: RunRecord, query: str
) -> KnowledgeDeliveryContext:
    scope = workspace.scope
    outcome = search_workspace(deps, workspace, query, SEARCH_MAX_RESULTS, run)
    delivery = KnowledgeDeliveryContext(
        mode="on_demand",
        knowledge_scope_revision=scope.revision,
        status=outcome.response.status,
        hints=outcome.response.hints,
        truncated=outcome.response.truncated,
    )
    # The search response fit 4096 bytes; this envelope is about as large. Guarantee the bound.
    while delivery.hints and wire.size(delivery) > SEARCH_MAX_BYTES:
        delivery.hints = delivery.hints[:-1]
        delivery.truncated = True
    return delivery


def prepare_context(
    deps: Dependencies,
    workspace: Workspace,
    run: RunRecord,
    user_input: str,
    mode: KnowledgeDelivery | None,
) -> TurnResponse:
    """The turn's context, over the route's scope read with the identity."""
    caller, scope = workspace.caller, workspace.scope
    query = retrieval_query(user_input)
    items: list[KnowledgeItem] = []
    refs: list[KnowledgeRef] = []
    if mode == "on_demand":
        context = TurnContext(knowledge_delivery=on_demand_delivery(deps, workspace, run, query))
    else:
        inline = inline_knowledge(deps, caller, run, scope, query)
        items, refs = inline.items, inline.refs
        context = TurnContext()
        if mode == "inline":
            context = TurnContext(
                knowledge_delivery=KnowledgeDeliveryContext(
                    mode="inline", knowledge_scope_revision=scope.revision, status=inline.status
                )
            )
    return TurnResponse(
        run_id=run.run_id,
        knowledge_scope_revision=scope.revision,
        instructions=caller.route.instructions,
        knowledge=items,
        knowledge_refs=refs,
        context=context,
    )
