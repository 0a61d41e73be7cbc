"""Figure 6 — bulk ingest throughput and index rebuild time per generation.

1. Bulk ingest into the local stack, exactly as a user runs it: the CLI helper's benchmark
   (`bench/ingest_local.py`) writes its corpus, starts `agent-knowledge serve`, and times
   `agent-knowledge doc put KB --dir DIR --wait` (upload, then the stack's pipeline until every
   document is searchable) → documents/s.
2. Full rebuild per generation (`rebuild_kb_index`: list ready documents, read and verify the
   bodies, tokenize, build the tantivy index, upload its files and manifest, publish) — the
   first generation from every body, and later generations with nothing changed, which reuse
   the previous generation's chunks (bench/segments.py measures incremental updates):
   - against the in-process moto stack at 1k documents;
   - with storage in memory at 1k and 10k documents — our own work per generation, without
     moto, whose DynamoDB serializer alone costs ~40 ms per listed document here (a 10k
     listing through moto would take minutes and measure moto, not us).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.fakes import MemoryBodies, MemoryDocuments, MemoryKnowledgeBases, MemoryRepositories

from agent_knowledge.ingest.content import prepare_document
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.bodies import body_key
from agent_knowledge.repositories.documents import document_id
from bench.corpus import documents
from bench.environment import local_stack, quiet
from bench.workspace import ingest, seed_demo_workspace

DOCUMENT_CHARS = 3500  # about 5 chunks per document


def in_memory_repositories(kb_id: str, count: int) -> MemoryRepositories:
    """Repositories holding `count` ready documents, prepared exactly as ingest prepares them."""
    bodies, records = MemoryBodies(), []
    for document in documents("en", count, DOCUMENT_CHARS, seed=61):
        prepared = prepare_document(document.title, document.body, "text/markdown")
        doc_id = document_id(document.source_key)
        key = body_key(kb_id, doc_id, prepared.revision)
        bodies.objects[key] = prepared.body_bytes
        records.append(
            DocumentRecord(
                kb_id=kb_id, doc_id=doc_id, source_key=document.source_key, title=prepared.title, status="ready",
                revision=prepared.revision, title_sha256=prepared.title_sha256, body_sha256=prepared.body_sha256,
                body_bytes=len(prepared.body_bytes), body_key=key, chunk_count=len(prepared.chunks),
                chunk_digests=prepared.chunk_digests, chunk_offsets=prepared.chunk_offsets,
                created_at=0, updated_at=0, body_etag=hashlib.md5(prepared.body_bytes).hexdigest(),  # noqa: S324
            )
        )  # fmt: skip
    return MemoryRepositories(bodies, MemoryDocuments(records), MemoryKnowledgeBases(kb_id))


def rebuild_in_memory(count: int, repeats: int) -> dict[str, Any]:
    from agent_knowledge.indexer.rebuild import rebuild_kb_index
    from agent_knowledge_dev.runtime import process_vector_space

    repositories = in_memory_repositories("bench", count)
    times = []
    with quiet():
        for _ in range(repeats):
            started = time.perf_counter()
            rebuild_kb_index(repositories, "bench", vector_space=process_vector_space())
            times.append(time.perf_counter() - started)
    chunks = sum(record.chunk_count for record in repositories.documents.records.values())
    return {"documents": count, "chunks": chunks, **_generations(times), "chunks_per_second": round(chunks / times[0])}


def _generations(times: list[float]) -> dict[str, Any]:
    """The first generation builds from every body; later ones (nothing changed) reuse the
    previous generation's chunks, so they are reported apart."""
    later = times[1:]
    return {
        "repeats": len(times),
        "first_seconds": round(times[0], 3),
        "next_p50_seconds": round(statistics.median(later), 3) if later else None,
    }


def rebuild_against_moto(count: int, repeats: int) -> dict[str, Any]:
    from agent_knowledge.indexer.publish import publish_rebuild
    from agent_knowledge_dev.runtime import process_vector_space

    with local_stack() as repositories, quiet():
        seed_demo_workspace(repositories)
        timing = ingest(repositories, "handbook", documents("en", count, DOCUMENT_CHARS, seed=62))
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            publish_rebuild(repositories, "handbook", vector_space=process_vector_space())
            times.append(time.perf_counter() - started)
    return {
        "documents": count,
        **_generations([timing.rebuild_seconds, *times]),
        "in_process_ingest_documents_per_second": round(count / timing.ingest_seconds, 1),
    }


def bulk_ingest_local(document_count: int, megabytes: float, workers: int = 4) -> dict[str, Any]:
    """The CLI helper's bulk ingest against `agent-knowledge serve` (bench/ingest_local.py)."""
    from bench.ingest_local import Server, write_corpus

    with tempfile.TemporaryDirectory(prefix="ak-bench-ingest-") as scratch:
        work = Path(scratch)
        total = write_corpus(work / "corpus", document_count, megabytes, seed=2026)
        server = Server(work / "state")
        server.start()
        try:
            server.create_kb("bench")
            seconds, put = server.put_folder("bench", work / "corpus", workers)
            if put.returncode:
                # On an overloaded machine the local stack can time out (the CLI then reports
                # "storage temporarily unavailable"); that is a result to show, not a crash.
                # `--wait` exits 1 when a document failed or the wait timed out; its JSON says which.
                said = put.stderr.strip() or put.stdout.strip()
                return {"documents": document_count, "workers": workers, "error": said[-300:]}
            summary = json.loads(put.stdout)
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):  # busy past its grace: stop() killed it
                server.stop()
    return {
        "documents": document_count,
        "bytes": total,
        "workers": workers,
        "wall_seconds": round(seconds, 2),
        "documents_per_second": round(document_count / seconds, 1),
        "created": summary["created"],
        "failed": summary["failed"],
    }


PROFILES = {
    "full": {"bulk": (1000, 8.0), "moto": (1000, 2), "memory": ((1000, 3), (10_000, 2))},
    "quick": {"bulk": (60, 0.4), "moto": (60, 2), "memory": ((60, 2), (300, 1))},
    "smoke": {"bulk": (6, 0.05), "moto": (4, 1), "memory": ((6, 1),)},
}


def run(profile: str = "full") -> dict[str, Any]:
    settings = PROFILES[profile]
    try:
        bulk = bulk_ingest_local(*settings["bulk"])
    except ImportError as exc:  # bench/ingest_local.py belongs to the local CLI's benchmark
        bulk = {"unavailable": f"bench.ingest_local cannot be imported: {exc}"}
    return {
        "bulk_local": bulk,
        "rebuild_moto": [rebuild_against_moto(*settings["moto"])],
        "rebuild_in_memory": [rebuild_in_memory(count, repeats) for count, repeats in settings["memory"]],
    }
