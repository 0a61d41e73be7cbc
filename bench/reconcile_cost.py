"""What one reconcile of a KB costs (docs/DESIGN.md §10, "Reconciliation"): the AWS requests it makes
and the function's own time, per 10,000 objects, projected to a million.

    .venv/bin/python -m bench.reconcile_cost            # --objects 10000 --chunks 8

A KB of N objects, each with its document record (a record the size of a real one: the chunk lists
of a document of `--chunks` chunks), all matching, is reconciled with `reconcile_kb` against a moto
server in this process (`agent_knowledge_dev.stacks.moto_server_stack`). The function's own work is
thread CPU time (`time.thread_time`) of the listing, of the Query and of the comparison, each timed
on its own — botocore serializing and parsing, our code — without moto's, which runs in the
server's threads; the AWS round trips are counted (ListObjectsV2 pages; Query pages as DynamoDB
cuts them, at 1 MB of items) and their latency is not part of it. The records' DynamoDB item sizes
give the read units the Query consumes (DynamoDB charges the whole items read, before the
projection; eventually consistent: half a unit per 4 KB). Prices are `bench/pipeline.py`'s list
prices.
"""

from __future__ import annotations

from bench.environment import configure

configure()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from typing import Any  # noqa: E402

from bench.pipeline import PRICES_USD  # noqa: E402

KB = "costs"


def item_bytes(item: dict[str, Any]) -> int:
    """A DynamoDB item's size as DynamoDB counts it: attribute names plus values (UTF-8 strings,
    numbers ~ their digits / 2 + 1, lists and maps 3 bytes + 1 per element plus the elements)."""

    def value(v: dict[str, Any]) -> int:
        ((kind, data),) = v.items()
        if kind == "S":
            return len(data.encode())
        if kind == "N":
            return math.ceil(len(data.lstrip("-").replace(".", "")) / 2) + 1
        if kind in {"BOOL", "NULL"}:
            return 1
        if kind == "L":
            return 3 + sum(1 + value(e) for e in data)
        if kind == "M":
            return 3 + sum(1 + len(k.encode()) + value(e) for k, e in data.items())
        return len(data)

    return sum(len(name.encode()) + value(v) for name, v in item.items())


def _record(source_key: str, etag: str, chunks: int, sequencer: str) -> Any:
    from agent_knowledge.records import DocumentRecord
    from agent_knowledge.repositories.documents import document_id

    now = time.time()
    doc_id = document_id(source_key)
    return DocumentRecord(
        kb_id=KB,
        doc_id=doc_id,
        source_key=source_key,
        title=f"Document {source_key}",
        status="ready",
        revision="0" * 32,
        title_sha256="a" * 64,
        body_sha256="b" * 64,
        body_bytes=chunks * 1800,
        body_key=f"bodies/{KB}/{doc_id}/{'c' * 32}/{'0' * 32}",
        body_etag='"' + "d" * 32 + '"',
        chunk_count=chunks,
        chunk_digests=["e" * 16] * chunks,
        chunk_offsets=[(i * 1800, (i + 1) * 1800) for i in range(chunks)],
        created_at=int(now),
        updated_at=int(now),
        write_id="f" * 32,
        source_sequencer=sequencer,
        source_version_id="v" * 32,
        source_etag=etag,
    )


