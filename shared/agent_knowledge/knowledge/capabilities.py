"""Negotiation: what this server supports for a route the caller may use."""

from __future__ import annotations

from agent_knowledge.identity.caller import Workspace
from agent_knowledge.models import CapabilitiesResponse


def describe_capabilities(workspace: Workspace) -> CapabilitiesResponse:
    return CapabilitiesResponse(
        route=workspace.caller.route.route,
        enabled=workspace.scope.enabled,
        knowledge_scope_revision=workspace.scope.revision,
    )
