"""Knowledge search: bounded, signed hints for the caller's current scope.

The public endpoint calls `search_knowledge` after `authorize_run` refused preparing runs;
server-side turn preparation calls it with a `preparing` run it just created.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from agent_knowledge.identity.caller import Caller
from agent_knowledge.identity.scope import Scope
from agent_knowledge.identity.workspace import load_scope
from agent_knowledge.knowledge.search_budget import HintDraft, fit_search_response, shrink_to_fit
from agent_knowledge.models import Hint, SearchResponse, SearchStatus
from agent_knowledge.records import RunRecord
from agent_knowledge.references.binding import reference_claims
from agent_knowledge.retrieval import RetrievalResult, retrieve
from agent_knowledge.runtime.container import Dependencies
from agent_knowledge.runtime.observability import metrics


def iso_utc(epoch_seconds: int) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_of(result: RetrievalResult) -> SearchStatus:
    if result.failed_kb_ids and not result.answered_kb_ids:
        return "unavailable"
    if result.failed_kb_ids:
        return "partial"
    return "ok"


@dataclass(frozen=True)
class SearchOutcome:
    response: SearchResponse
    hits: int
    stale_hits_dropped: int


def search_knowledge(
    deps: Dependencies,
    caller: Caller,
    query: str,
    limit: int,
    run: RunRecord | None,
    scope: Scope | None = None,
) -> SearchOutcome:
    started = time.perf_counter()
    scope = scope or load_scope(deps.repositories, caller)
    run_id = run.run_id if run else None
    empty = SearchResponse(
        route=caller.route.route,
        run_id=run_id,
        knowledge_scope_revision=scope.revision,
        status="disabled",
        hints=[],
        truncated=False,
    )
    if not scope.enabled:
        outcome = SearchOutcome(empty, hits=0, stale_hits_dropped=0)
        _record_metrics(outcome, started)
        return outcome

    result = retrieve(
        deps.repositories.bodies,
        deps.repositories.documents,
        scope,
        query.strip(),
        max_docs=min(limit, scope.config.max_docs),
    )
    now = deps.clock()
    drafts = []
    for found in result.documents:
        claims = reference_claims(caller, run_id, scope.revision, found.document)
        ref, expires_at = deps.token_codec().issue_reference(claims, now)
        drafts.append(
            HintDraft(
                ref=ref,
                title=found.document.title,
                chunk_text=found.chunk_text,
                matched_terms=found.matched_terms,
                revision=found.document.revision,
                score=round(found.score, 4),
                expires_at=iso_utc(expires_at),
            )
        )
    head = empty.model_copy(update={"status": status_of(result)}).wire()
    del head["hints"], head["truncated"]
    hints, truncated = fit_search_response(head, drafts)
    body = shrink_to_fit({**head, "hints": hints, "truncated": truncated})
    response = empty.model_copy(
        update={
            "status": status_of(result),
            "hints": [Hint(**hint) for hint in body["hints"]],
            "truncated": body["truncated"],
        }
    )
    outcome = SearchOutcome(response, hits=len(response.hints), stale_hits_dropped=result.stale_hits_dropped)
    _record_metrics(outcome, started)
    return outcome


def _record_metrics(outcome: SearchOutcome, started: float) -> None:
    metrics.add_metric(name="SearchCount", unit="Count", value=1)
    metrics.add_metric(name=f"SearchStatus_{outcome.response.status}", unit="Count", value=1)
    metrics.add_metric(name="SearchHits", unit="Count", value=outcome.hits)
    metrics.add_metric(name="StaleHitsDropped", unit="Count", value=outcome.stale_hits_dropped)
    metrics.add_metric(name="SearchLatency", unit="Milliseconds", value=(time.perf_counter() - started) * 1000)
