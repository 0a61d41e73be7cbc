"""Hints and references for retrieved documents, shared by search and turn preparation.

A hint is a signed reference (docs/DESIGN.md §5) plus a bounded excerpt of the matching chunk; its
expiry is sent as an ISO 8601 UTC time. Search status says whether every source answered
(§3): a retrieval failure must never read as "no knowledge".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_knowledge.identity.caller import Caller
from agent_knowledge.knowledge.search_budget import HintDraft, fit_search_response, shrink_to_fit
from agent_knowledge.limits import SEARCH_MAX_BYTES
from agent_knowledge.models import Hint, SearchStatus
from agent_knowledge.records import DocumentRecord
from agent_knowledge.references.binding import reference_claims
from agent_knowledge.references.codec import TokenCodec

if TYPE_CHECKING:
    from agent_knowledge.retrieval.query import RetrievalResult, RetrievedDocument


def iso_utc(epoch_seconds: int) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def search_status(result: RetrievalResult) -> SearchStatus:
    """`unavailable` if no source answered; `partial` if one failed or answered from an older index
    generation than its newest (which failed to load: what was published since is missing)."""
    if result.failed_kb_ids and not result.answered_kb_ids:
        return "unavailable"
    if result.failed_kb_ids or result.degraded_kb_ids:
        return "partial"
    return "ok"


def score_of(found: RetrievedDocument) -> float:
    """The score as sent: a ranking number, not a probability (docs/DESIGN.md §8)."""
    return round(found.score, 4)


def issue_reference(
    codec: TokenCodec, caller: Caller, run_id: str | None, scope_revision: str, document: DocumentRecord, now: float
) -> tuple[str, str]:
    """A reference to `document` bound to this caller, run and scope, and its expiry (ISO UTC)."""
    ref, expires_at = codec.issue_reference(reference_claims(caller, run_id, scope_revision, document), now)
    return ref, iso_utc(expires_at)


def hint_drafts(
    codec: TokenCodec,
    caller: Caller,
    run_id: str | None,
    scope_revision: str,
    documents: list[RetrievedDocument],
    now: float,
) -> list[HintDraft]:
    drafts = []
    for found in documents:
        ref, expires_at = issue_reference(codec, caller, run_id, scope_revision, found.document, now)
        drafts.append(
            HintDraft(
                ref=ref,
                title=found.document.title,
                chunk_text=found.chunk_text,
                matched_terms=found.matched_terms,
                revision=found.document.revision,
                score=score_of(found),
                expires_at=expires_at,
            )
        )
    return drafts


def fit_hints(envelope: dict[str, Any], drafts: list[HintDraft]) -> tuple[list[Hint], bool]:
    """The hints that fit, with `envelope` (every other field of the response, in wire order),
    into `SEARCH_MAX_BYTES`, and whether anything was cut or dropped."""
    head = {name: value for name, value in envelope.items() if name not in {"hints", "truncated"}}
    hints, truncated = fit_search_response(head, drafts)
    fitted = shrink_to_fit({**head, "hints": hints, "truncated": truncated}, SEARCH_MAX_BYTES)
    # Built from our own sized values: no second validation.
    return [Hint.model_construct(**hint) for hint in fitted["hints"]], fitted["truncated"]