def run(objects: int = 10_000, chunks: int = 8, repeats: int = 3) -> dict[str, Any]:
    import botocore.client

    from agent_knowledge.ingest.reconcile import compare, reconcile_kb
    from agent_knowledge.repositories import aws
    from agent_knowledge.repositories.dynamo import to_item
    from agent_knowledge.runtime.container import default_pipeline_dependencies, default_repositories
    from agent_knowledge_dev.admin import create_knowledge_base
    from agent_knowledge_dev.stacks import moto_server_stack

    # moto answers a Query of thousands of items far slower than DynamoDB: give it time.
    aws.READ_TIMEOUT_SECONDS = 300
    with moto_server_stack(seed=False, pipeline=False):
        repositories = default_repositories()
        create_knowledge_base(repositories, KB)
        deps = default_pipeline_dependencies()
        s3 = aws.client("s3")
        bucket = deps.sources.bucket
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
        body = b"# A document\n\n" + b"word " * 400

        def put(number: int) -> None:
            source_key = f"docs/{number:07d}.md"
            etag = s3.put_object(Bucket=bucket, Key=f"{KB}/{source_key}", Body=body)["ETag"].strip('"')
            repositories.documents.put(_record(source_key, etag, chunks, f"{number:018X}"))

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, range(objects)))
        sizes = [item_bytes(to_item(r.model_dump(mode="json"))) for r in repositories.documents.list(KB)]

        calls: Counter[str] = Counter()
        original = botocore.client.BaseClient._make_api_call

        def counting(client: Any, operation: str, params: dict[str, Any]) -> Any:
            calls[f"{client.meta.service_model.service_name}:{operation}"] += 1
            return original(client, operation, params)

        # Where the function's time goes: the listing, the records, the comparison (thread CPU).
        listed, started = list(deps.sources.list_objects(f"{KB}/")), time.thread_time()
        listed = list(deps.sources.list_objects(f"{KB}/"))
        list_cpu, started = time.thread_time() - started, time.thread_time()
        states = list(repositories.documents.states(KB))
        query_cpu, started = time.thread_time() - started, time.thread_time()
        compare(KB, listed, states, now=time.time(), grace=0)
        compare_cpu = time.thread_time() - started

        cpu, wall = [], []
        botocore.client.BaseClient._make_api_call = counting  # type: ignore[method-assign]
        try:
            for _ in range(repeats):
                calls.clear()
                started_cpu, started = time.thread_time(), time.perf_counter()
                report = reconcile_kb(deps, KB, grace=0)
                cpu.append(time.thread_time() - started_cpu)
                wall.append(time.perf_counter() - started)
                assert report.objects == objects and report.requeued == 0, report
        finally:
            botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]

    per_million = 1_000_000 / objects
    mean_item = statistics.mean(sizes)
    # Eventually consistent Query: half a read unit per 4 KB of items read (summed over the page).
    read_units = sum(sizes) / 4096 / 2 * per_million
    lists = calls["s3:ListObjectsV2"] * per_million
    # The function's own CPU: the listing's and the Query's parsing and the comparison (reconcile_kb
    # reads the records on a second thread, so the calling thread's time alone misses the Query's).
    own_cpu = list_cpu + query_cpu + compare_cpu
    lambda_gb_seconds = own_cpu * per_million * 1769 / 1024
    return {
        "objects": objects,
        "record_bytes_mean": round(mean_item),
        "aws_calls": dict(calls),
        "calling_thread_cpu_seconds": [round(value, 3) for value in cpu],
        "thread_cpu_breakdown": {
            "list_objects": round(list_cpu, 3),
            "query_states": round(query_cpu, 3),
            "compare": round(compare_cpu, 3),
        },
        "wall_seconds_moto_server": [round(value, 3) for value in wall],
        "per_million_objects": {
            "list_requests": round(lists),
            "list_usd": round(lists / 1000 * PRICES_USD["s3_put_per_1k"], 4),
            # DynamoDB pages a Query at 1 MB of items read (moto does not).
            "query_pages": math.ceil(sum(sizes) * per_million / 1_048_576),
            "read_units": round(read_units),
            "read_usd": round(read_units / 1e6 * PRICES_USD["dynamodb_read_unit_per_million"], 3),
            "function_cpu_seconds": round(own_cpu * per_million, 1),
            "lambda_gb_seconds_cpu_only": round(lambda_gb_seconds),
            "lambda_usd_cpu_only": round(lambda_gb_seconds * PRICES_USD["lambda_gb_second"], 4),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=8)
    arguments = parser.parse_args()
    print(json.dumps(run(arguments.objects, arguments.chunks), indent=2))


if __name__ == "__main__":
    main()
