"""The segment layout against moto: incremental updates, reader sync, corruption, races, garbage."""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_knowledge.index_format import chunk_text
from agent_knowledge.index_format.builder import stored_chunk
from agent_knowledge.index_format.chunks import chunk_digest
from agent_knowledge.index_format.layout import KEEP_GENERATIONS, prefix
from agent_knowledge.index_format.local_files import LocalFiles
from agent_knowledge.index_format.stored_generation import read_manifest
from agent_knowledge.indexer import merge_policy
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.indexer.rebuild import rebuild_kb_index
from agent_knowledge.indexer.segment_passes import SegmentEditor
from agent_knowledge.indexer.update import update_kb_index
from agent_knowledge.indexer.writer import ORPHAN_GRACE_SECONDS, collect_garbage, manifests
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.retrieval.query import retrieve
from agent_knowledge.retrieval.reader_cache import IndexCache, reset_local_state
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.retrieval import scope_of, search, search_titles

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "配置", "模板", "并发", "锁"]


def kb_record(stack, kb_id: str = "kb"):
    return stack.repositories.knowledge_bases.get(kb_id)


def newest_manifest(stack, kb_id: str = "kb"):
    return read_manifest(stack.repositories.bodies, kb_id, kb_record(stack, kb_id).index_manifests[0])


def live_chunks(stack, kb_id: str, cache: IndexCache) -> set[tuple[str, str, int, str]]:
    """(doc_id, revision, chunk_index, digest) of every chunk the KB's served index holds."""
    index = cache.get(stack.repositories.bodies, kb_record(stack, kb_id))
    if index is None:
        return set()
    searcher = index._searcher
    total = int(searcher.num_docs)
    if total == 0:
        return set()
    found = set()
    for _, address in searcher.search(tantivy.Query.all_query(), total, count=False).hits:
        chunk = stored_chunk(searcher.doc(address))
        found.add((chunk.doc_id, chunk.revision, chunk.chunk_index, chunk.digest))
    return found


@pytest.fixture
def ingestor(stack) -> Ingestor:
    for kb_id in ("kb", "other"):
        create_knowledge_base(stack.repositories, kb_id)
    return Ingestor(stack.repositories, clock=stack.clock)


def _body(words: list[str], paragraphs: int) -> str:
    return "\n\n".join(f"Paragraph {i} about {' '.join(words)}." for i in range(paragraphs))


_operation = st.tuples(
    st.sampled_from(["put", "put", "delete"]),
    st.integers(min_value=0, max_value=5),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.integers(min_value=1, max_value=3),
)
_kb_counter = iter(range(10_000))


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(st.lists(_operation, min_size=1, max_size=3), min_size=1, max_size=5))
def test_incremental_updates_give_what_a_full_rebuild_of_the_final_state_gives(stack, operations):
    kb_id = f"prop{next(_kb_counter)}"
    create_knowledge_base(stack.repositories, kb_id)
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    for batch in operations:  # each batch: a few changes, then one incremental update naming them
        changed = []
        for action, number, words, paragraphs in batch:
            source_key = f"doc{number}.md"
            if action == "put":
                ingestor.put(kb_id, source_key, f"Doc {number}", _body(words, paragraphs))
            else:
                ingestor.delete(kb_id, source_key)
            changed.append(document_id(source_key))
        update_kb_index(stack.repositories, kb_id, changed, vector_space=process_vector_space())
    cache = IndexCache(LocalFiles(f"/tmp/ak-test-prop-{kb_id}"))
    incremental = live_chunks(stack, kb_id, cache)
    queries = ["alpha bravo", "charlie", "配置模板", "锁", "hotel echo golf"]
    # Every matching document (six keys at most), not the top three: BM25 statistics still count
    # deleted chunks until their segment merges, so near-tied scores may order differently.
    # Lexical: this is about the segments (the vectors' own equivalence: test_hybrid_search.py).
    found = {query: sorted(search_titles(stack, [kb_id], query, 6, embedder=None)) for query in queries}
    manifest = newest_manifest(stack, kb_id)

    rebuild_kb_index(stack.repositories, kb_id, vector_space=process_vector_space())
    rebuilt = live_chunks(stack, kb_id, cache)
    assert incremental == rebuilt
    assert {query: sorted(search_titles(stack, [kb_id], query, 6, embedder=None)) for query in queries} == found
    ready = [record for record in stack.repositories.documents.list(kb_id) if record.status == "ready"]
    assert manifest.chunks == len(rebuilt) == sum(record.chunk_count for record in ready)
    assert manifest.documents == newest_manifest(stack, kb_id).documents == len(ready)
    cache.clear()
    cache.files.clear()


