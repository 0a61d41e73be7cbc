"""Knowledge search: bounded, signed hints for the caller's current scope.

`search_knowledge` is the operation (the search route and the MCP tool): it owns the order of the
steps, and its `authorize_run` refuses preparing runs. Server-side turn preparation calls
`search_workspace` with a `preparing` run it just created.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_knowledge.core.observability import metrics
from agent_knowledge.dependencies import Dependencies
from agent_knowledge.identity.caller import Prefetch, Workspace, open_workspace
from agent_knowledge.identity.run_access import authorize_run
from agent_knowledge.knowledge.hints import fit_hints, hint_drafts, search_status
from agent_knowledge.models import ParsedBody, SearchRequest, SearchResponse
from agent_knowledge.records import DocumentRecord, RunRecord, SessionRecord
from agent_knowledge.retrieval.query import query_vector_for, retrieve
from agent_knowledge.retrieval.query_vector import QueryVector

if TYPE_CHECKING:
    from agent_knowledge.embedding.base import Embedder


@dataclass(frozen=True)
class SearchOutcome:
    response: SearchResponse
    hits: int
    stale_hits_dropped: int


@dataclass
class SearchAhead:
    """What a search starts while the caller's identity is read: the query's embedding. Once the
    session is known valid (`embed_query`, run by `open_workspace` before its second round trip)
    a remote provider's call (Bedrock) starts, so it overlaps the scope read and the index loads
    and the search stays at 3 sequential round trips (docs/DESIGN.md §8). Never before the session
    check: a request without a valid session costs no model call."""

    body: ParsedBody[SearchRequest]
    # The container's embedder (`Dependencies.embedder`): the one the search then ranks with.
    embedder: Callable[[], Embedder | None]
    query_vector: QueryVector | None = None

    @property
    def prefetch(self) -> Prefetch:
        """The run the body names, read with the identity; the embedding started once the session is valid."""
        return Prefetch(run_id=self.body.model.run_id if self.body.model else None, after_session=self.embed_query)

    def embed_query(self, session: SessionRecord, document: DocumentRecord | None) -> None:
        if self.body.model is not None and self.query_vector is None:
            self.query_vector = query_vector_for(self.body.model.query.strip(), self.embedder())
            self.query_vector.start_remote()


def search_knowledge(
    deps: Dependencies, authorization: str | None, route: str, body: ParsedBody[SearchRequest]
) -> SearchOutcome:
    """One search, its steps in the protocol's order (docs/DESIGN.md §2, §4, §8): the caller
    revalidated with the run the body names read alongside (the body parsed before, its error
    kept: 401/404 come before 400), the body's error, the run's access, then the search."""
    ahead = SearchAhead(body, deps.embedder)
    workspace = open_workspace(deps.repositories, authorization, route, deps.clock(), ahead.prefetch, oauth=deps.oauth)
    request = body.get()
    run = authorize_run(deps.repositories, workspace, request.run_id, deps.clock())
    return search_workspace(deps, workspace, request.query, request.limit, run, ahead)


def search_workspace(
    deps: Dependencies,
    workspace: Workspace,
    query: str,
    limit: int,
    run: RunRecord | None,
    ahead: SearchAhead | None = None,
) -> SearchOutcome:
    """The search itself, in a workspace already opened and under a run already authorized."""
    started = time.perf_counter()
    caller, scope = workspace.caller, workspace.scope
    run_id = run.run_id if run else None
    response = SearchResponse(
        route=caller.route.route,
        run_id=run_id,
        knowledge_scope_revision=scope.revision,
        status="disabled",
        hints=[],
        truncated=False,
    )
    if not scope.enabled:
        outcome = SearchOutcome(response, hits=0, stale_hits_dropped=0)
        _record_metrics(outcome, started)
        return outcome

    result = retrieve(
        deps.repositories.bodies,
        deps.repositories.documents,
        scope,
        query.strip(),
        max_docs=min(limit, scope.config.max_docs),
        cache=deps.index_cache(),
        embedder=deps.embedder(),
        reranker=deps.reranker(),
        query_vector=ahead.query_vector if ahead is not None else None,
        viewer=caller.viewer,
    )
    drafts = hint_drafts(deps.token_codec(), caller, run_id, scope.revision, result.documents, deps.clock())
    # One response model: its wire form sizes the envelope, then it takes the hints that fit.
    response.status = search_status(result)
    response.hints, response.truncated = fit_hints(response.wire(), drafts)
    outcome = SearchOutcome(response, hits=len(response.hints), stale_hits_dropped=result.stale_hits_dropped)
    _record_metrics(outcome, started)
    return outcome


def _record_metrics(outcome: SearchOutcome, started: float) -> None:
    metrics.add_metric(name="SearchCount", unit="Count", value=1)
    metrics.add_metric(name=f"SearchStatus_{outcome.response.status}", unit="Count", value=1)
    metrics.add_metric(name="SearchHits", unit="Count", value=outcome.hits)
    metrics.add_metric(name="StaleHitsDropped", unit="Count", value=outcome.stale_hits_dropped)
    metrics.add_metric(name="SearchLatency", unit="Milliseconds", value=(time.perf_counter() - started) * 1000)
