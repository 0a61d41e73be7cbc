"""All repositories of one container, wired to the configured tables and lazy boto3 clients."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from agent_knowledge import aws
from agent_knowledge.repositories.config import (
    ClientRepository,
    KnowledgeBaseRepository,
    RouteRepository,
    TaskRepository,
)
from agent_knowledge.repositories.sessions import SessionRepository
from agent_knowledge.settings import Settings, get_settings


@dataclass(frozen=True)
class Repositories:
    sessions: SessionRepository
    clients: ClientRepository
    routes: RouteRepository
    knowledge_bases: KnowledgeBaseRepository
    tasks: TaskRepository

    @classmethod
    def build(cls, settings: Settings, dynamodb: Any) -> Repositories:
        return cls(
            sessions=SessionRepository(dynamodb, settings.sessions_table),
            clients=ClientRepository(dynamodb, settings.config_table),
            routes=RouteRepository(dynamodb, settings.config_table),
            knowledge_bases=KnowledgeBaseRepository(dynamodb, settings.config_table),
            tasks=TaskRepository(dynamodb, settings.config_table),
        )


@functools.cache
def default_repositories() -> Repositories:
    return Repositories.build(get_settings(), aws.client("dynamodb"))


def reset_repositories() -> None:
    default_repositories.cache_clear()
