"""Every exception the layer raises, under one root with context, and the protocol's error ladder.

    AgentKnowledgeError                the root: a safe message and `context()` for log lines
    ├── KnowledgeError                 reported to an API caller (below)
    ├── DocumentRejected               a source cannot be ingested as given (ingest/content)
    │   ├── NotUtf8                    undeclared bytes that are not UTF-8
    │   ├── KnowledgeBaseMissing(kb_id)   (the KB's state, not the document's:
    │   └── KnowledgeBaseDisabled(kb_id)   `kb sync` tries again once it is enabled)
    ├── MalformedMessage               a queue message that no retry can apply (ingest, index)
    ├── BodyMissing → BodyReplaced     a stored object is gone or replaced (repositories/bodies)
    ├── SourceTooLarge(size)           a source object over the ingest's limit (repositories/sources)
    ├── IndexUnavailable               no generation of a KB's index can be loaded (index_format/layout)
    ├── EmbeddingFailed(provider, ...)  an embedding provider gave no vectors (embedding/)
    ├── RerankFailed(model_id, ...)    the reranker gave no order; search keeps the fused one (retrieval/rerank)
    ├── TokenError → TokenInvalid, TokenExpired(expires_at)   (references/codec)
    ├── JsonRejected                   JSON this API does not accept (wire.loads)
    └── ConfigurationError             deployed without the environment template.yaml declares

The pipeline decides by type, never by message text. The protocol ladder, by what the caller can do:

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
    │   ├── ReferenceInvalid(reason, token)  one message per token, whatever the cause; the reason is logged
    │   ├── ReferenceExpired(expires_at)
    │   ├── ScopeChanged
    │   └── KnowledgeChanged
    └── KnowledgeUnavailable(store)    storage or index failure; retry later

HTTP statuses live in `agent_knowledge.runtime.http`, not here: the domain does not know it is
served over HTTP. Messages never contain bodies, tokens, keys or storage details; the context
attributes are identifiers and times only, safe to log.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal


class AgentKnowledgeError(Exception):
    """Root of everything the layer raises.

    A subclass names in `context_fields` the keyword arguments it carries (identifiers and times);
    each becomes an attribute and, when set, an entry of `context()`.
    """

    default_message = "agent knowledge error"
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
        """What the error knows beyond its message, for log lines (never secrets or bodies)."""
        values = {name: getattr(self, name) for name in self.context_fields}
        return {name: value for name, value in values.items() if value is not None}


class KnowledgeError(AgentKnowledgeError):
    """Base of every error the protocol reports to a caller, with its protocol error `code`."""

    code = "internal_error"
    default_message = "internal error"


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
    one from a genuine one issued to someone else. The message names only which token was refused
    (`token`: "reference" or "cursor"), and a cursor is blamed only once its reference has passed
    every check of its own, bound identity included (knowledge/read.py), so it tells a thief nothing.
    `reason` names the failed check for the logs only (`context()`); it never contains the token."""

    code = "knowledge_reference_invalid"
    default_message = "the knowledge reference or cursor is invalid"
    _MESSAGES: ClassVar[dict[str, str]] = {
        "reference": "the knowledge reference is invalid",
        "cursor": "the knowledge cursor is invalid (its reference is valid: read again without the cursor)",
    }

    context_fields = ("reason", "token")
    reason: str | None
    token: str | None

    def __init__(self, reason: str | None = None, *, token: str | None = None) -> None:
        super().__init__(self._MESSAGES.get(token or ""), reason=reason, token=token)


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


# -- outside the protocol: the pipeline, storage, tokens, configuration ------------------------


class DocumentRejected(AgentKnowledgeError):
    """A source cannot be ingested as given (unsupported, undecodable, empty, too large, ...): its
    document becomes `failed` with this message as the reason; nothing stored was changed."""

    default_message = "the document cannot be ingested"
    # What failed: the document (it waits for a new version) or its KB's state (disabled, missing:
    # the reconciler ingests it again once the KB is enabled). `DocumentRecord.error_cause`.
    cause: ClassVar[Literal["document", "knowledge_base"]] = "document"


class NotUtf8(DocumentRejected):
    """Bytes taken for UTF-8 (no byte order mark, no declared charset) that are not UTF-8: the
    source event adds how to declare another encoding."""


class KnowledgeBaseMissing(DocumentRejected):
    """The knowledge base a source or an index change names does not exist (or was deleted)."""

    cause = "knowledge_base"
    context_fields = ("kb_id",)
    kb_id: str | None


class KnowledgeBaseDisabled(DocumentRejected):
    """The knowledge base a source names is disabled: its objects are not ingested until enabled."""

    cause = "knowledge_base"
    context_fields = ("kb_id",)
    kb_id: str | None


class MalformedMessage(AgentKnowledgeError):
    """A queue message no retry can apply (not an S3 notification, not an index change): it goes
    to the dead-letter queue alone."""

    default_message = "malformed queue message"


class BodyMissing(AgentKnowledgeError):
    """A stored object is gone."""

    default_message = "the stored object is gone"


class BodyReplaced(BodyMissing):
    """The object under the key is no longer the one recorded (its ETag changed)."""

    default_message = "the stored object was replaced"


class SourceTooLarge(AgentKnowledgeError):
    """A source object is larger than the ingest reads."""

    context_fields = ("size",)
    size: int

    def __init__(self, size: int) -> None:
        super().__init__(f"the object is {size} bytes", size=size)


class IndexUnavailable(AgentKnowledgeError):
    """No generation of the KB's index can be loaded."""

    default_message = "the knowledge base index cannot be loaded"


class TokenError(AgentKnowledgeError):
    """A reference or cursor cannot be used."""

    default_message = "token unusable"


class TokenInvalid(TokenError):
    """Undecodable, wrong version or purpose, bad MAC, malformed claims."""


class TokenExpired(TokenError):
    context_fields = ("expires_at",)
    expires_at: int

    def __init__(self, expires_at: int) -> None:
        super().__init__("token expired", expires_at=expires_at)


class JsonRejected(AgentKnowledgeError):
    """The text is JSON that this API does not accept; the message is safe to return."""


class ConfigurationError(AgentKnowledgeError):
    """The function is deployed without the environment `template.yaml` declares."""


class EmbeddingFailed(AgentKnowledgeError):
    """An embedding provider returned no vectors: after throttling and transient errors were retried
    with back-off (`transient=True`), or at once for an error no retry can fix (`transient=False`:
    access denied, bad input). Either way the documents stay in their generation's `unembedded`
    list, searchable lexically, and a later indexer run embeds them (indexer/vector_generation.py)."""

    default_message = "embedding failed"
    context_fields = ("provider", "model_id", "error_code", "transient")


class RerankFailed(AgentKnowledgeError):
    """The optional reranker (retrieval/rerank.py) returned no order: throttled, timed out or
    unreachable after its one retry (`transient=True`), or refused for a reason no retry fixes —
    access denied, model not enabled, a malformed answer (`transient=False`). The search keeps
    the fused order and logs this; it never fails a search."""

    default_message = "reranking failed"
    context_fields = ("model_id", "error_code", "transient")
