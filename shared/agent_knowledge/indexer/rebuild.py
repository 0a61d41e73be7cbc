"""Rebuild a KB's index in full from its ready documents and publish it as the next generation.

Used by `agent-knowledge kb reindex`, for a KB's first index, after a schema/tokenizer or tantivy
version change, and to repair a generation that cannot be read. The result has the same layout
as an incremental update's (`agent_knowledge.index_format.layout`). Chunk texts come from memory,
from the newest kept generation that still loads (matched by revision and digests), and only
otherwise from the document bodies. If another writer publishes while the rebuild runs, the
rebuild catches up instead of starting over: it lists the records again and applies, to what it
built, the documents whose ready revision differs, then tries to publish again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from agent_knowledge.core.observability import logger
from agent_knowledge.errors import KnowledgeBaseMissing, KnowledgeUnavailable
from agent_knowledge.index_format.builder import IndexedChunk, write_index
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.index_format.layout import IndexManifest, IndexUnavailable
from agent_knowledge.index_format.local_files import LocalFiles, LocalStorageFailed, local_files
from agent_knowledge.index_format.stored_generation import open_generation
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.indexer.chunk_loader import (
    ChunkSource,
    PreviousIndex,
    RecentChunks,
    chunk_loader,
    left_out,
    load_all,
)
from agent_knowledge.indexer.writer import LocalGeneration, compose_generation
from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bundle import Repositories


def _ready_records(repositories: Repositories, kb_id: str) -> dict[str, DocumentRecord]:
    return {record.doc_id: record for record in repositories.documents.list(kb_id) if record.status == "ready"}


class _Previous(NamedTuple):
    kb_index: KbIndex
    directory: str
    manifest: IndexManifest


def _previous(repositories: Repositories, kb: KnowledgeBaseRecord, files: LocalFiles) -> _Previous | None:
    """The newest kept generation that loads (its chunks spare reading bodies), if any."""
    for key in kb.index_manifests:
        try:
            manifest = index_writer.manifests.get(repositories.bodies, kb.kb_id, key)
            index, directory, _ = open_generation(
                files, repositories.bodies, manifest, index_writer.writer_owner(kb.kb_id)
            )
            return _Previous(index, directory, manifest)
        except LocalStorageFailed:
            raise  # the new index would not fit either
        except (IndexUnavailable, KnowledgeUnavailable) as exc:
            logger.info("previous index not reused", extra={"kb_id": kb.kb_id, "error": type(exc).__name__})
    return None


def rebuild_kb_index(
    repositories: Repositories,
    kb_id: str,
    known: RecentChunks | None = None,
    files: LocalFiles = local_files,
    *,
    vector_space: str,
) -> int:
    """Build from the documents ready now, upload, publish; returns the published generation.
    `vector_space`: the stack's (`writer.compose_generation`)."""
    kb = repositories.knowledge_bases.get(kb_id)
    if kb is None:
        raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
    previous = _previous(repositories, kb, files)
    if previous is not None:
        try:
            # The new index takes about as much room as the one it replaces, beside it until published.
            files.ensure_free(previous.manifest.index_bytes)
        except BaseException:
            files.discard(previous.directory)
            raise
    directory = files.new_directory(f"{kb_id}.rebuild")
    try:
        sources: list[ChunkSource | None] = [known, PreviousIndex(previous.kb_index) if previous else None]
        load = chunk_loader(repositories.bodies, sources)
        records = _ready_records(repositories, kb_id)
        indexed: dict[str, str] = {}  # doc_id → revision of what the built index holds

        def chunks() -> Iterator[IndexedChunk]:
            for record, loaded in load_all([records[doc_id] for doc_id in sorted(records)], load):
                if loaded is None:
                    left_out(record)
                elif loaded:
                    indexed[record.doc_id] = record.revision
                    yield from loaded

        write_index(directory, chunks())
        uploaded: set[str] = set()
        for _ in range(index_writer.MAX_PUBLISH_ATTEMPTS):
            # Every document waits for vectors; the previous generation's of the same model are reused.
            reused = LocalGeneration(previous.manifest, previous.directory) if previous else None
            manifest = compose_generation(
                directory, kb_id, kb.generation + 1, len(indexed), "rebuild", indexed,
                vector_space=vector_space, previous=reused,
            )  # fmt: skip
            published = index_writer.publish(repositories, kb, manifest, directory, None, uploaded)
            if published is not None:
                index_writer.keep_local_copy(files, directory, published)
                return published.generation
            # Another writer published meanwhile: catch up with the records as they are now.
            current = repositories.knowledge_bases.get(kb_id)
            if current is None:
                raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
            kb = current
            records = _ready_records(repositories, kb_id)
            changed = sorted(
                {doc_id for doc_id, revision in indexed.items() if doc_id not in records}
                | {doc_id for doc_id, record in records.items() if indexed.get(doc_id) != record.revision}
            )
            if changed:
                for doc_id in changed:
                    indexed.pop(doc_id, None)
                indexed.update(
                    index_writer.apply_changes(directory, changed, [records[d] for d in changed if d in records], load)
                )
        raise KnowledgeUnavailable("the knowledge base index is being updated too often; try again")
    finally:
        files.discard(directory)
        if previous is not None:
            files.discard(previous.directory)
