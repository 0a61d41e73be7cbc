"""Level-triggered reconciliation (issue 23, finding 4): whatever happened to the events, every
object of the sources bucket ends as a ready or failed document after a reconcile, every document
whose object is gone is deleted, and `kb status` adds up (ready + pending + failed + not_ingested ==
objects) at every moment, counting what sits in the dead-letter queues."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.ingest import reconcile, status
from agent_knowledge.ingest.content import prepare_document
from agent_knowledge.ingest.reconcile import reconcile_kb
from agent_knowledge.ingest.source_events import SourceIngest
from agent_knowledge.ingest.status import DeadLetters, dead_letters_of, document_listing, kb_status
from agent_knowledge.repositories.bodies import BodyStore
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.repositories.queues import DeadLetterQueue
from agent_knowledge.runtime.container import default_pipeline_dependencies
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.handlers import load_event, load_function
from agent_knowledge_dev.lambda_context import LambdaContext
from agent_knowledge_dev.runtime import reset_caches
from tests.support.knowledge import published
from tests.support.pipeline import Pipeline, create_disabled_knowledge_base, start_pipeline
from tests.support.retrieval import search, search_titles

# Later than every grace period: what the reconciler and `kb status` see once events had their time.
LATER = status.GRACE_SECONDS + 60


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def deps_at(offset: float = 0.0) -> PipelineDependencies:
    """The functions' dependencies, with a clock `offset` seconds ahead of now."""
    return dataclasses.replace(default_pipeline_dependencies(), clock=lambda: time.time() + offset)


def status_of(stack, kb_id: str = "kb", offset: float = 0.0, dead_letters: DeadLetters | None = None):
    deps = deps_at(offset)
    found = kb_status(
        stack.repositories, kb_id, deps.clock, sources=deps.sources, dead_letters=dead_letters, sizing=SizingSettings()
    )
    assert found.ready + found.pending + found.failed + found.not_ingested == found.objects, found
    return found


def listing(stack, kb_id: str = "kb", offset: float = 0.0, dead_letters: DeadLetters | None = None):
    deps = deps_at(offset)
    entries = document_listing(
        stack.repositories, kb_id, sources=deps.sources, dead_letters=dead_letters, clock=deps.clock
    )
    return {entry.source_key: (entry.status, entry.reason) for entry in entries}


def counts(found) -> tuple[int, int, int, int, int, int]:
    return (found.objects, found.ready, found.pending, found.failed, found.not_ingested, found.deletes_pending)


def lose_events(pipeline: Pipeline) -> None:
    """Every event of the source queue is gone (a purge, a lost notification)."""
    pipeline.take_messages("SourceQueue")


def test_objects_whose_events_were_lost_are_ingested_after_a_reconcile(stack, pipeline):
    for name in ("alpha", "beta", "gamma"):
        pipeline.put(f"kb/{name}.md", f"# {name.title()}\n\nAll about the {name} wolverine.")
    pipeline.put("kb/folder/", b"")  # a folder placeholder is no document
    lose_events(pipeline)
    pipeline.run()
    # Young objects: their events are probably in flight.
    assert counts(status_of(stack)) == (3, 0, 3, 0, 0, 0)
    # Past the grace period nothing has come: they are not ingested, and `doc list` says why.
    assert counts(status_of(stack, offset=LATER)) == (3, 0, 0, 0, 3, 0)
    assert listing(stack, offset=LATER)["beta.md"] == ("not_ingested", status.NOT_INGESTED)
    # The schedule leaves young objects to their events; later it sends them.
    assert reconcile_kb(deps_at(), "kb").requeued == 0
    report = reconcile_kb(deps_at(LATER), "kb")
    assert (report.objects, report.documents, report.requeued, report.missing) == (3, 0, 3, 3)
    pipeline.run()
    assert counts(status_of(stack)) == (3, 3, 0, 0, 0, 0)
    assert sorted(search_titles(stack, ["kb"], "wolverine", max_docs=10)) == ["Alpha", "Beta", "Gamma"]
    assert stack.repositories.knowledge_bases.get("kb").last_sync == pytest.approx(time.time() + LATER, abs=60)
    assert status_of(stack).last_sync is not None
    # Nothing left to do: a second reconcile sends nothing.
    assert reconcile_kb(deps_at(LATER), "kb").requeued == 0


