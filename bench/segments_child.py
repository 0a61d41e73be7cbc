"""One cold load in a fresh process, for `bench.segments`: `python -m bench.segments_child MODE ...`.

    ours OBJECTS_ROOT KB_JSON STORE   IndexCache loads the KB's newest generation into STORE
                                      (streaming the files it lacks), opens it, one query
    tantivy DIRECTORY                 tantivy opens the same files, one query
    moto-search URL BUCKET KB_JSON STORE RECORDS_JSON QUERIES_JSON
                                      the same from a moto server through the product's BodyStore
                                      (S3 checksums validated by botocore): a first answer, the
                                      product's `retrieve` (3 documents, their chunk texts read),
                                      for the first of QUERIES_JSON, validated against the
                                      records in RECORDS_JSON; then the others warm, each with
                                      its chunk text blocks evicted and kept
    moto-indexer URL BUCKET KB_JSON STORE RECORD_JSON
                                      a cold indexer's first update (`update_kb_index`) of the
                                      document RECORD_JSON describes (its body is in the bucket)

Both import the same modules first; the figures are wall and CPU time of the load and the peak
RSS (VmHWM) increase over the RSS before it. Prints `BENCH_RESULT {json}`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.segments import Documents, OneKnowledgeBase

QUERY = "configuration template deploy"


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def raw_search(searcher: Any, query: str, hits: int = 30) -> list[str]:
    """tantivy alone: the query's index terms OR-ed, `hits` chunk hits, their stored documents
    read and grouped into at most 3 documents (what `retrieve` does minus normalization,
    validation and matched terms)."""
    import tantivy

    from agent_knowledge.index_format import schema as fields
    from agent_knowledge.index_format.analyzer import query_tokens
    from agent_knowledge.index_format.kb_index import AnalyzedQuery

    analyzed = AnalyzedQuery.of(query_tokens(query))
    terms = [(fields.TEXT, w) for w in analyzed.words] + [(fields.UNIGRAMS, u) for u in analyzed.unigrams]
    if not terms:
        return []
    schema = fields.schema()
    clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, f, t)) for f, t in terms]
    found = searcher.search(tantivy.Query.boolean_query(clauses), hits, count=False).hits
    documents = [searcher.doc(address).get_first(fields.DOC_ID) for score, address in found if score > 0]
    return list(dict.fromkeys(documents))[:3]


def record_for(index: Any, doc_id: str) -> Any:
    """A current record of a document as the index holds it (validation then accepts its hits)."""
    from agent_knowledge.records import DocumentRecord

    chunks = index.stored_chunks(doc_id, with_text=False)  # texts would fill the block cache searches use
    return DocumentRecord(
        kb_id="bench", doc_id=doc_id, source_key=doc_id, title=doc_id, status="ready",
        revision=chunks[0].revision if chunks else "r1", title_sha256="", body_sha256="", body_bytes=0, body_key="",
        chunk_count=len(chunks), chunk_digests=[chunk.digest for chunk in chunks],
    )  # fmt: skip


class _CountingStore:
    """The product's BodyStore, with the bytes it moved counted."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.downloaded_bytes = self.uploaded_bytes = self.gets = 0
        self.whole: list[int] = []  # bytes of each whole object read
        self.ranges: list[int] = []  # bytes of each ranged GET

    def download(self, key: str, target: Any) -> int:
        written = self._store.download(key, target)
        self.downloaded_bytes += written
        self.gets += 1
        self.whole.append(written)
        return written

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]:
        data, metadata = self._store.read_range(key, start, end, etag)
        self.downloaded_bytes += len(data)
        self.gets += 1
        self.ranges.append(len(data))
        return data, metadata

    def read(self, key: str) -> bytes:
        data = bytes(self._store.read(key))
        self.downloaded_bytes += len(data)
        self.gets += 1
        self.whole.append(len(data))
        return data

    def put_file(self, key: str, source: Any, sha256_hex: str, content_type: str) -> int:
        sent = int(self._store.put_file(key, source, sha256_hex, content_type))
        self.uploaded_bytes += sent
        return sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _moto_store(url: str, bucket: str) -> _CountingStore:
    """Created before the timed part (a container's S3 client outlives its first request)."""
    import boto3

    from agent_knowledge.repositories.bodies import BodyStore

    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
    return _CountingStore(BodyStore(lambda: client, bucket))


