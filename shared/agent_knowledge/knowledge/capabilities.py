"""Negotiation: what this server supports for a route the caller may use."""

from __future__ import annotations

from agent_knowledge.identity.caller import Caller
from agent_knowledge.identity.scope import load_scope
from agent_knowledge.models import CapabilitiesResponse
from agent_knowledge.repositories import Repositories


def describe_capabilities(repositories: Repositories, caller: Caller) -> CapabilitiesResponse:
    scope = load_scope(repositories, caller)
    return CapabilitiesResponse(
        route=caller.route.route,
        enabled=scope.enabled,
        knowledge_scope_revision=scope.revision,
    )
