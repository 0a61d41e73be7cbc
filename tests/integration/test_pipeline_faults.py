"""Regression tests of issue 23's findings 1 and 2: transient failures and lost answers in the
ingest never make a document permanently failed, pending or bodiless (docs/DESIGN.md §10)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from agent_knowledge.ingest.status import document_listing
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev.admin import create_knowledge_base
from tests.support.pipeline import Pipeline, start_pipeline
from tests.support.retrieval import search_titles


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def _server_error(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "InternalError", "Message": "try again"},
                        "ResponseMetadata": {"HTTPStatusCode": 503}}, operation)  # fmt: skip


def _fail_first_body_upload(monkeypatch, error: Exception) -> list[str]:
    """The ingest's first body upload raises `error` (before anything is written); the keys it hit."""
    s3 = aws.client("s3")
    original = s3.put_object
    hit: list[str] = []

    def failing_once(**request: Any) -> Any:
        if request["Key"].startswith("bodies/") and not hit:
            hit.append(request["Key"])
            raise error
        return original(**request)

    monkeypatch.setattr(s3, "put_object", failing_once)
    return hit


def test_a_body_upload_that_fails_once_is_repaired_by_the_redelivery(stack, pipeline, monkeypatch):
    failures = _fail_first_body_upload(monkeypatch, _server_error("PutObject"))
    pipeline.put("kb/doc.md", "# Doc\n\nWombat burrow rules.")
    pipeline.run()
    assert failures, "the fault was not injected"
    assert [(d.source_key, d.status) for d in document_listing(stack.repositories, "kb")] == [("doc.md", "ready")]
    assert search_titles(stack, ["kb"], "wombat") == ["Doc"]


def test_a_record_write_whose_answer_is_lost_keeps_its_body(stack, pipeline, monkeypatch):
    """botocore retries a write whose answer was lost after it committed: the retry must
    recognise its own write, not conclude another writer won and delete the body."""
    dynamodb = aws.client("dynamodb")
    original = dynamodb.put_item
    retried: list[str] = []

    def committed_then_retried(**request: Any) -> Any:
        item = request.get("Item", {})
        if item.get("status", {}).get("S") == "ready" and not retried:
            retried.append(item["doc_id"]["S"])
            original(**request)  # committed; the answer is lost and botocore sends it again
        return original(**request)

    monkeypatch.setattr(dynamodb, "put_item", committed_then_retried)
    pipeline.put("kb/doc.md", "# Doc\n\nQuokka feeding rules.")
    pipeline.run()
    assert retried == [document_id("doc.md")]
    stored = stack.repositories.documents.get("kb", document_id("doc.md"))
    assert stored.status == "ready" and stack.repositories.bodies.exists(stored.body_key, stored.body_etag)
    assert search_titles(stack, ["kb"], "quokka") == ["Doc"]


def test_an_ingest_that_dies_after_the_first_record_write_is_completed_by_the_redelivery(stack, pipeline, monkeypatch):
    crashes = _fail_first_body_upload(monkeypatch, RuntimeError("the function's container died here"))
    pipeline.put("kb/doc.md", "# Doc\n\nNarwhal tusk facts.")
    pipeline.run()
    assert crashes
    assert search_titles(stack, ["kb"], "narwhal") == ["Doc"]


def test_publishing_a_generation_whose_answer_is_lost_keeps_the_manifest(stack, pipeline, monkeypatch):
    dynamodb = aws.client("dynamodb")
    original = dynamodb.update_item
    retried: list[bool] = []

    def committed_then_retried(**request: Any) -> Any:
        if "generation = :next" in request.get("UpdateExpression", "") and not retried:
            retried.append(True)
            original(**request)
        return original(**request)

    monkeypatch.setattr(dynamodb, "update_item", committed_then_retried)
    pipeline.put("kb/doc.md", "# Doc\n\nAxolotl habitat notes.")
    pipeline.run()
    assert retried
    kb = stack.repositories.knowledge_bases.get("kb")
    assert stack.repositories.bodies.exists(kb.index_manifests[0], None)
    assert search_titles(stack, ["kb"], "axolotl") == ["Doc"]