def main() -> None:
    import tantivy  # noqa: F401

    from agent_knowledge.identity.scope import Scope
    from agent_knowledge.index_format.local_files import LocalFiles
    from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord, KnowledgeConfig, SourceConfig
    from agent_knowledge.retrieval.query import retrieve
    from agent_knowledge.retrieval.reader_cache import IndexCache
    from bench.index_store import DirectoryObjects

    mode = sys.argv[1]
    store = _moto_store(sys.argv[2], sys.argv[3]) if mode.startswith("moto-") else None
    records = Documents()  # the first answer's records (read before the timed part, like its client)
    if mode == "moto-search":
        for line in Path(sys.argv[6]).read_text(encoding="utf-8").splitlines():
            record = DocumentRecord.model_validate_json(line)
            records.records[(record.kb_id, record.doc_id)] = record
    config = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id="bench")])
    queries: list[str] = []
    if mode == "moto-search":  # a JSON file of queries, or one query
        given = Path(sys.argv[7])
        queries = json.loads(given.read_text(encoding="utf-8")) if given.is_file() else [sys.argv[7]]
    before = _status_kib("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    result: dict[str, Any] = {}
    if mode == "moto-search":
        kb = KnowledgeBaseRecord.model_validate_json(Path(sys.argv[4]).read_text(encoding="utf-8"))
        cache = IndexCache(LocalFiles(sys.argv[5]))
        index = cache.get(store, kb)
        assert index is not None
        found = retrieve(
            store, records, Scope(config, {kb.kb_id: kb}), queries[0], 3, cache=cache, embedder=None, reranker=None
        )
        assert found.documents and all(document.chunk_text for document in found.documents)
        result["answered"] = [document.document.doc_id for document in found.documents]
        result["downloaded_bytes"] = store.downloaded_bytes
        result["whole_object_bytes"] = list(store.whole)
        result["ranged_get_bytes"] = list(store.ranges)
        result["gets"] = store.gets
        result["chunks"] = index.chunk_count
    elif mode == "moto-indexer":
        from agent_knowledge.indexer.update import update_kb_index
        from agent_knowledge_dev.runtime import process_vector_space

        kb = KnowledgeBaseRecord.model_validate_json(Path(sys.argv[4]).read_text(encoding="utf-8"))
        record = DocumentRecord.model_validate_json(Path(sys.argv[6]).read_text(encoding="utf-8"))
        documents = Documents()
        documents.records[(record.kb_id, record.doc_id)] = record
        repositories = SimpleNamespace(knowledge_bases=OneKnowledgeBase(kb), documents=documents, bodies=store)
        generation = update_kb_index(
            repositories, kb.kb_id, [record.doc_id], files=LocalFiles(sys.argv[5]), vector_space=process_vector_space()
        )  # type: ignore[arg-type]
        assert generation > kb.generation
        result["downloaded_bytes"] = store.downloaded_bytes
        result["uploaded_bytes"] = store.uploaded_bytes
    elif mode == "ours":
        objects = DirectoryObjects(sys.argv[2])
        kb = KnowledgeBaseRecord.model_validate_json(Path(sys.argv[3]).read_text(encoding="utf-8"))
        cache = IndexCache(LocalFiles(sys.argv[4]))
        index = cache.get(objects, kb)
        assert index is not None
        raw_search(index._searcher, QUERY)
        result["directory"] = cache.opened_directory(kb.kb_id)
        result["downloaded_bytes"] = objects.downloaded_bytes
        result["chunks"] = index.chunk_count
    else:
        import tantivy as engine

        searcher = engine.Index.open(sys.argv[2]).searcher()
        raw_search(searcher, QUERY)
        result["chunks"] = int(searcher.num_docs)
    result["wall_ms"] = round((time.perf_counter() - wall) * 1000, 1)
    result["cpu_ms"] = round((time.process_time() - cpu) * 1000, 1)
    result["rss_before_mib"] = round(before / 1024, 1)
    result["rss_increase_mib"] = round((_status_kib("VmHWM") - before) / 1024, 1)
    result["peak_rss_mib"] = round(_status_kib("VmHWM") / 1024, 1)
    if mode == "moto-search" and len(queries) > 1:
        scope = Scope(config, {kb.kb_id: kb})
        result["warm_on_moto"] = _warm(store, records, scope, cache, queries[1:])
        # The same with the records read as a search reads them, from DynamoDB on the same server:
        # what a hint's ranged read adds to a search once it overlaps that round trip.
        table = _moto_documents(sys.argv[2], records)
        result["warm_on_moto_records_from_dynamodb"] = _warm(store, table, scope, cache, queries[1:])
    print("BENCH_RESULT " + json.dumps(result), flush=True)


def _moto_documents(url: str, records: Any) -> Any:
    """A documents table on the moto server holding `records`, read through the product's
    `DocumentRepository` (the key schema of template.yaml's DocumentsTable)."""
    import boto3

    from agent_knowledge.repositories.documents import DocumentRepository
    from agent_knowledge.repositories.dynamo import to_item

    client = boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1")
    name = "bench-documents"
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "kb_id", "KeyType": "HASH"}, {"AttributeName": "doc_id", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "kb_id", "AttributeType": "S"}, {"AttributeName": "doc_id", "AttributeType": "S"}
        ],
    )  # fmt: skip
    for record in records.records.values():
        client.put_item(TableName=name, Item=to_item(record.model_dump()))
    return DocumentRepository(client, name)