def test_a_document_whose_object_was_deleted_with_the_event_lost_is_removed(stack, pipeline):
    pipeline.put("kb/keep.md", "# Keep\n\nThe keeper walrus.")
    pipeline.put("kb/gone.md", "# Gone\n\nThe vanishing narwhal.")
    pipeline.run()
    pipeline.delete("kb/gone.md")
    lose_events(pipeline)
    pipeline.run()
    assert search_titles(stack, ["kb"], "vanishing narwhal")[:1] == ["Gone"]  # still served
    # Not an object any more: its delete is pending.
    assert counts(status_of(stack, offset=LATER)) == (1, 1, 0, 0, 0, 1)
    assert listing(stack, offset=LATER)["gone.md"] == ("pending", status.OBJECT_GONE)
    report = reconcile_kb(deps_at(LATER), "kb")
    assert (report.requeued, report.orphaned) == (1, 1)
    pipeline.run()
    assert "Gone" not in search_titles(stack, ["kb"], "vanishing narwhal")  # dense search may find "Keep"
    assert stack.repositories.documents.get("kb", document_id("gone.md")).status == "deleted"
    assert counts(status_of(stack)) == (1, 1, 0, 0, 0, 0)
    assert listing(stack) == {"keep.md": ("ready", None)}


def test_documents_stored_directly_are_not_the_buckets_to_delete(stack, pipeline):
    from agent_knowledge.ingest.ingestor import Ingestor

    published(
        stack.repositories,
        Ingestor(stack.repositories).put("kb", "seeded.md", None, "# Seeded\n\nStored without an object."),
    )
    report = reconcile_kb(deps_at(LATER), "kb")
    assert (report.objects, report.documents, report.requeued) == (0, 1, 0)
    # Such documents count as objects of their own (the demo seed, a stack without a bucket).
    assert counts(status_of(stack, offset=LATER)) == (1, 1, 0, 0, 0, 0)


def test_a_placeholder_left_by_a_crash_is_repaired(stack, pipeline, monkeypatch):
    def crash(*args, **kwargs):
        raise KnowledgeUnavailable.of("body storage")

    monkeypatch.setattr(BodyStore, "put", crash)
    pipeline.put("kb/doc.md", "# Doc\n\nThe placeholder pangolin.")
    pipeline.runner.step(pipeline.runner.mapping("IngestFunction"))  # the body upload fails
    lose_events(pipeline)  # and the event is lost before it is retried
    monkeypatch.undo()
    stuck = stack.repositories.documents.get("kb", document_id("doc.md"))
    assert stuck.status == "pending" and stuck.index_pending_since is None
    assert counts(status_of(stack, offset=LATER)) == (1, 0, 1, 0, 0, 0)
    assert reconcile_kb(deps_at(), "kb").requeued == 0  # it may still be on its way
    report = reconcile_kb(deps_at(LATER), "kb")
    assert (report.requeued, report.stuck) == (1, 1)
    pipeline.run()
    assert counts(status_of(stack)) == (1, 1, 0, 0, 0, 0)
    assert search_titles(stack, ["kb"], "pangolin") == ["Doc"]