def test_a_one_document_update_uploads_only_the_new_files(stack, ingestor, monkeypatch):
    for i in range(120):
        ingestor.put("kb", f"d{i}.md", f"D{i}", _body([WORDS[i % 8], f"word{i}"], 3))
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    base = newest_manifest(stack)
    bodies = stack.repositories.bodies
    original = bodies.put_file
    uploads: list[tuple[str, int]] = []

    def counting(key, source, sha256_hex, content_type):
        sent = original(key, source, sha256_hex, content_type)
        uploads.append((key, sent))
        return sent

    monkeypatch.setattr(bodies, "put_file", counting)
    before = stack.repositories.documents.get("kb", document_id("d7.md")).chunk_count
    published(stack.repositories, ingestor.put("kb", "d7.md", "D7", "A changed body about zulu."))
    new = newest_manifest(stack)
    added = {name: entry for name, entry in new.files.items() if base.files.get(name) != entry}
    manifest_key = kb_record(stack).index_manifests[0]
    assert sorted(uploads) == sorted(
        [(new.file_key(n), e.size) for n, e in added.items()] + [(manifest_key, len(new.to_bytes()))]
    )
    # The one segment of the rebuild is not uploaded again: only its delete bitset is.
    base_segments = {name[:32] for name in base.files}
    assert [name for name in added if name.endswith(".del")]
    assert not [name for name in added if name[:32] in base_segments and not name.endswith(".del")]
    # The index's own files sent are a fraction of it (the manifest, which lists every document
    # still waiting for vectors here, is not an index file).
    assert sum(size for key, size in uploads if key != manifest_key) < base.total_bytes / 5
    assert new.generation == 2 and new.chunks == base.chunks - before + 1 and new.documents == base.documents
    assert search_titles(stack, ["kb"], "zulu") == ["D7"]


def test_an_update_that_changes_nothing_publishes_nothing(stack, ingestor):
    published(stack.repositories, ingestor.put("kb", "a.md", "A", "Alpha text."))
    generation = kb_record(stack).generation
    assert (
        update_kb_index(
            stack.repositories,
            "kb",
            [document_id("a.md"), document_id("never.md")],
            vector_space=process_vector_space(),
        )
        == generation
    )
    assert update_kb_index(stack.repositories, "kb", [], vector_space=process_vector_space()) == generation


def test_a_reader_that_missed_generations_downloads_only_what_it_lacks(stack, ingestor):
    for i in range(40):
        ingestor.put("kb", f"d{i}.md", f"D{i}", _body([WORDS[i % 8]], 2))
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    reader = IndexCache(LocalFiles("/tmp/ak-test-reader"))
    try:
        first = kb_record(stack)
        assert reader.get(stack.repositories.bodies, first) is not None
        held = newest_manifest(stack)
        # Everything but the chunk texts, which a search reads by ranges for its hits (index_format/chunk_text).
        texts = {name for name, entry in held.files.items() if entry.role == "text"}
        assert texts and reader.last_sync["kb"].downloaded_bytes == held.total_bytes - sum(
            held.files[name].size for name in texts
        )
        for word in ("xray", "yankee", "zulu"):  # three generations the reader never sees
            published(stack.repositories, ingestor.put("kb", f"{word}.md", word.title(), f"About {word}."))
        latest = kb_record(stack)
        assert latest.generation == first.generation + 3
        index = reader.get(stack.repositories.bodies, latest)
        assert index is not None and index.generation == latest.generation
        new = newest_manifest(stack)
        local = {name: entry for name, entry in new.files.items() if entry.role != "text"}
        lacking = {entry.sha256: entry.size for entry in local.values() if entry not in held.files.values()}
        assert reader.last_sync["kb"].downloaded_bytes == sum(lacking.values())
        # /tmp holds the new generation once: the old generation's own files are gone.
        assert reader.files.stored_bytes() == sum({e.sha256: e.size for e in local.values()}.values())
        assert search_titles(stack, ["kb"], "zulu") == ["Zulu"]
    finally:
        reader.clear()
        reader.files.clear()


