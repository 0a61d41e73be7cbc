"""PDF, DOCX and PPTX objects through the pipeline (sources bucket → ingest → indexer → search):
ready with their titles and searchable with their page and slide markers, or failed with the
reason, never dead-lettered (docs/DESIGN.md §10)."""

from __future__ import annotations

import pytest

from agent_knowledge.ingest import binary_formats
from agent_knowledge.ingest.binary_formats import DOCX, PDF, PPTX
from agent_knowledge.ingest.content import prepare_document
from agent_knowledge.ingest.status import document_listing, kb_status
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev.admin import create_knowledge_base
from tests.support.office_documents import docx, pdf, pptx
from tests.support.pipeline import Pipeline, start_pipeline
from tests.support.retrieval import search_titles


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def listing(stack) -> dict[str, tuple[str, str | None]]:
    return {d.source_key: (d.status, d.reason) for d in document_listing(stack.repositories, "kb")}


def test_pdf_docx_and_pptx_objects_become_searchable_documents(stack, pipeline):
    manual = pdf([["Installing the flamingo server"], ["Flamingo tuning on page two"]], title="Flamingo Manual")
    memo = docx(("Heading1", "Pelican Memo"), "The pelican budget is approved.", [["Item", "Cost"]])
    deck = pptx([("Cormorant Roadmap", ["Ship the cormorant release"], "Speaker says hello")])
    pipeline.put("kb/manuals/flamingo.pdf", manual, PDF)
    pipeline.put("kb/memos/pelican.docx", memo)  # typed by the key's suffix
    pipeline.put("kb/decks/cormorant", deck, PPTX)  # no suffix: typed by the Content-Type
    pipeline.run()
    assert listing(stack) == {
        "manuals/flamingo.pdf": ("ready", None),
        "memos/pelican.docx": ("ready", None),
        "decks/cormorant": ("ready", None),
    }
    assert search_titles(stack, ["kb"], "flamingo tuning") == ["Flamingo Manual"]
    assert search_titles(stack, ["kb"], "pelican budget") == ["Pelican Memo"]
    assert search_titles(stack, ["kb"], "cormorant release") == ["Cormorant Roadmap"]
    stored = stack.repositories.documents.get("kb", document_id("manuals/flamingo.pdf"))
    body = stack.repositories.bodies.read(stored.body_key).decode()
    assert body.startswith("[page 1]\n\nInstalling the flamingo server\n\n[page 2]")
    # The revision is the one `doc put --file` computes locally from the same bytes.
    assert stored.revision == prepare_document(None, manual, PDF, "manuals/flamingo.pdf").revision


@pytest.mark.parametrize(
    ("key", "body", "reason"),
    [
        ("kb/secret.pdf", pdf([["secret"]], encrypted=True), "the file is encrypted"),
        ("kb/scan.pdf", pdf([[]], images_only=True), "OCR is not done"),
        ("kb/broken.docx", b"PK\x03\x04 broken", "not a readable Office document"),
        ("kb/empty.pptx", pptx([(None, [], None)]), "no extractable text"),
    ],
)
def test_an_unreadable_binary_document_fails_with_its_reason(stack, pipeline, key, body, reason):
    pipeline.put("kb/good.md", "# Good\n\nGazelle text.")
    pipeline.put(key, body)
    pipeline.run()
    status = listing(stack)
    assert status["good.md"] == ("ready", None)
    assert status[key.removeprefix("kb/")][0] == "failed" and reason in status[key.removeprefix("kb/")][1]
    assert kb_status(stack.repositories, "kb", sizing=SizingSettings()).failed == 1
    assert pipeline.dead_letters("SourceDeadLetterQueue") == []


def test_a_zip_bomb_fails_before_it_is_unpacked(stack, pipeline, monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_ZIP_TOTAL_BYTES", 50_000)
    pipeline.put("kb/bomb.docx", docx("x", extra={"word/media/zeros.bin": b"\x00" * 60_000}), DOCX)
    pipeline.run()
    status, reason = listing(stack)["bomb.docx"]
    assert status == "failed" and "(a zip bomb?)" in (reason or "")
    assert pipeline.dead_letters("SourceDeadLetterQueue") == []


def test_binary_objects_have_their_own_size_limit(stack, pipeline, monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_BINARY_SOURCE_BYTES", 200)
    monkeypatch.setattr("agent_knowledge.ingest.source_events.MAX_BINARY_SOURCE_BYTES", 200)
    content = pdf([["A PDF larger than two hundred bytes"]])
    pipeline.put("kb/large.pdf", content)
    pipeline.run()
    assert listing(stack)["large.pdf"] == ("failed", f"the object is larger than 200 bytes ({len(content)} bytes)")


def test_the_pdf_sample_event_drives_the_ingest_function(stack):
    import json

    from agent_knowledge.repositories import aws
    from agent_knowledge_dev.handlers import load_event, load_function
    from agent_knowledge_dev.lambda_context import LambdaContext

    create_knowledge_base(stack.repositories, "handbook")
    bucket = stack.environment["SOURCES_BUCKET"]
    content = pdf([["Travel is booked through the portal."]], title="Travel Policy")
    version = aws.client("s3").put_object(
        Bucket=bucket, Key="handbook/manuals/travel-policy.pdf", Body=content, ContentType=PDF
    )
    event = load_event("ingest-pdf-created")
    body = json.loads(event["Records"][0]["body"])
    body["Records"][0]["s3"]["bucket"]["name"] = bucket
    body["Records"][0]["s3"]["object"]["versionId"] = version["VersionId"]
    body["Records"][0]["s3"]["object"]["size"] = len(content)
    event["Records"][0]["body"] = json.dumps(body)
    assert load_function("ingest").lambda_handler(event, LambdaContext.for_function("IngestFunction")) == {
        "batchItemFailures": []
    }
    record = stack.repositories.documents.get("handbook", document_id("manuals/travel-policy.pdf"))
    assert (record.status, record.title) == ("ready", "Travel Policy")
