"""Ingest against moto: upsert, skip, delete, refusals, index generations, concurrency."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from agent_knowledge.errors import DocumentRejected, KnowledgeUnavailable
from agent_knowledge.index_format.recent_chunks import RecentChunks
from agent_knowledge.index_format.stored_generation import read_manifest
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.indexer.update import update_kb_index
from agent_knowledge.indexer.writer import manifests
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.repositories.bodies import BodyMissing
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.retrieval.reader_cache import reset_local_state
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.retrieval import search_titles


@pytest.fixture
def ingestor(stack):
    create_knowledge_base(stack.repositories, "kb")
    return Ingestor(stack.repositories, clock=stack.clock)


def generation(stack, kb_id: str = "kb") -> int:
    return stack.repositories.knowledge_bases.get(kb_id).generation


def test_put_creates_a_ready_record_and_an_immutable_body(stack, ingestor):
    result = published(stack.repositories, ingestor.put("kb", "guide.md", "Guide", "# Intro\n\nHello 世界.".encode()))
    record = result.document
    assert result.outcome == "created"
    assert record.status == "ready" and record.doc_id == document_id("guide.md")
    assert record.body_bytes == len("# Intro\n\nHello 世界.".encode())
    assert record.body_key.endswith("/" + record.revision)
    assert record.chunk_count == len(record.chunk_digests) == len(record.chunk_offsets) == 1
    assert record.created_at == record.updated_at == int(stack.clock())
    assert stack.repositories.documents.get("kb", record.doc_id) == record
    data, metadata = stack.repositories.bodies.read_range(record.body_key, 0, record.body_bytes, etag=record.body_etag)
    assert data.decode() == "# Intro\n\nHello 世界." and metadata["sha256"] == record.body_sha256


def test_identical_content_is_skipped_and_changes_are_updates(stack, ingestor):
    first = published(stack.repositories, ingestor.put("kb", "a.md", "Title", "Body one."))
    stack.clock.advance(60)
    again = published(stack.repositories, ingestor.put("kb", "a.md", "Title", b"Body one."))
    assert again.outcome == "skipped" and again.document == first.document
    assert generation(stack) == 1  # a skip does not rebuild

    retitled = published(stack.repositories, ingestor.put("kb", "a.md", "New title", "Body one."))
    assert retitled.outcome == "updated" and retitled.document.revision != first.document.revision
    assert retitled.document.created_at == first.document.created_at < retitled.document.updated_at
    # The old revision's body is gone; the new one is there.
    with pytest.raises(BodyMissing):
        stack.repositories.bodies.read(first.document.body_key)
    assert stack.repositories.bodies.read(retitled.document.body_key) == b"Body one."
    assert generation(stack) == 2


def test_html_is_stored_as_clean_text(stack, ingestor):
    html = "<html><body><h1>Setup</h1><p>Install &amp; run.</p><script>x()</script></body></html>"
    record = published(
        stack.repositories, ingestor.put("kb", "setup.html", "Setup", html, media_type="text/html")
    ).document
    assert stack.repositories.bodies.read(record.body_key).decode() == "# Setup\n\nInstall & run."


def test_delete_removes_record_body_and_hits(stack, ingestor):
    record = published(stack.repositories, ingestor.put("kb", "gone.md", "Gone", "Ephemeral zebra facts.")).document
    assert search_titles(stack, ["kb"], "zebra") == ["Gone"]
    deleted = ingestor.delete("kb", "gone.md")
    assert deleted == (record.doc_id,)
    update_kb_index(stack.repositories, "kb", deleted, vector_space=process_vector_space())
    assert ingestor.delete("kb", "gone.md") == ()
    assert ingestor.list("kb") == []
    with pytest.raises(BodyMissing):
        stack.repositories.bodies.read(record.body_key)
    assert search_titles(stack, ["kb"], "zebra") == []


def test_list_returns_every_document_of_the_kb(stack, ingestor):
    for name in ("a", "b", "c"):
        published(stack.repositories, ingestor.put("kb", f"{name}.md", name.upper(), f"Text {name}."))
    assert sorted(record.title for record in ingestor.list("kb")) == ["A", "B", "C"]


@pytest.mark.parametrize(
    ("title", "content", "message"),
    [
        ("", "new body", "title must not be empty"),
        ("t" * 256, "new body", "longer than 255"),
        ("Title", "", "body is empty"),
        ("Title", b"\xc3\x28 broken", "not valid UTF-8"),
        ("Title", b"x" * (5 * 1024 * 1024 + 1), "larger than 5242880"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(stack, ingestor, title, content, message):
    stored = published(stack.repositories, ingestor.put("kb", "doc.md", "Title", "Original body.")).document
    with pytest.raises(DocumentRejected, match=message):
        ingestor.put("kb", "doc.md", title, content)
    assert stack.repositories.documents.get("kb", stored.doc_id) == stored
    assert stack.repositories.bodies.read(stored.body_key) == b"Original body."
    assert generation(stack) == 1


def test_unknown_kb_is_refused_by_name(stack, ingestor):
    with pytest.raises(DocumentRejected, match="'nope'"):
        ingestor.put("nope", "a.md", "A", "Body.")
    with pytest.raises(DocumentRejected, match="'nope'"):
        publish_rebuild(stack.repositories, "nope", vector_space=process_vector_space())


def test_a_transient_body_storage_failure_leaves_a_new_document_pending_for_the_retry(stack, ingestor, monkeypatch):
    def broken(*args, **kwargs):
        raise KnowledgeUnavailable("document storage is temporarily unavailable")

    monkeypatch.setattr(stack.repositories.bodies, "put", broken)
    with pytest.raises(KnowledgeUnavailable):
        ingestor.put("kb", "a.md", "A", "Body.")
    record = stack.repositories.documents.get("kb", document_id("a.md"))
    # Not `failed`: a failure a retry can repair is not the document's fault.
    assert record.status == "pending" and record.error_reason is None
    monkeypatch.undo()
    assert published(stack.repositories, ingestor.put("kb", "a.md", "A", "Body.")).document.status == "ready"


def test_each_rebuild_publishes_the_next_generation(stack, ingestor):
    assert generation(stack) == 0
    ingestor.put("kb", "a.md", "A", "Alpha.")
    assert generation(stack) == 0
    assert publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space()) == 1
    assert publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space()) == 2
    assert generation(stack) == 2
    kept = stack.repositories.knowledge_bases.get("kb").index_manifests
    assert [read_manifest(stack.repositories.bodies, "kb", key).generation for key in kept] == [2, 1]


def test_concurrent_ingests_into_one_kb_lose_nothing(stack, ingestor):
    words = [f"keyword{i:02d}" for i in range(12)]

    def put(word: str) -> int:
        published(
            stack.repositories, ingestor.put("kb", f"{word}.md", f"Doc {word}", f"This document is about {word}.")
        )
        return generation(stack)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(put, words))

    # (moto's conditional writes are not atomic across threads, so two rebuilds may share a generation
    # here; each still lists the documents after its claim, so the last snapshot has all of them.)
    assert generation(stack) > 1
    assert len(ingestor.list("kb")) == len(words)
    for word in words:
        assert search_titles(stack, ["kb"], word) == [f"Doc {word}"]


def test_concurrent_bulk_puts_then_one_rebuild(stack, ingestor):
    def put(i: int) -> str:
        return ingestor.put("kb", f"bulk/{i}.md", f"Bulk {i}", f"Bulk body number{i}.").outcome

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert set(pool.map(put, range(40))) == {"created"}
    assert publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space()) == 1
    assert search_titles(stack, ["kb"], "number17") == ["Bulk 17"]


def test_a_rebuild_that_loses_the_generation_race_catches_up_and_publishes_the_next(stack, ingestor, monkeypatch):
    ingestor.put("kb", "a.md", "A", "Alpha.")
    kbs = stack.repositories.knowledge_bases
    original = kbs.publish_index
    attempts: list[tuple[int, bool]] = []

    def raced(kb_id: str, expected: int, kept: list[str]) -> bool:
        if not attempts:
            # Meanwhile another container stores b.md and publishes generation 1 first (under a
            # manifest key of its own: every attempt's key is unique).
            Ingestor(stack.repositories, clock=stack.clock).put("kb", "b.md", "B", "Bravo.")
            assert original(kb_id, expected, [f"{kept[0]}.other-writer"])
        published = original(kb_id, expected, kept)
        attempts.append((expected, published))
        return published

    monkeypatch.setattr(kbs, "publish_index", raced)
    assert publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space()) == 2
    assert attempts == [(0, False), (1, True)]
    assert search_titles(stack, ["kb"], "alpha") == ["A"] and search_titles(stack, ["kb"], "bravo") == ["B"]


def test_a_rebuild_reads_only_the_bodies_it_does_not_have(stack, ingestor, monkeypatch):
    recent = RecentChunks()
    Ingestor(stack.repositories, clock=stack.clock, recent_chunks=recent).put(
        "kb", "a.md", "A", "Remembered aardvark text."
    )
    bodies = stack.repositories.bodies
    original = bodies.read
    read_keys: list[str] = []
    monkeypatch.setattr(bodies, "read", lambda key: read_keys.append(key) or original(key))

    def body_reads() -> list[str]:
        reads = [key for key in read_keys if key.startswith("bodies/")]
        read_keys.clear()
        return reads

    publish_rebuild(
        stack.repositories, "kb", known=recent, vector_space=process_vector_space()
    )  # the chunks that ingestor just stored
    assert body_reads() == []
    # Another container (no such memory) adds b.md; a third rebuilds: a.md comes from the previous
    # index, only b.md's body is read.
    b = Ingestor(stack.repositories, clock=stack.clock).put("kb", "b.md", "B", "Bison text.")
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    assert body_reads() == [b.document.body_key]
    assert search_titles(stack, ["kb"], "aardvark") == ["A"] and search_titles(stack, ["kb"], "bison") == ["B"]
    for key in stack.repositories.knowledge_bases.get("kb").index_manifests:
        stack.repositories.bodies.delete(key)
    reset_local_state()  # a new container: no index files, no manifests at hand
    manifests.clear()
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())  # nothing to reuse: every body
    assert len(body_reads()) == 2
    assert search_titles(stack, ["kb"], "aardvark") == ["A"]