def test_a_search_reads_the_chunk_texts_of_what_it_shows_by_ranges_once(stack, ingestor, monkeypatch, tmp_path):
    """Issue 36: the text files are not downloaded; the hints' texts come by ranged GETs of the text
    files only, are the hits' own chunks, and a second search of them reads nothing."""
    for i in range(40):  # distinct bodies (one hint per body)
        ingestor.put("kb", f"d{i}.md", f"D{i}", _body([WORDS[i % 8], f"item{i}"], 2))
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    bodies = stack.repositories.bodies
    ranges: list[tuple[str, int, int]] = []
    read_range = bodies.read_range

    def counted(key: str, start: int, end: int, etag: str | None = None):
        ranges.append((key, start, end))
        return read_range(key, start, end, etag)

    monkeypatch.setattr(bodies, "read_range", counted)
    chunk_text.cache.clear()
    reader = IndexCache(LocalFiles(str(tmp_path / "reader")))
    try:
        scope = scope_of(stack, ["kb"])
        found = retrieve(
            bodies, stack.repositories.documents, scope, "golf", 3, cache=reader, embedder=None, reranker=None
        )
        assert len(found.documents) == 3  # five documents hold "golf"
        for document in found.documents:
            assert "golf" in document.chunk_text and document.matched_terms == ("golf",)
            assert chunk_digest(document.chunk_text) == document.document.chunk_digests[document.chunk_index]
        manifest = newest_manifest(stack)
        texts = {manifest.file_key(name): entry.size for name, entry in manifest.files.items() if entry.role == "text"}
        assert ranges and {key for key, _, _ in ranges} <= set(texts)
        assert reader.last_sync["kb"].downloaded_bytes == manifest.total_bytes - sum(texts.values())
        before = len(ranges)
        again = retrieve(
            bodies, stack.repositories.documents, scope, "golf", 3, cache=reader, embedder=None, reranker=None
        )
        assert [d.chunk_text for d in again.documents] == [d.chunk_text for d in found.documents]
        assert len(ranges) == before  # kept in memory
    finally:
        reader.clear()
        reader.files.clear()


def test_a_search_reads_its_hints_texts_while_it_reads_their_records(stack, ingestor, monkeypatch, tmp_path):
    """Issue 36: the ranged GETs of the hints' text blocks overlap the records' round trip (the
    prefetch), and the texts are then served from what it read (no GET twice)."""
    for i in range(6):
        published(stack.repositories, ingestor.put("kb", f"d{i}.md", f"D{i}", _body(["golf", f"item{i}"], 2)))
    bodies, documents = stack.repositories.bodies, stack.repositories.documents
    ranges: list[tuple[str, int, int]] = []
    read_range = bodies.read_range
    ranged = threading.Event()

    def counted(key: str, start: int, end: int, etag: str | None = None):
        ranges.append((key, start, end))
        ranged.set()
        return read_range(key, start, end, etag)

    get_many = documents.get_many
    overlapped: list[bool] = []

    def records_read_late(keys):  # as if DynamoDB were slow: the texts' GETs go on meanwhile
        overlapped.append(ranged.wait(timeout=10))
        return get_many(keys)

    monkeypatch.setattr(bodies, "read_range", counted)
    monkeypatch.setattr(documents, "get_many", records_read_late)
    chunk_text.cache.clear()
    reader = IndexCache(LocalFiles(str(tmp_path / "reader")))
    try:
        found = retrieve(
            bodies, documents, scope_of(stack, ["kb"]), "golf", 3, cache=reader, embedder=None, reranker=None
        )
        assert len(found.documents) == 3 and all("golf" in d.chunk_text for d in found.documents)
        assert overlapped == [True]
        assert len(ranges) == len(set(ranges))  # every block read once
    finally:
        reader.clear()
        reader.files.clear()


