"""Whatever order S3 events arrive in, and however often, a document ends as the last event says."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_knowledge.ingest.ingestor import SourceVersion
from agent_knowledge.ingest.source_events import SourceEvent, SourceIngest
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.repositories.sources import SourceObject
from agent_knowledge_dev.admin import create_knowledge_base

_keys = itertools.count()


class VersionedObjects:
    """The sources bucket as far as the ingest reads it: object versions by id."""

    bucket = "sources"

    def __init__(self) -> None:
        self.versions: dict[str, bytes] = {}

    def get(self, key: str, version_id: str | None, max_bytes: int) -> SourceObject | None:
        body = self.versions.get(version_id or "")
        return SourceObject(body, "text/markdown", version_id) if body is not None else None

    def current_version(self, key: str) -> str | None:
        raise AssertionError("not used: no permanent version deletes here")


def _record(sequencer: str) -> DocumentRecord:
    return DocumentRecord(
        kb_id="kb", doc_id="d", source_key="k", title="t", status="ready", revision="r", title_sha256="",
        body_sha256="", body_bytes=0, body_key="", source_sequencer=sequencer,
    )  # fmt: skip


@given(st.integers(0, 2**72), st.integers(0, 2**72), st.integers(0, 8), st.integers(0, 8))
def test_sequencers_compare_as_numbers_whatever_their_length(a, b, pad_a, pad_b):
    first, second = "0" * pad_a + f"{a:X}", "0" * pad_b + f"{b:X}"
    assert SourceVersion(first).is_older_than(_record(second)) == (a < b)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["put", "delete"]), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
    st.integers(0, 2),
)
def test_any_delivery_order_with_duplicates_ends_at_the_last_event(stack, kinds, random, duplicates):
    if stack.repositories.knowledge_bases.get("kb") is None:
        create_knowledge_base(stack.repositories, "kb")
    source_key = f"doc{next(_keys)}.md"
    objects = VersionedObjects()
    events = []
    for number, kind in enumerate(kinds):
        version = f"v{number}"
        if kind == "put":
            objects.versions[version] = f"# Doc\n\nVersion {number} text.".encode()
        events.append(SourceEvent("kb", source_key, kind, f"kb/{source_key}", version, f"{number + 1:020X}", 32))
    delivered = events + [random.choice(events) for _ in range(duplicates)]
    random.shuffle(delivered)
    ingest = SourceIngest(stack.repositories, objects)  # type: ignore[arg-type]
    for event in delivered:
        ingest.apply(event)
    final = stack.repositories.documents.get("kb", document_id(source_key))
    last = events[-1]
    assert final is not None and final.source_sequencer == last.sequencer
    if last.kind == "delete":
        assert final.status == "deleted"
    else:
        assert final.status == "ready" and final.source_version_id == last.version_id
        body = stack.repositories.bodies.read(final.body_key)
        assert body == objects.versions[last.version_id]
