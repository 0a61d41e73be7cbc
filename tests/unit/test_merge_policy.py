"""The merge policy (size tiers, a bounded count per tier) and the passes that carry it out on real
tantivy segments: what merges when, the segment-count bound, the bytes an update may rewrite."""

from __future__ import annotations

import json
import os

import pytest
import tantivy

from agent_knowledge.index_format.builder import stored_chunk, write_index
from agent_knowledge.index_format.chunks import IndexedChunk, chunk_digest
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.indexer import merge_policy
from agent_knowledge.indexer.merge_policy import FAN_IN, SegmentSize, next_merge, segment_bound, tier
from agent_knowledge.indexer.segment_passes import SegmentEditor, edit

BYTES_PER_CHUNK = 600  # about what the benchmark measures; only the simulation uses it


def segment(name: str, alive: int, max_doc: int | None = None) -> SegmentSize:
    max_doc = alive if max_doc is None else max_doc
    return SegmentSize(name.ljust(32, "0"), max_doc, alive, max_doc * BYTES_PER_CHUNK)


def test_tiers_grow_by_the_fan_in():
    assert [tier(n) for n in (0, 1, 15, 16, 127, 128, 1023, 1024, 8191, 8192)] == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4]


def test_a_tier_merges_when_it_holds_fan_in_segments_and_the_smallest_go_first():
    small = [segment(f"a{i}", 10 + i % 3) for i in range(FAN_IN - 1)]
    assert next_merge(small, None) is None
    full = [*small, segment("b", 3), segment("c", 15)]  # 9 segments in tier 0
    chosen = next_merge([segment("big", 90_000), *full], None)
    assert chosen is not None and len(chosen) == FAN_IN
    assert segment("c", 15).segment_id not in chosen  # the largest of tier 0 waits


def test_a_merge_over_the_update_budget_is_left_for_compaction():
    tier2 = [segment(f"t{i}", 1000) for i in range(FAN_IN)]  # 8 × 600 KB: 4.8 MB merged
    assert next_merge(tier2, merge_policy.UPDATE_MERGE_MAX_BYTES) is None
    assert next_merge(tier2, None) is not None and merge_policy.compaction_due(tier2)


def test_deleted_chunks_do_not_count_toward_what_a_merge_writes():
    mostly_deleted = segment("d", alive=10, max_doc=1000)
    assert mostly_deleted.live_bytes == 10 * BYTES_PER_CHUNK and tier(mostly_deleted.alive) == 0


@pytest.mark.parametrize("base_chunks", [10_000, 100_000, 1_000_000])
def test_any_run_of_updates_keeps_the_count_bounded_and_each_update_small(base_chunks):
    """The policy alone, on sizes: 5,000 one-document updates of 10–15 chunks on a rebuilt index."""
    segments = [segment("base", base_chunks)]
    worst_update, compactions, most = 0, 0, 0
    for number in range(5_000):
        segments.append(segment(f"u{number}", 10 + number % 6))
        rewritten = 0
        while (chosen := next_merge(segments, merge_policy.UPDATE_MERGE_MAX_BYTES)) is not None:
            merged = [s for s in segments if s.segment_id in chosen]
            segments = [s for s in segments if s.segment_id not in chosen]
            segments.append(segment(f"m{number}x{len(segments)}", sum(s.alive for s in merged)))
            rewritten += segments[-1].live_bytes
        worst_update = max(worst_update, rewritten)
        while (chosen := next_merge(segments, None)) is not None:
            compactions += 1
            merged = [s for s in segments if s.segment_id in chosen]
            segments = [s for s in segments if s.segment_id not in chosen]
            segments.append(segment(f"c{number}x{len(segments)}", sum(s.alive for s in merged)))
        most = max(most, len(segments))
        assert len(segments) <= segment_bound(sum(s.alive for s in segments))
    assert worst_update <= merge_policy.UPDATE_MERGE_MAX_BYTES
    # Compaction is rare: a merge of ~6,000 chunks every 512 updates, ~50,000 every 4,096.
    assert 0 < compactions <= 5_000 // 512 + 5_000 // 4096 + 1
    assert most <= 40


def chunks_of(doc_id: str, count: int, revision: str = "r1") -> list[IndexedChunk]:
    texts = [f"{doc_id} {revision} part {i} configuration template deploy words" for i in range(count)]
    return [IndexedChunk(doc_id, revision, i, chunk_digest(text), text) for i, text in enumerate(texts)]


def live(directory: str) -> dict[str, tuple[str, int]]:
    """doc_id → (revision, chunk count) of what the index in `directory` holds."""
    searcher = tantivy.Index.open(directory).searcher()
    found: dict[str, tuple[str, int]] = {}
    total = int(searcher.num_docs)
    for _, address in searcher.search(tantivy.Query.all_query(), max(total, 1), count=False).hits:
        chunk = stored_chunk(searcher.doc(address))
        revision, count = found.get(chunk.doc_id, (chunk.revision, 0))
        assert revision == chunk.revision
        found[chunk.doc_id] = (revision, count + 1)
    return found


def test_updates_through_the_passes_keep_every_chunk_and_only_the_policy_merges(tmp_path):
    directory = str(tmp_path / "index")
    os.makedirs(directory)
    base = [chunk for number in range(40) for chunk in chunks_of(f"b{number}", 5)]
    write_index(directory, base)
    expected = {f"b{number}": ("r1", 5) for number in range(40)}
    passes, most = [], 0
    for number in range(120):
        doc_id = f"b{number % 40}" if number % 2 else f"n{number}"
        new = chunks_of(doc_id, 10 + number % 6, f"r{number}")
        located = KbIndex.open(directory, 1).locate(doc_id)

        def change(editor: SegmentEditor, doc_id=doc_id, new=new, located=located) -> SegmentEditor:
            editor.replace([doc_id], new, located)
            editor.merge(merge_policy.UPDATE_MERGE_MAX_BYTES)
            return editor

        editor = edit(directory, change)
        passes.append(editor.passes - editor.merges)
        expected[doc_id] = (f"r{number}", len(new))
        segments = json.loads((tmp_path / "index" / "meta.json").read_text())["segments"]
        most = max(most, len(segments))
        # Each tier below compaction's holds fewer than FAN_IN segments after every update.
        sizes = editor.sizes()
        assert next_merge(sizes, merge_policy.UPDATE_MERGE_MAX_BYTES) is None
    assert live(directory) == expected
    assert set(passes) == {1}  # one commit per update: the located segments' deletes and the new segment
    assert most <= segment_bound(sum(count for _, count in expected.values()))


def test_a_merge_tantivy_would_not_do_itself_is_done_by_re_adding_live_chunks(tmp_path):
    """Segments of 10,000 chunks and more far apart in size sit in different tantivy levels."""
    directory = str(tmp_path / "index")
    os.makedirs(directory)
    write_index(directory, chunks_of("big", 12_000))
    editor = SegmentEditor(directory)
    editor.add(chunks_of("small", 3))
    chosen = tuple(size.segment_id for size in editor.sizes())
    editor.merge_segments(chosen)
    editor.save()
    assert len(editor.segments) == 1
    assert live(directory) == {"big": ("r1", 12_000), "small": ("r1", 3)}
