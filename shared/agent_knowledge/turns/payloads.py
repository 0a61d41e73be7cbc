"""API models of turns and run completion (schema `bailing.agent-turn-context.v1`).

Requests forbid unknown fields; responses are serialized with `agent_knowledge.wire`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field, StringConstraints, field_validator

from agent_knowledge import wire
from agent_knowledge.errors import JsonRejected
from agent_knowledge.models import PROTOCOL, Hint, NonBlankStr, RequestModel, ResponseModel, SearchStatus
from agent_knowledge.wire import check_tree

TURN_CONTEXT_SCHEMA: Final = "bailing.agent-turn-context.v1"
KNOWLEDGE_DELIVERY_SCHEMA: Final = "bailing.agent-knowledge-delivery.v1"
TASK_BINDING_SCHEMA: Final = "bailing.agent-task-binding.v1"
RUN_COMPLETION_SCHEMA: Final = "bailing.agent-run-completion.v1"

TURN_MAX_BODY_BYTES = 512 * 1024
USER_INPUT_MAX_CHARS = 64_000
MAX_RENDERERS = 20
# page_context is opaque but bounded (docs/turns.md): the object itself is level 1.
PAGE_CONTEXT_MAX_DEPTH = 16
PAGE_CONTEXT_MAX_BYTES = 64 * 1024
# Inline knowledge: each document body is cut to this many characters (and marked when cut).
INLINE_CONTENT_MAX_CHARS = 8_000

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
RendererName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]
KnowledgeDelivery = Literal["inline", "on_demand"]


class TaskBinding(RequestModel):
    # A plain str, checked below: a wrong schema version is a malformed binding (400).
    schema_version: str
    task_id: Identifier
    scope_hash: Annotated[str, StringConstraints(min_length=64, max_length=64, pattern=r"^[0-9a-f]{64}$")]

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: str) -> str:
        if value != TASK_BINDING_SCHEMA:
            raise ValueError(f"must be {TASK_BINDING_SCHEMA}")
        return value


class TurnRequest(RequestModel):
    client_conversation_id: Identifier
    client_turn_id: Identifier
    user_message_id: Identifier
    user_input: NonBlankStr = Field(min_length=1, max_length=USER_INPUT_MAX_CHARS)
    # Opaque host context (what page the user is on): hashed into the request, never interpreted.
    page_context: dict[str, Any] | None = None
    renderers: list[RendererName] | None = Field(default=None, max_length=200)
    knowledge_delivery: KnowledgeDelivery | None = None
    task_binding: TaskBinding | None = None

    @field_validator("page_context")
    @classmethod
    def _bounded_page_context(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # The adapter already refused lone surrogates and 32+ levels; checked again here because a
        # TurnRequest can be built without it, and the bounds of page_context are its own.
        if value is None:
            return None
        try:
            check_tree(value, PAGE_CONTEXT_MAX_DEPTH)
        except JsonRejected as exc:  # pydantic turns a ValueError into a validation error
            raise ValueError(exc.message) from None
        if len(wire.dumps(value).encode("utf-8")) > PAGE_CONTEXT_MAX_BYTES:
            raise ValueError(f"larger than {PAGE_CONTEXT_MAX_BYTES // 1024} KiB as compact UTF-8 JSON")
        return value

    @field_validator("renderers")
    @classmethod
    def _few_unique_renderers(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unique = list(dict.fromkeys(value))
        if len(unique) > MAX_RENDERERS:
            raise ValueError(f"at most {MAX_RENDERERS} unique renderer names")
        return unique


class Governance(ResponseModel):
    knowledge_trust: Literal["reference_only"] = "reference_only"


class KnowledgeItem(ResponseModel):
    title: str
    content: str
    score: float
    revision: str
    content_truncated: bool


class KnowledgeRef(ResponseModel):
    ref: str
    title: str
    revision: str
    score: float
    expires_at: str


class KnowledgeDeliveryContext(ResponseModel):
    omit_when_none: ClassVar[frozenset[str]] = frozenset({"hints", "truncated"})

    schema_version: Literal["bailing.agent-knowledge-delivery.v1"] = KNOWLEDGE_DELIVERY_SCHEMA
    mode: KnowledgeDelivery
    protocol: Literal["bailing.agent-knowledge.v1"] = PROTOCOL
    knowledge_scope_revision: str
    status: SearchStatus
    # on_demand only: the run-bound hints and whether the 4096-byte bound cut anything.
    hints: list[Hint] | None = None
    truncated: bool | None = None


class TurnContext(ResponseModel):
    omit_when_none: ClassVar[frozenset[str]] = frozenset({"knowledge_delivery"})

    knowledge_delivery: KnowledgeDeliveryContext | None = None

    def wire(self) -> dict[str, Any]:
        data = super().wire()
        if self.knowledge_delivery is not None:
            data["knowledge_delivery"] = self.knowledge_delivery.wire()
        return data


class TurnResponse(ResponseModel):
    schema_version: Literal["bailing.agent-turn-context.v1"] = TURN_CONTEXT_SCHEMA
    run_id: str
    knowledge_scope_revision: str
    instructions: str
    governance: Governance = Governance()
    knowledge: list[KnowledgeItem]
    knowledge_refs: list[KnowledgeRef]
    context: TurnContext

    def wire(self) -> dict[str, Any]:
        data = super().wire()
        data["context"] = self.context.wire()
        return data


class CompleteRunRequest(RequestModel):
    assistant_message_id: Identifier
    status: Literal["completed", "failed"]
    content: str | None = Field(default=None, max_length=USER_INPUT_MAX_CHARS)


class CompleteRunResponse(ResponseModel):
    schema_version: Literal["bailing.agent-run-completion.v1"] = RUN_COMPLETION_SCHEMA
    run_id: str
    state: Literal["completed", "failed"]
    assistant_message_id: str
    completed_at: int
