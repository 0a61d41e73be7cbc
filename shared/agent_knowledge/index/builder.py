"""Write chunks into a KB's tantivy index: a fresh index, or changes to an opened one.

tantivy never rewrites a file: a commit adds new segment files and new delete files (bitsets of
the deleted documents of an existing segment) and rewrites only meta.json. That is what makes an
incremental update cheap to upload (`agent_knowledge.index.layout`).

Merge policy: tantivy's `LogMergePolicy` with its defaults (tantivy-py exposes no other). Segments
are grouped in levels by size (below 10,000 chunks all in one level; above, a level per factor
1.68); a level with 8 segments is merged into one when a commit ends. So a KB of N chunks has at
most 7 segments per level and about log1.68(N / 10,000) + 1 levels, whatever the number of
updates, and most merges touch only small segments. Deleted chunks are dropped when their segment
is merged; a full rebuild (`agent-knowledge kb reindex`) compacts everything. docs/DESIGN.md §10.
"""

from __future__ import annotations

from collections.abc import Iterable

import tantivy

from agent_knowledge.index import schema as fields
from agent_knowledge.index.analyzer import cjk_unigrams, word_tokens
from agent_knowledge.index.chunks import IndexedChunk

REBUILD_HEAP_BYTES = 64_000_000
# An update adds a few documents: tantivy's minimum writer budget (15 MB per thread) is plenty.
UPDATE_HEAP_BYTES = 16_000_000


def _document(chunk: IndexedChunk) -> tantivy.Document:
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
    return document


def add_chunks(writer: tantivy.IndexWriter, chunks: Iterable[IndexedChunk]) -> int:
    count = 0
    for chunk in chunks:
        writer.add_document(_document(chunk))
        count += 1
    return count


def finish(writer: tantivy.IndexWriter) -> None:
    """Commit, then let the merges the policy starts finish (they rewrite meta.json)."""
    writer.commit()
    writer.wait_merging_threads()


def write_index(directory: str, chunks: Iterable[IndexedChunk]) -> int:
    """Write a fresh index of `chunks` into the empty `directory`; returns the chunk count."""
    index = tantivy.Index(fields.schema(), path=directory, reuse=False)
    fields.register_analyzers(index)
    writer = index.writer(heap_size=REBUILD_HEAP_BYTES, num_threads=1)
    count = add_chunks(writer, chunks)
    finish(writer)
    return count


def open_writer(directory: str) -> tuple[tantivy.Index, tantivy.IndexWriter]:
    """A writer on the index in `directory` (an opened generation's copy) for an incremental update."""
    index = tantivy.Index.open(directory)
    fields.register_analyzers(index)
    return index, index.writer(heap_size=UPDATE_HEAP_BYTES, num_threads=1)
