"""Write chunks into a KB's tantivy index: a fresh index, or changes to an opened one.

tantivy never rewrites a file: a commit adds new segment files and new delete files (bitsets of
the deleted documents of an existing segment) and rewrites only meta.json. That is what makes an
incremental update cheap to upload (`agent_knowledge.index_format.layout`). The chunk texts are not given
to tantivy: they are spooled (`TextSpool`) while the chunks are added, and each segment tantivy
writes gets its text file (`index_format/chunk_text`) in its document order (`write_segment_texts`).

Which segments merge, and when, is `agent_knowledge.indexer.merge_policy`'s: an incremental update
never opens a writer on the whole index (`agent_knowledge.indexer.segment_passes`). A fresh index
(`write_index`) is merged by tantivy's own policy while it is built. docs/DESIGN.md §10.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence

import tantivy

from agent_knowledge.index_format import schema as fields
from agent_knowledge.index_format.analyzer import cjk_unigrams, word_tokens
from agent_knowledge.index_format.chunk_text import ChunkTexts, file_name, write_text_file
from agent_knowledge.index_format.chunks import IndexedChunk

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


def stored_chunk(stored: tantivy.Document, text: str = "") -> IndexedChunk:
    """A chunk as its tantivy document stores it, with `text` (kept in the segment's text file)."""
    return IndexedChunk(
        doc_id=str(stored.get_first(fields.DOC_ID)),
        revision=stored_revision(stored),
        chunk_index=int(stored.get_first(fields.CHUNK_INDEX) or 0),
        digest=stored_digest(stored),
        text=text,
        access=stored_access(stored),
    )


def stored_access(stored: tantivy.Document) -> tuple[str, ...]:
    """The access terms a chunk was indexed with (empty: none, which no caller matches)."""
    return tuple(str(term) for term in stored.to_dict().get(fields.ACCESS, ()))


class TextSpool:
    """Chunk texts by digest while a writer adds chunks, in a temporary file (a rebuild of a million
    chunks keeps only the offsets in memory). A digest names its text: two chunks of the same
    digest have the same text."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()
        self._places: dict[bytes, tuple[int, int]] = {}
        self._end = 0

    def add(self, digest: bytes, text: str) -> None:
        if digest in self._places:
            return
        data = text.encode("utf-8")
        self._file.seek(self._end)
        self._file.write(data)
        self._places[digest] = (self._end, len(data))
        self._end += len(data)

    def get(self, digest: bytes) -> str | None:
        place = self._places.get(digest)
        if place is None:
            return None
        self._file.flush()
        return os.pread(self._file.fileno(), place[1], place[0]).decode("utf-8")

    def __contains__(self, digest: bytes) -> bool:
        return digest in self._places

    def close(self) -> None:
        self._file.close()

    def spooled(self, chunks: Iterable[IndexedChunk]) -> Iterator[IndexedChunk]:
        for chunk in chunks:
            self.add(bytes.fromhex(chunk.digest), chunk.text)
            yield chunk


def add_chunks(writer: tantivy.IndexWriter, chunks: Iterable[IndexedChunk], spool: TextSpool) -> int:
    count = 0
    for chunk in spool.spooled(chunks):
        writer.add_document(_document(chunk))
        count += 1
    return count


def segment_digests(searcher: tantivy.Searcher, segment_ord: int, max_doc: int) -> Iterator[bytes]:
    """The stored digest of every document of a segment (deleted ones too), in document order."""
    for doc in range(max_doc):
        yield bytes(searcher.doc(tantivy.DocAddress(segment_ord, doc)).get_first(fields.DIGEST) or b"")


def write_segment_texts(
    directory: str, segment_ids: Sequence[str], spool: TextSpool, sources: Sequence[str] = ()
) -> None:
    """Write the text file of each of `segment_ids` (segments of the index in `directory`) from the
    texts in `spool`; a text the spool lacks is taken from the text files of the `sources` segments
    (those a merge read), spooled first."""
    wanted = [
        segment_id for segment_id in segment_ids if not os.path.exists(os.path.join(directory, file_name(segment_id)))
    ]
    if not wanted:
        return
    with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
        segments = [(str(s["segment_id"]).replace("-", ""), int(s["max_doc"])) for s in json.load(source)["segments"]]
    searcher = tantivy.Index.open(directory).searcher()
    ords = {segment_id: (number, max_doc) for number, (segment_id, max_doc) in enumerate(segments)}
    merged_from_sources = False
    for segment_id in wanted:
        number, max_doc = ords[segment_id]
        digests = list(segment_digests(searcher, number, max_doc))
        if not merged_from_sources and any(digest not in spool for digest in digests):
            texts = ChunkTexts(directory)
            for source_id in sources:
                for digest, text in texts.entries(source_id):
                    spool.add(digest, text)
            merged_from_sources = True

        def entries(digests: list[bytes] = digests) -> Iterator[tuple[bytes, str]]:
            for digest in digests:
                text = spool.get(digest)
                if text is None:
                    raise ValueError("a chunk of a new segment has no text")
                yield digest, text

        write_text_file(os.path.join(directory, file_name(segment_id)), entries(), max_doc)


def finish(writer: tantivy.IndexWriter) -> None:
    """Commit, then let the merges the policy starts finish (they rewrite meta.json)."""
    writer.commit()
    writer.wait_merging_threads()


def write_index(directory: str, chunks: Iterable[IndexedChunk]) -> int:
    """Write a fresh index of `chunks` into the empty `directory`; returns the chunk count."""
    index = tantivy.Index(fields.schema(), path=directory, reuse=False)
    fields.register_analyzers(index)
    writer = index.writer(heap_size=REBUILD_HEAP_BYTES, num_threads=1)
    spool = TextSpool()
    try:
        count = add_chunks(writer, chunks, spool)
        finish(writer)
        del writer, index
        with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
            segments = [str(s["segment_id"]).replace("-", "") for s in json.load(source)["segments"]]
        write_segment_texts(directory, segments, spool)
    finally:
        spool.close()
    return count


def open_writer(directory: str) -> tuple[tantivy.Index, tantivy.IndexWriter]:
    """A writer on the index in `directory` (an opened generation's copy) for an incremental update."""
    index = tantivy.Index.open(directory)
    fields.register_analyzers(index)
    return index, index.writer(heap_size=UPDATE_HEAP_BYTES, num_threads=1)
