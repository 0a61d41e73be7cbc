"""Identity revalidation, run on every call (docs/DESIGN.md §2), failing closed, with the scope.

1. token hash → session; not revoked, not expired; access token not expired   → else 401
2. the session's client exists and is enabled                                   → else 404
3. the route is in the client's and the session's allowed routes               → else 404
4. the route exists, is enabled, and `agent_client.enabled` is true             → else 404
5. the route's audience policy admits the session's principal                  → else 404

Every 404 is the same `workspace_not_found`, whether or not the route exists.

A JWT access token (OAuth resource-server mode, `identity.oauth`, docs/DESIGN.md §15) takes step
1's place: validated instead of looked up, it stands for a session of its (issuer, subject, client)
on the route called (`TokenIdentity.session`); its client must exist, be enabled and allow the
route, or the token does not grant access (401); steps 4 and 5 are the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agent_knowledge.errors import RunNotFound, Unauthorized, WorkspaceNotFound
from agent_knowledge.identity.document_access import Viewer
from agent_knowledge.identity.oauth import OAuthConfig, TokenIdentity, TokenRefused, token_identity
from agent_knowledge.identity.scope import Scope, source_kb_ids
from agent_knowledge.limits import RUN_ID_MAX_CHARS
from agent_knowledge.records import (
    AudiencePolicy,
    ClientRecord,
    DocumentRecord,
    KnowledgeConfig,
    Principal,
    RouteRecord,
    RunRecord,
    SessionRecord,
    TaskRecord,
)
from agent_knowledge.repositories.batch_get import Lookup, batch_get
from agent_knowledge.repositories.bundle import Repositories

# RFC 6750 b64token, bounded so a huge header cannot cost a hash and a lookup (a session token is
# at most SESSION_TOKEN_MAX_CHARS; a JWT access token, validated without a lookup, may be longer).
_BEARER = re.compile(r"Bearer +([A-Za-z0-9\-._~+/]{16,8192}=*) *", re.IGNORECASE)
SESSION_TOKEN_MAX_CHARS = 512
_ROUTE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,127}")
# Not a valid route name: the access check of a run that does not exist fails with the same 404.
_NO_ROUTE = "-"


@dataclass(frozen=True)
class Caller:
    """Who is calling, as revalidated just now."""

    session: SessionRecord
    client: ClientRecord
    route: RouteRecord
    # The access token's caller, when the bearer was a JWT (then `session` stands for it).
    token: TokenIdentity | None = None

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def client_app_id(self) -> str:
        return self.client.client_app_id

    @property
    def principal(self) -> Principal | None:
        return self.session.principal

    @property
    def on_behalf_of(self) -> str | None:
        return self.session.on_behalf_of

    @property
    def viewer(self) -> Viewer:
        """Whose documents the caller may see (`identity/document_access`): the session's principal,
        and the principal it acts on behalf of."""
        return Viewer.of(self.session.principal, self.session.on_behalf_of)


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("missing bearer token")
    match = _BEARER.fullmatch(authorization)
    if not match:
        raise Unauthorized("malformed bearer token")
    return match.group(1)


def check_session(session: SessionRecord | None, now: float) -> SessionRecord:
    """Step 1: the bearer's session exists, is not revoked and has not expired (else 401)."""
    if session is None:
        raise Unauthorized("unknown bearer token")
    if session.revoked:
        raise Unauthorized("the session was revoked")
    if session.expires_at <= now or (
        session.access_token_expires_at is not None and session.access_token_expires_at <= now
    ):
        raise Unauthorized("the session has expired")
    return session


def valid_route_name(route: str) -> bool:
    return _ROUTE.fullmatch(route) is not None


