"""The sample events of the pipeline's functions (events/ingest-*.json, events/indexer-*.json):
they have the shape Lambda delivers, and the handlers do with them what the pipeline does."""

from __future__ import annotations

import copy
import json
import os

import pytest

from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev import cli
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.handlers import EVENTS, load_event, load_function
from agent_knowledge_dev.lambda_context import LambdaContext
from agent_knowledge_dev.localstate import STATE_DIR_ENV
from tests.support.retrieval import search_titles

SOURCE_KEY = "guides/parental-leave.md"


def _with_object(event: dict, bucket: str, version_id: str) -> dict:
    """The sample, for an object this stack really has (bucket and version id are per stack)."""
    changed = copy.deepcopy(event)
    for record in changed["Records"]:
        body = json.loads(record["body"])
        for s3_record in body["Records"]:
            s3_record["s3"]["bucket"]["name"] = bucket
            s3_record["s3"]["object"]["versionId"] = version_id
        record["body"] = json.dumps(body)
    return changed


def test_the_samples_drive_the_handlers_from_upload_to_search_to_delete(stack):
    from agent_knowledge.repositories import aws

    create_knowledge_base(stack.repositories, "handbook")
    bucket = stack.environment["SOURCES_BUCKET"]
    s3 = aws.client("s3")
    version = s3.put_object(Bucket=bucket, Key=f"handbook/{SOURCE_KEY}", Body=b"# Parental leave\n\nSixteen weeks.")
    ingest, indexer = load_function("ingest"), load_function("indexer")

    created = _with_object(load_event("ingest-object-created"), bucket, version["VersionId"])
    assert ingest.lambda_handler(created, LambdaContext.for_function("IngestFunction")) == {"batchItemFailures": []}
    record = stack.repositories.documents.get("handbook", document_id(SOURCE_KEY))
    assert record.status == "ready" and record.index_pending_since is not None
    assert record.source_sequencer == "0062F1A3B2C4D5E6F7"

    request = load_event("indexer-index-request")
    body = json.loads(request["Records"][0]["body"])
    request["Records"][0]["body"] = json.dumps({**body, "doc_ids": [record.doc_id]})
    assert indexer.lambda_handler(request, LambdaContext()) == {"batchItemFailures": []}
    assert search_titles(stack, ["handbook"], "sixteen weeks") == ["Parental leave"]

    marker = s3.delete_object(Bucket=bucket, Key=f"handbook/{SOURCE_KEY}")["VersionId"]
    removed = _with_object(load_event("ingest-object-removed"), bucket, marker)
    assert ingest.lambda_handler(removed, LambdaContext.for_function("IngestFunction")) == {"batchItemFailures": []}
    assert indexer.lambda_handler(request, LambdaContext()) == {"batchItemFailures": []}
    assert search_titles(stack, ["handbook"], "sixteen weeks") == []
    # The same events again (a redelivery, and the older create after the delete): nothing changes.
    assert ingest.lambda_handler(created, LambdaContext.for_function("IngestFunction")) == {"batchItemFailures": []}
    assert stack.repositories.documents.get("handbook", record.doc_id).status == "deleted"


@pytest.mark.parametrize(
    "event", sorted(p.name for p in EVENTS.glob("*.json") if p.name.startswith(("ingest-", "indexer-")))
)
def test_invoke_runs_the_pipeline_samples(event, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))  # no running serve: a fresh in-process stack
    saved = dict(os.environ)
    try:
        status = cli.main(["invoke", event.split("-", 1)[0], str(EVENTS / event)])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    # In a fresh stack the sample's object version does not exist: the event is skipped, not failed.
    assert json.loads(captured.out) == {"batchItemFailures": []}


def test_invoke_runs_the_reconciler_sample(capsys, tmp_path, monkeypatch):
    """events/reconciler-scheduled.json: EventBridge's scheduled event. A fresh stack's bucket is
    empty (the demo documents are stored directly, not the bucket's): nothing to reconcile."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    saved = dict(os.environ)
    try:
        status = cli.main(["invoke", "reconciler", str(EVENTS / "reconciler-scheduled.json")])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert json.loads(captured.out) == {"reconciled": [], "failed": [], "skipped": []}
