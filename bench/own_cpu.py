"""Figure — warm own CPU of search and read, with canned AWS responses (no moto in the figure).

A first pass against in-process moto records the raw HTTP responses (status, headers, bytes) of
every AWS call a warm request makes (botocore's `needs-retry` event carries them). The timed pass
answers the same calls with those bytes from a `before-send` hook registered first on the layer's
clients, so botocore still serializes every request, parses every response and checks DynamoDB's
CRC32, but no moto code runs and nothing waits on a socket: what is left is the handler's own CPU
(routing, identity and scope checks, the index query, signing, budgets, JSON) plus botocore's.
CPU is `time.process_time()` around each invocation, so the overlapped body GET's thread counts.
moto's in-process stubber is switched off during the timed pass (botocore would otherwise run it
too and discard its answer), so a call missing from the recording fails instead of reaching moto.

The floor, timed alternately with ours: the same calls with the same parameters (recorded with
`bench.warm.CallRecorder`), made one after another through the same layer clients and answered
from the same recording — botocore's own CPU for the request (serialize, sign, hooks, parse), and
nothing of ours. `ours - floor` is then what our code adds.
"""

from __future__ import annotations

import io
import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

from bench import handlers
from bench.stats import summary_ms
from bench.warm import Call, CallRecorder, _requests
from bench.workspace import handbook_stack

HANDLERS = ("search", "read")
TARGET_CPU_MS = {"search": 2.5, "read": 1.5}
SERVICES = ("dynamodb", "s3", "secretsmanager")

Recorded = tuple[int, dict[str, str], bytes]


class _Raw(io.BytesIO):
    """What botocore reads a response body from (`stream()` for content, `read()` for S3 bodies)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


class CannedAws:
    """Records each call's raw response while `recording`; answers calls from `answers` when set."""

    def __init__(self) -> None:
        from agent_knowledge.repositories import aws

        self.recording = False
        self.recorded: dict[str, list[Recorded]] = {}
        self.answers: dict[str, list[Recorded]] | None = None
        self._next: dict[str, int] = {}
        self.unanswered = 0
        self.answered = 0
        for service in SERVICES:
            events = aws.client(service).meta.events
            events.register("needs-retry", self._record)
            events.register_first("before-send", self._answer)

    @staticmethod
    def _operation(event_name: str) -> str:
        return event_name.split(".", 1)[1]  # "before-send.dynamodb.GetItem" -> "dynamodb.GetItem"

    def _record(self, response: Any, event_name: str, **_: Any) -> None:
        if self.recording and response is not None:
            http, parsed = response
            content = http.content  # for S3 GetObject this drains the stream the caller reads ...
            if hasattr(parsed.get("Body"), "read"):
                from botocore.response import StreamingBody

                # ... so hand the caller the same bytes again.
                parsed["Body"] = StreamingBody(io.BytesIO(content), len(content))
            self.recorded.setdefault(self._operation(event_name), []).append(
                (http.status_code, dict(http.headers), content)
            )

    def _answer(self, request: Any, event_name: str, **_: Any) -> Any:
        if self.answers is None:
            return None
        from botocore.awsrequest import AWSResponse, HeadersDict

        operation = self._operation(event_name)
        recorded = self.answers.get(operation)
        if not recorded:
            self.unanswered += 1
            raise RuntimeError(f"no recorded response for {operation}")
        self.answered += 1
        index = self._next.get(operation, 0)
        self._next[operation] = index + 1
        status, headers, body = recorded[index % len(recorded)]
        return AWSResponse(request.url, status, HeadersDict(headers), _Raw(body))

    def record(self) -> dict[str, list[Recorded]]:
        self.recorded, self.recording = {}, True
        return self.recorded

    def stop_recording(self) -> None:
        self.recording = False

    def replay(self, answers: dict[str, list[Recorded]] | None) -> None:
        # botocore calls every `before-send` handler and keeps the first answer, so moto's in-process
        # stubber would still do all its work behind ours: switch it off while we answer.
        from moto.core.models import botocore_stubber

        botocore_stubber.enabled = answers is None
        self.answers, self._next = answers, {}


