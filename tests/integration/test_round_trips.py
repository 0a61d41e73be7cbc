"""AWS calls per request and their sequential depth, per endpoint, counted exactly (issue 16).

On AWS a request's latency is the sum of its sequential round trips, so both numbers are part of
the contract: a change that adds a call or serializes two overlapping ones fails here.

Every call is slowed down (`LATENCY_SECONDS`, before moto answers), so calls the product
overlaps really overlap in time and calls it makes one after another never do; the depth is
then the largest number of calls that do not overlap each other (greedy interval scheduling),
which is the length of the request's critical path in round trips. Requests are measured warm:
the signing key and the opened indexes are already cached by an earlier request.
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from agent_knowledge.indexer.rebuild import rebuild_kb_index
from agent_knowledge.indexer.vector_generation import embed_unembedded
from agent_knowledge.repositories import aws
from agent_knowledge.settings import get_settings
from agent_knowledge_dev.demo import DEMO_KB
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import put_documents

LATENCY_SECONDS = 0.15
SERVICES = ("dynamodb", "s3", "secretsmanager", "bedrock-runtime")
DOCUMENTS = {
    "hr/vacation.md": (
        "Vacation policy",
        "# Vacation policy\n\nEmployees accrue vacation days monthly. Request vacation days in the HR portal.\n",
    ),
    "hr/carry-over.md": (
        "Vacation carry-over",
        "# Vacation carry-over\n\n" + "Unused vacation days carry over up to five days per year. " * 400 + "\n",
    ),
    "hr/leave.md": ("Parental leave", "# Parental leave\n\nParental leave is sixteen weeks; vacation days accrue.\n"),
}


@dataclass
class Call:
    operation: str
    started: float
    ended: float = 0.0


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def before_call(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        call = Call(model.name, time.monotonic())
        context["round_trip_call"] = call
        with self.lock:
            self.calls.append(call)

    def before_send(self, **_: Any) -> None:
        time.sleep(LATENCY_SECONDS)  # then moto answers (its own before-send handler)

    def after_call(self, context: dict[str, Any], **_: Any) -> None:
        call = context.get("round_trip_call")
        if call is not None:
            call.ended = time.monotonic()

    def depth(self) -> int:
        """Most calls of which no two overlap: the critical path, in round trips."""
        depth, free_at = 0, float("-inf")
        for call in sorted(self.calls, key=lambda c: c.ended):
            if call.started >= free_at:
                depth, free_at = depth + 1, call.ended
        return depth

    def operations(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in self.calls:
            counts[call.operation] = counts.get(call.operation, 0) + 1
        return dict(sorted(counts.items()))


@pytest.fixture
def measure(demo):
    put_documents(demo.repositories, DEMO_KB, DOCUMENTS, demo.clock())
    recorder = Recorder()
    handlers = [
        ("before-call", recorder.before_call),
        ("after-call", recorder.after_call),
        ("after-call-error", recorder.after_call),
    ]
    clients = [aws.client(service) for service in SERVICES]
    for client in clients:
        for event, handler in handlers:
            client.meta.events.register(event, handler)
        client.meta.events.register_first("before-send", recorder.before_send)

    def run(action):  # type: ignore[no-untyped-def]
        recorder.calls.clear()
        result = action()
        assert all(call.ended for call in recorder.calls)
        return result, (len(recorder.calls), recorder.depth(), recorder.operations())

    yield run
    for client in clients:
        for event, handler in handlers:
            client.meta.events.unregister(event, handler)
        client.meta.events.unregister("before-send", recorder.before_send)


def _search(call, **body):  # type: ignore[no-untyped-def]
    result = call("search", with_changes(load_event("search-english-query"), body={"query": "vacation days", **body}))
    assert result.status == 200, result.body
    return result.json()


def _read(call, **body):  # type: ignore[no-untyped-def]
    result = call("read", with_changes(load_event("read-first-page"), body=body))
    assert result.status == 200, result.body
    return result.json()


def _mcp(call, tool: str, **arguments):  # type: ignore[no-untyped-def]
    """A tools/call of the MCP endpoint → the tool's answer, the protocol's own JSON."""
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    result = call("mcp", with_changes(load_event("mcp-search"), body=message))
    assert result.status == 200, result.body
    assert not result.json()["result"]["isError"], result.body
    return result.json()["result"]["structuredContent"]


def _turn(call, n: int, delivery: str | None):  # type: ignore[no-untyped-def]
    body = json.loads(load_event("turns-legacy")["body"])
    body.update(client_turn_id=f"turn-{n}", user_message_id=f"message-{n}", user_input="How do vacation days work?")
    if delivery:
        body["knowledge_delivery"] = delivery
    result = call("turns", with_changes(load_event("turns-legacy"), body=body))
    assert result.status == 200, result.body
    return result.json()


def _complete(call, run_id: str):  # type: ignore[no-untyped-def]
    event = load_event("complete-run")
    event["rawPath"] = event["rawPath"].replace("run_demo", run_id)
    event["requestContext"]["http"]["path"] = event["rawPath"]
    event["pathParameters"] = {**(event.get("pathParameters") or {}), "run_id": run_id}
    result = call("complete_run", event)
    assert result.status == 200, result.body
    return result.json()


# (calls, sequential depth, calls per operation) of one warm request. Before issue 16 (every call
# sequential): capabilities 4/4, search 5/5, search with run 6/6, read 6/6, turn inline 13/13,
# turn on_demand 10/10, complete run 6/6. Issue 16's targets: depth ≤ 2, 3, 3, 6 and 5.
EXPECTED = {
    # {session, route} then {client, KBs}
    "capabilities": (2, 2, {"BatchGetItem": 2}),
    # + the hits' document records (the index is cached)
    "search": (3, 3, {"BatchGetItem": 3}),
    # the run joins the first batch (its task, if any, the second)
    "search with run": (3, 3, {"BatchGetItem": 3}),
    # the document record joins the first batch; the body GET overlaps the second
    "read first page": (3, 2, {"BatchGetItem": 2, "GetObject": 1}),
    "read next page": (3, 2, {"BatchGetItem": 2, "GetObject": 1}),
    # two identity batches, the claims in one transaction, the hits' records, the bodies at once,
    # the two final writes in another transaction (before: three PutItem, then two UpdateItem)
    "turn inline": (8, 6, {"BatchGetItem": 3, "GetObject": 3, "TransactWriteItems": 2}),
    "turn on_demand": (5, 5, {"BatchGetItem": 3, "TransactWriteItems": 2}),
    # {session, run} then {client, the run's route}; the completion claim and the run's transition
    "complete run": (4, 4, {"BatchGetItem": 2, "PutItem": 1, "UpdateItem": 1}),
    # The MCP endpoint's tools make exactly the calls of the routes they stand for (issue 28).
    "mcp search": (3, 3, {"BatchGetItem": 3}),
    "mcp read first page": (3, 2, {"BatchGetItem": 2, "GetObject": 1}),
    "mcp read next page": (3, 2, {"BatchGetItem": 2, "GetObject": 1}),
    # Every other message only revalidates the caller: {session, route} then {client, KBs}.
    "mcp tools/list": (2, 2, {"BatchGetItem": 2}),
}


def test_aws_calls_and_sequential_depth_per_endpoint(call, measure):
    measured: dict[str, tuple[int, int, dict[str, int]]] = {}
    _turn(call, 0, "inline")  # warm: signing key, index snapshot, clients
    hints = _search(call)["hints"]
    assert len(hints) == 3

    _, measured["capabilities"] = measure(lambda: call("capabilities", load_event("capabilities-valid-bearer")).json())
    _, measured["search"] = measure(lambda: _search(call))
    inline, measured["turn inline"] = measure(lambda: _turn(call, 1, "inline"))
    assert len(inline["knowledge"]) == 3
    on_demand, measured["turn on_demand"] = measure(lambda: _turn(call, 2, "on_demand"))
    assert on_demand["context"]["knowledge_delivery"]["hints"]
    _, measured["search with run"] = measure(lambda: _search(call, run_id=inline["run_id"]))
    long_ref = next(hint["ref"] for hint in hints if hint["title"] == "Vacation carry-over")
    first, measured["read first page"] = measure(lambda: _read(call, ref=long_ref, max_bytes=4096))
    assert first["next_cursor"]
    _, measured["read next page"] = measure(
        lambda: _read(call, ref=long_ref, cursor=first["next_cursor"], max_bytes=4096)
    )
    _, measured["complete run"] = measure(lambda: _complete(call, inline["run_id"]))

    _mcp(call, "knowledge_search", query="vacation days")  # warm the MCP function's container too
    _, measured["mcp search"] = measure(lambda: _mcp(call, "knowledge_search", query="vacation days"))
    mcp_first, measured["mcp read first page"] = measure(
        lambda: _mcp(call, "knowledge_read", ref=long_ref, max_bytes=4096)
    )
    assert mcp_first["next_cursor"]
    _, measured["mcp read next page"] = measure(
        lambda: _mcp(call, "knowledge_read", ref=long_ref, cursor=mcp_first["next_cursor"], max_bytes=4096)
    )
    _, measured["mcp tools/list"] = measure(lambda: call("mcp", load_event("mcp-tools-list")).json())

    assert measured == EXPECTED


class _TitanAnswer(io.BytesIO):
    """A raw HTTP body botocore can stream."""

    def stream(self, **_: Any):  # type: ignore[no-untyped-def]
        while chunk := self.read(65536):
            yield chunk


def _titan_v2(request: Any, **_: Any) -> AWSResponse:
    """bedrock-runtime InvokeModel's answer for Titan Text Embeddings v2 (its recorded shape)."""
    dimensions = json.loads(request.body)["dimensions"]
    payload = json.dumps({"embedding": [1.0] + [0.0] * (dimensions - 1), "inputTextTokenCount": 2}).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(payload))}
    return AWSResponse(request.url, 200, headers, _TitanAnswer(payload))