def test_a_record_of_an_overwritten_object_whose_event_was_lost_is_updated(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nThe first okapi.")
    pipeline.run()
    pipeline.put("kb/doc.md", "# Doc\n\nThe second quokka.")
    lose_events(pipeline)
    pipeline.run()
    assert listing(stack, offset=LATER)["doc.md"] == ("not_ingested", status.REPLACED)
    report = reconcile_kb(deps_at(LATER), "kb")
    assert (report.requeued, report.outdated) == (1, 1)
    pipeline.run()
    current = prepare_document(None, "# Doc\n\nThe second quokka.", "text/markdown", "doc.md")
    assert stack.repositories.documents.get("kb", document_id("doc.md")).revision == current.revision
    assert search_titles(stack, ["kb"], "quokka") == ["Doc"]
    # The old text is gone (dense search may still find the document by its new text's meaning).
    assert all("okapi" not in hit.chunk_text for hit in search(stack, ["kb"], "okapi").documents)
    assert counts(status_of(stack)) == (1, 1, 0, 0, 0, 0)


def test_a_failed_object_is_recorded_with_its_etag_and_not_sent_again(stack, pipeline):
    pipeline.put("kb/bad.md", b"\xff\xfe not text")
    lose_events(pipeline)
    assert reconcile_kb(deps_at(LATER), "kb").requeued == 1
    pipeline.run()
    assert counts(status_of(stack)) == (1, 0, 0, 1, 0, 0)
    assert listing(stack)["bad.md"][0] == "failed"
    assert reconcile_kb(deps_at(LATER), "kb").requeued == 0  # failed for this version: nothing to redo


def test_changes_whose_indexing_request_was_lost_get_one_for_the_kb(stack, pipeline):
    pipeline.put("kb/doc.md", "# Doc\n\nThe indexless ibis.")
    pipeline.runner.step(pipeline.runner.mapping("IngestFunction"))
    pipeline.take_messages("IndexQueue")  # the indexing request is lost
    assert counts(status_of(stack, offset=LATER)) == (1, 0, 1, 0, 0, 0)
    report = reconcile_kb(deps_at(LATER), "kb")
    assert report.index_requested and report.requeued == 0
    pipeline.run()
    assert counts(status_of(stack)) == (1, 1, 0, 0, 0, 0)
    assert search_titles(stack, ["kb"], "ibis") == ["Doc"]


def _dead_letters(pipeline: Pipeline, kb_id: str = "kb") -> DeadLetters:
    from agent_knowledge.repositories import aws

    def bodies(logical_id: str) -> list[str]:
        return DeadLetterQueue(lambda: aws.client("sqs"), pipeline.queue_url(logical_id)).peek()

    return dead_letters_of(kb_id, bodies("SourceDeadLetterQueue"), bodies("IndexDeadLetterQueue"))


def test_kb_status_counts_the_kbs_dead_lettered_messages_and_leaves_them_there(stack, pipeline, monkeypatch):
    original = SourceIngest.apply

    def poison(self, event):
        if event.source_key == "poison.md":
            raise KnowledgeUnavailable.of("source storage")
        return original(self, event)

    monkeypatch.setattr(SourceIngest, "apply", poison)
    pipeline.put("kb/poison.md", "# Poison\n\nThe dead-lettered dugong.")
    pipeline.put("kb/fine.md", "# Fine\n\nThe healthy heron.")
    pipeline.run()  # the poison's event fails 5 times: the dead-letter queue
    monkeypatch.undo()
    sqs = pipeline.sqs
    index_dlq = pipeline.queue_url("IndexDeadLetterQueue")
    for kb_id in ("kb", "other"):
        sqs.send_message(
            QueueUrl=index_dlq,
            MessageBody=json.dumps({"kb_id": kb_id, "doc_ids": []}),
            MessageGroupId=kb_id,
            MessageDeduplicationId=f"dead-{kb_id}",
        )
    pipeline.send("SourceDeadLetterQueue", "not an S3 event")  # no KB's
    dead = _dead_letters(pipeline)
    assert (dead.count, dead.source_keys) == (2, frozenset({"poison.md"}))
    found = status_of(stack, dead_letters=dead)
    # Known to be lost, so not ingested at once, young as it is; the reason says where it is.
    assert (found.dead_lettered, counts(found)) == (2, (2, 1, 0, 0, 1, 0))
    assert listing(stack, dead_letters=dead)["poison.md"] == ("not_ingested", status.DEAD_LETTERED)
    # Counting took nothing away: the messages are all still there, visible.
    assert _dead_letters(pipeline).count == 2
    assert len(pipeline.take_messages("SourceDeadLetterQueue")) == 2
    # `kb sync` (no grace) ingests it without waiting for a redrive.
    assert reconcile_kb(deps_at(), "kb", grace=0).missing == 1
    pipeline.run()
    assert counts(status_of(stack)) == (2, 2, 0, 0, 0, 0)


_kbs = itertools.count()
KEYS = ["a.md", "b.md", "c.md"]
OPERATIONS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.integers(0, 2)),
    st.tuples(st.just("bad"), st.sampled_from(KEYS), st.just(0)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.just(0)),
    st.tuples(st.sampled_from(["lose", "ingest", "index", "reconcile", "age"]), st.just(""), st.just(0)),
)


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(OPERATIONS, min_size=1, max_size=12))
def test_kb_status_adds_up_at_every_moment_and_one_reconcile_settles_everything(stack, operations):
    """Random puts, overwrites, undecodable objects and deletes, with events lost, the pipeline
    stepped and reconciles in between: after every step ready + pending + failed + not_ingested ==
    objects, the bucket's document objects; after the queues drain and one reconcile, every object
    is ready or failed and its record is the object's current version."""
    kb_id = f"prop{next(_kbs)}"
    create_knowledge_base(stack.repositories, kb_id)
    pipeline = start_pipeline(stack.environment)
    runner, offset = pipeline.runner, 0.0
    steps: dict[str, Callable[[], object]] = {
        "lose": lambda: lose_events(pipeline),
        "ingest": lambda: runner.step(runner.mapping("IngestFunction")),
        "index": lambda: runner.step(runner.mapping("IndexerFunction")),
    }
    for name, key, variant in operations:
        if name == "put":
            pipeline.put(f"{kb_id}/{key}", f"# {key}\n\nVersion {variant} of {key}.")
        elif name == "bad":
            pipeline.put(f"{kb_id}/{key}", b"\xff\xfe not text")
        elif name == "delete":
            pipeline.delete(f"{kb_id}/{key}")
        elif name == "reconcile":
            reconcile_kb(deps_at(offset), kb_id)
        elif name == "age":
            offset += LATER
        else:
            steps[name]()
        found = status_of(stack, kb_id, offset)
        listed = pipeline.s3.list_objects_v2(Bucket=pipeline.bucket, Prefix=f"{kb_id}/").get("Contents", [])
        assert found.objects == len(listed)
    pipeline.run()
    reconcile_kb(deps_at(offset), kb_id, grace=0)
    pipeline.run()
    final = status_of(stack, kb_id, offset)
    assert (final.pending, final.not_ingested, final.deletes_pending) == (0, 0, 0)
    assert final.ready + final.failed == final.objects
    assert reconcile_kb(deps_at(offset), kb_id, grace=0).requeued == 0


