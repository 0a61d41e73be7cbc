"""API models: one pydantic model per request and per response.

Requests forbid unknown fields. Responses are serialized with `agent_knowledge.jsonbytes`
so that byte budgets are measured on exactly the bytes sent.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

CAPABILITIES_SCHEMA: Final = "bailing.agent-knowledge-capabilities.v1"
SEARCH_SCHEMA: Final = "bailing.agent-knowledge-search.v1"
READ_SCHEMA: Final = "bailing.agent-knowledge-read.v1"
PROTOCOL: Final = "bailing.agent-knowledge.v1"


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Limits(ResponseModel):
    search_max_results: int = 3
    search_max_bytes: int = 4096
    read_default_bytes: int = 16384
    read_max_bytes: int = 32768
    reference_ttl_seconds: int = 300
    read_chain_max_bytes: int = 131072


LIMITS = Limits()


class CapabilitiesResponse(ResponseModel):
    schema_version: Literal["bailing.agent-knowledge-capabilities.v1"] = CAPABILITIES_SCHEMA
    protocol: Literal["bailing.agent-knowledge.v1"] = PROTOCOL
    supported: bool = True
    route: str
    enabled: bool
    knowledge_scope_revision: str
    delivery_modes: list[Literal["inline", "on_demand"]] = ["inline", "on_demand"]
    limits: Limits = LIMITS


class ErrorResponse(ResponseModel):
    error: str
    message: str
