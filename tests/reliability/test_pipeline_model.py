"""Model-based fault test of the ingestion pipeline (issue 23, "Tests"; docs/DESIGN.md §10).

A hypothesis state machine puts, overwrites and deletes a few keys of two KBs in the sources bucket
(each S3 call emits its event into the source queue, as the bucket's notification does), and runs
the pipeline's functions batch by batch through the local event source mappings (SQS redelivery
after a failure, dead-lettering after `maxReceiveCount` receives) with faults injected into the
functions' own S3, DynamoDB and SQS calls (tests/support/faults.py): refused, applied with the
answer lost (raised, or retried by botocore), and the container dying right after a call. It may
also hand the source queue's events over again, out of order and duplicated, and redrive the
dead-letter queues.

Then, faults off: the queues are drained and the dead-letter queues redriven until empty (or, as
the example chooses, their messages are lost), one reconcile runs (`reconcile_kb` with no grace
period, as `kb sync` runs it; emulated where it does not exist yet) and the queues are drained
again. The documents (status, title, revision; the reason of a failed one), their bodies, the
search results and `kb status` (against the bucket and the dead-letter queues) must be those of the
same operations without faults: the model is the last content put under each key, prepared as the
ingest prepares it. Throughout, a message may fail only if its own KB's processing met a fault (or
its container died): one KB's faults never fail, retry or dead-letter another KB's messages; and
without faults nothing fails.

Bounded for the default run (12 examples of 10 steps, about a minute); `RUN_SLOW=1` runs 300.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

import hypothesis.strategies as st
from hypothesis import HealthCheck, event, note, settings
from hypothesis.internal.conjecture import engine as conjecture_engine
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from agent_knowledge.ingest import source_events
from agent_knowledge.ingest.content import prepare_document
from agent_knowledge.ingest.status import document_listing, kb_status
from agent_knowledge.repositories.sources import SourceObjects
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev import event_sources
from agent_knowledge_dev.admin import create_knowledge_base
from tests.reliability.slow import scaled
from tests.support.faults import ContainerDied, Invocation, PipelineFaults
from tests.support.pipeline import Pipeline, start_pipeline
from tests.support.retrieval import search_titles

INGEST, INDEXER = "IngestFunction", "IndexerFunction"
QUEUES = ("SourceQueue", "SourceDeadLetterQueue", "IndexQueue", "IndexDeadLetterQueue")
DEAD_LETTER_QUEUES = ("SourceDeadLetterQueue", "IndexDeadLetterQueue")
KEYS = ("a.md", "notes/b.md", "c.txt")
WORDS = ("capybara", "pangolin", "ocelot", "marmot")
EMPTY = ""  # an empty object: the ingest rejects it, the document is failed with this reason
EMPTY_REASON = "the object is empty"
# The probability that a call of an invocation meets a fault. An ingest makes about 6 calls per
# event, an index update about 25 per KB: from most invocations succeeding to most failing.
FAULT_RATES = (0.05, 0.15, 0.3)
DRAIN_TIMEOUT_SECONDS = 120.0
SHRINK_SECONDS = scaled(120, 300)
# Each redrive and drain can dead-letter again only what was received `maxReceiveCount` times
# before it (each message at most once): a few rounds empty the dead-letter queues.
MAX_REDRIVES = 4

_examples = itertools.count(1)


def content_of(word: str) -> bytes:
    if word == EMPTY:
        return b""
    return f"# {word.capitalize()} notes\n\nField notes about the {word} and where it lives.\n".encode()


@functools.cache
def prepared(key: str, word: str) -> Any:
    """What the ingest makes of the object (source_events.SourceIngest._put): no title metadata,
    the media type from the key, the bytes as they are."""
    media_type, _ = source_events.media_type_from(key, "binary/octet-stream")
    return prepare_document(None, content_of(word), media_type, key)


def message_kbs(function: str, body: str) -> set[str]:
    """The KBs one queue message is about."""
    try:
        message = json.loads(body)
        if function == INDEXER:
            return {str(message["kb_id"])}
        return {unquote_plus(r["s3"]["object"]["key"]).partition("/")[0] for r in message["Records"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        return set()


class Functions:
    """What the event source mappings invoke: the real handlers, each call with its faults."""

    def __init__(self, faults: PipelineFaults, load_handler: Callable[[Any], Any]) -> None:
        self.faults = faults
        self._load_handler = load_handler
        self.rate, self.seed = 0.0, 0
        self.violations: list[str] = []

    def load(self, route: Any) -> Callable[[dict[str, Any], Any], Any]:
        handler = self._load_handler(route)
        function = route.function

        def invoke(lambda_event: dict[str, Any], context: Any) -> Any:
            rate, seed = self.rate, self.seed
            self.rate, self.seed = 0.0, 0  # one invocation per step
            with self.faults.invocation(function, rate, seed) as invocation:
                try:
                    response = handler(lambda_event, context)
                except ContainerDied:
                    self._report(invocation, lambda_event, None)
                    raise RuntimeError(f"{function}: the container died") from None
                except Exception:
                    self._report(invocation, lambda_event, None)
                    raise
            self._report(invocation, lambda_event, response)
            return response

        return invoke

    def _report(self, invocation: Invocation, lambda_event: dict[str, Any], response: Any) -> None:
        records = lambda_event["Records"]
        if response is None:  # the invocation failed: Lambda retries the whole batch
            failed = {record["messageId"] for record in records}
        else:
            failed = {str(item["itemIdentifier"]) for item in response.get("batchItemFailures", [])}
        faults = ", ".join(str(call) for call in invocation.faults) or "none"
        note(
            f"{invocation.function}: {len(records)} message(s), {len(invocation.calls)} call(s), "
            f"faults: {faults}{'; died' if invocation.crashed else ''}; failed: {len(failed)}"
        )
        for call in invocation.faults:
            event(f"fault: {call.service} {call.fault}")
        if failed:
            event(f"{invocation.function}: messages failed")
        if invocation.crashed:
            return  # a dead container fails every message of its batch, by design
        faulted = invocation.faulted_kbs()
        for record in records:
            if record["messageId"] not in failed:
                continue
            kbs = message_kbs(invocation.function, record["body"])
            if kbs and not kbs & faulted:
                self.violations.append(
                    f"{invocation.function}: a message of {sorted(kbs)} failed, though only "
                    f"{sorted(faulted) or 'no KB'} met faults ({faults})"
                )


def _guard(method: Callable[..., Any]) -> Callable[..., Any]:
    """A failed step skips the final comparison (its error is the one to report)."""

    @functools.wraps(method)
    def guarded(self: PipelineModel, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.failed = True
            raise

    return guarded


# What a key is set to: an object with one of the words, an empty object, or deleted (None).
contents = st.sampled_from((*WORDS, EMPTY, None))
# One batch of a function (Lambda's poller) with its fault rate and seed.
batches = st.tuples(st.sampled_from((INGEST, INDEXER)), st.sampled_from(FAULT_RATES), st.integers(0, 2**32 - 1))


class PipelineModel(RuleBasedStateMachine):
    def __init__(self, stack: Any, pipeline: Pipeline, functions: Functions) -> None:
        super().__init__()
        self.stack, self.pipeline, self.functions = stack, pipeline, functions
        example = next(_examples)
        # Ids that no other text of a request contains (no hex id or hash has a "k", "o" or "y"):
        # a faulted call is about the KBs its parameters name (`PipelineFaults`).
        self.kbs = (f"kb-{example}-owl", f"kb-{example}-yak")
        for kb_id in self.kbs:
            create_knowledge_base(stack.repositories, kb_id)
        functions.faults.kb_ids = self.kbs
        functions.violations.clear()
        for queue in QUEUES:  # whatever an earlier failing example left
            pipeline.take_messages(queue)
        self.objects: dict[tuple[str, str], str | None] = {}  # the model: last content put, None: deleted
        self.failed = False
        self.redrive_at_end = True
        self.dead_letters: dict[str, list[dict[str, Any]]] = {queue: [] for queue in DEAD_LETTER_QUEUES}

    # -- operations on the sources bucket, each followed by a few batches (or none: events pile up)

    @initialize(
        changes=st.lists(st.tuples(st.integers(0, 1), st.sampled_from(KEYS), contents), min_size=1, max_size=4),
        redrive_at_end=st.booleans(),
    )
    @_guard
    def start(self, changes: list[tuple[int, str, str | None]], redrive_at_end: bool) -> None:
        """A few objects to begin with; and whether the dead-letter queues are redriven at the end
        (or their messages lost, e.g. expired: then the reconcile alone must repair)."""
        self.redrive_at_end = redrive_at_end
        for kb, key, word in changes:
            self._change(kb, key, word)

    @rule(kb=st.integers(0, 1), key=st.sampled_from(KEYS), word=contents, then=st.lists(batches, max_size=3))
    @_guard
    def change(self, kb: int, key: str, word: str | None, then: list[tuple[str, float, int]]) -> None:
        """Put (a new object, an overwrite) or delete one key, then run a few batches."""
        self._change(kb, key, word)
        self._deliver(then)

    # -- the pipeline, with faults ----------------------------------------------------------------

    @rule(steps=st.lists(batches, min_size=1, max_size=4))
    @_guard
    def deliver(self, steps: list[tuple[str, float, int]]) -> None:
        self._deliver(steps)

    @rule(data=st.data(), redrive=st.booleans())
    @_guard
    def redeliver(self, data: st.DataObject, redrive: bool) -> None:
        """SQS delivers at least once, in no particular order: the waiting source events again,
        reordered, some twice; and an operator may redrive the dead-letter queues."""
        if redrive:
            self._redrive()
        messages = self.pipeline.take_messages("SourceQueue")
        if not messages:
            return
        order = data.draw(st.permutations(range(len(messages))), label="order")
        twice = data.draw(st.sets(st.sampled_from(range(len(messages)))), label="twice")
        for index in order:
            for _ in range(2 if index in twice else 1):
                self.pipeline.send("SourceQueue", messages[index]["Body"])

    # -- after the last step: settle without faults, then compare with the model -----------------

    def teardown(self) -> None:
        if not self.failed:
            self._settle()
            self._compare()

    def _settle(self) -> None:
        """Faults off. The dead-letter queues are redriven until they stay empty (SQS moves a message
        that was received `maxReceiveCount` times at its next receive, so a drain can dead-letter
        messages of the faulty phase), or, if the example says so, their messages are lost; either
        way one reconcile follows. After it nothing may fail, let alone be dead-lettered."""
        self.functions.rate = 0.0
        for queue in DEAD_LETTER_QUEUES:
            if self._queued(queue):
                event(f"{queue} not empty before the settling")
        self.pipeline.run(DRAIN_TIMEOUT_SECONDS)
        for _ in range(MAX_REDRIVES):
            if not any(self._queued(queue) for queue in DEAD_LETTER_QUEUES):
                break
            if not self.redrive_at_end:
                lost = {queue: len(self.pipeline.take_messages(queue)) for queue in DEAD_LETTER_QUEUES}
                note(f"dead-lettered messages lost: {lost}")
                break
            self._redrive()
            self.pipeline.run(DRAIN_TIMEOUT_SECONDS)
        self._check_isolation()
        self._reconcile()
        self.pipeline.run(DRAIN_TIMEOUT_SECONDS)
        self._check_isolation()
        self.dead_letters = {queue: self.pipeline.take_messages(queue) for queue in DEAD_LETTER_QUEUES}
        dead = {queue: len(messages) for queue, messages in self.dead_letters.items()}
        assert not any(dead.values()), f"dead-lettered without faults: {dead}"

    def _reconcile(self) -> None:
        """One reconcile of each KB, as `kb sync` runs it (`agent_knowledge.ingest.reconcile`); in a
        version without it, every object key and every document key of the KB is sent to the source
        queue with its record's sequencer (`reconcile_notification`), as a full reconcile would."""
        try:
            reconcile = importlib.import_module("agent_knowledge.ingest.reconcile")
        except ImportError:
            reconcile = None
        if reconcile is not None:
            for kb_id in self.kbs:
                report = reconcile.reconcile_kb(self._dependencies(), kb_id, grace=0)
                note(f"reconcile: {report.model_dump(exclude={'seconds', 'last_sync'})}")
            return
        notification = getattr(source_events, "reconcile_notification", None)
        if notification is None:
            note("no reconcile in this version of the pipeline")
            return
        bucket, repositories = self.pipeline.bucket, self.stack.repositories
        for kb_id in self.kbs:
            sequencers: dict[str, str] = {}
            listing = self.pipeline.s3.list_objects_v2(Bucket=bucket, Prefix=f"{kb_id}/")
            for item in listing.get("Contents", []):
                sequencers[item["Key"]] = "0"
            for record in repositories.documents.list(kb_id, with_chunks=False):
                sequencers[f"{kb_id}/{record.source_key}"] = record.source_sequencer or "0"
            if sequencers:
                self.pipeline.send("SourceQueue", notification(bucket, sorted(sequencers.items())))

    def _dependencies(self) -> Any:
        """The pipeline's dependencies with the source queue (what the reconciler sends to)."""
        from agent_knowledge.repositories.queues import SourceQueue
        from agent_knowledge.runtime.container import default_pipeline_dependencies

        deps = default_pipeline_dependencies()
        if deps.source_queue is None:
            queue = SourceQueue(lambda: self.pipeline.sqs, self.pipeline.queue_url("SourceQueue"))
            deps = dataclasses.replace(deps, source_queue=queue)
        return deps

    def _views(self, function: Callable[..., Any], kb_id: str) -> Any:
        """`kb status` / `doc list` as the CLI computes them: against the bucket listing and the
        dead-letter queues, no grace period (an object without its document is `not_ingested`),
        where this version takes them."""
        parameters = inspect.signature(function).parameters
        extra: dict[str, Any] = {}
        if "sources" in parameters:
            extra["sources"] = SourceObjects(lambda: self.pipeline.s3, self.pipeline.bucket)
        if "grace" in parameters:
            extra["grace"] = 0.0
        if "sizing" in parameters:
            extra["sizing"] = SizingSettings()
        if "dead_letters" in parameters:
            from agent_knowledge.ingest.status import dead_letters_of

            source, index = ([m["Body"] for m in self.dead_letters[q]] for q in DEAD_LETTER_QUEUES)
            extra["dead_letters"] = dead_letters_of(kb_id, source, index)
        return function(self.stack.repositories, kb_id, **extra)

    def _compare(self) -> None:
        repositories = self.stack.repositories
        for kb_id in self.kbs:
            expected, actual = self._expected_listing(kb_id), {}
            for document in self._views(document_listing, kb_id):
                if document.status == "failed":
                    # A failed document keeps the title and revision of whatever was stored before
                    # it, which depends on the order its events were applied in: only its reason.
                    actual[document.source_key] = (document.status, document.reason)
                else:
                    actual[document.source_key] = (document.status, document.title, document.revision)
            assert actual == expected, f"documents of {kb_id}"
            for record in repositories.documents.list(kb_id):
                if record.status != "ready":
                    continue
                word = self.objects.get((kb_id, record.source_key))
                assert word, f"{kb_id}/{record.source_key} is ready, but the model has no content for it"
                assert repositories.bodies.exists(record.body_key, record.body_etag or None), (
                    f"the body of {kb_id}/{record.source_key} is missing"
                )
                body = repositories.bodies.read(record.body_key)
                assert body == prepared(record.source_key, word).body_bytes, f"the body of {kb_id}/{record.source_key}"
            for word in WORDS:
                # Documents with the same body are one hint (docs/retrieval.md): one per distinct body.
                holding = [prepared(key, word) for key in KEYS if self.objects.get((kb_id, key)) == word]
                bodies = {document.body_bytes for document in holding}
                found = search_titles(self.stack, [kb_id], word, max_docs=5)
                assert len(found) == len(bodies) and set(found) <= {d.title for d in holding}, (
                    f"search {word!r} in {kb_id}"
                )
            self._compare_status(kb_id, expected)

    def _expected_listing(self, kb_id: str) -> dict[str, tuple[str | None, ...]]:
        expected: dict[str, tuple[str | None, ...]] = {}
        for key in KEYS:
            word = self.objects.get((kb_id, key))
            if word is None:
                continue
            if word == EMPTY:
                expected[key] = ("failed", EMPTY_REASON)
            else:
                document = prepared(key, word)
                expected[key] = ("ready", document.title, document.revision)
        return expected

    def _compare_status(self, kb_id: str, expected: dict[str, tuple[str | None, ...]]) -> None:
        """Everything but the generation number (how many generations it took depends on the
        faults) and the time of the last reconcile."""
        status = self._views(kb_status, kb_id).model_dump()
        ready = sum(1 for value in expected.values() if value[0] == "ready")
        wanted: dict[str, Any] = {
            "kb_id": kb_id,
            "ready": ready,
            "pending": 0,
            "failed": len(expected) - ready,
            "oldest_pending_age_seconds": None,
        }
        # The fields issue 23 adds, where this version has them.
        optional = {"objects": len(expected), "not_ingested": 0, "deletes_pending": 0, "dead_lettered": 0}
        wanted.update({name: value for name, value in optional.items() if name in status})
        assert {name: status.get(name) for name in wanted} == wanted, f"kb status of {kb_id}: {status}"

    # -- helpers ----------------------------------------------------------------------------------

    def _change(self, kb: int, key: str, word: str | None) -> None:
        if word is None:
            self.pipeline.delete(f"{self.kbs[kb]}/{key}")
        else:
            self.pipeline.put(f"{self.kbs[kb]}/{key}", content_of(word))
        self.objects[(self.kbs[kb], key)] = word

    def _deliver(self, steps: list[tuple[str, float, int]]) -> None:
        """One batch of a function per step, each of its calls faulted at the step's rate."""
        runner = self.pipeline.runner
        for function, rate, seed in steps:
            self.functions.rate, self.functions.seed = rate, seed
            runner.step(runner.mapping(function))
            self.functions.rate, self.functions.seed = 0.0, 0
        self._check_isolation()

    def _redrive(self) -> None:
        sqs = self.pipeline.sqs
        for message in self.pipeline.take_messages("SourceDeadLetterQueue"):
            self.pipeline.send("SourceQueue", message["Body"])
        url, target = self.pipeline.queue_url("IndexDeadLetterQueue"), self.pipeline.queue_url("IndexQueue")
        while True:
            received = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
            ).get("Messages", [])
            if not received:
                return
            for message in received:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                sqs.send_message(
                    QueueUrl=target,
                    MessageBody=message["Body"],
                    MessageGroupId=message["Attributes"]["MessageGroupId"],
                    MessageDeduplicationId=uuid.uuid4().hex,  # a redrive is a new send
                )

    def _queued(self, queue: str) -> int:
        attributes = self.pipeline.sqs.get_queue_attributes(
            QueueUrl=self.pipeline.queue_url(queue),
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def _check_isolation(self) -> None:
        violations = list(self.functions.violations)
        self.functions.violations.clear()
        assert not violations, "\n".join(violations)


def _one_at_a_time(monkeypatch: Any) -> None:
    """The indexer's thread pools run one task at a time, so its calls are made (and counted, and
    faulted) in the same order on every run of an example."""
    for module, name in [
        ("agent_knowledge.indexer.publish", "CLEARERS"),
        ("agent_knowledge.indexer.chunk_loader", "BODY_READERS"),
        ("agent_knowledge.ingest.indexing", "CLEARERS"),  # c8558c9
        ("agent_knowledge.ingest.index_chunks", "BODY_READERS"),  # c8558c9
    ]:
        try:
            found = importlib.import_module(module)
        except ImportError:
            continue
        monkeypatch.setattr(found, name, 1)


def test_the_pipeline_converges_to_the_fault_free_outcome(stack, monkeypatch):
    faults = PipelineFaults()
    functions = Functions(faults, event_sources.load_handler)
    monkeypatch.setattr(event_sources, "load_handler", functions.load)
    _one_at_a_time(monkeypatch)
    # A failing example is shrunk for two minutes at most (hypothesis' own limit is five), each
    # attempt being a run of the pipeline.
    monkeypatch.setattr(conjecture_engine, "MAX_SHRINKING_SECONDS", SHRINK_SECONDS, raising=False)
    pipeline = start_pipeline(stack.environment)
    with faults.installed():
        run_state_machine_as_test(
            lambda: PipelineModel(stack, pipeline, functions),
            settings=settings(
                max_examples=scaled(12, 300),
                stateful_step_count=10,
                deadline=None,
                print_blob=True,
                suppress_health_check=list(HealthCheck),
            ),
        )
