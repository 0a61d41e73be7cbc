"""Objects in the sources bucket: what an operator uploaded, read by the version an event names,
and listed by KB for the reconciler (`ingest/reconcile.py`) and `kb status`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from agent_knowledge.errors import SourceTooLarge
from agent_knowledge.repositories.aws_errors import storage_errors


@dataclass(frozen=True)
class SourceObject:
    body: bytes
    content_type: str
    version_id: str | None
    # User metadata (x-amz-meta-*), e.g. the title `doc put --title` sets.
    metadata: dict[str, str] = field(default_factory=dict)
    # The object's ETag without quotes: what a bucket listing shows, for reconciliation.
    etag: str | None = None


@dataclass(frozen=True, slots=True)
class ListedObject:
    """One object of a bucket listing (ListObjectsV2: the current versions only)."""

    key: str
    etag: str  # without quotes
    last_modified: float  # epoch seconds
    size: int


@dataclass(frozen=True)
class SourceHead:
    """The key's current object: its version ("null" in an unversioned bucket) and ETag."""

    version_id: str
    etag: str | None


def _gone(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in {"NoSuchKey", "NoSuchVersion", "404", "NotFound", "MethodNotAllowed"} or status in {404, 405}


class SourceObjects:
    """`s3` is a client factory (created on first use), as for the body store."""

    def __init__(self, s3: Callable[[], Any], bucket: str) -> None:
        self._client_factory = s3
        self.bucket = bucket

    def get(self, key: str, version_id: str | None, max_bytes: int) -> SourceObject | None:
        """The object (that version, or the current one); None if it no longer exists (a delete
        came after the event). Raises SourceTooLarge rather than reading more than `max_bytes`."""
        request: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if version_id:
            request["VersionId"] = version_id
        try:
            with storage_errors("source storage", passthrough=_gone):
                response = self._client_factory().get_object(**request)
                size = int(response.get("ContentLength") or 0)
                if size > max_bytes:
                    response["Body"].close()
                    raise SourceTooLarge(size)
                body = response["Body"].read()
        except ClientError as exc:
            if _gone(exc):
                return None
            raise
        content_type = str(response.get("ContentType") or "")
        etag = str(response.get("ETag") or "").strip('"') or None
        return SourceObject(body, content_type, response.get("VersionId"), dict(response.get("Metadata") or {}), etag)

    def head(self, key: str) -> SourceHead | None:
        """The key's current object (version id and ETag), or None if there is none (deleted)."""
        try:
            with storage_errors("source storage", passthrough=_gone):
                response = self._client_factory().head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _gone(exc):
                return None
            raise
        etag = str(response.get("ETag") or "").strip('"') or None
        return SourceHead(str(response.get("VersionId") or "null"), etag)

    def list_objects(self, prefix: str) -> Iterator[ListedObject]:
        """Every current object under `prefix`, in key order: one ListObjectsV2 page (request) per
        1,000 objects."""
        request: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        while True:
            with storage_errors("source storage"):
                response = self._client_factory().list_objects_v2(**request)
            for item in response.get("Contents", []):
                yield ListedObject(
                    key=str(item["Key"]),
                    etag=str(item.get("ETag") or "").strip('"'),
                    last_modified=item["LastModified"].timestamp(),
                    size=int(item.get("Size") or 0),
                )
            token = response.get("NextContinuationToken")
            if not response.get("IsTruncated") or not token:
                return
            request["ContinuationToken"] = token

    def top_level_prefixes(self) -> list[str]:
        """The first path segment of every key (`<kb_id>` of `<kb_id>/...`): the KBs that have
        objects. One ListObjectsV2 request per 1,000 of them, whatever the number of objects."""
        request: dict[str, Any] = {"Bucket": self.bucket, "Delimiter": "/"}
        found: list[str] = []
        while True:
            with storage_errors("source storage"):
                response = self._client_factory().list_objects_v2(**request)
            found.extend(str(item["Prefix"]).removesuffix("/") for item in response.get("CommonPrefixes", []))
            token = response.get("NextContinuationToken")
            if not response.get("IsTruncated") or not token:
                return [prefix for prefix in found if prefix]
            request["ContinuationToken"] = token
