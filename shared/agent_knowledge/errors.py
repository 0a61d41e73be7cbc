"""Domain errors. They carry a protocol error code and a short, safe message.

HTTP statuses live in `agent_knowledge.runtime.http`, not here: the domain does not know it is
served over HTTP. Messages never contain bodies, tokens, keys or storage details.
"""

from __future__ import annotations


class KnowledgeError(Exception):
    """Base of every error the protocol reports to a caller."""

    code = "internal_error"
    default_message = "internal error"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)


class InvalidRequest(KnowledgeError):
    code = "invalid_request"
    default_message = "the request is invalid"


class Unauthorized(KnowledgeError):
    code = "unauthorized"
    default_message = "a valid agent bearer token is required"


class WorkspaceNotFound(KnowledgeError):
    """Same answer whether the route exists or not: no enumeration."""

    code = "workspace_not_found"
    default_message = "workspace not found"


class RunNotFound(KnowledgeError):
    code = "run_not_found"
    default_message = "run not found"


class RunNotReady(KnowledgeError):
    code = "run_not_ready"
    default_message = "the run is not ready for knowledge access"


class TaskNotActive(KnowledgeError):
    code = "task_not_active"
    default_message = "the managed task is not active for this session"


class TurnConflict(KnowledgeError):
    """The idempotency key (turn, message or run completion) is already bound to another request."""

    code = "turn_conflict"
    default_message = "this turn was already started with a different request"


class ReferenceInvalid(KnowledgeError):
    """One message for every cause, so that a caller holding a stolen token cannot tell a forged
    one from a genuine one issued to someone else. `reason` names the failed check for the logs
    only; it never contains the token."""

    code = "knowledge_reference_invalid"
    default_message = "the knowledge reference or cursor is invalid"

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class ReferenceExpired(KnowledgeError):
    code = "knowledge_reference_expired"
    default_message = "the knowledge reference or cursor has expired; search again"


class ScopeChanged(KnowledgeError):
    code = "knowledge_scope_changed"
    default_message = "the workspace knowledge configuration changed; search again"


class KnowledgeChanged(KnowledgeError):
    code = "knowledge_changed"
    default_message = "the document changed or is no longer available; search again"


class KnowledgeUnavailable(KnowledgeError):
    code = "knowledge_unavailable"
    default_message = "knowledge storage is temporarily unavailable"


class NotImplementedYet(KnowledgeError):
    code = "not_implemented"
    default_message = "this endpoint is not implemented yet"