def check_access(
    session: SessionRecord, client: ClientRecord | None, route: str, route_record: RouteRecord | None
) -> Caller:
    """Steps 2-5: client, allowed routes, route, audience (else the same 404)."""
    if not valid_route_name(route):
        raise WorkspaceNotFound()
    if client is None or not client.enabled:
        raise WorkspaceNotFound()
    if route not in client.allowed_routes or route not in session.allowed_routes:
        raise WorkspaceNotFound()
    if route_record is None or not route_record.enabled or not route_record.agent_client.enabled:
        raise WorkspaceNotFound()
    if not admits(route_record.audience, client.client_app_id, session.principal):
        raise WorkspaceNotFound()
    return Caller(session=session, client=client, route=route_record)


def check_token_client(identity: TokenIdentity, client: ClientRecord | None, route: str) -> None:
    """An access token grants access through one of our clients: it exists, is enabled and may use
    the route (else 401: the token, not the route, is what the caller must change)."""
    if client is None or not client.enabled:
        raise TokenRefused(reason="unknown or disabled client")
    if route not in client.allowed_routes:
        raise TokenRefused(reason="route not allowed for the client")


def _session_lookup(
    repositories: Repositories, token: str, identity: TokenIdentity | None
) -> Lookup[SessionRecord] | None:
    if identity is not None or len(token) > SESSION_TOKEN_MAX_CHARS:
        return None  # a JWT is not looked up; a longer opaque token names no session
    return repositories.sessions.lookup_by_token(token)


@dataclass(frozen=True)
class Workspace:
    """The caller as revalidated just now, the route's scope, and the records read alongside."""

    caller: Caller
    scope: Scope
    run: RunRecord | None = None  # the run the request names (not yet authorized)
    task: TaskRecord | None = None  # that run's managed task, or the task a turn binds to
    document: DocumentRecord | None = None  # the document a read's reference names (not yet checked)


@dataclass(frozen=True)
class Prefetch:
    """What a route reads in the same round trips as the caller's identity (`open_workspace`): the
    run and the task its request names, the document a read's reference names; and what it starts
    once the session is known valid, before the second round trip (`after_session`: a search's
    query embedding, a read's body fetch)."""

    run_id: str | None = None
    task_id: str | None = None
    document: tuple[str, str] | None = None
    after_session: Callable[[SessionRecord, DocumentRecord | None], None] | None = None


NO_PREFETCH = Prefetch()


def open_workspace(
    repositories: Repositories,
    authorization: str | None,
    route: str,
    now: float,
    prefetch: Prefetch = NO_PREFETCH,
    *,
    oauth: Callable[[], OAuthConfig | None],
) -> Workspace:
    """Revalidate the caller (docs/DESIGN.md §2) and read the route's scope (§3) in two round trips.

    1. {session by token hash, route, the run, the task, the document} — none depends on another;
    2. {the session's client, the route's knowledge bases, the run's task} — they need round 1.
    The checks run in the protocol's order on the fresh records, so the same check fails as if the
    records had been read one by one; only when they are read changed. `prefetch.after_session`
    runs once the session is known valid, before round 2 (a read starts its body fetch there).
    `oauth` gives the trusted issuer a JWT bearer is validated against (None: bearer-token mode),
    asked only when the bearer is a JWT.
    """
    run_id, task_id, document = prefetch.run_id, prefetch.task_id, prefetch.document
    token = bearer_token(authorization)
    identity = token_identity(token, now, oauth)
    route_lookup = repositories.routes.lookup(route) if valid_route_name(route) else None
    session, route_record, run, task, document_record, token_client = batch_get(
        repositories.dynamodb,
        [
            _session_lookup(repositories, token, identity),
            route_lookup,
            repositories.runs.lookup(run_id) if run_id else None,
            repositories.tasks.lookup(task_id) if task_id else None,
            repositories.documents.lookup(*document) if document else None,
            # A token names its client: read in round 1, checked before anything else is.
            repositories.clients.lookup(identity.client_app_id) if identity is not None else None,
        ],
    )
    if identity is not None:
        check_token_client(identity, token_client, route)
        session = identity.session(route)
    session = check_session(session, now)
    if prefetch.after_session is not None:
        prefetch.after_session(session, document_record)

    config = route_record.knowledge if route_record is not None else KnowledgeConfig()
    kb_ids = source_kb_ids(config)
    run_task_id = run.task_id if run is not None and task_id is None else None
    client, run_task, *kbs = batch_get(
        repositories.dynamodb,
        [
            repositories.clients.lookup(session.client_app_id) if identity is None else None,
            repositories.tasks.lookup(run_task_id) if run_task_id else None,
            *(repositories.knowledge_bases.lookup(kb_id) for kb_id in kb_ids),
        ],
    )
    caller = check_access(session, client if identity is None else token_client, route, route_record)
    if identity is not None:
        caller = Caller(caller.session, caller.client, caller.route, identity)
    knowledge_bases = {kb.kb_id: kb for kb in kbs if kb is not None}
    return Workspace(
        caller=caller,
        scope=Scope(config, knowledge_bases),
        run=run,
        task=task if task_id else run_task,
        document=document_record,
    )


