"""The ingestion pipeline through the local stand-ins: S3 objects in the sources bucket → events →
ingest function → indexing queue → indexer function → search (docs/DESIGN.md §10)."""

from __future__ import annotations

import json
import threading

import pytest

from agent_knowledge.ingest import source_events
from agent_knowledge.ingest.content import prepare_document
from agent_knowledge.ingest.status import document_listing, kb_status
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev.admin import create_knowledge_base
from tests.support.pipeline import Pipeline, create_disabled_knowledge_base, start_pipeline
from tests.support.retrieval import search, search_titles


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def generation(stack, kb_id: str = "kb") -> int:
    return stack.repositories.knowledge_bases.get(kb_id).generation


def listing(stack, kb_id: str = "kb") -> dict[str, tuple[str, str | None]]:
    return {d.source_key: (d.status, d.reason) for d in document_listing(stack.repositories, kb_id)}


def record(stack, source_key: str, kb_id: str = "kb"):
    return stack.repositories.documents.get(kb_id, document_id(source_key))


def test_an_object_put_becomes_a_searchable_document(stack, pipeline):
    pipeline.put("kb/guides/zebra.md", "# Zebra guide\n\nStriped crossing rules.")
    pipeline.run()
    assert search_titles(stack, ["kb"], "striped") == ["Zebra guide"]
    assert listing(stack) == {"guides/zebra.md": ("ready", None)}
    stored = record(stack, "guides/zebra.md")
    assert stored.source_sequencer and stored.source_version_id and stored.index_pending_since is None


