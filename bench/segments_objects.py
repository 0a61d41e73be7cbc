"""Issue 36, item 3 — one object per segment instead of one per component: does it help the download?

`python -m bench.segments_objects [--chunks 100000] [--runs 5]`

A generation of `--chunks` chunks of bench.segments' corpus is built with the product's code; its
files a search container downloads (every tantivy file; the chunk text files are read by ranges)
are uploaded to a moto server twice: one object per file, as the product stores them, and one
object per segment (the segment's files concatenated, what a packed layout would store). Each way
is then downloaded the way `LocalFiles` downloads a generation (DOWNLOAD_THREADS parallel GETs
through the product's `BodyStore`, largest first, each streamed to a file), `--runs` times
alternately, each into an empty directory: GETs, bytes, wall and CPU (`time.process_time`) per
download, medians. Splitting a segment's object back into files is not done here, so the packed
figures are a lower bound of what a packed layout would cost.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BUCKET = "bench-segment-objects"


def _download_all(store: Any, objects: list[tuple[str, int]], directory: str) -> int:
    from agent_knowledge.index_format.local_files import DOWNLOAD_THREADS

    def one(key: str) -> int:
        with open(os.path.join(directory, key.replace("/", "_")), "wb") as target:
            return int(store.download(key, target))

    ordered = [key for key, _ in sorted(objects, key=lambda item: -item[1])]
    with ThreadPoolExecutor(max_workers=min(DOWNLOAD_THREADS, len(ordered))) as pool:
        return sum(pool.map(one, ordered))


def run(chunks: int, runs: int) -> dict[str, Any]:
    import boto3

    from agent_knowledge.index_format.layout import TEXT_ROLE
    from agent_knowledge.repositories.bodies import BodyStore
    from bench.environment import moto_server
    from bench.index_store import DirectoryObjects, publish_chunks
    from bench.segments import _chunks

    result: dict[str, Any] = {"chunks": chunks, "runs": runs, "load_average_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="ak-bench-objects-") as scratch:
        objects = DirectoryObjects(os.path.join(scratch, "bucket"))
        _, manifest = publish_chunks(_chunks(chunks), objects, "bench")
        files = {name: entry for name, entry in manifest.files.items() if entry.role != TEXT_ROLE}
        by_segment: dict[str, list[str]] = {}
        for name in sorted(files):
            by_segment.setdefault(name[:32], []).append(name)
        with moto_server() as url:
            client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
            client.create_bucket(Bucket=BUCKET)
            store = BodyStore(lambda: client, BUCKET)
            per_file: list[tuple[str, int]] = []
            for name, entry in files.items():
                key = manifest.file_key(name)
                with open(Path(objects.root, key), "rb") as source:
                    store.put_file(key, source, entry.sha256, "application/octet-stream")
                per_file.append((key, entry.size))
            per_segment: list[tuple[str, int]] = []
            for segment_id, names in by_segment.items():
                data = b"".join(Path(objects.root, manifest.file_key(name)).read_bytes() for name in names)
                key = f"packed/{segment_id}"
                store.put_file(key, io.BytesIO(data), "", "application/octet-stream")
                per_segment.append((key, len(data)))
            figures: dict[str, dict[str, list[float]]] = {
                "one_object_per_file": {"wall": [], "cpu": []},
                "one_object_per_segment": {"wall": [], "cpu": []},
            }
            for _ in range(runs):
                for label, layout in (("one_object_per_file", per_file), ("one_object_per_segment", per_segment)):
                    target = tempfile.mkdtemp(dir=scratch)
                    wall, cpu = time.perf_counter(), time.process_time()
                    _download_all(store, layout, target)
                    figures[label]["wall"].append(time.perf_counter() - wall)
                    figures[label]["cpu"].append(time.process_time() - cpu)
                    shutil.rmtree(target)
        for label, layout in (("one_object_per_file", per_file), ("one_object_per_segment", per_segment)):
            result[label] = {
                "gets": len(layout),
                "bytes": sum(size for _, size in layout),
                "wall_p50_ms": round(statistics.median(figures[label]["wall"]) * 1000, 1),
                "cpu_p50_ms": round(statistics.median(figures[label]["cpu"]) * 1000, 1),
            }
        result["segments"] = len(by_segment)
    result["load_average_end"] = os.getloadavg()
    return result


def main() -> None:
    from bench.environment import configure

    configure()
    parser = argparse.ArgumentParser(prog="python -m bench.segments_objects", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    if arguments.chunks < 1 or arguments.runs < 1:
        parser.error("--chunks and --runs take a positive number")
    text = json.dumps(run(arguments.chunks, arguments.runs), indent=2)
    if arguments.output:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