def _corrupt_every_index_object(stack, kb_id: str, data: bytes | None) -> None:
    bodies = stack.repositories.bodies
    for listed in list(bodies.list(f"indexes/{kb_id}/")):
        original = bodies.read(listed.key)
        replacement = original[: len(original) // 2] if data is None else data
        bodies.put(listed.key, replacement, "0" * 64)


@pytest.mark.parametrize("data", [b"garbage, not an index", b"", None], ids=["garbage", "empty", "truncated"])
def test_an_unreadable_index_fails_only_its_source_and_the_next_update_repairs_it(call, demo, data):
    stack = demo
    """Issue 17 finding 3: on the old layout this answered 500 and the next rebuild failed."""
    from agent_knowledge_dev.demo import DEMO_KB
    from agent_knowledge_dev.handlers import load_event, with_changes

    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    create_knowledge_base(stack.repositories, "second")
    published(
        stack.repositories, ingestor.put("second", "oncall.md", "On-call receipts", "Receipts for on-call expenses.")
    )
    route = stack.repositories.routes.get("demo")
    from agent_knowledge.records import KnowledgeConfig, SourceConfig

    knowledge = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=DEMO_KB), SourceConfig(kb_id="second")])
    stack.repositories.routes.put(route.model_copy(update={"knowledge": knowledge}))
    event = with_changes(load_event("search-english-query"), body={"query": "receipt"})
    assert call("search", event).json()["status"] == "ok"

    _corrupt_every_index_object(stack, "second", data)
    reset_local_state()
    manifests.clear()
    result = call("search", event)
    assert result.status == 200 and result.json()["status"] == "partial"
    assert "On-call receipts" not in [hint["title"] for hint in result.json()["hints"]]

    published(
        stack.repositories, ingestor.put("second", "new.md", "New receipts", "More receipts.")
    )  # the next update rebuilds
    titles = [hint["title"] for hint in call("search", event).json()["hints"]]
    assert call("search", event).json()["status"] == "ok" and "On-call receipts" in titles


def _second_generation_store(stack, ingestor):
    """Two documents in two generations: the newest manifest and the store file of its new segment."""
    published(stack.repositories, ingestor.put("kb", "a.md", "Cats", "Cats sleep all day."))
    published(
        stack.repositories, ingestor.put("kb", "b.md", "Dogs", "Dogs bark at cats.")
    )  # generation 2: a new segment
    base = read_manifest(stack.repositories.bodies, "kb", kb_record(stack).index_manifests[1])
    new = newest_manifest(stack)
    return new, next(n for n in new.files if n not in base.files and n.endswith(".store"))


def test_a_corrupt_newest_segment_falls_back_to_the_previous_generation(stack, ingestor):
    new, name = _second_generation_store(stack, ingestor)
    stack.repositories.bodies.put(new.file_key(name), b"\x00" * new.files[name].size, "0" * 64)
    reset_local_state()
    result = search(stack, ["kb", "other"], "cats")
    assert result.failed_kb_ids == [] and [d.document.title for d in result.documents] == ["Cats"]
    assert result.degraded_kb_ids == ["kb"]  # served from generation 1: search says partial
    # With no older generation left to fall back to, only this source fails.
    for key in kb_record(stack).index_manifests[1:]:
        stack.repositories.bodies.delete(key)
    reset_local_state()
    result = search(stack, ["kb", "other"], "cats")
    assert result.failed_kb_ids == ["kb"] and result.answered_kb_ids == ["other"]


def test_a_manifest_of_another_schema_version_fails_the_source_and_the_next_update_rebuilds(
    stack, ingestor, monkeypatch
):
    published(stack.repositories, ingestor.put("kb", "a.md", "Cats", "Cats sleep all day."))
    import agent_knowledge.index_format.layout as layout
    import agent_knowledge.indexer.writer as generation

    monkeypatch.setattr(generation, "SCHEMA_VERSION", layout.SCHEMA_VERSION + 1)
    monkeypatch.setattr(layout, "SCHEMA_VERSION", generation.SCHEMA_VERSION)
    reset_local_state()
    manifests.clear()
    assert search(stack, ["kb"], "cats").failed_kb_ids == ["kb"]
    published(stack.repositories, ingestor.put("kb", "b.md", "Dogs", "Dogs bark."))
    assert newest_manifest(stack).kind == "rebuild"
    assert search_titles(stack, ["kb"], "cats") == ["Cats"]


