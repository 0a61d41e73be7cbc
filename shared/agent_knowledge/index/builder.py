"""Write chunks into a KB's tantivy index: a fresh index, or changes to an opened one.

tantivy never rewrites a file: a commit adds new segment files and new delete files (bitsets of
the deleted documents of an existing segment) and rewrites only meta.json. That is what makes an
incremental update cheap to upload (`agent_knowledge.index.layout`).

Which segments merge, and when, is `agent_knowledge.index.merge_policy`'s: an incremental update
never opens a writer on the whole index (`agent_knowledge.index.segment_passes`). A fresh index
(`write_index`) is merged by tantivy's own policy while it is built. docs/DESIGN.md §10.
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
            fields.REVISION: chunk.revision.encode("ascii"),
            fields.DIGEST: bytes.fromhex(chunk.digest),
            fields.CHUNK: chunk.text.encode("utf-8"),
        }
    )
    for term in chunk.access:  # one raw term each: the search's access filter (issue 33)
        document.add_text(fields.ACCESS, term)
    # Explicitly unsigned: keyword integers become i64, which a u64 fast field refuses.
    document.add_unsigned(fields.DOC_KEY, fields.doc_key(chunk.doc_id))
    document.add_unsigned(fields.CHUNK_INDEX, chunk.chunk_index)
    return document


def stored_revision(stored: tantivy.Document) -> str:
    return bytes(stored.get_first(fields.REVISION) or b"").decode("ascii")


def stored_digest(stored: tantivy.Document) -> str:
    return bytes(stored.get_first(fields.DIGEST) or b"").hex()


def stored_chunk(stored: tantivy.Document) -> IndexedChunk:
    """A chunk as its tantivy document stores it."""
    return IndexedChunk(
        doc_id=str(stored.get_first(fields.DOC_ID)),
        revision=stored_revision(stored),
        chunk_index=int(stored.get_first(fields.CHUNK_INDEX) or 0),
        digest=stored_digest(stored),
        text=bytes(stored.get_first(fields.CHUNK) or b"").decode("utf-8"),
        access=stored_access(stored),
    )


def stored_access(stored: tantivy.Document) -> tuple[str, ...]:
    """The access terms a chunk was indexed with (empty: none, which no caller matches)."""
    return tuple(str(term) for term in stored.to_dict().get(fields.ACCESS, ()))


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
