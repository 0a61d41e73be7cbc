"""Issue 17, findings 2 and 4: races and faults on the write path never leave a document ready
without its body, and a retry repairs what an earlier failure left undone."""

from __future__ import annotations

import logging

import pytest

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.indexer.update import update_kb_index
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.retrieval import search_titles


@pytest.fixture
def ingestor(stack):
    create_knowledge_base(stack.repositories, "kb")
    return Ingestor(stack.repositories, clock=stack.clock)


def stored_body(stack, source_key: str) -> bytes:
    record = stack.repositories.documents.get("kb", document_id(source_key))
    assert record is not None and record.status == "ready"
    return stack.repositories.bodies.read(record.body_key)


def test_racing_writers_x_to_y_and_y_to_x_keep_the_body(stack, ingestor, monkeypatch):
    """Writer A changes X→Y; before A removes X's old body, writer B changes Y→X. The body B
    stored for X must survive A's cleanup (it used to share X's key, and was deleted)."""
    published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Version X of the walrus text."))
    writer_b = Ingestor(stack.repositories, clock=stack.clock)
    bodies = stack.repositories.bodies
    original_delete = bodies.delete
    raced = []

    def delete_after_b(key: str) -> None:
        if not raced:
            raced.append(key)
            published(stack.repositories, writer_b.put("kb", "doc.md", "Doc", "Version X of the walrus text."))
        original_delete(key)

    monkeypatch.setattr(bodies, "delete", delete_after_b)
    published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Version Y of the walrus text."))
    assert raced, "the race did not happen"
    assert stored_body(stack, "doc.md") == b"Version X of the walrus text."
    assert search_titles(stack, ["kb"], "walrus") == ["Doc"]


def test_a_delete_racing_a_re_put_of_the_same_content_keeps_the_body(stack, ingestor, monkeypatch):
    first = published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Narwhal facts.")).document
    writer_b = Ingestor(stack.repositories, clock=stack.clock)
    bodies = stack.repositories.bodies
    original_delete = bodies.delete

    def re_put_before_delete(key: str) -> None:
        if key == first.body_key and not getattr(re_put_before_delete, "done", False):
            re_put_before_delete.done = True  # type: ignore[attr-defined]
            published(stack.repositories, writer_b.put("kb", "doc.md", "Doc", "Narwhal facts."))
        original_delete(key)

    monkeypatch.setattr(bodies, "delete", re_put_before_delete)
    deleted = ingestor.delete("kb", "doc.md")
    assert deleted
    update_kb_index(stack.repositories, "kb", deleted, vector_space=process_vector_space())
    assert stored_body(stack, "doc.md") == b"Narwhal facts."


def test_a_put_of_unchanged_content_restores_a_missing_body(stack, ingestor):
    record = published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Okapi notes.")).document
    stack.repositories.bodies.delete(record.body_key)  # lost, whatever the cause
    again = published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Okapi notes."))
    assert again.outcome == "updated" and again.document.revision == record.revision
    assert again.document.body_key != record.body_key
    assert stored_body(stack, "doc.md") == b"Okapi notes."


def test_unchanged_content_with_its_body_is_still_skipped(stack, ingestor):
    record = published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Okapi notes.")).document
    assert published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Okapi notes.")).outcome == "skipped"
    assert stored_body(stack, "doc.md") == b"Okapi notes." and record.body_key


def test_a_failed_index_upload_is_repaired_by_the_retry(stack, ingestor, monkeypatch):
    original = index_writer.publish
    monkeypatch.setattr(index_writer, "publish", _broken("index storage is temporarily unavailable"))
    with pytest.raises(KnowledgeUnavailable):
        published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Capybara habits."))
    assert search_titles(stack, ["kb"], "capybara") == []
    monkeypatch.setattr(index_writer, "publish", original)
    retry = published(
        stack.repositories,
        Ingestor(stack.repositories, clock=stack.clock).put("kb", "doc.md", "Doc", "Capybara habits."),
    )
    assert retry.outcome == "skipped"  # the content was stored the first time
    assert retry.document.index_pending_since is None
    assert search_titles(stack, ["kb"], "capybara") == ["Doc"]


def test_a_failed_cleanup_of_the_old_body_does_not_fail_the_update(stack, ingestor, monkeypatch, caplog):
    old = published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "Old axolotl text.")).document
    monkeypatch.setattr(stack.repositories.bodies, "delete", _broken("document storage is temporarily unavailable"))
    with caplog.at_level(logging.WARNING):
        result = published(stack.repositories, ingestor.put("kb", "doc.md", "Doc", "New axolotl text."))
    assert result.outcome == "updated"
    assert stored_body(stack, "doc.md") == b"New axolotl text."
    assert search_titles(stack, ["kb"], "axolotl") == ["Doc"]
    assert stack.repositories.bodies.read(old.body_key) == b"Old axolotl text."  # orphaned, and logged
    assert "replaced body not deleted" in caplog.text


def _broken(message: str):
    def fail(*args, **kwargs):
        raise KnowledgeUnavailable(message)

    return fail