def _warm(store: Any, records: Any, scope: Any, cache: Any, queries: list[str]) -> dict[str, Any]:
    """Warm searches after the first answer: the queries once untimed, then each with the chunk
    text blocks evicted (every hint's block read by a ranged GET; heads kept), then again with them
    kept. Medians of wall and CPU per search, and the GETs the evicted pass made."""
    import statistics

    from agent_knowledge.retrieval.query import retrieve

    try:
        from agent_knowledge.index_format.chunk_text import cache as text_cache
    except ImportError:  # before issue 36: the texts are in tantivy's store
        text_cache = None
    figures: dict[str, Any] = {"queries": len(queries)}
    for query in queries:  # untimed: the index's own caches (idf, tantivy's pages) warm up
        retrieve(store, records, scope, query, 3, cache=cache, embedder=None, reranker=None)
    for label, evict in (("texts_evicted", True), ("texts_kept", False)):
        gets_before = store.gets
        walls, cpus = [], []
        for query in queries:
            if evict and text_cache is not None:
                text_cache.forget_blocks()
            elif not evict:  # this query's blocks read once, untimed (the evicted pass dropped them)
                retrieve(store, records, scope, query, 3, cache=cache, embedder=None, reranker=None)
            wall, cpu = time.perf_counter(), time.process_time()
            retrieve(store, records, scope, query, 3, cache=cache, embedder=None, reranker=None)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        figures[label] = {
            "wall_p50_ms": round(statistics.median(walls) * 1000, 2),
            "cpu_p50_ms": round(statistics.median(cpus) * 1000, 2),
        }
        if evict:
            figures["gets_per_search_evicted"] = round((store.gets - gets_before) / max(1, len(queries)), 2)
    if text_cache is not None:
        figures["wall_added_by_hint_reads_p50_ms"] = round(
            figures["texts_evicted"]["wall_p50_ms"] - figures["texts_kept"]["wall_p50_ms"], 2
        )
    return figures


if __name__ == "__main__":
    main()