def test_the_reconciler_function_reconciles_every_enabled_kb_on_its_schedule(stack, pipeline):
    create_disabled_knowledge_base(stack, "off")
    pipeline.put("kb/lost.md", "# Lost\n\nThe scheduled salamander.")
    pipeline.put("off/doc.md", "# Off\n\nText.")
    pipeline.put("nokb/doc.md", "# Nobody's\n\nText.")
    lose_events(pipeline)
    handler = load_function("reconciler").lambda_handler
    context = LambdaContext.for_function("ReconcilerFunction")
    answer = handler(load_event("reconciler-scheduled"), context, deps=deps_at(LATER))
    assert [report["kb_id"] for report in answer["reconciled"]] == ["kb"]
    assert answer["reconciled"][0]["missing"] == 1
    assert (answer["failed"], answer["skipped"]) == ([], ["nokb", "off"])
    pipeline.run()
    assert search_titles(stack, ["kb"], "salamander") == ["Lost"]
    assert stack.repositories.knowledge_bases.get("kb").last_sync is not None
    assert stack.repositories.knowledge_bases.get("off").last_sync is None


def test_a_run_short_of_time_leaves_the_least_recently_reconciled_first(stack, pipeline, monkeypatch):
    for kb_id in ("b-kb", "a-kb"):
        create_knowledge_base(stack.repositories, kb_id)
        pipeline.put(f"{kb_id}/doc.md", "# Doc\n\nText.")
    pipeline.put("kb/doc.md", "# Doc\n\nText.")
    stack.repositories.knowledge_bases.set_last_sync("kb", 1.0)
    stack.repositories.knowledge_bases.set_last_sync("a-kb", 5.0)
    remaining = iter([600.0, 600.0, 10.0])
    run = reconcile.reconcile_all(deps_at(), remaining_seconds=lambda: next(remaining))
    # Never reconciled first (b-kb), then the oldest (kb); a-kb is left for the next run.
    assert [report.kb_id for report in run.reconciled] == ["b-kb", "kb"]
    assert run.skipped == ["a-kb"]


def test_a_run_reports_a_kb_it_could_not_reconcile_and_the_function_fails(stack, pipeline, monkeypatch):
    pipeline.put("kb/doc.md", "# Doc\n\nText.")

    def unavailable(*args, **kwargs):
        raise KnowledgeUnavailable.of("document storage")

    monkeypatch.setattr(type(stack.repositories.documents), "states", unavailable)
    run = reconcile.reconcile_all(deps_at())
    assert (run.reconciled, run.failed) == ([], ["kb"])
    with pytest.raises(KnowledgeUnavailable, match="1 knowledge base"):
        load_function("reconciler").lambda_handler(
            load_event("reconciler-scheduled"), LambdaContext.for_function("ReconcilerFunction"), deps=deps_at()
        )


