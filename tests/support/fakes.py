"""In-memory stand-ins for the parts of the layer's repositories that retrieval and the index
rebuild use, and a clock moved by hand. For unit tests and for benchmarks that measure our own
work without moto's per-call cost."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import BinaryIO

from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bodies import BodyMissing, ListedObject, Sink


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class MemoryBodies:
    """Stands in for the S3 body store (`BodyStore`): objects in a dict; counts whole-object reads."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.reads = 0

    def read(self, key: str) -> bytes:
        self.reads += 1
        try:
            return self.objects[key]
        except KeyError:
            raise BodyMissing(key) from None

    def put(self, key: str, body: bytes, sha256_hex: str) -> None:
        self.objects[key] = body

    def put_file(self, key: str, source: BinaryIO, sha256_hex: str, content_type: str) -> int:
        self.objects[key] = source.read()
        return len(self.objects[key])

    def download(self, key: str, target: Sink) -> int:
        data = self.read(key)
        target.write(data)
        return len(data)

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]:
        """Bytes [start, end), not counted as a whole-object read."""
        try:
            return self.objects[key][start:end], {}
        except KeyError:
            raise BodyMissing(key) from None

    def list(self, prefix: str) -> Iterator[ListedObject]:
        now = datetime.now(UTC)
        listed = [ListedObject(key, len(data), now) for key, data in self.objects.items() if key.startswith(prefix)]
        return iter(listed)

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)


class MemoryDocuments:
    """Stands in for the documents table (`DocumentRepository`): the current records, no AWS calls."""

    def __init__(self, records: Iterable[DocumentRecord] = ()) -> None:
        self.records = {(record.kb_id, record.doc_id): record for record in records}

    def get_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
        return {key: self.records[key] for key in keys if key in self.records}

    def get_whole(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
        return self.get_many(keys)

    def list(self, kb_id: str) -> Iterator[DocumentRecord]:
        return (record for record in self.records.values() if record.kb_id == kb_id)


class MemoryKnowledgeBases:
    """Stands in for the KB records of the config table: index generations published conditionally."""

    def __init__(self, *kb_ids: str) -> None:
        self.records = {kb_id: KnowledgeBaseRecord(kb_id=kb_id, generation=0) for kb_id in kb_ids}

    def get(self, kb_id: str) -> KnowledgeBaseRecord | None:
        return self.records.get(kb_id)

    def publish_index(self, kb_id: str, expected: int, manifests: list[str]) -> bool:
        if self.records[kb_id].generation != expected:
            return False
        update = {"generation": expected + 1, "index_manifests": manifests}
        self.records[kb_id] = self.records[kb_id].model_copy(update=update)
        return True


@dataclass
class MemoryRepositories:
    """The repositories `retrieve()`, the index cache and the index writers use, in memory."""

    bodies: MemoryBodies = field(default_factory=MemoryBodies)
    documents: MemoryDocuments = field(default_factory=MemoryDocuments)
    knowledge_bases: MemoryKnowledgeBases = field(default_factory=MemoryKnowledgeBases)


# The variables every container's settings need (`settings.load_settings`); any value will do here.
REQUIRED_ENVIRONMENT = {
    "SESSIONS_TABLE": "sessions",
    "CONFIG_TABLE": "config",
    "DOCUMENTS_TABLE": "documents",
    "RUNS_TABLE": "runs",
    "BODIES_BUCKET": "bodies",
    "SERVER_TOKEN_SECRET_ID": "server-token",
}
