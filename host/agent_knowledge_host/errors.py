"""Errors a host sees, one class per protocol error code, each with what to do next.

The ladder: `KnowledgeHostError` → `ServerError` (the server answered with an error; `code`,
`status`, `message`) → one subclass per protocol code; the four a new search cures share
`SearchAgain`. Outside the server's answers:
`TransportError` (no answer at all), `ProtocolViolation` (an answer that breaks the protocol:
unknown schema, a missing delivery echo, knowledge not marked reference_only) and
`StaleResponse` (an answer that arrived after the host moved on; it was dropped).

Nothing here ever pretends success: a host that catches these must not fall back to
"no knowledge" or to a body it already had. The guidance for each protocol code is
`agent_knowledge.mcp.tool_catalog.GUIDANCE`, the text the stack's MCP endpoint gives too.
"""

from __future__ import annotations

from typing import ClassVar

from agent_knowledge.mcp.tool_catalog import GUIDANCE, UNKNOWN_ERROR_GUIDANCE, describe_error, error_label


class KnowledgeHostError(Exception):
    """Base of every error raised by the host library."""

    code: ClassVar[str] = "host_error"
    guidance: ClassVar[str] = "Do not treat this as 'no knowledge'."
    #: True when the cure is a new search (the old reference can never work again).
    search_again: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def describe(self) -> str:
        """One line for a model or a log: the code, what happened, what to do."""
        return describe_error(self._label(), self.message, self.guidance)

    def _label(self) -> str:
        return self.code


class TransportError(KnowledgeHostError):
    code = "transport_error"
    guidance = "The server could not be reached; retry later. This is not 'no knowledge'."


class ProtocolViolation(KnowledgeHostError):
    code = "protocol_violation"
    guidance = "The server's answer does not follow bailing.agent-knowledge.v1; do not use it."


class UnknownSchema(ProtocolViolation):
    code = "unknown_schema"
    guidance = "The server speaks a schema this host does not know; do not guess, upgrade the host."


class DeliveryNotConfirmed(ProtocolViolation):
    code = "knowledge_delivery_not_confirmed"
    guidance = (
        "The turn asked for a delivery mode the server did not echo; bodies may be missing. "
        "Do not treat the turn as inline; start the turn again without on_demand."
    )


class MissingToken(KnowledgeHostError):
    code = "missing_token"
    guidance = "No agent bearer token is configured; set one (for the MCP server: AGENT_KNOWLEDGE_TOKEN)."


class StaleResponse(KnowledgeHostError):
    code = "stale_response"
    guidance = "The answer belonged to an earlier turn or authorization and was dropped; ask again in this turn."


class ServerError(KnowledgeHostError):
    """The server answered with an error status. Subclasses name the protocol code."""

    code = "server_error"
    guidance = UNKNOWN_ERROR_GUIDANCE

    def __init__(self, message: str, *, status: int, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        # An unknown code is kept as sent, so a log shows what the server said.
        self.reported_code = code or self.code

    def _label(self) -> str:
        return error_label(self.reported_code, self.status)


class InvalidRequest(ServerError):
    code = "invalid_request"
    guidance = GUIDANCE[code]


class InvalidArguments(KnowledgeHostError):
    """Arguments refused on the host side, before any request was sent (e.g. an MCP tool's schema)."""

    code = "invalid_request"
    guidance = InvalidRequest.guidance


class Unauthorized(ServerError):
    code = "unauthorized"
    guidance = GUIDANCE[code]


class Forbidden(ServerError):
    code = "forbidden"
    guidance = "The bearer may not use this workspace; do not retry with the same credentials."


class WorkspaceNotFound(ServerError):
    code = "workspace_not_found"
    guidance = GUIDANCE[code]


class RunNotFound(ServerError):
    code = "run_not_found"
    guidance = GUIDANCE[code]


class RunNotReady(ServerError):
    code = "run_not_ready"
    guidance = GUIDANCE[code]


class TaskNotActive(ServerError):
    code = "task_not_active"
    guidance = GUIDANCE[code]


class TurnConflict(ServerError):
    code = "turn_conflict"
    guidance = GUIDANCE[code]


class SearchAgain(ServerError):
    """The reference (or cursor) can never work again: the cure is a new search, never a retry.
    Each subclass's guidance ends with what to do then (`SEARCH_AGAIN`)."""

    search_again = True


class ReferenceInvalid(SearchAgain):
    code = "knowledge_reference_invalid"
    guidance = GUIDANCE[code]


class ReferenceExpired(SearchAgain):
    code = "knowledge_reference_expired"
    guidance = GUIDANCE[code]


class ScopeChanged(SearchAgain):
    code = "knowledge_scope_changed"
    guidance = GUIDANCE[code]


class KnowledgeChanged(SearchAgain):
    code = "knowledge_changed"
    guidance = GUIDANCE[code]


class KnowledgeUnavailable(ServerError):
    code = "knowledge_unavailable"
    guidance = GUIDANCE[code]


class InternalError(ServerError):
    code = "internal_error"
    guidance = GUIDANCE[code]


class EndpointMissing(ServerError):
    """404/405/501 from an endpoint an older server does not have (negotiation falls back to inline)."""

    code = "endpoint_missing"
    guidance = "This server predates the endpoint; use inline (legacy) turns."


ERROR_BY_CODE: dict[str, type[ServerError]] = {
    error.code: error
    for error in (
        InvalidRequest,
        Unauthorized,
        WorkspaceNotFound,
        RunNotFound,
        RunNotReady,
        TaskNotActive,
        TurnConflict,
        ReferenceInvalid,
        ReferenceExpired,
        ScopeChanged,
        KnowledgeChanged,
        KnowledgeUnavailable,
        InternalError,
    )
}


def error_for(status: int, code: str | None, message: str) -> ServerError:
    """The typed error for an error answer: by protocol code first, by status when the code is unknown."""
    error_type = ERROR_BY_CODE.get(code or "")
    if error_type is None:
        if status == 401:
            error_type = Unauthorized
        elif status == 403:
            error_type = Forbidden
        elif status in (404, 405, 501):
            error_type = EndpointMissing
        elif status >= 500:
            error_type = InternalError
        else:
            error_type = ServerError
    return error_type(message, status=status, code=code)
