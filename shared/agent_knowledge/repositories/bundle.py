"""All repositories of one container, wired to the configured tables and lazy boto3 clients (the
container builds them once: `runtime/container.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_knowledge.repositories.bodies import BodyStore
from agent_knowledge.repositories.config import (
    ClientRepository,
    KnowledgeBaseRepository,
    RouteRepository,
    TaskRepository,
)
from agent_knowledge.repositories.documents import DocumentRepository
from agent_knowledge.repositories.runs import RunRepository
from agent_knowledge.repositories.sessions import SessionRepository
from agent_knowledge.repositories.turn_store import TurnRepository
from agent_knowledge.settings import Settings


@dataclass(frozen=True)
class Repositories:
    sessions: SessionRepository
    clients: ClientRepository
    routes: RouteRepository
    knowledge_bases: KnowledgeBaseRepository
    tasks: TaskRepository
    documents: DocumentRepository
    bodies: BodyStore
    runs: RunRepository
    turns: TurnRepository
    # The DynamoDB client itself, for reads that span tables (`repositories.batch.batch_get`).
    dynamodb: Any

    @classmethod
    def build(cls, settings: Settings, dynamodb: Any, s3: Callable[[], Any]) -> Repositories:
        return cls(
            sessions=SessionRepository(dynamodb, settings.sessions_table),
            clients=ClientRepository(dynamodb, settings.config_table),
            routes=RouteRepository(dynamodb, settings.config_table),
            knowledge_bases=KnowledgeBaseRepository(dynamodb, settings.config_table),
            tasks=TaskRepository(dynamodb, settings.config_table),
            documents=DocumentRepository(dynamodb, settings.documents_table),
            bodies=BodyStore(s3, settings.bodies_bucket),
            runs=RunRepository(dynamodb, settings.runs_table),
            turns=TurnRepository(dynamodb, settings.runs_table),
            dynamodb=dynamodb,
        )