def test_a_writer_that_loses_the_race_applies_its_change_on_the_winners_generation(stack, ingestor, monkeypatch):
    published(stack.repositories, ingestor.put("kb", "a.md", "A", "Alpha."))
    kbs = stack.repositories.knowledge_bases
    original = kbs.publish_index
    calls: list[bool] = []

    def raced(kb_id, expected, kept):
        if not calls:
            calls.append(True)
            # Another container stores and publishes b.md between our read of g and our publish.
            other = Ingestor(stack.repositories, clock=stack.clock)
            other.put("kb", "b.md", "B", "Bravo.")
            monkeypatch.setattr(kbs, "publish_index", original)
            update_kb_index(stack.repositories, "kb", [document_id("b.md")], vector_space=process_vector_space())
            monkeypatch.setattr(kbs, "publish_index", raced)
        won = original(kb_id, expected, kept)
        calls.append(won)
        return won

    monkeypatch.setattr(kbs, "publish_index", raced)
    published(stack.repositories, ingestor.put("kb", "c.md", "C", "Charlie."))
    assert calls == [True, False, True] and kb_record(stack).generation == 3
    assert [search_titles(stack, ["kb"], word) for word in ("alpha", "bravo", "charlie")] == [["A"], ["B"], ["C"]]


def test_concurrent_updaters_lose_no_change(stack, ingestor, monkeypatch):
    # DynamoDB's conditional writes are atomic; moto's are not across threads: make them so.
    kbs = stack.repositories.knowledge_bases
    original, lock = kbs.publish_index, threading.Lock()

    def atomic(*args):
        with lock:
            return original(*args)

    monkeypatch.setattr(kbs, "publish_index", atomic)
    words = [f"keyword{i:02d}" for i in range(10)]
    with ThreadPoolExecutor(max_workers=5) as pool:
        list(
            pool.map(
                lambda w: published(stack.repositories, ingestor.put("kb", f"{w}.md", f"Doc {w}", f"About {w}.")), words
            )
        )
    for word in words:
        assert search_titles(stack, ["kb"], word) == [f"Doc {word}"]
    assert newest_manifest(stack).documents == len(words)


def test_nothing_unreferenced_stays_beyond_the_kept_generations(stack, ingestor):
    for i in range(12):  # enough small segments for the merge policy to merge some
        published(stack.repositories, ingestor.put("kb", f"d{i}.md", f"D{i}", f"Body number{i}."))
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    published(stack.repositories, ingestor.put("kb", "d3.md", "D3", "Changed."))
    kept = kb_record(stack).index_manifests
    assert len(kept) == KEEP_GENERATIONS
    referenced = set(kept)
    for key in kept:
        referenced |= read_manifest(stack.repositories.bodies, "kb", key).object_keys()
    bodies = stack.repositories.bodies
    assert {listed.key for listed in bodies.list(prefix("kb"))} == referenced
    # An object left by a writer that died: kept while it may be in use, deleted after the grace period.
    orphan = f"{prefix('kb')}files/{'0' * 64}.{'1' * 32}.idx"
    bodies.put_file(orphan, io.BytesIO(b"left over"), "0" * 64, "application/octet-stream")
    assert collect_garbage(bodies, "kb", kept, []) == 0
    assert collect_garbage(bodies, "kb", kept, [], now=time.time() + ORPHAN_GRACE_SECONDS + 60) == 1
    assert {listed.key for listed in bodies.list(prefix("kb"))} == referenced


# -- merge policy, compaction, S3 checksums (issue 25) -----------------------------------------


def _segment_count(stack, kb_id: str = "kb") -> int:
    return len(newest_manifest(stack, kb_id).meta["segments"])


