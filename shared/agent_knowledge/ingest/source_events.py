"""The sources bucket's S3 events → document changes (the ingest function's domain).

An object at `<kb_id>/<source_key>` IS the document `source_key` of KB `kb_id`. Each event is
applied on its own: an object that cannot be ingested (unknown or disabled KB, unsupported type,
undecodable text, empty or oversized) makes its document `failed` with the reason and touches
nothing else; only storage failures raise (the queue then retries the message, and after
`maxReceiveCount` moves it to the dead-letter queue). Events are ordered per key by their S3
`sequencer` (see `SourceVersion`), so redelivered and out-of-order events change nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from email.message import Message
from typing import Any, Literal
from urllib.parse import quote_plus, unquote_plus

from agent_knowledge.core.clock import Clock, system_clock
from agent_knowledge.core.observability import logger
from agent_knowledge.errors import DocumentRejected, KnowledgeBaseDisabled, MalformedMessage, NotUtf8
from agent_knowledge.identity.document_access import (
    MAX_SIDECAR_BYTES,
    AccessSidecarInvalid,
    document_key,
    is_sidecar,
    parse_sidecar,
    sidecar_key,
)
from agent_knowledge.ingest.binary_formats import BINARY_MEDIA_TYPES, MAX_BINARY_SOURCE_BYTES
from agent_knowledge.ingest.content import MAX_BODY_BYTES, MEDIA_TYPES, USE_TEXT_ENCODING, text_codec
from agent_knowledge.ingest.ingestor import Ingestor, IngestResult, SourceVersion
from agent_knowledge.ingest.source_files import MEDIA_TYPES_BY_SUFFIX, media_type_of, title_from_metadata
from agent_knowledge.records import DocumentAccess
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.queues import IndexMessage
from agent_knowledge.repositories.sources import SourceObjects, SourceTooLarge

# HTML shrinks when converted to text: allow raw objects up to what `prepare_document` accepts.
MAX_SOURCE_BYTES = 4 * MAX_BODY_BYTES
# PDF, DOCX, PPTX (binary_formats.py) may be larger: images and fonts are not text.


def max_source_bytes(media_type: str | None) -> int:
    """How large an object of this type may be (None: not known yet, the largest any type may be)."""
    if media_type is None or media_type in BINARY_MEDIA_TYPES:
        return MAX_BINARY_SOURCE_BYTES
    return MAX_SOURCE_BYTES


EventKind = Literal["put", "delete", "reconcile"]


class MalformedNotification(MalformedMessage):
    """The message is not an S3 event notification; retrying cannot help (it goes to the DLQ)."""


@dataclass(frozen=True)
class SourceEvent:
    kb_id: str
    source_key: str
    kind: EventKind
    key: str
    version_id: str | None
    sequencer: str
    size: int
    etag: str | None = None


# Not an S3 event name: what the reconciler sends for a key whose document does not match the
# bucket (`reconcile_notification`). Applied like an `ObjectRemoved:Delete` of one version: the
# key's current object, read now, is ingested, or the document is deleted if there is none.
RECONCILE_EVENT = "AgentKnowledge:Reconcile"


def reconcile_notification(bucket: str, keys: list[tuple[str, str]]) -> str:
    """One source-queue message asking the ingest to reconcile `keys` ((object key, sequencer of
    the document's record, or "0" if it has none) — the record's own sequencer, so the reconcile is
    never stale against the record it found, yet stale against any newer event applied meanwhile)."""
    records = [
        {
            "eventName": RECONCILE_EVENT,
            "s3": {"bucket": {"name": bucket}, "object": {"key": quote_plus(key), "sequencer": sequencer or "0"}},
        }
        for key, sequencer in keys
    ]
    return json.dumps({"Records": records}, separators=(",", ":"))


def _kind(event_name: str, version_id: str | None) -> EventKind | None:
    if event_name == RECONCILE_EVENT:
        return "reconcile"
    if event_name.startswith("ObjectCreated:"):
        return "put"
    if event_name == "ObjectRemoved:DeleteMarkerCreated" or (event_name == "ObjectRemoved:Delete" and not version_id):
        return "delete"
    if event_name == "ObjectRemoved:Delete":
        # One version deleted for good: the key's current object (if any) is now another one.
        return "reconcile"
    return None


def parse_notification(body: str, bucket: str) -> list[SourceEvent]:
    """The document events in one SQS message from the sources bucket (none for `s3:TestEvent`,
    folder placeholders, keys outside any KB prefix, or other buckets, which are logged)."""
    try:
        message = json.loads(body)
        if message.get("Event") == "s3:TestEvent":
            return []
        records = message["Records"]
        events = [event for record in records if (event := _event(record, bucket)) is not None]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MalformedNotification(f"not an S3 event notification ({type(exc).__name__})") from None
    return events


def _event(record: dict[str, Any], bucket: str) -> SourceEvent | None:
    s3 = record["s3"]
    if s3["bucket"]["name"] != bucket:
        logger.warning("event from another bucket ignored", extra={"bucket": s3["bucket"]["name"]})
        return None
    key = unquote_plus(s3["object"]["key"])
    version_id = s3["object"].get("versionId") or None
    kind = _kind(str(record["eventName"]), version_id)
    kb_id, _, source_key = key.partition("/")
    if kind is None or not kb_id or not source_key or source_key.endswith("/"):
        logger.info("object is not a document", extra={"key": key, "event": record["eventName"]})
        return None
    return SourceEvent(
        kb_id=kb_id,
        source_key=source_key,
        kind=kind,
        key=key,
        version_id=version_id,
        sequencer=str(s3["object"]["sequencer"]),
        size=int(s3["object"].get("size") or 0),
        etag=str(s3["object"].get("eTag") or "").strip('"') or None,
    )


def media_type_from(source_key: str, content_type: str) -> tuple[str, str | None]:
    """(media type, declared charset): the key's suffix decides, else the object's Content-Type."""
    header = Message()
    header["content-type"] = content_type or "application/octet-stream"
    charset = header.get_param("charset")
    declared = str(charset) if isinstance(charset, str) else None
    media_type = media_type_of(source_key) or header.get_content_type()
    if media_type not in MEDIA_TYPES:
        shown = content_type or "none"
        raise DocumentRejected(
            f"unsupported type (Content-Type {shown}); use a {', '.join(MEDIA_TYPES_BY_SUFFIX)} key, "
            f"or Content-Type {', '.join(MEDIA_TYPES)}"
        )
    return media_type, declared


def decode_declared(content: bytes, charset: str | None) -> bytes | str:
    """Text in the charset the object's Content-Type declares; without one, the bytes as they are
    (`prepare_document` decodes them as for every upload: byte order mark, HTML `<meta>`, UTF-8)."""
    if not charset:
        return content
    codec = text_codec(charset)
    if codec is None:  # only text encodings: Python's `rot13`, `zlib`, `base64`… are codecs too
        raise DocumentRejected(
            f"unsupported charset {charset[:40]!r} in the object's Content-Type; {USE_TEXT_ENCODING}"
        )
    try:
        return content.decode(codec).removeprefix("\ufeff")
    except ValueError as exc:  # UnicodeDecodeError, or whatever else a codec raises
        where = f" (invalid byte at offset {exc.start})" if isinstance(exc, UnicodeDecodeError) else ""
        raise DocumentRejected(f"content is not valid {charset}{where}") from None


NO_CHARSET_HINT = (
    " and the object's Content-Type declares no charset; upload UTF-8 or declare one, "
    "e.g. Content-Type: text/plain; charset=windows-1252"
)


@dataclass(frozen=True)
class Applied:
    event: SourceEvent
    result: IngestResult | None  # None: the object version is gone (a later event follows)

    @property
    def index_message(self) -> IndexMessage | None:
        """What the indexer must be told, if the document's change is not yet in the index."""
        if self.result is None or self.result.document.index_pending_since is None:
            return None
        document = self.result.document
        change = f"{document.kb_id}\n{document.doc_id}\n{document.write_id}".encode()
        return IndexMessage(document.kb_id, self.result.doc_ids, hashlib.sha256(change).hexdigest())


class SourceIngest:
    """Applies events to the documents table and bodies. One per batch: KB records are cached
    for the batch only, so a KB disabled a moment ago is seen as disabled by the next batch."""

    def __init__(self, repositories: Repositories, sources: SourceObjects, clock: Clock = system_clock) -> None:
        self._ingestor = Ingestor(repositories, clock=clock)
        self._sources = sources

    def apply(self, event: SourceEvent) -> Applied:
        if is_sidecar(event.source_key):
            return self._sidecar_changed(event)
        source = SourceVersion(event.sequencer, event.version_id, event.etag)
        kind, version_id = event.kind, event.version_id
        if kind == "reconcile":
            current = self._sources.head(event.key)
            if current is None:
                kind = "delete"
            else:
                # The version read below and its ETag: a failed record says which object failed,
                # so the reconciler sees it matches the bucket and does not send it again.
                kind, version_id = "put", current.version_id
                source = replace(source, version_id=current.version_id, etag=current.etag)
        result: IngestResult | None
        if kind == "delete":
            result = self._ingestor.remove(event.kb_id, event.source_key, source)
        else:
            try:
                result = self._put(event, version_id, source)
            except DocumentRejected as exc:
                result = self._ingestor.fail(event.kb_id, event.source_key, exc.message, source, exc.cause)
        if result is not None:
            # A failed document's reason is the DocumentRejected message: never a body or a token.
            reason = {"reason": result.document.error_reason} if result.outcome == "failed" else {}
            logger.info(
                "source applied",
                extra={"kb_id": event.kb_id, "doc_id": result.document.doc_id, "outcome": result.outcome, **reason},
            )
        return Applied(event, result)

    def _sidecar_changed(self, event: SourceEvent) -> Applied:
        """An access sidecar was put, changed or deleted: its document is reconciled (read again with
        its current sidecar, like `kb sync` does), never ingested as a document itself. A sidecar of
        a document not yet recorded waits for the document's own event, which reads it."""
        source_key = document_key(event.source_key)
        record = self._ingestor.document(event.kb_id, source_key)
        if record is None or record.status == "deleted":
            logger.info("access sidecar of no document", extra={"kb_id": event.kb_id})
            return Applied(event, None)
        # The record's own sequencer: S3 orders a sidecar's events apart from its document's.
        reconcile = replace(
            event,
            source_key=source_key,
            key=f"{event.kb_id}/{source_key}",
            kind="reconcile",
            version_id=None,
            sequencer=record.source_sequencer or "0",
            size=0,
            etag=None,
        )
        return self.apply(reconcile)

    def _access(self, event: SourceEvent) -> tuple[DocumentAccess | None, str | None]:
        """The document's access list and its sidecar's ETag (None, None: no sidecar). A sidecar that
        cannot be read as an access list fails the document (`AccessSidecarInvalid`)."""
        try:
            found = self._sources.get(sidecar_key(event.key), None, MAX_SIDECAR_BYTES)
        except SourceTooLarge:
            raise AccessSidecarInvalid(f"access sidecar is larger than {MAX_SIDECAR_BYTES} bytes") from None
        if found is None:
            return None, None
        return parse_sidecar(found.body), found.etag or None

    def _put(self, event: SourceEvent, version_id: str | None, source: SourceVersion) -> IngestResult | None:
        kb = self._ingestor.knowledge_base(event.kb_id)
        if not kb.enabled:
            raise KnowledgeBaseDisabled(f"knowledge base {event.kb_id!r} is disabled", kb_id=event.kb_id)
        # The key's suffix gives the type's size limit; without one, the Content-Type will tell.
        limit = max_source_bytes(media_type_of(event.source_key))
        if event.kind == "put":  # a reconcile has no size: it is checked on reading
            self._check_size(event.size, limit)
        try:
            found = self._sources.get(event.key, version_id, limit)
        except SourceTooLarge as exc:
            self._check_size(exc.size, limit)
            raise
        if found is None:
            logger.info("object version gone before it was read", extra={"kb_id": event.kb_id})
            return None
        # What was read is what the record will say it holds (a reconcile learns it only now).
        source = replace(source, version_id=found.version_id or source.version_id, etag=found.etag or source.etag)
        media_type, charset = media_type_from(event.source_key, found.content_type)
        self._check_size(len(found.body), max_source_bytes(media_type))
        # PDF, DOCX, PPTX are bytes whatever charset a Content-Type claims.
        content = found.body if media_type in BINARY_MEDIA_TYPES else decode_declared(found.body, charset)
        access, access_etag = self._access(event)
        try:
            # The same preparation as `doc put` (title from metadata, else found in the document),
            # so the revision an uploader computed locally is the one stored here.
            return self._ingestor.put(
                event.kb_id,
                event.source_key,
                title_from_metadata(found.metadata),
                content,
                media_type=media_type,
                source=source,
                access=access,
                access_etag=access_etag,
            )
        except NotUtf8 as exc:
            if charset is None:
                raise NotUtf8(exc.message + NO_CHARSET_HINT) from None
            raise

    @staticmethod
    def _check_size(size: int, limit: int) -> None:
        if size == 0:
            raise DocumentRejected("the object is empty")
        if size > limit:
            raise DocumentRejected(f"the object is larger than {limit} bytes ({size} bytes)")


def index_messages(applied: list[Applied]) -> Iterator[IndexMessage]:
    for item in applied:
        message = item.index_message
        if message is not None:
            yield message
