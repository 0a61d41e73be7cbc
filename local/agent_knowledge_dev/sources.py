"""The sources bucket as the CLI uses it: `s3://<bucket>/<kb_id>/<source_key>` IS the document.

Uploading an object adds or updates the document, deleting it deletes the document; the stack's
ingest pipeline does the rest. A file counts as unchanged when the object's ETag is the MD5 of
its bytes (S3 gives single-part uploads without KMS that ETag; with any other ETag a file is
simply uploaded again, which changes nothing but costs the upload).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.source_files import title_from_metadata, title_metadata
from agent_knowledge.repositories.aws_errors import is_missing_object, storage_errors

# Every failure of the bucket is `KnowledgeUnavailable("source storage")`: counted as that file's
# failure by a folder upload, never an exception that loses the whole run's summary.
STORE = "source storage"


@dataclass(frozen=True)
class SourceObject:
    source_key: str
    etag: str  # without quotes
    title: str | None = None  # from the object's metadata (HEAD only)
    version_id: str | None = None  # HEAD and upload only; None in an unversioned bucket


def content_etag(content: bytes) -> str:
    """The ETag S3 gives a single-part, non-KMS upload of these bytes."""
    return hashlib.md5(content, usedforsecurity=False).hexdigest()


class SourcesBucket:
    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    @staticmethod
    def key(kb_id: str, source_key: str) -> str:
        return f"{kb_id}/{source_key}"

    def uri(self, kb_id: str, source_key: str) -> str:
        return f"s3://{self.bucket}/{self.key(kb_id, source_key)}"

    def objects(self, kb_id: str) -> dict[str, SourceObject]:
        """Every object of the KB by source key (one ListObjectsV2 page per 1,000 objects)."""
        prefix = f"{kb_id}/"
        return {item.source_key: item for item in self._list(prefix)}

    def _list(self, prefix: str) -> Iterator[SourceObject]:
        paginator = self._s3.get_paginator("list_objects_v2")
        with storage_errors(STORE):
            pages = list(paginator.paginate(Bucket=self.bucket, Prefix=prefix))
        for page in pages:
            for item in page.get("Contents", []):
                source_key = item["Key"][len(prefix) :]
                if source_key:
                    yield SourceObject(source_key, item["ETag"].strip('"'))

    def head(self, kb_id: str, source_key: str) -> SourceObject | None:
        try:
            with storage_errors(STORE, passthrough=is_missing_object):
                response = self._s3.head_object(Bucket=self.bucket, Key=self.key(kb_id, source_key))
        except self._s3.exceptions.ClientError:  # only a missing object passes through
            return None
        try:
            title = title_from_metadata(response.get("Metadata", {}))
        except DocumentRejected:  # unreadable: its ingest failed, so the file is sent again anyway
            title = None
        return SourceObject(source_key, response["ETag"].strip('"'), title, response.get("VersionId") or None)

    def put(
        self,
        kb_id: str,
        source_key: str,
        content: bytes,
        media_type: str,
        title: str | None = None,
        charset: str | None = None,
    ) -> str:
        return self.upload(kb_id, source_key, content, media_type, title, charset).etag

    def upload(
        self,
        kb_id: str,
        source_key: str,
        content: bytes,
        media_type: str,
        title: str | None = None,
        charset: str | None = None,
    ) -> SourceObject:
        """Put the object; the version it became (`doc put --wait` follows that version). A
        `charset` goes into its Content-Type, which the ingest decodes a text object by."""
        with storage_errors(STORE):
            response = self._s3.put_object(
                Bucket=self.bucket,
                Key=self.key(kb_id, source_key),
                Body=content,
                ContentType=f"{media_type}; charset={charset}" if charset else media_type,
                Metadata=title_metadata(title) if title else {},
            )
        return SourceObject(source_key, str(response["ETag"]).strip('"'), title, response.get("VersionId") or None)

    def delete(self, kb_id: str, source_key: str) -> None:
        with storage_errors(STORE):
            self._s3.delete_object(Bucket=self.bucket, Key=self.key(kb_id, source_key))
