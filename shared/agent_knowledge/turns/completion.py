"""Completing a run: `context_ready` → `completed` (or `failed`), idempotently.

The route is not in the path, so the caller is revalidated against the run's own route. A run
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

from agent_knowledge.errors import RunNotFound, RunNotReady, TurnConflict, WorkspaceNotFound
from agent_knowledge.identity.caller import bearer_token, check_access, check_session, valid_route_name
from agent_knowledge.identity.scope import canonical_json
from agent_knowledge.limits import RUN_ID_MAX_CHARS
from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.batch_get import batch_get
from agent_knowledge.repositories.turn_store import CompletionClaim
from agent_knowledge.runtime.container import Dependencies
from agent_knowledge.turns.payloads import CompleteRunRequest, CompleteRunResponse

# Not a valid route name (see identity.caller): the access check fails with 404 for an unknown run.
_NO_ROUTE = "-"


def completion_fingerprint(run_id: str, request: CompleteRunRequest) -> str:
    return hashlib.sha256(canonical_json({"run_id": run_id, **request.model_dump(mode="json")})).hexdigest()


def run_of_caller(deps: Dependencies, authorization: str | None, run_id: str) -> RunRecord:
    """The run, after revalidating the caller against its route and checking it owns the run.

    Two round trips: {session, run}, then {client, the run's route}; the checks keep their order.
    """
    repositories = deps.repositories
    token = bearer_token(authorization)
    session, run = batch_get(
        repositories.dynamodb,
        [
            repositories.sessions.lookup_by_token(token),
            repositories.runs.lookup(run_id) if 0 < len(run_id) <= RUN_ID_MAX_CHARS else None,
        ],
    )
    session = check_session(session, deps.clock())
    route = run.route if run is not None else _NO_ROUTE
    client, route_record = batch_get(
        repositories.dynamodb,
        [
            repositories.clients.lookup(session.client_app_id),
            repositories.routes.lookup(route) if valid_route_name(route) else None,
        ],
    )
    try:
        caller = check_access(session, client, route, route_record)
    except WorkspaceNotFound:
        raise RunNotFound(run_id=run_id if run is not None else None) from None
    if run is None or run.session_id != caller.session_id or run.client_app_id != caller.client_app_id:
        raise RunNotFound()
    return run


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
