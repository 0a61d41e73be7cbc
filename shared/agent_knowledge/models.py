"""API models: one pydantic model per request and per response.

Requests forbid unknown fields. Responses are serialized with `agent_knowledge.wire`
so that byte budgets are measured on exactly the bytes sent.

No `from __future__ import annotations` here: pydantic would compile every annotation string when
each model class is created, at import (docs: bench/README.md, cold start).
"""

from typing import Annotated, Any, ClassVar, Final, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from agent_knowledge import limits
from agent_knowledge.errors import InvalidRequest

CAPABILITIES_SCHEMA: Final = "bailing.agent-knowledge-capabilities.v1"
SEARCH_SCHEMA: Final = "bailing.agent-knowledge-search.v1"
READ_SCHEMA: Final = "bailing.agent-knowledge-read.v1"
PROTOCOL: Final = "bailing.agent-knowledge.v1"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


# Request text that must say something: whitespace only is refused like an empty string.
NonBlankStr = Annotated[str, AfterValidator(_not_blank)]


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class ResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    # Optional fields the protocol leaves out entirely (rather than sending null) when unset.
    omit_when_none: ClassVar[frozenset[str]] = frozenset({"run_id"})

    def wire(self) -> dict[str, Any]:
        """The JSON object sent on the wire (field order is the declaration order)."""
        data = self.model_dump(mode="json")
        for name in self.omit_when_none:
            if data.get(name, ...) is None:
                del data[name]
        return data


class Limits(ResponseModel):
    search_max_results: int = limits.SEARCH_MAX_RESULTS
    search_max_bytes: int = limits.SEARCH_MAX_BYTES
    read_default_bytes: int = limits.READ_DEFAULT_BYTES
    read_max_bytes: int = limits.READ_MAX_BYTES
    reference_ttl_seconds: int = limits.REFERENCE_TTL_SECONDS
    read_chain_max_bytes: int = limits.READ_CHAIN_MAX_BYTES


class CapabilitiesResponse(ResponseModel):
    schema_version: Literal["bailing.agent-knowledge-capabilities.v1"] = CAPABILITIES_SCHEMA
    protocol: Literal["bailing.agent-knowledge.v1"] = PROTOCOL
    supported: bool = True
    route: str
    enabled: bool
    knowledge_scope_revision: str
    delivery_modes: list[Literal["inline", "on_demand"]] = ["inline", "on_demand"]
    # A factory, not an instance made at import: only the capabilities function builds Limits.
    limits: Limits = Field(default_factory=Limits)


class SearchRequest(RequestModel):
    query: NonBlankStr = Field(max_length=limits.QUERY_MAX_CHARS)
    limit: int = Field(default=limits.SEARCH_MAX_RESULTS, ge=limits.SEARCH_MIN_RESULTS, le=limits.SEARCH_MAX_RESULTS)
    run_id: str | None = Field(default=None, min_length=1, max_length=limits.RUN_ID_MAX_CHARS)


class Hint(ResponseModel):
    ref: str
    title: str
    summary: str
    revision: str
    score: float
    expires_at: str


SearchStatus = Literal["ok", "disabled", "unavailable", "partial"]


class RouteAnswer(ResponseModel):
    """How search and read answers begin: their schema, the route and run they answer for, and
    the scope revision they were computed under. Subclasses fix `schema_version`."""

    schema_version: str
    route: str
    run_id: str | None = None
    knowledge_scope_revision: str


class SearchResponse(RouteAnswer):
    schema_version: Literal["bailing.agent-knowledge-search.v1"] = SEARCH_SCHEMA
    status: SearchStatus
    trust: Literal["reference_only"] = "reference_only"
    hints: list[Hint]
    truncated: bool


class ReadRequest(RequestModel):
    ref: str = Field(min_length=1, max_length=limits.TOKEN_MAX_CHARS)
    run_id: str | None = Field(default=None, min_length=1, max_length=limits.RUN_ID_MAX_CHARS)
    cursor: str | None = Field(default=None, min_length=1, max_length=limits.TOKEN_MAX_CHARS)
    max_bytes: int = Field(default=limits.READ_DEFAULT_BYTES, ge=limits.READ_MIN_BYTES, le=limits.READ_MAX_BYTES)


class ReadResponse(RouteAnswer):
    schema_version: Literal["bailing.agent-knowledge-read.v1"] = READ_SCHEMA
    ref: str
    revision: str
    title: str
    content: str
    trust: Literal["reference_only"] = "reference_only"
    next_cursor: str | None
    truncated: bool
    budget_exhausted: bool
    total_content_bytes: int
    read_chain_max_bytes: int = limits.READ_CHAIN_MAX_BYTES


RequestT = TypeVar("RequestT", bound=BaseModel)


class ParsedBody(Generic[RequestT]):
    """A request body parsed up front, whose error is raised only when the body is used.

    The protocol checks the bearer and the route before the body (401/404 before 400), but the
    first identity read already needs the run or reference the body names: so the body is parsed
    first and its error kept until `get()`.
    """

    def __init__(self, model: RequestT | None, error: InvalidRequest | None) -> None:
        self.model = model
        self._error = error

    def get(self) -> RequestT:
        if self.model is None:
            raise self._error or InvalidRequest()
        return self.model
