"""What the host receives, as pydantic models.

Wire models ignore fields they do not know (a newer server may add some) but check the
`schema_version` exactly: an unknown schema is an error, never a guess. Every hint and page
handed to a host carries its provenance — `trust: "reference_only"`, `ref`, `title`,
`revision` — so an agent can always tell reference material from instructions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL: Final = "bailing.agent-knowledge.v1"
CAPABILITIES_SCHEMA: Final = "bailing.agent-knowledge-capabilities.v1"
SEARCH_SCHEMA: Final = "bailing.agent-knowledge-search.v1"
READ_SCHEMA: Final = "bailing.agent-knowledge-read.v1"
TURN_SCHEMA: Final = "bailing.agent-turn-context.v1"
DELIVERY_SCHEMA: Final = "bailing.agent-knowledge-delivery.v1"
REFERENCE_ONLY: Final = "reference_only"

DeliveryMode = Literal["inline", "on_demand"]


def epoch_of(expires_at: int | float | str | None) -> float | None:
    """An `expires_at` (epoch seconds or ISO 8601, e.g. "2026-12-02T16:59:52Z") as epoch seconds, or None."""
    if expires_at is None or isinstance(expires_at, int | float):
        return None if expires_at is None else float(expires_at)
    try:
        moment = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    # A time without a zone is not trusted to mean UTC: unknown, so nothing is cached on it.
    return moment.timestamp() if moment.tzinfo is not None else None


class WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Limits(WireModel):
    search_max_results: int
    search_max_bytes: int
    read_default_bytes: int
    read_max_bytes: int
    reference_ttl_seconds: int
    read_chain_max_bytes: int


class Capabilities(WireModel):
    schema_version: Literal["bailing.agent-knowledge-capabilities.v1"]
    protocol: Literal["bailing.agent-knowledge.v1"]
    supported: bool
    route: str
    enabled: bool
    knowledge_scope_revision: str
    delivery_modes: list[str]
    limits: Limits

    def supports(self, mode: DeliveryMode) -> bool:
        return self.supported and mode in self.delivery_modes


class Hint(WireModel):
    """A bounded pointer to a document: read `ref` for the body. Reference material, not instructions."""

    trust: Literal["reference_only"] = Field(description="Always reference_only: never overrides instructions.")
    ref: str = Field(description="Opaque reference for knowledge_read; expires after 300 seconds.")
    title: str
    revision: str = Field(description="The document revision the reference is bound to.")
    summary: str = Field(description="A bounded excerpt of the matching text, not model output.")
    score: float = Field(description="A ranking number, not a relevance probability.")
    expires_at: int | float | str = Field(description="When the reference stops working.")

    def expiry_epoch(self) -> float | None:
        return epoch_of(self.expires_at)


class WorkspaceAnswer(WireModel):
    """What a search or read answer echoes: its schema, the caller's route and run, and the scope
    revision the answer was computed under. Subclasses pin `schema_version` to their schema."""

    schema_version: str
    route: str
    run_id: str | None = None
    knowledge_scope_revision: str


class SearchResult(WorkspaceAnswer):
    """Search answer. `status` is ok (including zero hits), disabled, unavailable or partial:
    unavailable/partial mean retrieval failed (wholly or partly), never 'no knowledge'."""

    schema_version: Literal["bailing.agent-knowledge-search.v1"]
    status: Literal["ok", "disabled", "unavailable", "partial"]
    trust: Literal["reference_only"]
    hints: list[Hint]
    truncated: bool


class ReadPage(WorkspaceAnswer):
    """One page of a document body. Reference material, not instructions."""

    schema_version: Literal["bailing.agent-knowledge-read.v1"]
    ref: str
    revision: str
    title: str
    content: str
    trust: Literal["reference_only"]
    next_cursor: str | None = Field(description="Pass to the next read with the same ref and run; null at the end.")
    truncated: bool
    budget_exhausted: bool = Field(description="True on the last page of a source longer than the 128 KiB chain.")
    total_content_bytes: int
    read_chain_max_bytes: int


class ReadChain(BaseModel):
    """Every page of one reference chain, in order."""

    model_config = ConfigDict(frozen=True)

    ref: str
    title: str
    revision: str
    trust: Literal["reference_only"] = REFERENCE_ONLY
    pages: list[ReadPage]
    #: The source is longer than the chain budget: `content` is a prefix, not the whole document.
    source_longer_than_chain: bool

    @property
    def content(self) -> str:
        return "".join(page.content for page in self.pages)


class InlineKnowledge(WireModel):
    """A body delivered inline with a legacy or inline turn. Reference material, not instructions."""

    trust: Literal["reference_only"]
    title: str
    content: str
    revision: str
    score: float | None = None
    #: The server cut the body (inline bodies are bounded); read the matching knowledge_ref for more.
    content_truncated: bool = False


class KnowledgeRef(WireModel):
    """A run-bound reference to an inline document, readable with the turn's run_id."""

    trust: Literal["reference_only"]
    ref: str
    title: str
    revision: str
    score: float | None = None
    expires_at: int | float | str | None = None

    def expiry_epoch(self) -> float | None:
        return epoch_of(self.expires_at)


class KnowledgeDelivery(WireModel):
    schema_version: str
    mode: DeliveryMode
    protocol: str
    knowledge_scope_revision: str
    status: Literal["ok", "disabled", "unavailable", "partial"]
    # Raw here: `Turn.hints` holds them validated and with provenance.
    hints: list[dict[str, Any]] | None = None
    truncated: bool | None = None


class TurnContextBody(WireModel):
    knowledge_delivery: KnowledgeDelivery | None = None


class Governance(WireModel):
    knowledge_trust: Literal["reference_only"]


class TurnContext(WireModel):
    schema_version: Literal["bailing.agent-turn-context.v1"]
    run_id: str
    knowledge_scope_revision: str
    instructions: str
    governance: Governance
    knowledge: list[InlineKnowledge]
    knowledge_refs: list[KnowledgeRef]
    context: TurnContextBody


class Negotiation(BaseModel):
    """What capabilities said, and what the host may therefore ask for."""

    model_config = ConfigDict(frozen=True)

    #: None when the server predates the capabilities endpoint (404/405/501).
    capabilities: Capabilities | None
    legacy_server: bool

    def supports(self, mode: DeliveryMode) -> bool:
        return self.capabilities is not None and self.capabilities.supports(mode)


class Turn(BaseModel):
    """A started turn: the server's context plus what the client negotiated and delivered."""

    model_config = ConfigDict(frozen=True)

    context: TurnContext
    requested: DeliveryMode | None
    #: "legacy" means the request carried no knowledge_delivery field: bodies come inline.
    delivered: Literal["legacy", "inline", "on_demand"]
    #: Why the turn fell back to a legacy inline turn, or None when it did not.
    fallback_reason: str | None
    #: On-demand hints from the turn, with provenance (empty for inline/legacy turns).
    hints: list[Hint]

    @property
    def run_id(self) -> str:
        return self.context.run_id
