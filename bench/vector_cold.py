"""Vector cold load, whole file against read by need (issue 36, item 1):
`python -m bench.vector_cold --rows 100000 1000000 --runs 3 --before-tree DIR`.

For each `--rows`, a partitioned vector file (`--dimensions` 512, seeded random unit vectors — what
a cold load costs depends on the file's size and layout, not on its values; 4 rows per document) is
published as a generation's only file and uploaded with the product's `BodyStore` (S3 checksums
included) to a moto server on loopback. Then in fresh processes, alternating, `--runs` times each,
a search container's first dense search:

- `before`: the code before issue 36 (`--before-tree`: a directory holding its `shared/`, e.g.
  `git archive 0cb8d40 shared | tar -x -C DIR`), with the file it writes (format 2, the same
  rows): `LocalFiles.materialize` downloads the file (S3 checksum checked), `dense_search`
  memory-maps it and searches;
- `whole`: this code and its file (format 3), downloaded whole the same way;
- `by_need` (after): this code, `materialize(by_need=True)` leaves the file out, and `dense_search`
  reads its head and the probed lists by ranged GETs (`index_format/vector_ranges`).

Per run: bytes and GETs from the bucket before the first answer (counted at the `BodyStore`),
the first search's CPU (`time.process_time`, the child's own: moto runs in another process) and
wall, both from before the load to the answer; then the warm query CPU, the median over `QUERIES`
queries asked `WARM_ROUNDS` more times (every list they probe held), and that of the first of
those rounds apart. Imports are done before the clock starts.
moto answers a ranged GET by reading the whole object and slicing it, so the by-need wall on moto
is mostly moto's; `projected_s3_seconds` is the transfer on S3 with bench.segments' assumptions
(first byte 30 ms per round of parallel GETs, 80 MB/s per stream, 150 MB/s per function), from
the GETs each run made, plus its CPU at a 1,024 MB function's vCPU share. Medians of the runs;
results in bench/results/vector_cold.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "vector_cold.json"
BUCKET = "vector-cold"
KB_ID = "kb-vectors"
SPACE_MODEL = "bench-model"
# The functions run numpy with one BLAS thread (template.yaml); the children do the same.
CHILD_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
# Documents a search asks the dense side for (retrieval/hybrid FUSION_DEPTH): k = 3 rows per document.
DOCUMENTS = 30
QUERIES = 20
# Times the warm queries are asked again. The first round after a by-need container fetched its
# lists ran ~1.5x slower at 1M rows than the later ones (which match the whole file's): reported
# apart (`warm_first_round_cpu_ms`), the warm figure is the median over every round.
WARM_ROUNDS = 3
# bench.segments' S3 assumptions (a copy: that module is another benchmark's).
S3_FIRST_BYTE_SECONDS = 0.03
S3_STREAM_BYTES_PER_SECOND = 80e6
S3_FUNCTION_BYTES_PER_SECOND = 150e6
LAMBDA_VCPU_AT_1024_MB = 1024 / 1769
RANGE_THREADS = 8


def _module(name: str, before: str) -> Any:
    """The module `name` of this tree; in the code before issue 37 split `index/` (the
    `--before-tree` child, which has that tree's agent_knowledge first on its path), `before`.
    Chosen by the loaded package's own directories: the editable install's finder would otherwise
    resolve `name` in this tree and mix the two."""
    import importlib

    import agent_knowledge

    package = os.path.dirname(agent_knowledge.__file__ or "")
    moved = os.path.isdir(os.path.join(package, name.split(".")[1]))
    return importlib.import_module(name if moved else before)


def build(rows: int, dimensions: int, seed: int = 0) -> bytes:
    import numpy as np

    from agent_knowledge.embedding.base import normalised

    write_vectors = _module(
        "agent_knowledge.index_format.vector_writing", "agent_knowledge.index.vectors"
    ).write_vectors
    VectorRow = _module("agent_knowledge.index_format.vectors", "agent_knowledge.index.vectors").VectorRow

    generator = np.random.default_rng(seed)
    matrix = normalised(generator.standard_normal((rows, dimensions), dtype=np.float32))
    named = [VectorRow(f"doc{n // 4:07d}", f"rev{n // 4:07d}", n % 4, f"{n:016x}") for n in range(rows)]
    return write_vectors(f"{SPACE_MODEL}/{dimensions}", named, matrix)


def manifest_of(data: bytes, rows: int, dimensions: int) -> Any:
    import hashlib

    from agent_knowledge.index_format.layout import VECTOR_ROLE, IndexFile, IndexManifest
    from agent_knowledge.index_format.vectors import file_name

    entry = IndexFile(sha256=hashlib.sha256(data).hexdigest(), size=len(data), role=VECTOR_ROLE)
    return IndexManifest(
        format_version=1, schema_version=1, tantivy_version="0", kb_id=KB_ID, generation=1, documents=rows // 4,
        chunks=rows, index_bytes=len(data), files={file_name(data): entry}, meta={},
        embedding_model_id=f"{SPACE_MODEL}/{dimensions}",
    )  # fmt: skip


def store_for(url: str) -> Any:
    import botocore.session

    from agent_knowledge.repositories.bodies import BodyStore

    client = botocore.session.get_session().create_client(
        "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
    )
    return BodyStore(lambda: client, BUCKET), client


class Counted:
    """The bucket, counting GETs and the bytes they return (what a container reads before answering)."""

    def __init__(self, bodies: Any) -> None:
        self.bodies, self.gets, self.bytes = bodies, 0, 0
        self.sizes: list[int] = []  # of each GET, in order

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]:
        data, metadata = self.bodies.read_range(key, start, end, etag)
        self.gets, self.bytes = self.gets + 1, self.bytes + len(data)
        self.sizes.append(len(data))
        return data, metadata

    def download(self, key: str, target: Any) -> int:
        written = int(self.bodies.download(key, target))
        self.gets, self.bytes = self.gets + 1, self.bytes + written
        self.sizes.append(written)
        return written

    def read(self, key: str) -> bytes:
        return bytes(self.bodies.read(key))


def child(url: str, manifest_json: str, mode: str, seed: int) -> dict[str, Any]:
    """One fresh container's first dense search (`mode` whole or by_need), then warm queries."""
    import numpy as np

    from agent_knowledge.embedding.base import normalised

    IndexManifest = _module("agent_knowledge.index_format.layout", "agent_knowledge.index.layout").IndexManifest
    LocalFiles = _module("agent_knowledge.index_format.local_files", "agent_knowledge.index.local_files").LocalFiles
    dense = _module("agent_knowledge.retrieval.dense", "agent_knowledge.index.dense")
    OpenedVectors, dense_search = dense.OpenedVectors, dense.dense_search

    manifest = IndexManifest.model_validate_json(manifest_json)
    dimensions = int(manifest.embedding_model_id.rpartition("/")[2])
    queries = normalised(np.random.default_rng(seed).standard_normal((QUERIES + 1, dimensions), dtype=np.float32))
    bodies, _ = store_for(url)
    bucket = Counted(bodies)
    with tempfile.TemporaryDirectory(prefix="vector-cold-") as scratch:
        store, opened = LocalFiles(scratch), OpenedVectors()
        by_need = mode == "by_need"
        cpu, wall = time.process_time(), time.perf_counter()
        # The code before issue 36 has neither argument.
        directory, _ = store.materialize(bucket, manifest, "bench", **({"by_need": True} if by_need else {}))
        extra = {"remote": (bucket, store)} if by_need else {}
        first = dense_search(manifest, directory, queries[0], DOCUMENTS, opened=opened, **extra)
        first_cpu, first_wall = time.process_time() - cpu, time.perf_counter() - wall
        cold = {"gets": bucket.gets, "bytes": bucket.bytes, "sizes": list(bucket.sizes)}
        for query in queries[1:]:  # each fetches the lists it lacks (by need)
            dense_search(manifest, directory, query, DOCUMENTS, opened=opened, **extra)
        rounds: list[list[float]] = []
        for _ in range(WARM_ROUNDS):  # asked again: every list held
            rounds.append([])
            for query in queries[1:]:
                started = time.process_time()
                dense_search(manifest, directory, query, DOCUMENTS, opened=opened, **extra)
                rounds[-1].append(time.process_time() - started)
        return {
            "mode": mode, "first_search_cpu_ms": first_cpu * 1e3, "first_search_wall_ms": first_wall * 1e3,
            "bytes_before_first_answer": cold["bytes"], "gets_before_first_answer": cold["gets"],
            "projected_s3_seconds": projected(cold["sizes"], by_need, first_cpu),
            "bytes_after_queries": bucket.bytes, "warm_query_cpu_ms": statistics.median(sum(rounds, [])) * 1e3,
            "warm_first_round_cpu_ms": statistics.median(rounds[0]) * 1e3,
            "hits": len(first.hits), "stored_bytes": store.stored_bytes(),
        }  # fmt: skip


def projected(sizes: list[int], by_need: bool, cpu_seconds: float) -> float:
    """The first answer's wall on S3 from a 1,024 MB function (module docstring): by need, the
    head's two GETs one after the other, then the lists' GETs RANGE_THREADS at a time; whole, one
    GET of the file."""

    def transfer(parallel: list[int]) -> float:
        rounds = -(-len(parallel) // RANGE_THREADS) if parallel else 0
        streamed = max(
            max(parallel, default=0) / S3_STREAM_BYTES_PER_SECOND, sum(parallel) / S3_FUNCTION_BYTES_PER_SECOND
        )
        return rounds * S3_FIRST_BYTE_SECONDS + streamed

    sequential = sizes[:2] if by_need else []
    seconds = sum(transfer([size]) for size in sequential) + transfer(sizes[len(sequential) :])
    return round(seconds + cpu_seconds / LAMBDA_VCPU_AT_1024_MB, 3)


def run_child(url: str, manifest_json: str, mode: str, seed: int, before_tree: Path | None) -> dict[str, Any]:
    environment = {**os.environ, **CHILD_ENVIRONMENT}
    if mode == "before":  # its agent_knowledge first on the path
        environment["PYTHONPATH"] = os.pathsep.join([str(before_tree / "shared"), str(ROOT)])
    completed = subprocess.run(
        [sys.executable, "-m", "bench.vector_cold", "--child", url, mode, str(seed)], input=manifest_json,
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False, env=environment,
    )  # fmt: skip
    for line in completed.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return dict(json.loads(line.removeprefix("BENCH_RESULT ")))
    raise RuntimeError(f"vector_cold child failed ({completed.returncode}): {completed.stderr[-2000:]}")


def built_before(rows: int, dimensions: int, before_tree: Path, scratch: str) -> bytes:
    """The same rows written by the code before issue 36 (format 2), in a process of its own."""
    path = Path(scratch, "before.vectors")
    code = f"from bench.vector_cold import build; open({str(path)!r}, 'wb').write(build({rows}, {dimensions}))"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(before_tree / "shared"), str(ROOT)])}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, check=True, timeout=3600)
    return path.read_bytes()


