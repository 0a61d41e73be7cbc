"""Identity revalidation, run on every call (docs/DESIGN.md §2), failing closed.

1. token hash → session; not revoked, not expired; access token not expired   → else 401
2. the session's client exists and is enabled                                   → else 404
3. the route is in the client's and the session's allowed routes               → else 404
4. the route exists, is enabled, and `agent_client.enabled` is true             → else 404
5. the route's audience policy admits the session's principal                  → else 404

Every 404 is the same `workspace_not_found`, whether or not the route exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_knowledge.errors import Unauthorized, WorkspaceNotFound
from agent_knowledge.identity.audience import admits
from agent_knowledge.records import ClientRecord, Principal, RouteRecord, SessionRecord
from agent_knowledge.repositories import Repositories

# RFC 6750 b64token, bounded so a huge header cannot cost a hash and a lookup.
_BEARER = re.compile(r"Bearer +([A-Za-z0-9\-._~+/]{16,512}=*) *", re.IGNORECASE)
_ROUTE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,127}")


@dataclass(frozen=True)
class Caller:
    """Who is calling, as revalidated just now."""

    session: SessionRecord
    client: ClientRecord
    route: RouteRecord

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


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("missing bearer token")
    match = _BEARER.fullmatch(authorization)
    if not match:
        raise Unauthorized("malformed bearer token")
    return match.group(1)


def revalidate(repositories: Repositories, authorization: str | None, route: str, now: float) -> Caller:
    token = bearer_token(authorization)
    session = repositories.sessions.get_by_token(token)
    if session is None:
        raise Unauthorized("unknown bearer token")
    if session.revoked:
        raise Unauthorized("the session was revoked")
    if session.expires_at <= now or (
        session.access_token_expires_at is not None and session.access_token_expires_at <= now
    ):
        raise Unauthorized("the session has expired")

    if not _ROUTE.fullmatch(route):
        raise WorkspaceNotFound()
    client = repositories.clients.get(session.client_app_id)
    if client is None or not client.enabled:
        raise WorkspaceNotFound()
    if route not in client.allowed_routes or route not in session.allowed_routes:
        raise WorkspaceNotFound()
    route_record = repositories.routes.get(route)
    if route_record is None or not route_record.enabled or not route_record.agent_client.enabled:
        raise WorkspaceNotFound()
    if not admits(route_record.audience, client.client_app_id, session.principal):
        raise WorkspaceNotFound()
    return Caller(session=session, client=client, route=route_record)
