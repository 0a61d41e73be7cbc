"""Figure 7 — the ingestion pipeline: freshness, deletes, bulk throughput, AWS calls and cost.

Everything runs in this process against in-process moto (`bench.environment.local_stack`), with
the same stand-ins `agent-knowledge serve` uses: moto's S3 notifications completed by
`agent_knowledge_dev.moto_s3`, and the event source mapping pollers of
`agent_knowledge_dev.event_sources` invoking the real `functions/ingest` and `functions/indexer`
handlers (the pollers use their own SQS client, so the layer's AWS calls are counted apart).

1. Freshness: in a KB of N documents, PUT one new document into the sources bucket and time until
   `retrieve()` (what the search function runs) returns it; then DELETE it and time until it is
   gone. N = 30 and N = 1,500; p50/p95 and the ratio big/small, measured in one run. Targets:
   p50 ≤ 2 s, p95 ≤ 5 s, ratio ≤ 1.5. The N documents are stored with the `Ingestor` and indexed
   once before the pollers start (how they got there does not matter to the measurement, and
   loading 1,500 through the pipeline first would only add minutes; figure 2 measures that path).
2. Bulk: 3,000 documents PUT in a loop (what `aws s3 sync` does), timed from the first PUT until
   every one is searchable (the KB's pending count is 0 and every document is ready):
   documents/s and the number of index generations it took. Bounded: after BULK_DEADLINE_SECONDS
   the figure reports how many were searchable by then instead.
3. AWS calls per ingested document during the bulk load, by service and operation, and the cost
   per 1,000 documents they project at the AWS list prices below (us-east-1, on-demand).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from bench.corpus import documents
from bench.environment import local_stack, quiet
from bench.stats import percentile

KB = "pipeline"
DOCUMENT_CHARS = 3500
TARGETS = {"p50_seconds": 2.0, "p95_seconds": 5.0, "ratio": 1.5}
PROFILES = {
    "full": {"sizes": (30, 1500), "samples": 20, "bulk": 3000},
    "quick": {"sizes": (30, 150), "samples": 5, "bulk": 300},
    "smoke": {"sizes": (3, 6), "samples": 2, "bulk": 12},
}
POLL_SECONDS = 0.02
DEADLINE_SECONDS = 120.0
BULK_DEADLINE_SECONDS = 1800.0
# AWS list prices assumed (us-east-1, December 2026 price pages as last read; update when they move).
PRICES_USD = {
    "s3_put_per_1k": 0.005,  # PUT, COPY, POST, LIST, DELETE is free
    "s3_get_per_1k": 0.0004,  # GET, HEAD
    "dynamodb_write_unit_per_million": 0.625,  # on-demand, 1 unit per 1 KB written
    "dynamodb_read_unit_per_million": 0.125,  # on-demand, 1 unit per 4 KB strongly consistent
    "sqs_standard_per_million": 0.40,
    "sqs_fifo_per_million": 0.50,
    "lambda_per_million_requests": 0.20,
    "lambda_gb_second": 0.0000133334,  # arm64, the template's architecture (not used: duration is not counted)
}
S3_GETS = {"GetObject", "HeadObject"}


class Calls:
    """Every AWS call made through the layer's clients (not the pollers'), with request sizes."""

    def __init__(self) -> None:
        from agent_knowledge.repositories import aws

        self.counts: Counter[str] = Counter()
        self.write_units = 0
        self.read_items = 0
        for service in ("dynamodb", "s3", "sqs"):
            aws.client(service).meta.events.register("provide-client-params", self._record)
        aws.client("dynamodb").meta.events.register("after-call.dynamodb.Query", self._queried)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.counts[f"{model.service_model.service_name}:{model.name}"] += 1
        if model.name in {"PutItem", "UpdateItem"}:
            # One write unit per started KB of the item (its wire form approximates its size).
            size = len(repr(params.get("Item") or params.get("ExpressionAttributeValues") or {}))
            self.write_units += max(1, -(-size // 1024))
        elif model.name == "GetItem":
            self.read_items += 1
        elif model.name == "BatchGetItem":
            self.read_items += sum(len(table["Keys"]) for table in params["RequestItems"].values())

    def _queried(self, parsed: dict[str, Any], **_: Any) -> None:
        self.read_items += len(parsed.get("Items", []))

    def reset(self) -> None:
        self.counts.clear()
        self.write_units = 0
        self.read_items = 0


@contextlib.contextmanager
def pipeline_stack(preload: list[Any] | None = None) -> Iterator[tuple[Any, Any, Any, Any]]:
    """(repositories, s3 client, runner, observer) with the pollers running, as `serve` runs them;
    the KB holds `preload`'s documents, stored and indexed before the pollers start. `observer`:
    repositories on clients of their own, for the benchmark's status reads, which `Calls` (hooked
    on the layer's clients) must not count."""
    import botocore.session

    from agent_knowledge.repositories.bundle import Repositories
    from agent_knowledge.settings import get_settings
    from agent_knowledge_dev.admin import create_knowledge_base
    from agent_knowledge_dev.event_sources import LOCAL_POLL_INTERVAL_SECONDS, EventSourceRunner
    from agent_knowledge_dev.moto_s3 import install

    install()
    with local_stack() as repositories, quiet():
        create_knowledge_base(repositories, KB)
        if preload:
            from agent_knowledge.index_format.recent_chunks import RecentChunks
            from agent_knowledge.indexer.publish import publish_rebuild
            from agent_knowledge.ingest.ingestor import Ingestor
            from agent_knowledge_dev.runtime import process_vector_space

            recent = RecentChunks()
            ingestor = Ingestor(repositories, recent_chunks=recent)
            for doc in preload:
                ingestor.put(KB, doc.source_key, doc.title, doc.body)
            publish_rebuild(repositories, KB, known=recent, vector_space=process_vector_space())
        session = botocore.session.get_session()
        pollers_sqs = session.create_client("sqs", region_name="us-east-1")
        s3 = session.create_client("s3", region_name="us-east-1")
        runner = EventSourceRunner(pollers_sqs, retry_visibility=5)
        observer = Repositories.build(
            get_settings(), session.create_client("dynamodb", region_name="us-east-1"), s3=lambda: s3
        )
        runner.start(poll_interval=LOCAL_POLL_INTERVAL_SECONDS)
        try:
            yield repositories, s3, runner, observer
        finally:
            runner.stop()


