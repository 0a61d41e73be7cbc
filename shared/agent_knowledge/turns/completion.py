"""Completing a run: `context_ready` → `completed` (or `failed`), idempotently.

The route is not in the path, so the caller is revalidated against the run's own route
(`identity.caller.open_run`, called by the handler). A run
that does not exist, is not the caller's, or whose route the caller may no longer use is the same
`404 run_not_found` (no enumeration); the bearer is checked first either way, so an unknown
token is 401 whether or not the run exists.

The first completion records the fingerprint of its request (a conditional put); an identical
replay answers the same body, a different one `409 turn_conflict`. After completion, search and
read with the run answer `409 run_not_ready` (run_access).
"""

from __future__ import annotations

import hashlib
import hmac

from agent_knowledge.dependencies import Dependencies
from agent_knowledge.errors import RunNotReady, TurnConflict
from agent_knowledge.identity.scope import canonical_json
from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.turn_store import CompletionClaim
from agent_knowledge.turns.payloads import CompleteRunRequest, CompleteRunResponse


def completion_fingerprint(run_id: str, request: CompleteRunRequest) -> str:
    return hashlib.sha256(canonical_json({"run_id": run_id, **request.model_dump(mode="json")})).hexdigest()


def complete_run(deps: Dependencies, run: RunRecord, request: CompleteRunRequest) -> CompleteRunResponse:
    run_id = run.run_id
    now = deps.clock()
    if run.state in {"preparing", "expired"} or (run.state == "context_ready" and run.expires_at <= now):
        raise RunNotReady()

    fingerprint = completion_fingerprint(run_id, request)
    claim = CompletionClaim(
        run_id=run_id,
        fingerprint=fingerprint,
        state=request.status,
        assistant_message_id=request.assistant_message_id,
        completed_at=int(now),
    )
    earlier = deps.repositories.turns.claim_completion(claim, run.expires_at)
    if earlier is not None:
        if not hmac.compare_digest(earlier.fingerprint, fingerprint):
            raise TurnConflict("this run was already completed with a different request")
        claim = earlier
    # Also finishes a completion whose first attempt stopped between the two writes.
    if not deps.repositories.runs.transition(run_id, "context_ready", claim.state):
        current = deps.repositories.runs.get(run_id)
        if current is None or current.state != claim.state:
            raise RunNotReady()
    return CompleteRunResponse(
        run_id=run_id,
        state=claim.state,  # type: ignore[arg-type]
        assistant_message_id=claim.assistant_message_id,
        completed_at=claim.completed_at,
    )
