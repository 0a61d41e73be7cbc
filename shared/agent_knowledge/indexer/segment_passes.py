"""Edit a KB's local index in passes, each showing tantivy's writer only the segments it must touch.

tantivy-py's writer runs tantivy's own merge policy on every commit, over every segment it sees,
and has no setting to turn it off (`agent_knowledge.indexer.merge_policy`). So the index directory
(an opened generation's copy: hard links and `meta.json`) is never given to a writer whole. A pass
makes a sibling directory holding hard links to the files of the segments it works on and a
`meta.json` listing only those, runs the writer there, commits, and takes back what tantivy wrote:
the new files (linked into the index directory; names are new segment ids and delete opstamps, so
nothing is overwritten) and the resulting segment list, which replaces the shown segments in the
index's `meta.json`. Files of segments a pass did not show are never managed by that writer, so
tantivy's garbage collection cannot delete them.

- deletes: shown at most FAN_IN - 1 segments at a time (a commit never has FAN_IN to merge);
- adds: no existing segment shown, so the new chunks become new segments only;
- a merge: exactly the FAN_IN chosen segments shown, and an empty commit, on which tantivy merges
  them natively. If its policy would not (segments of 10,000 chunks and more that it levels
  apart), the chosen segments' live chunks are read from their stores and added as a new segment.

Every segment a pass creates gets its chunk text file (`index_format/chunk_text`) before the pass ends:
texts of the chunks it added (spooled as they were added), else of the shown segments' own text
files (a merge). The shown segments' text files are linked into the pass directory with their
segment's other files.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import tantivy

from agent_knowledge.index_format import schema as fields
from agent_knowledge.index_format.builder import (
    UPDATE_HEAP_BYTES,
    TextSpool,
    add_chunks,
    stored_chunk,
    write_segment_texts,
)
from agent_knowledge.index_format.chunk_text import ChunkTexts
from agent_knowledge.index_format.chunks import IndexedChunk
from agent_knowledge.index_format.layout import file_name_ok, segment_files
from agent_knowledge.indexer import merge_policy

# Passes and merges one edit may run (a bound on loops; far above what the policy ever asks).
MAX_MERGES = 32


# Where a document's chunks are: segment id → how many chunks it holds there.
Located = Mapping[str, int]


def _segment_id(segment: dict[str, Any]) -> str:
    return str(segment["segment_id"]).replace("-", "")


def alive_chunks(segment: dict[str, Any]) -> int:
    return int(segment["max_doc"]) - int((segment.get("deletes") or {}).get("num_deleted_docs", 0))


def segment_sizes(meta: dict[str, Any], file_sizes: Mapping[str, int]) -> list[merge_policy.SegmentSize]:
    """Each segment of tantivy's `meta` with its live chunks and the bytes of its current files
    (its components, and its delete bitset of the current opstamp only)."""
    by_segment: dict[str, int] = {}
    for name, size in file_sizes.items():
        if not name.endswith(".del"):
            by_segment[name[:32]] = by_segment.get(name[:32], 0) + size
    sizes = []
    for segment in meta.get("segments", []):
        segment_id = _segment_id(segment)
        size = by_segment.get(segment_id, 0)
        deletes = segment.get("deletes")
        if deletes:
            size += file_sizes.get(f"{segment_id}.{deletes['opstamp']}.del", 0)
        sizes.append(merge_policy.SegmentSize(segment_id, int(segment["max_doc"]), alive_chunks(segment), size))
    return sizes


class SegmentEditor:
    """The index in `directory`, edited pass by pass; `save` writes the resulting `meta.json`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
            self.meta: dict[str, Any] = json.load(source)
        self.passes = 0
        self.merges = 0
        # The texts of the chunks the running pass adds (`_pass` opens and closes it).
        self._spool: TextSpool | None = None

    def _texts(self) -> TextSpool:
        if self._spool is None:
            raise RuntimeError("chunks are added inside a pass only")
        return self._spool

    @property
    def segments(self) -> list[dict[str, Any]]:
        return list(self.meta.get("segments", []))

    def sizes(self) -> list[merge_policy.SegmentSize]:
        names = [name for name in os.listdir(self.directory) if file_name_ok(name)]
        return segment_sizes(self.meta, {name: os.path.getsize(os.path.join(self.directory, name)) for name in names})

    def delete(self, doc_ids: Iterable[str]) -> None:
        """Delete every chunk of `doc_ids`, whichever segments hold them."""
        self._delete_in(list(dict.fromkeys(doc_ids)), [_segment_id(s) for s in self.segments])

    def _delete_in(self, doc_ids: list[str], segment_ids: list[str]) -> None:
        if not doc_ids:
            return

        def deletes(writer: tantivy.IndexWriter) -> None:
            for doc_id in doc_ids:
                writer.delete_documents_by_term(fields.DOC_ID, doc_id)

        group = merge_policy.FAN_IN - 1
        for start in range(0, len(segment_ids), group):
            self._pass(segment_ids[start : start + group], deletes)

    def replace(self, doc_ids: Iterable[str], chunks: Iterable[IndexedChunk], located: Located | None) -> None:
        """Delete every chunk of `doc_ids` and add `chunks` as a new segment. `located`: where the
        caller found the chunks of `doc_ids` (segment id → chunk count); then one commit does it
        all, showing tantivy only those segments. Chunks found elsewhere after all (an index that
        changed under the caller) are deleted by a pass over the other segments."""
        wanted = list(dict.fromkeys(doc_ids))
        if located is None or len(located) > merge_policy.FAN_IN - 2:
            self.delete(wanted)
            self.add(chunks)
            return
        shown = [_segment_id(s) for s in self.segments if _segment_id(s) in located]
        before = sum(alive_chunks(s) for s in self.segments if _segment_id(s) in located)

        def work(writer: tantivy.IndexWriter) -> None:
            for doc_id in wanted:
                writer.delete_documents_by_term(fields.DOC_ID, doc_id)
            add_chunks(writer, chunks, self._texts())

        self._pass(shown, work)
        after = sum(alive_chunks(s) for s in self.segments if _segment_id(s) in located)
        if before - after != sum(located.values()):
            self._delete_in(wanted, [_segment_id(s) for s in self.segments if _segment_id(s) not in located])

    def add(self, chunks: Iterable[IndexedChunk]) -> int:
        """Add `chunks` as new segments; returns how many."""
        added = 0

        def adds(writer: tantivy.IndexWriter) -> None:
            nonlocal added
            added = add_chunks(writer, chunks, self._texts())

        self._pass([], adds)
        return added

    def merge(self, max_bytes: int | None) -> int:
        """Run the merges the policy asks for, within `max_bytes` per merge (None: any size);
        returns how many ran."""
        ran = 0
        while ran < MAX_MERGES and (chosen := merge_policy.next_merge(self.sizes(), max_bytes)) is not None:
            self.merge_segments(chosen)
            ran += 1
        return ran

    def merge_segments(self, segment_ids: tuple[str, ...]) -> None:
        """Merge exactly these segments into one (natively if tantivy's policy does, else by
        re-adding their live chunks)."""
        self._pass(list(segment_ids), lambda writer: None)
        left = set(segment_ids) & {_segment_id(s) for s in self.segments}
        if left:  # tantivy levelled them apart: merge what is left by re-adding its chunks
            self._readd(sorted(left))
        self.merges += 1

    def _readd(self, segment_ids: list[str]) -> None:
        source = self._pass_directory(segment_ids)
        try:
            self.meta["segments"] = [s for s in self.segments if _segment_id(s) not in set(segment_ids)]
            self.add(_live_chunks(source))
        finally:
            shutil.rmtree(source, ignore_errors=True)

    def _pass_directory(self, segment_ids: list[str]) -> str:
        directory = f"{self.directory}.pass-{uuid.uuid4().hex[:8]}"
        os.makedirs(directory)
        shown = [s for s in self.segments if _segment_id(s) in set(segment_ids)]
        names = [name for name in os.listdir(self.directory) if file_name_ok(name)]
        for name in segment_files({"segments": shown}, names):
            os.link(os.path.join(self.directory, name), os.path.join(directory, name))
        with open(os.path.join(directory, "meta.json"), "w", encoding="utf-8") as target:
            json.dump({**self.meta, "segments": shown}, target)
        return directory

    def _pass(self, segment_ids: list[str], work: Callable[[tantivy.IndexWriter], None]) -> None:
        directory = self._pass_directory(segment_ids)
        self._spool = TextSpool()
        try:
            index = tantivy.Index.open(directory)
            fields.register_analyzers(index)
            writer = index.writer(heap_size=UPDATE_HEAP_BYTES, num_threads=1)
            work(writer)
            writer.commit()
            writer.wait_merging_threads()
            del writer, index
            with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
                result: dict[str, Any] = json.load(source)
            created = [_segment_id(s) for s in result.get("segments", []) if _segment_id(s) not in set(segment_ids)]
            write_segment_texts(directory, created, self._texts(), segment_ids)
            for name in os.listdir(directory):
                target = os.path.join(self.directory, name)
                if file_name_ok(name) and not os.path.exists(target):
                    os.link(os.path.join(directory, name), target)
        finally:
            self._spool.close()
            self._spool = None
            shutil.rmtree(directory, ignore_errors=True)
        shown = set(segment_ids)
        kept = [s for s in self.segments if _segment_id(s) not in shown]
        # A segment whose every chunk is deleted is dropped (tantivy may keep it listed).
        self.meta["segments"] = kept + [s for s in result.get("segments", []) if alive_chunks(s) > 0]
        self.meta["opstamp"] = max(int(self.meta.get("opstamp", 0)), int(result.get("opstamp", 0)))
        self.passes += 1

    def save(self) -> None:
        path = os.path.join(self.directory, "meta.json")
        with open(f"{path}.tmp", "w", encoding="utf-8") as target:
            json.dump(self.meta, target)
        os.replace(f"{path}.tmp", path)


def _live_chunks(directory: str) -> Iterator[IndexedChunk]:
    """Every chunk not deleted of the index in `directory`, streamed from its stores and text files."""
    searcher = tantivy.Index.open(directory).searcher()
    total = int(searcher.num_docs)
    if not total:
        return
    alive = {(a.segment_ord, a.doc) for _, a in searcher.search(tantivy.Query.all_query(), total, count=False).hits}
    with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
        segments = json.load(source).get("segments", [])
    texts = ChunkTexts(directory)
    for number, segment in enumerate(segments):
        for doc, (_, text) in enumerate(texts.entries(_segment_id(segment))):
            if (number, doc) in alive:
                yield stored_chunk(searcher.doc(tantivy.DocAddress(number, doc)), text)


def edit(directory: str, change: Callable[[SegmentEditor], Any]) -> Any:
    """Apply `change` to the index in `directory` and save it; returns what `change` returns."""
    editor = SegmentEditor(directory)
    result = change(editor)
    editor.save()
    return result
