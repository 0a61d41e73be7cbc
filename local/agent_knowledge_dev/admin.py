"""Administrative operations (what the platform does around the protocol): issue and revoke
sessions, register clients, routes and knowledge bases. Used by the CLI, the demo seed and tests.
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from typing import Literal

from agent_knowledge.records import (
    AgentClientSettings,
    AudiencePolicy,
    ClientRecord,
    KnowledgeBaseRecord,
    KnowledgeConfig,
    Principal,
    RouteRecord,
    SessionRecord,
)
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.sessions import hash_token

DEFAULT_SESSION_TTL = 3600
# `session issue --ttl` at most: a session's bearer is a credential; a week bounds what a leaked one
# (say, from a host's configuration file) is worth. The demo session is seeded programmatically.
MAX_SESSION_TTL = 7 * 86_400
# Route names are URL path segments; ids of every kind stay printable and unambiguous.
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class AdminError(ValueError):
    """An administrative request that cannot be carried out as asked (unknown KB, bad name, ...)."""


def check_identifier(kind: str, value: str) -> str:
    if not _IDENTIFIER.fullmatch(value):
        raise AdminError(f"invalid {kind} {value!r}: use 1-128 letters, digits, '.', '_' or '-'")
    return value


def require_knowledge_base(repositories: Repositories, kb_id: str) -> KnowledgeBaseRecord:
    record = repositories.knowledge_bases.get(kb_id)
    if record is None:
        raise AdminError(f"unknown knowledge base {kb_id!r}; create it with `agent-knowledge kb create {kb_id}`")
    return record


def require_route(repositories: Repositories, route: str) -> RouteRecord:
    record = repositories.routes.get(route)
    if record is None:
        raise AdminError(f"unknown route {route!r}; create it with `agent-knowledge route put {route} --kb KB`")
    return record


def issue_session(
    repositories: Repositories,
    *,
    client_app_id: str,
    routes: list[str],
    principal: Principal | None,
    on_behalf_of: str | None = None,
    ttl_seconds: int = DEFAULT_SESSION_TTL,
    access_token: str | None = None,
    now: float | None = None,
) -> tuple[SessionRecord, str]:
    """Create a session and return it with its access token (shown once, stored only as a hash)."""
    if ttl_seconds <= 0:
        raise AdminError("the session ttl must be a positive number of seconds")
    issued = int(now if now is not None else time.time())
    token = access_token or secrets.token_urlsafe(32)
    record = SessionRecord(
        token_hash=hash_token(token),
        session_id=f"ses_{uuid.uuid4().hex}",
        client_app_id=client_app_id,
        principal=principal,
        on_behalf_of=on_behalf_of,
        allowed_routes=list(dict.fromkeys(routes)),
        expires_at=issued + ttl_seconds,
        access_token_expires_at=issued + ttl_seconds,
        created_at=issued,
    )
    repositories.sessions.put(record)
    return record, token


def put_client(repositories: Repositories, client_app_id: str, routes: list[str], enabled: bool = True) -> ClientRecord:
    record = ClientRecord(client_app_id=client_app_id, enabled=enabled, allowed_routes=list(dict.fromkeys(routes)))
    repositories.clients.put(record)
    return record


def put_route(
    repositories: Repositories,
    route: str,
    knowledge: KnowledgeConfig,
    *,
    audience: AudiencePolicy | None = None,
    enabled: bool = True,
    agent_client_enabled: bool = True,
    instructions: str = "",
) -> RouteRecord:
    record = RouteRecord(
        route=route,
        enabled=enabled,
        agent_client=AgentClientSettings(enabled=agent_client_enabled),
        audience=audience,
        knowledge=knowledge,
        instructions=instructions,
    )
    repositories.routes.put(record)
    return record


def create_knowledge_base(
    repositories: Repositories,
    kb_id: str,
    name: str = "",
    enabled: bool = True,
    default_access: Literal["route", "none"] = "route",
) -> KnowledgeBaseRecord:
    existing = repositories.knowledge_bases.get(kb_id)
    if existing is not None:
        return existing
    record = KnowledgeBaseRecord(kb_id=kb_id, name=name or kb_id, enabled=enabled, default_access=default_access)
    repositories.knowledge_bases.put(record)
    return record


def set_knowledge_base_enabled(repositories: Repositories, kb_id: str, enabled: bool) -> KnowledgeBaseRecord:
    if not repositories.knowledge_bases.set_enabled(kb_id, enabled):
        require_knowledge_base(repositories, kb_id)  # raises with the usual message
    return require_knowledge_base(repositories, kb_id)


def set_knowledge_base_default_access(
    repositories: Repositories, kb_id: str, default_access: Literal["route", "none"]
) -> KnowledgeBaseRecord:
    if not repositories.knowledge_bases.set_default_access(kb_id, default_access):
        require_knowledge_base(repositories, kb_id)  # raises with the usual message
    return require_knowledge_base(repositories, kb_id)


def revoke_session(repositories: Repositories, session_id: str) -> None:
    if not repositories.sessions.revoke(session_id):
        raise AdminError(f"unknown session {session_id!r}")
