"""Document metadata: one item per (kb_id, doc_id); doc_id is derived from the source key."""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.aws_errors import storage_errors
from agent_knowledge.repositories.batch_get import Lookup, batch_get
from agent_knowledge.repositories.dynamo import Table, from_item, key, to_item

# What validating a hit, signing a reference and serving a body need of a record; the rest
# (chunk offsets above all: a long list per document) is never read on the query path. Records read
# with this projection are for validation only, never written back.
VALIDATION_ATTRIBUTES = (
    "kb_id",
    "doc_id",
    "source_key",
    "title",
    "status",
    "revision",
    "title_sha256",
    "body_sha256",
    "body_bytes",
    "body_key",
    "body_etag",
    "chunk_digests",
    "access",
)

# The sparse index of documents whose change is not yet in a published index generation
# (template.yaml: DocumentsTable, GlobalSecondaryIndexes): key kb_id, sort index_pending_since.
PENDING_INDEX = "pending"
# Everything but the chunk lists, which can be most of a record's size and matter only to the index.
_SUMMARY_ATTRIBUTES = [name for name in DocumentRecord.model_fields if name not in {"chunk_digests", "chunk_offsets"}]


@dataclass(frozen=True)
class PendingChange:
    kb_id: str
    doc_id: str
    since: float


@dataclass(frozen=True, slots=True)
class DocumentState:
    """What the reconciler and `kb status` compare with the sources bucket: a few small attributes
    of a record (`DocumentRepository.states`), never its chunk lists or title."""

    doc_id: str
    source_key: str
    status: str
    source_etag: str | None
    source_sequencer: str | None
    index_pending_since: float | None
    updated_at: int
    write_id: str
    access_etag: str | None = None  # the ETag of the document's access sidecar when it was read
    error_cause: str | None = None  # of a failed record (`DocumentRecord.error_cause`)
    section_of: str | None = None  # a section's source (`DocumentRecord.section_of`)
    section_count: int = 0  # a source's sections (`DocumentRecord.section_count`)


STATE_ATTRIBUTES = tuple(DocumentState.__dataclass_fields__)


def document_record(item: dict[str, Any]) -> DocumentRecord:
    """A stored item as a record. An item that is not a valid record (an access list of the wrong
    shape above all) is storage that cannot be used now: KnowledgeUnavailable, so that search and
    read answer `knowledge_unavailable` and never serve a document whose access cannot be evaluated."""
    try:
        return DocumentRecord.model_validate(item)
    except ValidationError:
        raise KnowledgeUnavailable("a document record cannot be read", store="document storage") from None


def document_id(source_key: str) -> str:
    """Stable id of a source within its KB (callers never see or supply it)."""
    return "doc_" + hashlib.sha256(source_key.encode("utf-8")).hexdigest()[:32]


def section_id(source_key: str, number: int) -> str:
    """Stable id of section `number` (from 1) of a long source: a NUL never occurs in a source key,
    so no source's id is ever a section's."""
    return "doc_" + hashlib.sha256(f"{source_key}\x00section\x00{number}".encode()).hexdigest()[:32]


class DocumentRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = Table(dynamodb, table, "document storage")

    def get(self, kb_id: str, doc_id: str) -> DocumentRecord | None:
        item = self._table.get(key(kb_id=kb_id, doc_id=doc_id))
        return document_record(item) if item else None

    def _lookup(self, kb_id: str, doc_id: str, attributes: tuple[str, ...]) -> Lookup[DocumentRecord]:
        """`attributes`: what to read (empty: the whole record)."""
        item_key = key(kb_id=kb_id, doc_id=doc_id)
        return Lookup(self._table.name, item_key, document_record, self._table.store, attributes)

    def _get_batch(
        self, keys: list[tuple[str, str]], attributes: tuple[str, ...]
    ) -> dict[tuple[str, str], DocumentRecord]:
        lookups = [self._lookup(kb_id, doc_id, attributes) for kb_id, doc_id in dict.fromkeys(keys)]
        return {(r.kb_id, r.doc_id): r for r in batch_get(self._table.dynamodb, lookups) if r is not None}

    def lookup(self, kb_id: str, doc_id: str) -> Lookup[DocumentRecord]:
        """The record of a document as validation needs it (`VALIDATION_ATTRIBUTES`), for `batch_get`."""
        return self._lookup(kb_id, doc_id, VALIDATION_ATTRIBUTES)

    def get_marks(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
        """Batch read of (kb_id, doc_id) pairs with their pending marks (what the indexer needs to
        clear them: revision, status, `index_pending_since`); missing documents are absent."""
        return self._get_batch(keys, (*VALIDATION_ATTRIBUTES, "index_pending_since", "write_id"))

    def get_whole(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
        """Batch read of whole records (chunk offsets included: the index writer cuts chunks from
        the body with them); missing documents are absent from the result."""
        return self._get_batch(keys, ())

    def get_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
        """Batch read of (kb_id, doc_id) pairs, as validation needs them (`VALIDATION_ATTRIBUTES`);
        missing documents are absent from the result."""
        return self._get_batch(keys, VALIDATION_ATTRIBUTES)

    def list(self, kb_id: str, *, with_chunks: bool = True) -> Iterator[DocumentRecord]:
        """Every record of the KB (tombstones included); without the chunk lists unless `with_chunks`."""
        request: dict[str, Any] = {
            "KeyConditionExpression": "kb_id = :kb",
            "ExpressionAttributeValues": {":kb": {"S": kb_id}},
            "ConsistentRead": True,
        }
        if not with_chunks:
            request["ProjectionExpression"] = ", ".join(f"#a{i}" for i in range(len(_SUMMARY_ATTRIBUTES)))
            request["ExpressionAttributeNames"] = {f"#a{i}": name for i, name in enumerate(_SUMMARY_ATTRIBUTES)}
        for item in self._table.query(**request):
            yield document_record(item)

    def states(self, kb_id: str, *, consistent: bool = False) -> Iterator[DocumentState]:
        """Every record of the KB (tombstones included) as `DocumentState`: one paginated Query
        (1 MB of items per page) with a projection. The projection saves transfer and parsing; the
        read units are DynamoDB's for the whole items (4 KB each, half that read eventually
        consistent, the default here: the reconciler's comparison tolerates a record a moment old)."""
        request: dict[str, Any] = {
            "KeyConditionExpression": "kb_id = :kb",
            "ExpressionAttributeValues": {":kb": {"S": kb_id}},
            "ConsistentRead": consistent,
            "ProjectionExpression": ", ".join(f"#a{i}" for i in range(len(STATE_ATTRIBUTES))),
            "ExpressionAttributeNames": {f"#a{i}": name for i, name in enumerate(STATE_ATTRIBUTES)},
        }
        for item in self._table.query(**request):
            pending = item.get("index_pending_since")
            yield DocumentState(
                doc_id=str(item["doc_id"]),
                source_key=str(item.get("source_key", "")),
                # Records written before the vocabulary was unified said `error` for `failed`.
                status="failed" if item.get("status") == "error" else str(item.get("status", "")),
                source_etag=item.get("source_etag"),
                source_sequencer=item.get("source_sequencer"),
                index_pending_since=float(pending) if pending is not None else None,
                updated_at=int(item.get("updated_at") or 0),
                write_id=str(item.get("write_id") or ""),
                access_etag=item.get("access_etag"),
                error_cause=item.get("error_cause"),
                section_of=item.get("section_of"),
                section_count=int(item.get("section_count") or 0),
            )

    def pending(self, kb_id: str) -> builtins.list[PendingChange]:
        """The KB's changes not yet in a published index generation, oldest first. The index is
        eventually consistent: a change made a moment ago may be missing (its queue message names it)."""
        request: dict[str, Any] = {
            "IndexName": PENDING_INDEX,
            "KeyConditionExpression": "kb_id = :kb",
            "ExpressionAttributeValues": {":kb": {"S": kb_id}},
        }
        return [
            PendingChange(str(item["kb_id"]), str(item["doc_id"]), float(item["index_pending_since"]))
            for item in self._table.query(**request)
        ]

    def oldest_pending_since(self, kb_id: str) -> float | None:
        """When the KB's oldest change still waiting for the indexer was made (one index item read)."""
        items = self._table.query_page(
            IndexName=PENDING_INDEX,
            KeyConditionExpression="kb_id = :kb",
            ExpressionAttributeValues={":kb": {"S": kb_id}},
            ScanIndexForward=True,
            Limit=1,
        )
        return float(from_item(items[0])["index_pending_since"]) if items else None

    def clear_pending(self, record: DocumentRecord) -> bool:
        """The record's change is in a published generation: drop its pending mark, unless the
        record changed since it was read (then its new change still waits for the indexer).
        Idempotent: a retry that finds the same write with its mark already gone succeeds."""
        if record.index_pending_since is None:
            return True
        if record.write_id:
            return self._table.update(
                key(kb_id=record.kb_id, doc_id=record.doc_id),
                "REMOVE index_pending_since",
                "write_id = :w AND (index_pending_since = :p OR attribute_not_exists(index_pending_since))",
                {":w": record.write_id, ":p": record.index_pending_since},
            )
        return self._table.update(
            key(kb_id=record.kb_id, doc_id=record.doc_id),
            "REMOVE index_pending_since",
            "revision = :r AND #s = :s AND index_pending_since = :p",
            {":r": record.revision, ":s": record.status, ":p": record.index_pending_since},
            {"#s": "status"},
        )

    def replace(self, record: DocumentRecord, expected: DocumentRecord | None) -> bool:
        """Write `record` only if the stored item is still `expected` (None: no item at all).
        Every write has its own write_id, so this detects any change in between, even one that
        went back to the same revision; records written before write_id existed match on revision.

        Idempotent: the condition also holds when the stored item already IS `record` (same
        write_id), so a retry of a write that committed but whose answer was lost (botocore retries
        it) succeeds again instead of looking like a lost race (docs/DESIGN.md §10)."""
        request: dict[str, Any] = {"TableName": self._table.name, "Item": to_item(record.model_dump(mode="json"))}
        values: dict[str, Any] = {":mine": {"S": record.write_id}}
        if expected is None:
            condition = "attribute_not_exists(doc_id)"
        elif expected.write_id:
            condition = "write_id = :w"
            values[":w"] = {"S": expected.write_id}
        else:
            condition = "(attribute_not_exists(write_id) AND revision = :r)"
            values[":r"] = {"S": expected.revision}
        if record.write_id:
            request["ConditionExpression"] = f"{condition} OR write_id = :mine"
            request["ExpressionAttributeValues"] = values
        else:
            request["ConditionExpression"] = condition
            values.pop(":mine")
            if values:
                request["ExpressionAttributeValues"] = values
        return self._table.write("Put", request)

    def put(self, record: DocumentRecord, *, only_if_new: bool = False, only_if_revision: str | None = None) -> bool:
        """Write a record, optionally only if none exists yet or only if the stored revision is
        `only_if_revision`; returns False when that condition fails."""
        request: dict[str, Any] = {"TableName": self._table.name, "Item": to_item(record.model_dump(mode="json"))}
        if only_if_new:
            request["ConditionExpression"] = "attribute_not_exists(doc_id)"
        elif only_if_revision is not None:
            request["ConditionExpression"] = "revision = :r"
            request["ExpressionAttributeValues"] = {":r": {"S": only_if_revision}}
        return self._table.write("Put", request)

    def delete(self, kb_id: str, doc_id: str) -> bool:
        with storage_errors(self._table.store):
            response = self._table.dynamodb.delete_item(
                TableName=self._table.name, Key=key(kb_id=kb_id, doc_id=doc_id), ReturnValues="ALL_OLD"
            )
        return bool(response.get("Attributes"))
