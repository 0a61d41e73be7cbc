"""Document bodies in S3, under a key unique to the write that stored it; also the search index's
files (`agent_knowledge.index_format.layout`), uploaded and downloaded as streams.

Each object records the SHA-256 of its bytes in its metadata. Reads are ranged and
conditional on the ETag recorded at ingest (`IfMatch`), so a page is served from exactly the
object the document record describes, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO, Protocol

from botocore.exceptions import ClientError, FlexibleChecksumError

from agent_knowledge.errors import BodyMissing, BodyReplaced
from agent_knowledge.repositories.aws_errors import is_missing_object, is_replaced_object, storage_errors

SHA256_METADATA = "sha256"
# Streaming downloads hand the object over in pieces of this size: never the whole object in memory.
DOWNLOAD_CHUNK_BYTES = 1024 * 1024
# The S3 checksum of index files: the cheapest full-object checksum botocore validates without the
# CRT (zlib's CRC32); their SHA-256 is their name, computed once by the writer, never on download.
INDEX_CHECKSUM = "CRC32"


@dataclass(frozen=True)
class StoredBody:
    key: str
    etag: str


class Sink(Protocol):
    """Where a streaming download writes (a file, or a wrapper that also hashes)."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True)
class ListedObject:
    key: str
    size: int
    last_modified: datetime


def body_key(kb_id: str, doc_id: str, revision: str, write_id: str = "") -> str:
    """Every write gets its own key (`write_id`), so deleting the body a write replaced can never
    delete the body of another write of the same content (two writers, or a delete racing a re-put)."""
    if write_id:
        return f"bodies/{kb_id}/{doc_id}/{write_id}/{revision}"
    return f"bodies/{kb_id}/{doc_id}/{revision}"


class BodyStore:
    """`s3` is a client factory: the S3 client is created on first use, so functions that
    never read bodies never pay for it."""

    def __init__(self, s3: Callable[[], Any], bucket: str) -> None:
        self._client_factory = s3
        self._bucket = bucket

    @property
    def _s3(self) -> Any:
        return self._client_factory()

    def put(self, key: str, body: bytes, sha256_hex: str) -> StoredBody:
        with storage_errors("document storage"):
            response = self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                ContentType="text/plain; charset=utf-8",
                Metadata={SHA256_METADATA: sha256_hex},
            )
        return StoredBody(key=key, etag=response["ETag"])

    def put_file(self, key: str, source: BinaryIO, sha256_hex: str, content_type: str) -> int:
        """Upload an open file, streamed from its current position (large index files never sit
        in memory whole); returns the bytes uploaded. S3 stores it with a CRC32 checksum, checked
        on arrival and validated by botocore on every `download`."""
        start = source.tell()
        with storage_errors("index storage"):
            self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=source,
                ContentType=content_type,
                Metadata={SHA256_METADATA: sha256_hex},
                ChecksumAlgorithm=INDEX_CHECKSUM,
            )
        source.seek(0, 2)
        return source.tell() - start

    def download(self, key: str, target: Sink) -> int:
        """Stream the object into `target` piece by piece; returns the bytes written. botocore
        validates the object's S3 checksum as it streams (an object stored without one is not
        checked). Raises BodyMissing if it is gone, BodyReplaced if its bytes fail the checksum."""
        written = 0
        try:
            with storage_errors("index storage", passthrough=is_missing_object):
                body = self._s3.get_object(Bucket=self._bucket, Key=key, ChecksumMode="ENABLED")["Body"]
                try:
                    for piece in body.iter_chunks(DOWNLOAD_CHUNK_BYTES):
                        target.write(piece)
                        written += len(piece)
                except FlexibleChecksumError as exc:
                    raise BodyReplaced(key) from exc  # not the bytes S3 was given
                finally:
                    body.close()
        except ClientError as exc:
            if is_missing_object(exc):
                raise BodyMissing(key) from exc
            raise
        return written

    def list(self, prefix: str) -> Iterator[ListedObject]:
        """Every object whose key starts with `prefix`, a page (1,000 keys) at a time."""
        request: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
        while True:
            with storage_errors("index storage"):
                response = self._s3.list_objects_v2(**request)
            for item in response.get("Contents", []):
                yield ListedObject(key=item["Key"], size=int(item["Size"]), last_modified=item["LastModified"])
            if not response.get("IsTruncated"):
                return
            request["ContinuationToken"] = response["NextContinuationToken"]

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]:
        """Bytes [start, end) and the object's metadata. Raises BodyMissing if it is gone or changed."""
        if end <= start:
            return b"", {}
        request: dict[str, Any] = {"Bucket": self._bucket, "Key": key, "Range": f"bytes={start}-{end - 1}"}
        if etag:
            request["IfMatch"] = etag
        try:
            with storage_errors("document storage", passthrough=is_missing_object):
                response = self._s3.get_object(**request)
                data = response["Body"].read()
        except ClientError as exc:
            if is_replaced_object(exc):
                raise BodyReplaced(key) from exc
            if is_missing_object(exc):
                raise BodyMissing(key) from exc
            raise
        return data, response.get("Metadata", {})

    def read(self, key: str) -> bytes:
        try:
            with storage_errors("document storage", passthrough=is_missing_object):
                return self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if is_missing_object(exc):
                raise BodyMissing(key) from exc
            raise

    def exists(self, key: str, etag: str | None = None) -> bool:
        """Whether the object is there (and, given `etag`, still the one recorded)."""
        request: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
        if etag:
            request["IfMatch"] = etag
        try:
            with storage_errors("document storage", passthrough=is_missing_object):
                self._s3.head_object(**request)
        except ClientError as exc:
            if is_missing_object(exc):
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        with storage_errors("document storage"):
            self._s3.delete_object(Bucket=self._bucket, Key=key)
