"""Figure 2 — warm handler latency in-process against moto, beside a floor of the same AWS calls.

A botocore hook on the layer's clients records every operation (and its parameters) a warm
request makes; the floor replays exactly those calls with plain boto3 clients and no logic.
moto's own per-call cost is in both, so `ours - floor` is the work our code adds: routing,
validation, identity and scope checks, the index query, token signing, byte budgets, JSON.
Requests of ours and of the floor alternate, so both see the same machine noise. Each is timed
by wall clock and by the process's CPU time (moto runs in-process, and read's overlapped body GET
on a thread of its own, so the process CPU time holds all the work and none of the waiting for a
core on this shared machine).
"""

from __future__ import annotations

import contextlib
import copy
import json
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from bench import handlers
from bench.stats import ratio, summary_ms
from bench.workspace import handbook_stack

HANDLERS = ("capabilities", "search", "read")
TARGET_EXTRA_MS = 2.0
SERVICES = ("dynamodb", "s3", "secretsmanager")

Call = tuple[str, str, dict[str, Any]]


class CallRecorder:
    """Records (service, operation, parameters) of every call made through the layer's clients."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.recording = False
        from agent_knowledge.repositories import aws

        for service in SERVICES:
            aws.client(service).meta.events.register("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if self.recording:
            self.calls.append((model.service_model.service_name, model.name, copy.deepcopy(params)))

    @contextlib.contextmanager
    def record(self) -> Iterator[list[Call]]:
        self.calls, self.recording = [], True
        try:
            yield self.calls
        finally:
            self.recording = False


class Floor:
    """The same calls with plain boto3: no validation, no logic, bodies read like ours reads them."""

    def __init__(self) -> None:
        import boto3
        import botocore

        from agent_knowledge.repositories import aws

        session = boto3.session.Session()
        # The layer's own Config (retries, timeouts, pool), so only the logic differs.
        self._clients = {
            service: session.client(service, config=aws.client(service).meta.config) for service in SERVICES
        }
        self._xform = botocore.xform_name

    def replay(self, calls: list[Call]) -> None:
        for service, operation, params in calls:
            response = getattr(self._clients[service], self._xform(operation))(**params)
            body = response.get("Body")
            if body is not None:
                body.read()


def _requests(name: str, queries: list[str]) -> list[dict[str, Any]]:
    if name == "capabilities":
        return [handlers.event("capabilities")]
    if name == "search":
        return [handlers.event("search", {"query": query}) for query in queries]
    refs = []
    for query in queries:
        status, body = handlers.invoke("search", handlers.event("search", {"query": query}))
        assert status == 200, body
        refs.append(json.loads(body)["hints"][0]["ref"])
    return [handlers.event("read", {"ref": ref}) for ref in refs]


def _measure(name: str, events: list[dict[str, Any]], rounds: int, recorder: CallRecorder, floor: Floor) -> dict:
    recordings = []
    for event in events:
        handlers.invoke(name, event)  # warm: index loaded, signing key read, clients created
        with recorder.record() as calls:
            status, body = handlers.invoke(name, event)
        assert status == 200, body
        recordings.append(list(calls))
    ours: list[float] = []
    base: list[float] = []
    ours_cpu: list[float] = []
    base_cpu: list[float] = []
    for _ in range(rounds):
        for event, calls in zip(events, recordings, strict=True):
            started, started_cpu = time.perf_counter(), time.process_time()
            handlers.invoke(name, event)
            middle, middle_cpu = time.perf_counter(), time.process_time()
            floor.replay(calls)
            ours.append(middle - started)
            base.append(time.perf_counter() - middle)
            ours_cpu.append(middle_cpu - started_cpu)
            base_cpu.append(time.process_time() - middle_cpu)
    extra = [(o - b) * 1000 for o, b in zip(ours, base, strict=True)]
    operations = Counter(f"{service}:{operation}" for calls in recordings for service, operation, _ in calls)
    ours_summary, floor_summary = summary_ms(ours), summary_ms(base)
    return {
        "requests": len(events),
        "aws_calls_per_request": round(sum(len(calls) for calls in recordings) / len(recordings), 2),
        "operations": dict(sorted(operations.items())),
        "ours": ours_summary,
        "floor": floor_summary,
        "ratio_p50": ratio(ours_summary["p50_ms"], floor_summary["p50_ms"]),
        "extra_p50_ms": round(ours_summary["p50_ms"] - floor_summary["p50_ms"], 3),
        "extra_paired_p50_ms": round(statistics.median(extra), 3),
        "ours_cpu": summary_ms(ours_cpu),
        "floor_cpu": summary_ms(base_cpu),
        "extra_cpu_p50_ms": round((statistics.median(ours_cpu) - statistics.median(base_cpu)) * 1000, 3),
    }


PROFILES = {"full": {"rounds": 30}, "quick": {"rounds": 5}, "smoke": {"rounds": 1}}  # KB size: HANDBOOK_PROFILES


def run(profile: str = "full") -> dict[str, Any]:
    rounds = PROFILES[profile]["rounds"]
    with handbook_stack(profile) as handbook:
        repositories, timing = handbook.repositories, handbook.timing
        result: dict[str, Any] = {"documents": handbook.documents, "rounds": rounds, "target_extra_ms": TARGET_EXTRA_MS}
        result["chunks"] = sum(record.chunk_count for record in repositories.documents.list("handbook"))
        result["seed_seconds"] = round(timing.ingest_seconds + timing.rebuild_seconds, 1)
        recorder, floor = CallRecorder(), Floor()
        for name in HANDLERS:
            result[name] = _measure(name, _requests(name, handbook.queries), rounds, recorder, floor)
    result["met"] = all(result[name]["extra_p50_ms"] <= TARGET_EXTRA_MS for name in ("search", "read"))
    return result
