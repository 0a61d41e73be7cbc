"""The caller's workspace as it is right now: revalidated identity plus the route's scope."""

from __future__ import annotations

from agent_knowledge.identity.caller import Caller
from agent_knowledge.identity.scope import Scope, source_kb_ids
from agent_knowledge.repositories import Repositories


def load_scope(repositories: Repositories, caller: Caller) -> Scope:
    config = caller.route.knowledge
    return Scope(config, repositories.knowledge_bases.get_many(source_kb_ids(config)))