def _found(repositories: Any, query: str, title: str) -> bool:
    from agent_knowledge.identity.scope import Scope
    from agent_knowledge.records import KnowledgeConfig, SourceConfig
    from agent_knowledge.retrieval.query import retrieve
    from agent_knowledge.retrieval.reader_cache import index_cache
    from bench.environment import process_search

    config = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=KB)])
    scope = Scope(config, repositories.knowledge_bases.get_many([KB]))
    return any(
        hit.document.title == title
        for hit in retrieve(
            repositories.bodies, repositories.documents, scope, query, 3, cache=index_cache, **process_search()
        ).documents
    )


def _until(condition: Any, deadline: float = DEADLINE_SECONDS, poll: float = POLL_SECONDS) -> float:
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > deadline:
            raise TimeoutError(f"not within {deadline} s")
        time.sleep(poll)
    return time.perf_counter() - started


def _put_all(s3: Any, bucket: str, docs: list[Any]) -> None:
    for doc in docs:
        s3.put_object(Bucket=bucket, Key=f"{KB}/{doc.source_key}", Body=doc.body.encode("utf-8"))


def _drained(repositories: Any, runner: Any) -> bool:
    from agent_knowledge.ingest.status import kb_status
    from agent_knowledge.settings import sizing_settings

    return runner.idle() and kb_status(repositories, KB, sizing=sizing_settings()).pending == 0


def _summary(samples: list[float]) -> dict[str, Any]:
    return {
        "n": len(samples),
        "p50_seconds": round(statistics.median(samples), 3),
        "p95_seconds": round(percentile(samples, 0.95), 3),
        "max_seconds": round(max(samples), 3),
    }


def freshness(size: int, samples: int) -> dict[str, Any]:
    loading = time.perf_counter()
    with pipeline_stack(list(documents("en", size, DOCUMENT_CHARS, seed=71))) as (repositories, s3, _, _):
        bucket = os.environ["SOURCES_BUCKET"]
        load_seconds = time.perf_counter() - loading
        put, delete, cpu = [], [], []
        for number in range(samples):
            word = f"freshmarker{number:04d}"
            title = f"Fresh document {number}"
            key = f"{KB}/fresh/{number:04d}.md"
            cpu_before = time.process_time()
            s3.put_object(Bucket=bucket, Key=key, Body=f"# {title}\n\nThis page is about {word}.".encode())
            put.append(_until(lambda word=word, title=title: _found(repositories, word, title)))
            s3.delete_object(Bucket=bucket, Key=key)
            delete.append(_until(lambda word=word, title=title: not _found(repositories, word, title)))
            cpu.append(time.process_time() - cpu_before)
        generation = repositories.knowledge_bases.get(KB).generation
    return {
        "documents": size,
        "load_seconds": round(load_seconds, 2),
        "put_to_searchable": _summary(put),
        "delete_to_gone": _summary(delete),
        "cpu_seconds_per_put_and_delete_p50": round(statistics.median(cpu), 3),
        "generations": generation,
    }


