"""Stored records: what the repositories read from and write to DynamoDB.

These are storage models, not API models; API request/response models live in
`agent_knowledge.models`.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Record(BaseModel):
    # Schemas are built on first use, not at import: building them all is ~100 ms of cold start,
    # and a request touches only a few record types. Empty-list defaults are written `= []`, not
    # `Field(default_factory=list)`: pydantic copies them per instance all the same, and a factory
    # makes the schema build call inspect.signature(list), whose first call compiles the tokenize
    # module's patterns (~7 ms of the first request). No `from __future__ import annotations` in
    # this module: pydantic would then compile every annotation string at class creation.
    model_config = ConfigDict(extra="ignore", defer_build=True)


class Principal(Record):
    id: str = Field(min_length=1)
    tenant: str | None = None
    roles: list[str] = []
    audience: str | None = None


class SessionRecord(Record):
    token_hash: str
    session_id: str
    client_app_id: str
    principal: Principal | None = None
    on_behalf_of: str | None = None
    allowed_routes: list[str] = []
    expires_at: int
    # The access token may expire before the session it belongs to.
    access_token_expires_at: int | None = None
    revoked: bool = False
    task_required: bool = False
    created_at: int = 0


class ClientRecord(Record):
    client_app_id: str
    enabled: bool = True
    allowed_routes: list[str] = []


class AudiencePolicy(Record):
    enabled: bool = True
    anonymous: bool = False
    clients: list[str] | None = None
    tenants: list[str] | None = None
    roles: list[str] | None = None
    principals: list[str] | None = None
    audiences: list[str] | None = None


class SourceConfig(Record):
    model_config = ConfigDict(extra="forbid")

    kb_id: str = Field(min_length=1)
    top_k: int | None = Field(default=None, ge=1, le=100)
    min_score: float | None = Field(default=None, ge=0)


class KnowledgeConfig(Record):
    """A route's whole knowledge configuration; its canonical JSON is part of the scope revision."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    sources: list[SourceConfig] = []
    top_k: int = Field(default=10, ge=1, le=100)
    min_score: float = Field(default=0.0, ge=0)
    max_docs: int = Field(default=3, ge=1, le=10)


class AgentClientSettings(Record):
    enabled: bool = False


class RouteRecord(Record):
    route: str
    enabled: bool = True
    agent_client: AgentClientSettings = Field(default_factory=AgentClientSettings)
    audience: AudiencePolicy | None = None
    knowledge: KnowledgeConfig = Field(default_factory=KnowledgeConfig)
    instructions: str = ""


class DocumentAccess(Record):
    """A document's access list, from its sidecar (`identity/document_access.py`): entries
    `principal:<id>`, `role:<name>`, `tenant:<name>`, `everyone`; deny overrides allow."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    allow: list[str] = []
    deny: list[str] = []


class KnowledgeBaseRecord(Record):
    kb_id: str
    name: str = ""
    enabled: bool = True
    # The KB's search index: its generation, bumped by each publish (a conditional write), and the
    # object keys of the manifests of the kept generations, newest first (docs/DESIGN.md §10).
    generation: int = 0
    index_manifests: list[str] = []
    # When the reconciler last compared the KB's objects in the sources bucket with its documents
    # (epoch seconds; `ingest/reconcile.py`); None if it never did.
    last_sync: float | None = None
    # Who sees a document without an access sidecar: every session of a route naming the KB
    # (`route`), or nobody (`none`). `identity/document_access.py` (issue 33).
    default_access: Literal["route", "none"] = "route"


# `ready`: the body is stored and the record may be served (search and read check this, and the
# revision). `pending`: a new document whose body is being stored. `failed`: it could not be
# ingested (`error_reason` says why); one vocabulary from records to the CLI. `deleted`: a
# tombstone left by a delete from the sources bucket, so that a late, older event cannot
# resurrect the document; DynamoDB TTL removes it.
DocumentStatus = Literal["pending", "ready", "failed", "deleted"]


class DocumentRecord(Record):
    kb_id: str
    doc_id: str
    source_key: str
    title: str
    status: DocumentStatus
    error_reason: str | None = None
    # Of a `failed` record: whether the document failed (it waits for a new version) or its KB's
    # state did (disabled or missing: the reconciler ingests it again once the KB is enabled).
    # None on records written before it was kept (they wait for a new version).
    error_cause: Literal["document", "knowledge_base"] | None = None
    revision: str

    @field_validator("status", mode="before")
    @classmethod
    def _earlier_vocabulary(cls, value: object) -> object:
        # Records written before the vocabulary was unified said `error` for `failed`.
        return "failed" if value == "error" else value

    title_sha256: str
    body_sha256: str
    body_bytes: int
    body_key: str
    # ETag of the S3 object under body_key, as returned when it was written (reads use IfMatch).
    body_etag: str = ""
    chunk_count: int = 0
    # Per chunk: the first 16 hex digits of the SHA-256 of its UTF-8 text.
    chunk_digests: list[str] = []
    # Chunk boundaries as [start, end) UTF-8 *byte* offsets into the stored body.
    chunk_offsets: list[tuple[int, int]] = []
    created_at: int = 0
    updated_at: int = 0
    # Unique per write of the record (part of body_key): the version a conditional write replaces.
    write_id: str = ""
    # Set (epoch seconds) while the change is not yet in a published index generation; cleared by
    # the indexer. Documents with it are in the table's sparse `pending` index.
    index_pending_since: float | None = None
    # The S3 event that last set this record (sources bucket): an older event never overwrites it.
    source_sequencer: str | None = None
    source_version_id: str | None = None
    # That object's ETag (unquoted): the reconciler compares it with the bucket's listing.
    source_etag: str | None = None
    # Epoch seconds after which DynamoDB may remove the item (tombstones only).
    ttl: int | None = None
    # The access list of the document's sidecar (None: no sidecar, the KB's `default_access`), and
    # the sidecar object's ETag (unquoted) when it was read: the reconciler compares it.
    access: DocumentAccess | None = None
    access_etag: str | None = None
    # A long source stored as sections (docs/DESIGN.md §10, "Long sources as sections"). The source's
    # record: how many sections it has (0: none, it is an ordinary document; its own body is then
    # empty and it has no chunks). A section's record: the source's doc_id and its number from 1.
    section_count: int = 0
    section_of: str | None = None
    section: int | None = None


RunState = Literal["preparing", "context_ready", "completed", "failed", "expired"]


class RunRecord(Record):
    run_id: str
    session_id: str
    client_app_id: str
    route: str
    state: RunState
    task_id: str | None = None
    created_at: int = 0
    expires_at: int


TaskState = Literal["active", "paused", "cancelled"]


class TaskRecord(Record):
    task_id: str
    state: TaskState
    members: list[str] = []
    scope_hash: str
    expires_at: int