def _replay_calls(calls: list[Call]) -> None:
    """The floor: the recorded calls through the layer's clients, bodies read as ours reads them."""
    from botocore import xform_name

    from agent_knowledge.repositories import aws

    for service, operation, params in calls:
        response = getattr(aws.client(service), xform_name(operation))(**params)
        body = response.get("Body")
        if body is not None:
            body.read()


def _measure(
    name: str, events: list[dict[str, Any]], rounds: int, canned: CannedAws, recorder: CallRecorder
) -> dict[str, Any]:
    recordings = []
    for event in events:
        handlers.invoke(name, event)  # warm: index loaded, signing key read, clients created
        recorded = canned.record()
        with recorder.record() as calls:
            status, body = handlers.invoke(name, event)
        canned.stop_recording()
        assert status == 200, body
        recordings.append((recorded, list(calls)))
    # Timed: the handler itself, as Lambda calls it (not the test harness's loader around it).
    from agent_knowledge_dev.handlers import load_function
    from agent_knowledge_dev.lambda_context import LambdaContext

    handler, context = load_function(name).lambda_handler, LambdaContext()
    cpu: list[float] = []
    wall: list[float] = []
    floor_cpu: list[float] = []
    try:
        for _ in range(rounds):
            for event, (recorded, calls) in zip(events, recordings, strict=True):
                canned.replay(recorded)
                answered = canned.answered
                started, started_cpu = time.perf_counter(), time.process_time()
                response = handler(event, context)
                cpu.append(time.process_time() - started_cpu)
                wall.append(time.perf_counter() - started)
                assert response["statusCode"] == 200, response
                # Every call answered from the recording: none reached moto.
                assert canned.answered - answered == sum(map(len, recorded.values())), "a call reached moto"
                canned.replay(recorded)
                answered = canned.answered
                started_cpu = time.process_time()
                _replay_calls(calls)
                floor_cpu.append(time.process_time() - started_cpu)
                # The floor made exactly the calls the recording answers: no more, no fewer.
                assert canned.answered - answered == sum(map(len, recorded.values())), "the floor's calls differ"
    finally:
        canned.replay(None)
    calls_made = [sum(len(responses) for responses in recorded.values()) for recorded, _ in recordings]
    own, floor = statistics.median(cpu) * 1000, statistics.median(floor_cpu) * 1000
    return {
        "requests": len(events),
        "aws_calls_per_request": round(statistics.mean(calls_made), 2),
        "operations": sorted({operation for recorded, _ in recordings for operation in recorded}),
        "cpu": summary_ms(cpu),
        "wall": summary_ms(wall),
        "floor_cpu": summary_ms(floor_cpu),
        "above_floor_cpu_p50_ms": round(own - floor, 3),
        "target_cpu_ms": TARGET_CPU_MS[name],
        "met": own <= TARGET_CPU_MS[name],
    }


PROFILES = {"full": {"rounds": 50}, "quick": {"rounds": 10}, "smoke": {"rounds": 2}}  # KB size: HANDBOOK_PROFILES


def run(profile: str = "full") -> dict[str, Any]:
    rounds = PROFILES[profile]["rounds"]
    with handbook_stack(profile) as handbook:
        result: dict[str, Any] = {"documents": handbook.documents, "rounds": rounds}
        canned, recorder = CannedAws(), CallRecorder()
        for name in HANDLERS:
            result[name] = _measure(name, _requests(name, handbook.queries), rounds, canned, recorder)
        result["unanswered_calls"] = canned.unanswered
    result["met"] = canned.unanswered == 0 and all(result[name]["met"] for name in HANDLERS)
    return result


if __name__ == "__main__":  # pragma: no cover - `python -m bench --only own_cpu` is the entry point
    print(json.dumps(run("quick"), indent=2))