def test_an_index_written_by_another_version_is_rebuilt_after_a_reconcile(stack, pipeline):
    # An upgrade that changes the index format leaves every KB's current generation unreadable:
    # its searches fail until the next change rebuilds it — or the next reconcile asks for it.
    pipeline.put("kb/doc.md", "# Doc\n\nThe upgraded umbrellabird.")
    pipeline.run()
    repositories = stack.repositories
    current = repositories.knowledge_bases.get("kb").index_manifests[0]
    manifest = json.loads(repositories.bodies.read(current))
    older = json.dumps({**manifest, "schema_version": manifest["schema_version"] - 1}).encode()
    repositories.bodies.put(current, older, hashlib.sha256(older).hexdigest())
    reset_caches()
    before = search(stack, ["kb"], "umbrellabird")  # an older kept generation at best: partial
    assert before.failed_kb_ids + before.degraded_kb_ids == ["kb"]
    report = reconcile_kb(deps_at(LATER), "kb")
    assert report.index_requested and report.requeued == 0
    pipeline.run()
    reset_caches()
    after = search(stack, ["kb"], "umbrellabird")
    assert [hit.document.title for hit in after.documents] == ["Doc"]
    assert after.failed_kb_ids == after.degraded_kb_ids == []
    assert not reconcile_kb(deps_at(LATER), "kb").index_requested  # once rebuilt, nothing more


def test_the_local_schedule_invokes_the_reconciler_function_again_and_again(stack, pipeline):
    # `serve`'s stand-in for the EventBridge schedule (agent_knowledge_dev.reconcile_schedule): the
    # reconciler function itself runs, first after `first_run`, then every `interval`.
    from agent_knowledge_dev.reconcile_schedule import ReconcileSchedule

    pipeline.put("kb/doc.md", "# Doc\n\nThe scheduled newt.")  # the run goes over the bucket's KBs
    pipeline.run()
    assert stack.repositories.knowledge_bases.get("kb").last_sync is None
    schedule = ReconcileSchedule(interval=0.05, first_run=0.01).start()
    try:
        deadline = time.monotonic() + 60
        while schedule.runs < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        schedule.stop()
    assert schedule.runs >= 2
    assert stack.repositories.knowledge_bases.get("kb").last_sync is not None


def test_documents_failed_by_a_disabled_or_missing_kb_are_ingested_by_kb_sync_once_it_is_enabled(stack, pipeline):
    # Issue 35, finding 4: their failed records carry the objects' ETags, so nothing was ever
    # requeued although `kb sync` on a disabled KB says "enable it first".
    create_disabled_knowledge_base(stack, "off")
    pipeline.put("off/doc.md", "# Off\n\nThe dormant dormouse.")
    pipeline.put("off/empty.md", b"")  # fails for the KB's state first, then for its content
    pipeline.put("gone/doc.md", "# Gone\n\nThe missing marmot.")  # a KB created later
    pipeline.run()
    assert listing(stack, "off")["doc.md"] == ("failed", "knowledge base 'off' is disabled")
    gone = stack.repositories.documents.get("gone", document_id("doc.md"))  # no listing of a missing KB
    assert (gone.status, gone.error_reason) == ("failed", "knowledge base 'gone' does not exist")
    # Disabled still: the schedule skips the KB, and a reconcile of it requeues nothing.
    assert reconcile_kb(deps_at(LATER), "off").requeued == 0

    stack.repositories.knowledge_bases.set_enabled("off", True)
    create_knowledge_base(stack.repositories, "gone")
    # What `kb sync --wait` does (grace 0), then the pipeline runs.
    reports = [reconcile_kb(deps_at(), kb_id, grace=0) for kb_id in ("off", "gone")]
    assert [r.requeued for r in reports] == [2, 1] and [r.unblocked for r in reports] == [2, 1]
    pipeline.run()
    assert listing(stack, "off") == {"doc.md": ("ready", None), "empty.md": ("failed", "the object is empty")}
    assert listing(stack, "gone") == {"doc.md": ("ready", None)}
    assert search_titles(stack, ["off"], "dormouse") == ["Off"] and search_titles(stack, ["gone"], "marmot") == ["Gone"]
    # The content failure waits for a new version: nothing more to send.
    assert [reconcile_kb(deps_at(LATER), kb_id).requeued for kb_id in ("off", "gone")] == [0, 0]


def test_the_scheduled_reconciler_ingests_documents_failed_by_a_disabled_kb_once_it_is_enabled(stack, pipeline):
    create_disabled_knowledge_base(stack, "off")
    pipeline.put("off/doc.md", "# Off\n\nThe sleepy sloth.")
    pipeline.run()
    stack.repositories.knowledge_bases.set_enabled("off", True)
    handler = load_function("reconciler").lambda_handler
    answer = handler(
        load_event("reconciler-scheduled"), LambdaContext.for_function("ReconcilerFunction"), deps=deps_at()
    )
    assert [(report["kb_id"], report["requeued"]) for report in answer["reconciled"]] == [("off", 1)]
    assert answer["reconciled"][0]["unblocked"] == 1
    pipeline.run()
    assert search_titles(stack, ["off"], "sloth") == ["Off"]
