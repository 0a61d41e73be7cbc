"""Cold load before → after vectors (issue 26): `python -m bench.retrieval.cold_vectors --chunks 100000`.

What a generation's vector file adds to a search container's first search. One KB index of
`--chunks` chunks is built with the product's code (`bench.index_store.publish_chunks`, the corpus
and chunker of Figure 8, `bench.segments`) as generation 1; generation 2 is generation 1 plus one
vector file of every chunk's row, written by the product's `write_vectors` and listed in the
manifest with the role `vectors`, as the indexer's vector pass publishes it. Both are uploaded to a
moto server with the product's `BodyStore`. Then, in fresh processes
(`bench.retrieval.cold_vectors_child`), alternating before / after, `--runs` times each: the
reader cache's cold load of the generation and one tantivy query (Figure 8's first search on moto),
and — after — what the first hybrid answer adds (local model load, query embedding, first dense
search). Medians; CPU is `time.process_time`. The projection to a 1,024 MB Lambda function is
`bench.segments.project_to_lambda` (its S3 assumptions are listed in the result).

The vectors' values are seeded random unit vectors, not the local model's embeddings: the cold
load cost depends on the file's size and layout (rows × dimensions), not on what the vectors
are, and embedding 100,000 chunks takes ~an hour of CPU here. The rows name the real documents,
revisions, chunk numbers and digests of the index, so the file is valid for search
(`dense_hits` returns real chunks; the scan's cost at 100k rows does not depend on the values).
Results in bench/results/cold_vectors.json.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from agent_knowledge.embedding.base import normalised, vector_space
from agent_knowledge.embedding.local import LocalEmbedder
from agent_knowledge.index_format.builder import IndexedChunk
from agent_knowledge.index_format.layout import VECTOR_ROLE, IndexFile, IndexManifest, manifest_key
from agent_knowledge.index_format.local_files import DOWNLOAD_THREADS
from agent_knowledge.index_format.vector_writing import write_vectors
from agent_knowledge.index_format.vectors import VectorRow, file_name
from agent_knowledge.records import KnowledgeBaseRecord
from agent_knowledge.repositories.bodies import BodyStore
from bench.index_store import DirectoryObjects, publish_chunks
from bench.retrieval.run_report import commit, load_average
from bench.segments import (
    KB_ID,
    LAMBDA_VCPU_AT_1024_MB,
    MOTO_BUCKET,
    S3_FIRST_BYTE_SECONDS,
    S3_FUNCTION_BYTES_PER_SECOND,
    S3_STREAM_BYTES_PER_SECOND,
    _chunks,
    _moto_server,
    project_to_lambda,
)
from bench.stats import ratio

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "cold_vectors.json"
# The functions run numpy with one BLAS thread (template.yaml); the children do the same.
CHILD_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def build_index(count: int, objects: DirectoryObjects) -> tuple[KnowledgeBaseRecord, IndexManifest, list[VectorRow]]:
    """Generation 1 of `count` chunks, and each chunk's row (what a vector file names it by)."""
    rows: list[VectorRow] = []

    def recorded() -> Iterator[IndexedChunk]:
        for chunk in _chunks(count):
            rows.append(VectorRow(chunk.doc_id, chunk.revision, chunk.chunk_index, chunk.digest))
            yield chunk

    kb, manifest = publish_chunks(recorded(), objects, KB_ID)
    return kb, manifest, rows