def test_a_search_embedding_its_query_with_bedrock_keeps_three_round_trips(demo, call, measure, monkeypatch):
    """The query's InvokeModel starts once the session is valid and overlaps the scope read and the
    index loads: one more call, not one more round trip (issue 26). Before, it started after the
    identity and scope reads and made a 4th."""
    monkeypatch.setenv("EMBEDDING_PROVIDER", "bedrock")
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "256")
    get_settings.reset()  # the Dependencies of each call read the settings: Bedrock's from now on
    bedrock = aws.client("bedrock-runtime")
    bedrock.meta.events.register_first("before-send", _titan_v2)  # after the fixture's latency
    try:
        deps = demo.dependencies()
        rebuild_kb_index(
            demo.repositories, DEMO_KB, vector_space=deps.vector_space
        )  # `kb reindex`: the new model's space
        embedded = embed_unembedded(demo.repositories, DEMO_KB, deps.embedder())
        assert embedded.embedded_chunks > 0 and embedded.remaining_documents == 0  # search is hybrid now
        assert len(_search(call)["hints"]) == 3  # warm
        _, measured = measure(lambda: _search(call))
    finally:
        bedrock.meta.events.unregister("before-send", _titan_v2)
        get_settings.reset()
    assert measured == (4, 3, {"BatchGetItem": 3, "InvokeModel": 1})
