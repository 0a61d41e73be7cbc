"""A KB index published the way the product publishes it, into a local directory instead of S3.

`DirectoryObjects` stands in for the bodies bucket (each object a file under a root; reads and
streamed downloads like `BodyStore`'s, byte counters for what went in and out). `publish_chunks`
builds an index of given chunks with the product's code (`write_index`, then the manifest
`describe` makes) and stores its files and manifest, returning the KB record a reader would see.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Iterable
from typing import BinaryIO

from agent_knowledge.index_format.builder import IndexedChunk, write_index
from agent_knowledge.index_format.layout import IndexManifest, manifest_key
from agent_knowledge.indexer.writer import describe
from agent_knowledge.records import KnowledgeBaseRecord
from agent_knowledge.repositories.bodies import BodyMissing, Sink

PIECE_BYTES = 1024 * 1024


class DirectoryObjects:
    def __init__(self, root: str) -> None:
        self.root = root
        self.uploaded_bytes = 0
        self.downloaded_bytes = 0

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def read(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as source:
                data = source.read()
        except FileNotFoundError as exc:
            raise BodyMissing(key) from exc
        self.downloaded_bytes += len(data)
        return data

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]:
        try:
            with open(self._path(key), "rb") as source:
                source.seek(start)
                data = source.read(max(0, end - start))
        except FileNotFoundError as exc:
            raise BodyMissing(key) from exc
        self.downloaded_bytes += len(data)
        return data, {}

    def download(self, key: str, target: Sink) -> int:
        written = 0
        try:
            with open(self._path(key), "rb") as source:
                while piece := source.read(PIECE_BYTES):
                    target.write(piece)
                    written += len(piece)
        except FileNotFoundError as exc:
            raise BodyMissing(key) from exc
        self.downloaded_bytes += written
        return written

    def put_file(self, key: str, source: BinaryIO, sha256_hex: str, content_type: str) -> int:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as target:
            shutil.copyfileobj(source, target)
        self.uploaded_bytes += os.path.getsize(path)
        return os.path.getsize(path)

    def total_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(self.root) for n in names)


def publish_chunks(
    chunks: Iterable[IndexedChunk], objects: DirectoryObjects, kb_id: str = "bench"
) -> tuple[KnowledgeBaseRecord, IndexManifest]:
    """Build an index of `chunks` and store it as generation 1 of `kb_id` in `objects`."""
    with tempfile.TemporaryDirectory(prefix="ak-bench-build-") as directory:
        documents: set[str] = set()

        def counted() -> Iterable[IndexedChunk]:
            for chunk in chunks:
                documents.add(chunk.doc_id)
                yield chunk

        write_index(directory, counted())
        manifest = describe(directory, kb_id, 1, len(documents), None, kind="rebuild")
        for name in manifest.files:
            with open(os.path.join(directory, name), "rb") as source:
                objects.put_file(manifest.file_key(name), source, manifest.files[name].sha256, "")
    key = manifest_key(kb_id, 1)
    objects.put_file(key, io.BytesIO(manifest.to_bytes()), "", "application/json")
    return KnowledgeBaseRecord(kb_id=kb_id, generation=1, index_manifests=[key]), manifest