def test_one_document_updates_upload_only_their_segment_and_compaction_publishes_its_own_generation(
    stack, ingestor, monkeypatch
):
    # A tiny budget: every merge of this small KB is compaction's, so the first one shows up early.
    monkeypatch.setattr(merge_policy, "UPDATE_MERGE_MAX_BYTES", 1)
    for i in range(4):
        ingestor.put("kb", f"base{i}.md", f"Base {i}", _body(["alpha", f"base{i}"], 2))
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    bodies = stack.repositories.bodies
    original = bodies.put_file
    uploads: list[str] = []

    def counting(key, source, sha256_hex, content_type):
        uploads.append(key)
        return original(key, source, sha256_hex, content_type)

    monkeypatch.setattr(bodies, "put_file", counting)
    kinds = []
    for i in range(merge_policy.FAN_IN + 1):
        before = kb_record(stack).generation
        uploads.clear()
        published(stack.repositories, ingestor.put("kb", f"new{i}.md", f"New {i}", _body(["bravo", f"new{i}"], 1)))
        new_keys = kb_record(stack).index_manifests[: kb_record(stack).generation - before]
        kinds.append([read_manifest(bodies, "kb", key).kind for key in reversed(new_keys)])
        # An update uploads its own segment's files and its manifest, never a merged segment (what
        # a compaction uploads comes after the update's manifest).
        update_manifest = read_manifest(bodies, "kb", new_keys[-1])
        own = uploads[: next(n for n, key in enumerate(uploads) if "/manifests/" in key)]
        assert len({key.split("/files/")[1].split(".")[1] for key in own}) == 1
        assert update_manifest.kind == "update"
        assert _segment_count(stack) <= merge_policy.segment_bound(newest_manifest(stack).chunks)
    # The rebuild's segment and 7 one-document segments fill tier 0: the 7th update's publish is
    # followed by a compaction that merges the 8; no other.
    assert kinds[merge_policy.FAN_IN - 2] == ["update", "compaction"]
    assert kinds.count(["update"]) == len(kinds) - 1
    compacted = newest_manifest(stack)
    assert compacted.documents == 4 + merge_policy.FAN_IN + 1 and _segment_count(stack) < merge_policy.FAN_IN
    assert search_titles(stack, ["kb"], "new3") == ["New 3"] and search_titles(stack, ["kb"], "base2") == ["Base 2"]


def test_an_update_shows_tantivy_only_the_segments_holding_the_changed_document(stack, ingestor, monkeypatch):
    for i in range(6):
        published(
            stack.repositories, ingestor.put("kb", f"d{i}.md", f"D{i}", _body(["alpha", f"word{i}"], 2))
        )  # six segments
    passes: list[int] = []
    original = SegmentEditor._pass

    def counting(self, segment_ids, work):
        passes.append(len(segment_ids))
        return original(self, segment_ids, work)

    monkeypatch.setattr(SegmentEditor, "_pass", counting)
    published(stack.repositories, ingestor.put("kb", "d3.md", "D3", "A changed body about zulu."))
    assert passes == [1]  # one commit, showing the one segment that held d3
    assert search_titles(stack, ["kb"], "zulu") == ["D3"] and search_titles(stack, ["kb"], "word3") == []


def test_a_file_whose_bytes_changed_in_the_bucket_fails_its_s3_checksum_not_the_search(stack, ingestor):
    from moto.backends import get_backend

    new, name = _second_generation_store(stack, ingestor)
    bucket = stack.environment["BODIES_BUCKET"]
    stored = next(
        backend["aws"].buckets[bucket].keys[new.file_key(name)]
        for backend in get_backend("s3").values()
        if bucket in backend["aws"].buckets
    )
    stored._value_buffer.seek(0)
    stored._value_buffer.write(b"\x00")  # bit rot: the stored CRC32 no longer matches
    reset_local_state()
    result = search(stack, ["kb", "other"], "cats")
    assert result.failed_kb_ids == [] and [d.document.title for d in result.documents] == ["Cats"]
    assert result.degraded_kb_ids == ["kb"]  # generation 1 served: its files are intact