def add_vectors(
    objects: DirectoryObjects, kb: KnowledgeBaseRecord, base: IndexManifest, rows: list[VectorRow], seed: int
) -> tuple[KnowledgeBaseRecord, IndexManifest]:
    """The next generation: `base` plus one vector file of `rows` (seeded random unit vectors of the
    local model's dimensions, recorded under its vector space so search takes it as its own)."""
    embedder = LocalEmbedder()  # names the model; its weights are not loaded here
    generator = np.random.default_rng(seed)
    matrix = normalised(generator.standard_normal((len(rows), embedder.dimensions), dtype=np.float32))
    data = write_vectors(vector_space(embedder), rows, matrix)
    del matrix
    name = file_name(data)
    entry = IndexFile(sha256=hashlib.sha256(data).hexdigest(), size=len(data), role=VECTOR_ROLE)
    files = {**base.files, name: entry}
    after = base.model_copy(
        update={
            "generation": base.generation + 1, "kind": "vectors", "files": files,
            "index_bytes": sum(f.size for f in files.values()),
            "embedding_model_id": vector_space(embedder), "unembedded": [],
        }
    )  # fmt: skip
    objects.put_file(after.file_key(name), io.BytesIO(data), entry.sha256, "")
    key = manifest_key(kb.kb_id, after.generation)
    objects.put_file(key, io.BytesIO(after.to_bytes()), "", "application/json")
    record = KnowledgeBaseRecord(
        kb_id=kb.kb_id, generation=after.generation, index_manifests=[key, *kb.index_manifests]
    )
    return record, after


def upload(client: Any, objects: DirectoryObjects, kbs: list[KnowledgeBaseRecord]) -> None:
    """Every file and manifest of the KB records' generations into the moto bucket, as the indexer
    stores them (`BodyStore.put_file`: S3 checksums that the reader's downloads validate)."""
    from agent_knowledge.index_format.layout import parse_manifest

    client.create_bucket(Bucket=MOTO_BUCKET)
    store = BodyStore(lambda: client, MOTO_BUCKET)
    done: set[str] = set()
    for kb in kbs:
        for key in kb.index_manifests:
            if key in done:
                continue
            manifest = parse_manifest(Path(objects.root, key).read_bytes(), kb.kb_id)
            for name, entry in manifest.files.items():
                if manifest.file_key(name) not in done:
                    with open(Path(objects.root, manifest.file_key(name)), "rb") as source:
                        store.put_file(manifest.file_key(name), source, entry.sha256, "application/octet-stream")
                    done.add(manifest.file_key(name))
            store.put_file(key, io.BytesIO(Path(objects.root, key).read_bytes()), "", "application/json")
            done.add(key)


def cold_run(url: str, kb_path: str, store_root: str, hybrid: bool) -> dict[str, Any]:
    """One fresh process's cold first search (and hybrid steps); its store is removed afterwards."""
    arguments = [sys.executable, "-m", "bench.retrieval.cold_vectors_child", url, MOTO_BUCKET, kb_path, store_root]
    try:
        completed = subprocess.run(
            arguments + (["--hybrid"] if hybrid else []), cwd=ROOT, capture_output=True, text=True,
            timeout=1800, check=False, env={**os.environ, **CHILD_ENVIRONMENT},
        )  # fmt: skip
    finally:
        shutil.rmtree(store_root, ignore_errors=True)
    for line in completed.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return dict(json.loads(line.removeprefix("BENCH_RESULT ")))
    raise RuntimeError(f"cold_vectors child failed ({completed.returncode}): {completed.stderr[-2000:]}")


def _median_of(runs: list[dict[str, Any]], step: str) -> dict[str, float]:
    return {
        field: round(statistics.median(run[step][field] for run in runs), 1)
        for field in runs[0][step]
        if isinstance(runs[0][step][field], int | float)
    }


def summarise(runs: list[dict[str, Any]], manifest: IndexManifest) -> dict[str, Any]:
    first = _median_of(runs, "first_search")
    sizes = [entry.size for entry in manifest.files.values()]
    summary: dict[str, Any] = {
        "runs": len(runs),
        "index_bytes": manifest.index_bytes,
        "files": len(sizes),
        "first_search_median": first,
        "projected_lambda_1024_mb": project_to_lambda(first["cpu_ms"] / 1000, sizes, DOWNLOAD_THREADS),
    }
    for step in ("model_load_and_first_embedding", "query_embedding", "first_dense_search", "second_dense_search"):
        if step in runs[0]:
            summary[f"{step}_median"] = _median_of(runs, step)
    return summary