# -- finding 3: one bad message or one failing KB never strands others ---------------------------


def _index_record(message_id: str, body: str, group: str) -> dict[str, Any]:
    return {"messageId": message_id, "body": body, "attributes": {"MessageGroupId": group}}


def _index_message(kb_id: str) -> str:
    return json.dumps({"kb_id": kb_id, "doc_ids": []})


def _indexer(stack):
    from agent_knowledge.indexer.index_batch import index_batch
    from agent_knowledge.runtime.container import default_pipeline_dependencies

    return lambda records: index_batch(default_pipeline_dependencies(), records)


def _pending_put(stack, kb_id: str, key: str, text: str) -> None:
    from agent_knowledge.ingest.ingestor import Ingestor

    Ingestor(stack.repositories, clock=stack.clock).put(kb_id, key, None, text)


def test_a_malformed_index_message_fails_alone_and_its_batch_is_indexed(stack, pipeline):
    create_knowledge_base(stack.repositories, "other")
    _pending_put(stack, "kb", "a.md", "# A\n\nGiraffe neck facts.")
    _pending_put(stack, "other", "b.md", "# B\n\nOtter den facts.")
    records = [
        _index_record("m1", _index_message("kb"), "kb"),
        _index_record("m2", "{not json", "kb"),
        _index_record("m3", _index_message("other"), "other"),
    ]
    assert _indexer(stack)(records) == {"batchItemFailures": [{"itemIdentifier": "m2"}]}
    assert search_titles(stack, ["kb"], "giraffe") == ["A"] and search_titles(stack, ["other"], "otter") == ["B"]


def test_a_failing_kb_retries_only_its_own_messages(stack, pipeline, monkeypatch):
    from agent_knowledge.errors import KnowledgeUnavailable
    from agent_knowledge.indexer import update

    create_knowledge_base(stack.repositories, "other")
    _pending_put(stack, "kb", "a.md", "# A\n\nHeron wading facts.")
    _pending_put(stack, "other", "b.md", "# B\n\nBison herd facts.")
    original = update.update_kb_index

    def failing_for_kb(repositories, kb_id, *args, **kwargs):
        if kb_id == "kb":
            raise KnowledgeUnavailable("index storage is temporarily unavailable")
        return original(repositories, kb_id, *args, **kwargs)

    monkeypatch.setattr(update, "update_kb_index", failing_for_kb)
    records = [
        _index_record("m1", _index_message("kb"), "kb"),
        _index_record("m2", _index_message("other"), "other"),
        _index_record("m3", _index_message("kb"), "kb"),
    ]
    failed = _indexer(stack)(records)["batchItemFailures"]
    assert sorted(item["itemIdentifier"] for item in failed) == ["m1", "m3"]
    assert search_titles(stack, ["other"], "bison") == ["B"]


def test_messages_that_cannot_finish_before_the_timeout_are_deferred_not_the_batch(stack, pipeline):
    from agent_knowledge.ingest.source_batch import DEADLINE_RESERVE_SECONDS, ingest_batch
    from agent_knowledge.runtime.container import default_pipeline_dependencies

    pipeline.put("kb/a.md", "# A\n\nFirst.")
    pipeline.put("kb/b.md", "# B\n\nSecond.")
    messages = pipeline.take_messages("SourceQueue")
    records = [{"messageId": f"m{i}", "body": message["Body"]} for i, message in enumerate(messages)]
    for record in records[1:]:  # taken off the queue above: what Lambda would redeliver
        pipeline.send("SourceQueue", record["body"])
    calls: list[int] = []

    def remaining() -> float:  # plenty for the first message, too little for the others
        calls.append(1)
        return 60.0 if len(calls) == 1 else DEADLINE_RESERVE_SECONDS - 1

    failed = ingest_batch(default_pipeline_dependencies(), records, remaining)["batchItemFailures"]
    assert [item["itemIdentifier"] for item in failed] == [record["messageId"] for record in records[1:]]
    pipeline.run()  # the deferred messages are delivered again, with time to spare
    assert sorted(d.source_key for d in document_listing(stack.repositories, "kb")) == ["a.md", "b.md"]
