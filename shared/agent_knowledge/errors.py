"""Domain errors: a ladder by what the caller can do about them, each carrying a protocol error
code, a short safe message and the context a caller (or a log line) needs.

    KnowledgeError
    ├── InvalidRequest                 fix the request
    ├── AccessRefused                  the bearer or the route (docs/DESIGN.md §2)
    │   ├── Unauthorized
    │   └── WorkspaceNotFound
    ├── RunRefused(run_id)             the run named in the request (§4)
    │   ├── RunNotFound
    │   ├── RunNotReady
    │   └── TaskNotActive
    ├── TurnConflict                   an idempotency key already bound to another request (§9)
    ├── SearchAgain                    the reference cannot be used; a new search is the remedy (§5)
    │   ├── ReferenceInvalid(reason)    one message for every cause; the reason is logged
    │   ├── ReferenceExpired(expires_at)
    │   ├── ScopeChanged
    │   └── KnowledgeChanged
    └── KnowledgeUnavailable(store)    storage or index failure; retry later

HTTP statuses live in `agent_knowledge.runtime.http`, not here: the domain does not know it is
served over HTTP. Messages never contain bodies, tokens, keys or storage details; the context
attributes are identifiers and times only, safe to log.
"""

from __future__ import annotations

from typing import Any, ClassVar


class KnowledgeError(Exception):
    """Base of every error the protocol reports to a caller.

    A subclass names in `context_fields` the keyword arguments it carries (identifiers and times);
    each becomes an attribute and, when set, an entry of `context()`.
    """

    code = "internal_error"
    default_message = "internal error"
    context_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str | None = None, **context: Any) -> None:
        unknown = set(context) - set(self.context_fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} carries no {', '.join(sorted(unknown))}")
        for name in self.context_fields:
            setattr(self, name, context.get(name))
        self.message = message or self.default_message
        super().__init__(self.message)

    def context(self) -> dict[str, Any]:
        """What the error knows beyond its code, for log lines (never secrets or bodies)."""
        values = {name: getattr(self, name) for name in self.context_fields}
        return {name: value for name, value in values.items() if value is not None}


class InvalidRequest(KnowledgeError):
    code = "invalid_request"
    default_message = "the request is invalid"


# -- access: who is calling and which route they may use --------------------------------------


class AccessRefused(KnowledgeError):
    """The bearer or the route does not grant access."""


class Unauthorized(AccessRefused):
    code = "unauthorized"
    default_message = "a valid agent bearer token is required"


class WorkspaceNotFound(AccessRefused):
    """Same answer whether the route exists or not: no enumeration."""

    code = "workspace_not_found"
    default_message = "workspace not found"


# -- runs and managed tasks --------------------------------------------------------------------


class RunRefused(KnowledgeError):
    """The run named in the request cannot be used by this caller now."""

    context_fields = ("run_id",)
    run_id: str | None


class RunNotFound(RunRefused):
    code = "run_not_found"
    default_message = "run not found"


class RunNotReady(RunRefused):
    code = "run_not_ready"
    default_message = "the run is not ready for knowledge access"


class TaskNotActive(RunRefused):
    code = "task_not_active"
    default_message = "the managed task is not active for this session"


class TurnConflict(KnowledgeError):
    """The idempotency key (turn, message or run completion) is already bound to another request."""

    code = "turn_conflict"
    default_message = "this turn was already started with a different request"


# -- references: search again -----------------------------------------------------------------


class SearchAgain(KnowledgeError):
    """The reference or cursor cannot be used any more; only a new search helps."""


class ReferenceInvalid(SearchAgain):
    """One message for every cause, so that a caller holding a stolen token cannot tell a forged
    one from a genuine one issued to someone else. `reason` names the failed check for the logs
    only (`context()`); it never contains the token."""

    code = "knowledge_reference_invalid"
    default_message = "the knowledge reference or cursor is invalid"

    context_fields = ("reason",)
    reason: str | None

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason=reason)  # never a caller-specific message


class ReferenceExpired(SearchAgain):
    code = "knowledge_reference_expired"
    default_message = "the knowledge reference or cursor has expired; search again"

    context_fields = ("expires_at",)
    expires_at: int | None  # epoch seconds the reference or cursor expired at


class ScopeChanged(SearchAgain):
    code = "knowledge_scope_changed"
    default_message = "the workspace knowledge configuration changed; search again"


class KnowledgeChanged(SearchAgain):
    code = "knowledge_changed"
    default_message = "the document changed or is no longer available; search again"


# -- unavailable -------------------------------------------------------------------------------


class KnowledgeUnavailable(KnowledgeError):
    """Storage or an index failed; the same request may succeed later."""

    code = "knowledge_unavailable"
    default_message = "knowledge storage is temporarily unavailable"

    context_fields = ("store",)
    store: str | None  # which store failed, e.g. "document storage"

    @classmethod
    def of(cls, store: str) -> KnowledgeUnavailable:
        return cls(f"{store} is temporarily unavailable", store=store)