def run(count: int, runs: int, seed: int) -> dict[str, Any]:
    report: dict[str, Any] = {
        "command": f"python -m bench.retrieval.cold_vectors --chunks {count} --runs {runs}",
        "commit": commit(),
        "loadavg_start": load_average(),
        "chunks": count,
        "vectors": "seeded random unit vectors (numpy default_rng), rows naming the index's real chunks",
        "child_environment": CHILD_ENVIRONMENT,
        "projection_assumptions": {
            "s3_first_byte_seconds": S3_FIRST_BYTE_SECONDS,
            "s3_stream_bytes_per_second": S3_STREAM_BYTES_PER_SECOND,
            "s3_function_bytes_per_second": S3_FUNCTION_BYTES_PER_SECOND,
            "lambda_vcpu_at_1024_mb": round(LAMBDA_VCPU_AT_1024_MB, 3),
            "download_threads": DOWNLOAD_THREADS,
        },
    }
    with tempfile.TemporaryDirectory(prefix="ak-bench-cold-vectors-") as scratch:
        objects = DirectoryObjects(os.path.join(scratch, "bucket"))
        print(f"[bench] cold_vectors: building {count} chunks …", file=sys.stderr, flush=True)
        before_kb, before, rows = build_index(count, objects)
        after_kb, after = add_vectors(objects, before_kb, before, rows, seed)
        del rows
        report["vector_file_bytes"] = after.index_bytes - before.index_bytes
        report["vector_file_bytes_per_chunk"] = round(report["vector_file_bytes"] / before.chunks, 1)
        paths = {"before": os.path.join(scratch, "kb-before.json"), "after": os.path.join(scratch, "kb-after.json")}
        Path(paths["before"]).write_text(before_kb.model_dump_json(), encoding="utf-8")
        Path(paths["after"]).write_text(after_kb.model_dump_json(), encoding="utf-8")
        results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        with _moto_server() as url:
            import boto3

            upload(boto3.client("s3", endpoint_url=url, region_name="us-east-1"), objects, [before_kb, after_kb])
            for number in range(runs):
                for name in ("before", "after"):  # alternated, so a change of load falls on both
                    print(f"[bench] cold_vectors: {name} run {number + 1}/{runs}", file=sys.stderr, flush=True)
                    store_root = os.path.join(scratch, f"store-{name}-{number}")
                    results[name].append(cold_run(url, paths[name], store_root, hybrid=name == "after"))
    report["runs"] = results
    report["before"] = summarise(results["before"], before)
    report["after"] = summarise(results["after"], after)
    first_before, first_after = report["before"]["first_search_median"], report["after"]["first_search_median"]
    report["ratios_after_to_before"] = {
        field: ratio(first_after[field], first_before[field])
        for field in ("cpu_ms", "wall_ms", "downloaded_bytes", "peak_rss_mib", "rss_increase_mib")
    } | {
        "projected_lambda_total_seconds": ratio(
            report["after"]["projected_lambda_1024_mb"]["total_seconds"],
            report["before"]["projected_lambda_1024_mb"]["total_seconds"],
        )
    }
    report["loadavg_end"] = load_average()
    return report


def main(argv: list[str] | None = None) -> int:
    from bench.environment import configure

    configure()
    parser = argparse.ArgumentParser(
        prog="python -m bench.retrieval.cold_vectors", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="cold processes per generation (medians)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.chunks < 1 or args.runs < 1:
        parser.error("--chunks and --runs must be at least 1")
    report = run(args.chunks, args.runs, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    shown = {key: report[key] for key in ("commit", "loadavg_start", "loadavg_end", "before", "after")}
    print(json.dumps(shown | {"ratios_after_to_before": report["ratios_after_to_before"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