def open_run(
    repositories: Repositories,
    authorization: str | None,
    run_id: str,
    now: float,
    *,
    oauth: Callable[[], OAuthConfig | None],
) -> RunRecord:
    """The run, after revalidating the caller against its route and checking it owns the run.

    Two round trips: {session, run}, then {client, the run's route}; the checks keep their order.
    """
    token = bearer_token(authorization)
    identity = token_identity(token, now, oauth)
    session, run = batch_get(
        repositories.dynamodb,
        [
            _session_lookup(repositories, token, identity),
            repositories.runs.lookup(run_id) if 0 < len(run_id) <= RUN_ID_MAX_CHARS else None,
        ],
    )
    route = run.route if run is not None else _NO_ROUTE
    if identity is not None:
        session = identity.session(route)
    session = check_session(session, now)
    client, route_record = batch_get(
        repositories.dynamodb,
        [
            repositories.clients.lookup(session.client_app_id),
            repositories.routes.lookup(route) if valid_route_name(route) else None,
        ],
    )
    if identity is not None and (client is None or not client.enabled):
        raise TokenRefused(reason="unknown or disabled client")
    try:
        caller = check_access(session, client, route, route_record)
    except WorkspaceNotFound:
        raise RunNotFound(run_id=run_id if run is not None else None) from None
    if run is None or run.session_id != caller.session_id or run.client_app_id != caller.client_app_id:
        raise RunNotFound()
    return run


# --- Audience policy: which callers a route admits --------------------------------------------------

# Route audience policy (docs/DESIGN.md §2).
#
# No policy, or `enabled: false`, admits everyone. Otherwise every listed dimension must match:
# AND across dimensions, any-of within a list, `"*"` matches any present value, and an empty or
# absent list does not constrain. A value the session lacks never matches a listed dimension
# (fail closed). A session without a principal is admitted only with `anonymous: true`; the
# principal dimensions (tenants, roles, principals, audiences) then do not apply — there is no
# principal to test — but the `clients` dimension still does.

WILDCARD = "*"


def _matches(allowed: list[str] | None, values: list[str]) -> bool:
    if not allowed:
        return True
    if not values:
        return False
    return WILDCARD in allowed or any(value in allowed for value in values)


def _present(value: str | None) -> list[str]:
    return [value] if value else []


def admits(policy: AudiencePolicy | None, client_app_id: str, principal: Principal | None) -> bool:
    if policy is None or not policy.enabled:
        return True
    if not _matches(policy.clients, [client_app_id]):
        return False
    if principal is None:
        return policy.anonymous
    return (
        _matches(policy.tenants, _present(principal.tenant))
        and _matches(policy.roles, principal.roles)
        and _matches(policy.principals, [principal.id])
        and _matches(policy.audiences, _present(principal.audience))
    )
