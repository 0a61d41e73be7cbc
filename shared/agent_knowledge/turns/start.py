"""Starting a turn: one frozen run and context per (session, route, conversation, turn).

Idempotency rests on DynamoDB conditional writes in the runs table (see docs/turns.md):

1. the `user_message_id` is claimed for this turn key — used by another turn → `turn_conflict`;
2. the turn key is claimed with the hash of the whole request, a fresh run id and a short
   preparation lease. Exactly one request wins the claim, however many arrive at once;
3. the winner creates the run (`preparing`), prepares its knowledge context, moves the run to
   `context_ready` and stores the exact response bytes on the turn record (`ready`);
4. a request that finds the key taken compares request hashes: different → `turn_conflict`;
   the same → it returns the stored bytes, waiting a bounded time while the winner prepares.
   If the winner stopped (its lease ran out) the waiter takes the preparation over, with the
   same run id.

A new turn makes 1–3 in one transaction and the two final writes of 3 in another; a cancelled
transaction writes nothing, and the request then takes the steps above one by one.

`start_turn` is the operation: the caller revalidated with the bound task read alongside, the
body's error, the task binding's check (`identity/run_access`), then the steps above.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from agent_knowledge import wire
from agent_knowledge.core.observability import logger, metrics
from agent_knowledge.dependencies import Dependencies
from agent_knowledge.errors import KnowledgeUnavailable, RunNotReady, TurnConflict
from agent_knowledge.identity.caller import Caller, Prefetch, Workspace, open_workspace
from agent_knowledge.identity.run_access import authorize_task_binding
from agent_knowledge.identity.scope import canonical_json
from agent_knowledge.models import ParsedBody
from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.turn_store import TurnClaim
from agent_knowledge.turns.context import prepare_context
from agent_knowledge.turns.payloads import TurnRequest

# A preparer that has not finished within this time is presumed gone; a replay may take over.
LEASE_SECONDS = 30
# How long a concurrent identical request waits for the winner's context (wall-clock).
WAIT_SECONDS = 10.0
WAIT_INTERVAL_SECONDS = 0.05


@dataclass(frozen=True)
class TurnOutcome:
    run_id: str
    body: str  # the exact response bytes (as text), identical on every replay
    replayed: bool


def _digest(*parts: str) -> str:
    return hashlib.sha256(canonical_json(list(parts))).hexdigest()


def turn_key(caller: Caller, request: TurnRequest) -> str:
    return _digest(
        "turn",
        caller.session_id,
        caller.client_app_id,
        caller.route.route,
        request.client_conversation_id,
        request.client_turn_id,
    )


def message_key(caller: Caller, user_message_id: str) -> str:
    return _digest("message", caller.session_id, caller.client_app_id, caller.route.route, user_message_id)


def request_hash(request: TurnRequest) -> str:
    """SHA-256 over the whole request, knowledge_delivery and task_binding included."""
    return hashlib.sha256(canonical_json(request.model_dump(mode="json"))).hexdigest()


def start_turn(
    deps: Dependencies, authorization: str | None, route: str, body: ParsedBody[TurnRequest], run_ttl_seconds: int
) -> TurnOutcome:
    """Start a turn, its steps in the protocol's order: the caller revalidated with the task the
    binding names read alongside (the body parsed before, its error kept: 401/404 come before
    400), the body's error, the binding's check — on replays too: a paused task or a revoked
    member stops the turn either way — then the turn's claims (the module's docstring)."""
    binding = body.model.task_binding if body.model else None
    prefetch = Prefetch(task_id=binding.task_id if binding else None)
    workspace = open_workspace(deps.repositories, authorization, route, deps.clock(), prefetch, oauth=deps.oauth)
    request = body.get()
    now = deps.clock()
    task_id = authorize_task_binding(
        deps.repositories,
        workspace,
        binding.task_id if binding else None,
        binding.scope_hash if binding else None,
        now,
    )
    outcome = _claim_turn(deps, workspace, request, task_id, now, run_ttl_seconds)
    logger.info("turn context delivered", extra={"run_id": outcome.run_id, "replayed": outcome.replayed})
    return outcome


def _claim_turn(
    deps: Dependencies,
    workspace: Workspace,
    request: TurnRequest,
    task_id: str | None,
    now: float,
    run_ttl_seconds: int,
    sleep: Callable[[float], None] = time.sleep,
) -> TurnOutcome:
    """The claims, then the preparation or the replay, for a caller and task binding checked just now."""
    repositories = deps.repositories
    caller = workspace.caller
    key = turn_key(caller, request)
    fingerprint = request_hash(request)
    expires_at = int(now) + run_ttl_seconds

    messages = message_key(caller, request.user_message_id)
    claim = TurnClaim(
        key=key,
        request_hash=fingerprint,
        user_message_id=request.user_message_id,
        run_id=f"run_{uuid.uuid4().hex}",
        state="preparing",
        lease_until=int(now) + LEASE_SECONDS,
        expires_at=expires_at,
    )
    # A new turn (the common case): message, turn and run claimed in one round trip.
    run = _new_run(deps, caller, claim, task_id)
    if repositories.turns.claim_fresh(messages, claim, run):
        return _prepare(deps, workspace, request, claim, task_id, created=run)

    # Something exists already: the same claims one by one say what (nothing was written).
    owner, claimed_message = repositories.turns.claim_message(messages, key, expires_at)
    if owner != key:
        raise TurnConflict("this user_message_id was already used by another turn")

    existing = repositories.turns.claim_turn(claim)
    if existing is None:
        return _prepare(deps, workspace, request, claim, task_id)
    if not hmac.compare_digest(existing.request_hash, fingerprint):
        if claimed_message:
            repositories.turns.release_message(messages, key)
        raise TurnConflict()
    return _replay(deps, workspace, request, existing, task_id, sleep)


def _replay(
    deps: Dependencies,
    workspace: Workspace,
    request: TurnRequest,
    existing: TurnClaim,
    task_id: str | None,
    sleep: Callable[[float], None],
) -> TurnOutcome:
    deadline = time.monotonic() + WAIT_SECONDS
    current: TurnClaim | None = existing
    while current is not None:
        if current.state == "ready" and current.context is not None:
            metrics.add_metric(name="TurnReplays", unit="Count", value=1)
            return TurnOutcome(current.run_id, current.context, replayed=True)
        now = deps.clock()
        if current.lease_until <= now:
            lease = int(now) + LEASE_SECONDS
            if deps.repositories.turns.renew_lease(current.key, current.lease_until, lease):
                logger.info("taking over the preparation of a turn", extra={"run_id": current.run_id})
                return _prepare(deps, workspace, request, replace(current, lease_until=lease), task_id)
        if time.monotonic() >= deadline:
            break
        sleep(WAIT_INTERVAL_SECONDS)
        current = deps.repositories.turns.get_turn(existing.key)
    raise RunNotReady("the turn is still being prepared; retry shortly")


def _new_run(deps: Dependencies, caller: Caller, claim: TurnClaim, task_id: str | None) -> RunRecord:
    return RunRecord(
        run_id=claim.run_id,
        session_id=caller.session_id,
        client_app_id=caller.client_app_id,
        route=caller.route.route,
        state="preparing",
        task_id=task_id,
        created_at=int(deps.clock()),
        expires_at=claim.expires_at,
    )


def _prepare(
    deps: Dependencies,
    workspace: Workspace,
    request: TurnRequest,
    claim: TurnClaim,
    task_id: str | None,
    created: RunRecord | None = None,
) -> TurnOutcome:
    """Prepare and freeze the turn's context. `created`: the run, when `claim_fresh` just created
    it; otherwise it is created here, or found when this request takes a preparation over."""
    repositories = deps.repositories
    try:
        if created is not None:
            run = created
        else:
            run = _new_run(deps, workspace.caller, claim, task_id)
            if not repositories.runs.create(run):  # taken over: the run exists already
                existing = repositories.runs.get(run.run_id)
                if existing is None or existing.state not in {"preparing", "context_ready"}:
                    raise RunNotReady()
                run = existing
        context = prepare_context(deps, workspace, run, request.user_input, request.knowledge_delivery)
        body = wire.dumps(context)
        # Usually both at once; if that is refused (nothing written), one by one to learn why.
        frozen = repositories.turns.freeze_with_run(claim.key, run.run_id, claim.lease_until, body)
        if not frozen and not repositories.runs.transition(run.run_id, "preparing", "context_ready"):
            current = repositories.runs.get(run.run_id)
            if current is None or current.state != "context_ready":
                raise RunNotReady()
    except Exception:
        # Give the lease up so that a retry takes the preparation over at once (if even that
        # fails, the lease simply runs out).
        with contextlib.suppress(KnowledgeUnavailable):
            repositories.turns.renew_lease(claim.key, claim.lease_until, 0)
        raise
    if not frozen and not repositories.turns.freeze(claim.key, run.run_id, claim.lease_until, body):
        # Our lease ran out and another request took over: its context is the one that counts.
        stored = repositories.turns.get_turn(claim.key)
        if stored is not None and stored.state == "ready" and stored.context is not None:
            return TurnOutcome(stored.run_id, stored.context, replayed=True)
        raise RunNotReady("the turn is still being prepared; retry shortly")
    metrics.add_metric(name="RunsCreated", unit="Count", value=1)
    return TurnOutcome(run.run_id, body, replayed=False)