def bulk(count: int) -> dict[str, Any]:
    with pipeline_stack() as (_, s3, runner, observer):
        bucket = os.environ["SOURCES_BUCKET"]
        docs = list(documents("en", count, DOCUMENT_CHARS, seed=72))
        calls = Calls()
        calls.reset()
        invocations_before = dict(runner.invocations)
        started, cpu_started = time.perf_counter(), time.process_time()
        _put_all(s3, bucket, docs)
        put_seconds = time.perf_counter() - started
        try:
            _until(lambda: _drained(observer, runner), BULK_DEADLINE_SECONDS, poll=0.5)
            complete = True
        except TimeoutError:
            complete = False
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        from agent_knowledge.ingest.status import kb_status
        from agent_knowledge.settings import sizing_settings

        counts, write_units, read_items = dict(calls.counts), calls.write_units, calls.read_items
        status = kb_status(observer, KB, sizing=sizing_settings())
        generation = observer.knowledge_bases.get(KB).generation
        invocations = {name: runner.invocations[name] - invocations_before.get(name, 0) for name in runner.invocations}
    return {
        "documents": count,
        "complete": complete,
        "searchable": status.ready,
        "bytes": sum(len(doc.body.encode()) for doc in docs),
        "put_seconds": round(put_seconds, 2),
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "documents_per_second": round(status.ready / wall, 1),
        "generations": generation,
        "invocations": invocations,
        "aws_calls": counts,
        "aws_calls_per_document": round(sum(counts.values()) / count, 2),
        "dynamodb_write_units_per_document": round(write_units / count, 2),
        "dynamodb_items_read_per_document": round(read_items / count, 2),
        "cost": _cost(count, counts, write_units, read_items, invocations),
    }


def _cost(
    count: int, counts: dict[str, int], write_units: int, read_items: int, invocations: dict[str, int]
) -> dict[str, Any]:
    """USD per 1,000 documents. Counted: the layer's calls. Added per document, as AWS bills them
    but this process cannot count them: the operator's PutObject, S3's SendMessage of the event,
    and the event source mappings' receive/delete (one each per message batch)."""
    per = 1000 / count
    s3_puts = sum(n for op, n in counts.items() if op.startswith("s3:") and op.split(":")[1] not in S3_GETS)
    s3_puts += count  # the operator's PutObject
    s3_gets = sum(n for op, n in counts.items() if op.startswith("s3:") and op.split(":")[1] in S3_GETS)
    reads = read_items  # one read unit per item (each is under 4 KB), strongly consistent
    sqs_fifo = counts.get("sqs:SendMessageBatch", 0) + 2 * invocations.get("IndexerFunction", 0)
    sqs_standard = count + 2 * invocations.get("IngestFunction", 0)  # S3's SendMessage + receive/delete
    lambda_requests = sum(invocations.values())
    parts = {
        "s3": s3_puts * PRICES_USD["s3_put_per_1k"] / 1000 + s3_gets * PRICES_USD["s3_get_per_1k"] / 1000,
        "dynamodb": write_units * PRICES_USD["dynamodb_write_unit_per_million"] / 1e6
        + reads * PRICES_USD["dynamodb_read_unit_per_million"] / 1e6,
        "sqs": sqs_standard * PRICES_USD["sqs_standard_per_million"] / 1e6
        + sqs_fifo * PRICES_USD["sqs_fifo_per_million"] / 1e6,
        "lambda_requests": lambda_requests * PRICES_USD["lambda_per_million_requests"] / 1e6,
    }
    return {
        "usd_per_1000_documents": {name: round(value * per, 6) for name, value in parts.items()}
        | {"total_without_lambda_duration": round(sum(parts.values()) * per, 6)},
        "prices_usd": PRICES_USD,
        "not_included": "Lambda duration (GB-s; measure on AWS), CloudWatch Logs, S3 storage",
    }


def run(profile: str = "full") -> dict[str, Any]:
    settings = PROFILES[profile]
    small, big = (freshness(size, settings["samples"]) for size in settings["sizes"])
    ratio = (
        round(big["put_to_searchable"]["p50_seconds"] / small["put_to_searchable"]["p50_seconds"], 2)
        if small["put_to_searchable"]["p50_seconds"]
        else None
    )
    result: dict[str, Any] = {
        "load_average": _load_average(),
        "targets": TARGETS,
        "small": small,
        "big": big,
        "ratio_big_small_p50": ratio,
        "bulk": bulk(settings["bulk"]),
    }
    result["load_average_after"] = _load_average()
    result["met"] = {
        "p50": all(point["put_to_searchable"]["p50_seconds"] <= TARGETS["p50_seconds"] for point in (small, big)),
        "p95": all(point["put_to_searchable"]["p95_seconds"] <= TARGETS["p95_seconds"] for point in (small, big)),
        "delete_p95": all(point["delete_to_gone"]["p95_seconds"] <= TARGETS["p95_seconds"] for point in (small, big)),
        "ratio": ratio is not None and ratio <= TARGETS["ratio"],
    }
    return result


def _load_average() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return " ".join(handle.read().split()[:3])
    except OSError:
        return "unknown"