def test_an_overwrite_updates_and_a_delete_removes(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nOld okapi text.")
    pipeline.run()
    pipeline.put("kb/doc.md", "# Doc\n\nNew quokka text.")
    pipeline.run()
    assert search_titles(stack, ["kb"], "quokka") == ["Doc"]
    # The old text is gone (dense search may still find the document by its new text's meaning).
    assert all("okapi" not in hit.chunk_text for hit in search(stack, ["kb"], "okapi").documents)
    pipeline.delete("kb/doc.md")
    pipeline.run()
    assert search_titles(stack, ["kb"], "quokka") == []
    assert listing(stack) == {}
    tombstone = record(stack, "doc.md")
    assert tombstone.status == "deleted" and tombstone.ttl and tombstone.body_key == ""


def test_a_redelivered_event_changes_nothing(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nIbex text.")
    events = pipeline.take_messages("SourceQueue")
    for message in events:
        pipeline.send("SourceQueue", message["Body"])
    pipeline.run()
    before, generations = record(stack, "doc.md"), generation(stack)
    for message in events:  # the same S3 events, delivered again
        pipeline.send("SourceQueue", message["Body"])
    pipeline.run()
    assert record(stack, "doc.md") == before
    assert generation(stack) == generations
    assert search_titles(stack, ["kb"], "ibex") == ["Doc"]


def test_an_older_event_never_overwrites_a_newer_document(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nFirst version about lynx.")
    pipeline.put("kb/doc.md", "# Doc\n\nSecond version about puma.")
    events = pipeline.take_messages("SourceQueue")
    for message in reversed(events):  # newest first
        pipeline.send("SourceQueue", message["Body"])
    pipeline.run()
    assert search_titles(stack, ["kb"], "puma") == ["Doc"] and search_titles(stack, ["kb"], "lynx") == []


def test_a_late_put_event_cannot_resurrect_a_deleted_document(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nMarmot text.")
    pipeline.delete("kb/doc.md")
    events = pipeline.take_messages("SourceQueue")
    for message in reversed(events):  # the delete arrives before the put
        pipeline.send("SourceQueue", message["Body"])
    pipeline.run()
    assert search_titles(stack, ["kb"], "marmot") == [] and listing(stack) == {}
    assert record(stack, "doc.md").status == "deleted"


@pytest.mark.parametrize(
    ("key", "body", "content_type", "reason"),
    [
        ("kb/broken.md", b"# Broken\n\n\xc3\x28 bytes", None, "not valid UTF-8 (invalid byte at offset 10)"),
        ("kb/report.odt", b"PK\x03\x04", "application/vnd.oasis.opendocument.text", "unsupported type (Content-Type"),
        ("kb/report.pdf", b"%PDF-1.7 ...", "application/pdf", "the file is not a readable PDF"),
        ("kb/empty.md", b"", None, "the object is empty"),
        ("kb/latin.txt", "caf\u00e9 olé".encode("latin-1"), "text/plain; charset=utf-8", "not valid utf-8"),
    ],
)
def test_a_poison_object_fails_with_its_reason_while_others_proceed(stack, pipeline, key, body, content_type, reason):
    pipeline.put("kb/good.md", "# Good\n\nGazelle text.")
    pipeline.put(key, body, content_type)
    pipeline.run()
    status = listing(stack)
    source_key = key.removeprefix("kb/")
    assert status["good.md"] == ("ready", None)
    assert status[source_key][0] == "failed" and reason in status[source_key][1]
    assert search_titles(stack, ["kb"], "gazelle") == ["Good"]
    assert pipeline.dead_letters("SourceDeadLetterQueue") == []  # failed documents are not retried


def test_a_declared_charset_is_honoured(stack, pipeline):
    pipeline.put("kb/cafe.txt", "Caf\u00e9 cr\u00e8me notes.".encode("latin-1"), "text/plain; charset=iso-8859-1")
    pipeline.run()
    assert listing(stack) == {"cafe.txt": ("ready", None)}
    assert search_titles(stack, ["kb"], "crème") == ["Café crème notes."]


def test_the_title_given_to_doc_put_travels_in_the_object_metadata(stack, pipeline):
    from agent_knowledge.ingest.content import prepare_document
    from agent_knowledge.ingest.source_files import title_metadata

    body = "# Heading in the file\n\nKestrel notes."
    pipeline.put("kb/notes.md", body, metadata=title_metadata("Notes über Falken"))
    pipeline.run()
    assert search_titles(stack, ["kb"], "kestrel") == ["Notes über Falken"]
    # The revision is what the uploader computes locally (doc put --wait waits for it).
    expected = prepare_document("Notes über Falken", body.encode(), "text/markdown", "notes.md").revision
    assert record(stack, "notes.md").revision == expected


def test_an_oversized_object_fails_without_being_read(stack, pipeline, monkeypatch):
    monkeypatch.setattr(source_events, "MAX_SOURCE_BYTES", 64)
    pipeline.put("kb/big.md", "# Big\n\n" + "word " * 40)
    pipeline.run()
    assert listing(stack)["big.md"] == ("failed", "the object is larger than 64 bytes (207 bytes)")


def test_a_failed_update_takes_the_old_version_out_of_search(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nHeron text.")
    pipeline.run()
    pipeline.put("kb/doc.md", b"\xff\xfe not text")
    pipeline.run()
    assert listing(stack)["doc.md"][0] == "failed"
    assert search_titles(stack, ["kb"], "heron") == []
    assert kb_status(stack.repositories, "kb", sizing=SizingSettings()).model_dump(
        exclude={"index_generation", "index_bytes", "largest_index_bytes", "vectors"}
    ) == {
        "kb_id": "kb",
        "objects": 1,
        "ready": 0,
        "pending": 0,
        "failed": 1,
        "not_ingested": 0,
        "deletes_pending": 0,
        "sections": 0,
        "dead_lettered": None,
        "oldest_pending_age_seconds": None,
        "last_sync": None,
    }


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain; charset=rot13", "Grebafba grkg."),
        ("text/markdown; charset=base64", "SGVyb24gdGV4dC4="),
        ("text/plain; charset=undefined", "Heron text."),
        (None, '<html><head><meta charset="zlib"><title>Page</title></head><body>Heron text.</body></html>'),
        (None, '<html><head><meta charset="punycode"><title>Page</title></head><body>Heron text.</body></html>'),
    ],
)
def test_an_update_in_a_codec_that_is_no_text_encoding_fails_the_document_and_dead_letters_nothing(
    stack, pipeline, content_type, body
):
    # Issue 23, finding 6: Python's non-text codecs named by Content-Type or <meta charset> raised
    # LookupError/UnicodeError out of the ingest, the event was dead-lettered with no failed record
    # and the old version stayed served. The update fails the document, with the reason, instead.
    key = "page.html" if content_type is None else "doc.txt"
    pipeline.put(f"kb/{key}", "<title>Old</title>heron old" if content_type is None else "Old\n\nheron old")
    pipeline.run()
    assert listing(stack)[key][0] == "ready"
    pipeline.put(f"kb/{key}", body, content_type=content_type)
    pipeline.run()
    status, reason = listing(stack)[key]
    assert status == "failed" and reason and "encoding" in reason
    assert search_titles(stack, ["kb"], "heron") == []
    assert pipeline.dead_letters("SourceDeadLetterQueue") == []
    assert pipeline.dead_letters("IndexDeadLetterQueue") == []


def test_objects_of_unknown_or_disabled_kbs_are_recorded_as_failed(stack, pipeline):
    create_disabled_knowledge_base(stack, "off")
    pipeline.put("nope/doc.md", "# Doc\n\nText.")
    pipeline.put("off/doc.md", "# Doc\n\nText.")
    pipeline.put("kb/fine.md", "# Fine\n\nFinch text.")
    pipeline.run()
    assert record(stack, "doc.md", "nope").error_reason == "knowledge base 'nope' does not exist"
    assert listing(stack, "off") == {"doc.md": ("failed", "knowledge base 'off' is disabled")}
    assert search_titles(stack, ["kb"], "finch") == ["Fine"]


def test_a_malformed_message_goes_to_the_dead_letter_queue_while_others_proceed(stack, pipeline):
    pipeline.send("SourceQueue", "this is not an S3 event")
    pipeline.put("kb/doc.md", "# Doc\n\nOtter text.")
    pipeline.run()
    assert search_titles(stack, ["kb"], "otter") == ["Doc"]
    (dead,) = pipeline.dead_letters("SourceDeadLetterQueue")
    assert dead["Body"] == "this is not an S3 event"


def test_an_indexing_failure_is_retried_and_lands(stack, pipeline, monkeypatch):
    from agent_knowledge.errors import KnowledgeUnavailable
    from agent_knowledge.indexer import update as index_update

    calls = []
    original = index_update.update_kb_index

    def flaky(repositories, kb_id, doc_ids, **options):
        calls.append(kb_id)
        if len(calls) < 3:
            raise KnowledgeUnavailable("index storage is temporarily unavailable")
        return original(repositories, kb_id, doc_ids, **options)

    # The indexer imports it when it runs (the ingest function, which shares its module, must not).
    monkeypatch.setattr(index_update, "update_kb_index", flaky)
    pipeline.put("kb/doc.md", "# Doc\n\nBadger text.")
    pipeline.run()
    assert len(calls) == 3
    assert search_titles(stack, ["kb"], "badger") == ["Doc"]
    assert pipeline.dead_letters("IndexDeadLetterQueue") == []


def test_bulk_changes_are_indexed_in_far_fewer_generations_than_documents(stack, pipeline):
    for i in range(40):
        pipeline.put(f"kb/bulk/{i:02d}.md", f"# Bulk {i}\n\nBulk body keyword{i:02d}.")
    pipeline.run()
    # Each indexer run publishes a lexical generation, then one with its vectors (hybrid search).
    assert generation(stack) <= 16
    status = kb_status(stack.repositories, "kb", sizing=SizingSettings())
    assert (status.ready, status.pending, status.failed) == (40, 0, 0)
    assert search_titles(stack, ["kb"], "keyword17")[:1] == ["Bulk 17"]  # dense search adds its neighbours


def test_concurrent_updates_of_one_kb_produce_one_consistent_index(stack, pipeline):
    """Writers overwrite and delete the same documents while the pollers run in threads; once the
    queues drain, the index holds exactly the last version of every document."""
    runner = pipeline.runner
    runner.start(poll_interval=0.01)
    try:

        def writer(n: int) -> None:
            for round_ in range(3):
                for i in range(6):
                    pipeline.put(f"kb/doc{i}.md", f"# Doc {i}\n\nwriter{n} round{round_} doc{i} text.")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pipeline.delete("kb/doc5.md")
        pipeline.put("kb/final.md", "# Final\n\nFinal pelican text.")
        runner.wait_until_idle(timeout=120)
    finally:
        runner.stop()
    s3 = pipeline.s3
    for i in range(5):
        current = s3.get_object(Bucket=pipeline.bucket, Key=f"kb/doc{i}.md")["Body"].read().decode()
        words = current.split("\n\n")[1].split()
        assert search_titles(stack, ["kb"], f"{words[0]} {words[1]} doc{i}", max_docs=10)[0] == f"Doc {i}"
        # The record is the object's current version, and the index holds that revision (search
        # serves a hit only if its revision is the record's).
        assert record(stack, f"doc{i}.md").revision == prepare_document(f"Doc {i}", current, "text/markdown").revision
    assert "Doc 5" not in search_titles(stack, ["kb"], "doc5")  # dense search still finds its neighbours
    status = kb_status(stack.repositories, "kb", sizing=SizingSettings())
    assert (status.ready, status.pending, status.failed) == (6, 0, 0)
    assert status.index_generation == generation(stack)


def test_kb_status_agrees_with_search(stack, pipeline):
    words = ["aardvark", "bison", "cheetah", "dingo"]
    for word in words:
        pipeline.put(f"kb/{word}.md", f"# {word.title()}\n\nAll about the {word}.")
    pipeline.put("kb/bad.md", b"\xff")
    pipeline.run()
    pipeline.delete("kb/dingo.md")
    pipeline.run()
    ready = [d for d in document_listing(stack.repositories, "kb") if d.status == "ready"]
    assert [d.title for d in ready] == ["Aardvark", "Bison", "Cheetah"]
    for document in ready:
        # First: dense search adds the other animals after it.
        assert search_titles(stack, ["kb"], document.title.lower())[:1] == [document.title]
    assert "Dingo" not in search_titles(stack, ["kb"], "dingo")
    status = kb_status(stack.repositories, "kb", sizing=SizingSettings())
    assert (status.ready, status.pending, status.failed) == (3, 0, 1)


def test_index_lag_is_emitted_as_a_metric_with_only_the_service_dimension(stack, pipeline, capsys, monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    pipeline.put("kb/doc.md", "# Doc\n\nMetric text.")
    pipeline.run()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"IndexLagSeconds"' in line]
    assert lines
    metric = lines[-1]
    assert metric["_aws"]["CloudWatchMetrics"] == [
        {
            "Namespace": "AgentKnowledge",
            "Dimensions": [["Service"]],
            "Metrics": [{"Name": "IndexLagSeconds", "Unit": "Seconds"}],
        }
    ]
    # After the batch nothing of the KB is pending: the lag is 0 (docs/DESIGN.md §10).
    assert metric["Service"] == "agent-knowledge" and metric["IndexLagSeconds"] == 0


def test_index_lag_reports_the_oldest_change_still_pending(stack, pipeline, capsys, monkeypatch):
    from agent_knowledge.errors import KnowledgeUnavailable
    from agent_knowledge.indexer import update as index_update

    def broken(*args, **options):
        raise KnowledgeUnavailable("index storage is temporarily unavailable")

    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.setattr(index_update, "update_kb_index", broken)
    pipeline.put("kb/doc.md", "# Doc\n\nLag text.")
    pipeline.runner.step(pipeline.runner.mapping("IngestFunction"))
    since = record(stack, "doc.md").index_pending_since
    pipeline.runner.step(pipeline.runner.mapping("IndexerFunction"))
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"IndexLagSeconds"' in x]
    assert line["IndexLagSeconds"] > 0 and since is not None
