"""Build a KB's index from its chunks and pack it as one snapshot file (an uncompressed tar:
tantivy's segment files are already compressed)."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

import tantivy

from agent_knowledge.retrieval import schema as fields
from agent_knowledge.retrieval.analyzer import cjk_unigrams, word_tokens

WRITER_HEAP_BYTES = 64_000_000
_LOCK_FILES = {".tantivy-writer.lock", ".tantivy-meta.lock"}


@dataclass(frozen=True)
class IndexedChunk:
    doc_id: str
    revision: str
    chunk_index: int
    digest: str
    text: str


def write_index(directory: str, chunks: Iterable[IndexedChunk]) -> int:
    """Write a fresh index of `chunks` into the empty `directory`; returns the chunk count."""
    index = tantivy.Index(fields.schema(), path=directory, reuse=False)
    fields.register_analyzers(index)
    writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
    count = 0
    for chunk in chunks:
        document = tantivy.Document(
            **{
                fields.TEXT: " ".join(word_tokens(chunk.text)),
                fields.UNIGRAMS: " ".join(cjk_unigrams(chunk.text)),
                fields.DOC_ID: chunk.doc_id,
                fields.REVISION: chunk.revision,
                fields.DIGEST: chunk.digest,
                fields.CHUNK: chunk.text.encode("utf-8"),
            }
        )
        # Explicitly unsigned: keyword integers become i64, which a u64 fast field refuses.
        document.add_unsigned(fields.DOC_KEY, fields.doc_key(chunk.doc_id))
        document.add_unsigned(fields.CHUNK_INDEX, chunk.chunk_index)
        writer.add_document(document)
        count += 1
    writer.commit()
    writer.wait_merging_threads()
    return count


def pack(directory: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(os.listdir(directory)):
            if name not in _LOCK_FILES:
                archive.add(os.path.join(directory, name), arcname=name, recursive=False)
    return buffer.getvalue()


def unpack(snapshot: bytes, directory: str) -> None:
    with tarfile.open(fileobj=io.BytesIO(snapshot), mode="r") as archive:
        for member in archive.getmembers():
            # Flat regular files only: a snapshot can never write outside `directory`.
            if not member.isfile() or os.path.basename(member.name) != member.name:
                raise ValueError("unexpected entry in index snapshot")
            source = archive.extractfile(member)
            assert source is not None
            with open(os.path.join(directory, member.name), "wb") as target:
                target.write(source.read())


def build_snapshot(chunks: Iterable[IndexedChunk]) -> tuple[bytes, int]:
    with tempfile.TemporaryDirectory(prefix="ak-index-build-") as directory:
        count = write_index(directory, chunks)
        return pack(directory), count


def read_chunks(snapshot: bytes) -> list[IndexedChunk]:
    """Every chunk stored in a snapshot (a rebuild reuses them for documents that did not change)."""
    with tempfile.TemporaryDirectory(prefix="ak-index-read-") as directory:
        unpack(snapshot, directory)
        searcher = tantivy.Index.open(directory).searcher()
        total = int(searcher.num_docs)
        if total == 0:
            return []
        chunks: list[IndexedChunk] = []
        for _, address in searcher.search(tantivy.Query.all_query(), total, count=False).hits:
            stored = searcher.doc(address)
            chunks.append(
                IndexedChunk(
                    doc_id=str(stored.get_first(fields.DOC_ID)),
                    revision=str(stored.get_first(fields.REVISION)),
                    chunk_index=int(stored.get_first(fields.CHUNK_INDEX) or 0),
                    digest=str(stored.get_first(fields.DIGEST)),
                    text=bytes(stored.get_first(fields.CHUNK) or b"").decode("utf-8"),
                )
            )
        return chunks