def publish(data: bytes, rows: int, dimensions: int, url: str) -> Any:
    import io

    manifest = manifest_of(data, rows, dimensions)
    bodies, _ = store_for(url)
    ((name, entry),) = manifest.files.items()
    bodies.put_file(manifest.file_key(name), io.BytesIO(data), entry.sha256, "application/octet-stream")
    return manifest


def measure(rows: int, dimensions: int, runs: int, url: str, before_tree: Path | None) -> dict[str, Any]:
    started = time.perf_counter()
    data = build(rows, dimensions)
    built_seconds = time.perf_counter() - started
    manifests = {"whole": publish(data, rows, dimensions, url)}
    manifests["by_need"] = manifests["whole"]
    from agent_knowledge.index_format.vectors import VectorFile

    opened = VectorFile(data)
    head_bytes, lists, file_bytes = opened.head_bytes, opened.list_total, len(data)
    del data, opened
    if before_tree is not None:
        with tempfile.TemporaryDirectory(prefix="vector-cold-before-") as scratch:
            manifests["before"] = publish(built_before(rows, dimensions, before_tree, scratch), rows, dimensions, url)
    modes = list(manifests)
    samples: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for run in range(runs):
        for mode in modes if run % 2 == 0 else modes[::-1]:
            samples[mode].append(run_child(url, manifests[mode].model_dump_json(), mode, 100 + run, before_tree))
    _, client = store_for(url)
    for manifest in manifests.values():
        for name in manifest.files:
            client.delete_object(Bucket=BUCKET, Key=manifest.file_key(name))
    medians = {
        mode: {key: statistics.median(s[key] for s in runs_of) for key in runs_of[0] if key != "mode"}
        for mode, runs_of in samples.items()
    }
    return {
        "rows": rows, "dimensions": dimensions, "file_bytes": file_bytes, "head_bytes": head_bytes, "lists": lists,
        "before_file_bytes": next(iter(manifests["before"].files.values())).size if "before" in manifests else None,
        "build_seconds": built_seconds, "median": medians, "runs": samples,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000])
    parser.add_argument("--dimensions", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("URL", "MODE", "SEED"))
    parser.add_argument("--before-tree", type=Path, help="a directory holding shared/ of the code before issue 36")
    parser.add_argument("--out", type=Path, default=RESULTS)
    arguments = parser.parse_args()
    if arguments.child:
        url, mode, seed = arguments.child
        print("BENCH_RESULT " + json.dumps(child(url, sys.stdin.read(), mode, int(seed))))
        return
    from bench.retrieval.run_report import commit, load_average

    report: dict[str, Any] = {"commit": commit(), "loadavg_start": load_average(), "results": []}
    from bench.environment import moto_server

    with moto_server() as url:
        _, client = store_for(url)
        client.create_bucket(Bucket=BUCKET)
        for rows in arguments.rows:
            result = measure(rows, arguments.dimensions, arguments.runs, url, arguments.before_tree)
            report["results"].append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "runs"}), flush=True)
    report["loadavg_end"] = load_average()
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
