"""Hostile input to every protocol endpoint, in-process: random JSON bodies, raw bytes, base64
flags, bearer headers, header casing and route names.

Promise: only documented statuses (never 500), every answer JSON with `Cache-Control: no-store`,
and error bodies are `{error, message}` that never echo request content.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_knowledge_dev.demo import DEMO_KB, DEMO_TOKEN
from agent_knowledge_dev.handlers import load_event
from tests.reliability.fuzzcount import count
from tests.reliability.slow import scaled
from tests.support.knowledge import put_documents

DOCUMENTED = {
    "capabilities": {200, 401, 404, 503},
    "search": {200, 400, 401, 404, 409, 503},
    "read": {200, 400, 401, 404, 409, 410, 503},
    "turns": {200, 400, 401, 404, 409, 503},
    "complete_run": {200, 400, 401, 404, 409, 503},
}
EVENTS = {
    "capabilities": "capabilities-valid-bearer",
    "search": "search-english-query",
    "read": "read-first-page",
    "turns": "turns-on-demand",
    "complete_run": "complete-run",
}
FIELDS = {
    "capabilities": [],
    "search": ["query", "limit", "run_id"],
    "read": ["ref", "cursor", "run_id", "max_bytes"],
    "turns": [
        "client_conversation_id",
        "client_turn_id",
        "user_message_id",
        "user_input",
        "page_context",
        "renderers",
        "knowledge_delivery",
        "task_binding",
    ],
    "complete_run": ["assistant_message_id", "status", "content"],
}
BODY = "# Travel\n\n" + "".join(f"Rule {n}: keep the travel receipt for the expense report.\n\n" for n in range(300))

fuzz = settings(
    max_examples=scaled(100, 2000),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=80)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture
def valid(demo, call):
    """A valid reference, cursor and run of the demo session, so fuzzing also reaches the deep paths."""
    put_documents(demo.repositories, DEMO_KB, {"travel.md": ("Travel", BODY)}, demo.clock())
    event = load_event("search-english-query")
    event["body"] = json.dumps({"query": "travel receipt"})
    ref = call("search", event).json()["hints"][0]["ref"]
    event = load_event("read-first-page")
    event["body"] = json.dumps({"ref": ref, "max_bytes": 4096})
    cursor = call("read", event).json()["next_cursor"]
    run_id = call("turns", load_event("turns-on-demand")).json()["run_id"]
    return {"ref": ref, "cursor": cursor, "run_id": run_id}


def field_values(valid: dict[str, str]):
    return st.one_of(
        json_values,
        st.sampled_from(
            [valid["ref"], valid["cursor"], valid["run_id"], "run_1", 4096, 32768, 3, 1, "", "on_demand", "failed"]
        ),
        st.text(max_size=2100),
    )


# Raw JSON that Python's json module accepts but the API must refuse with 400 (never 500, never
# "last key wins"): lone surrogate escapes, NaN/Infinity and overflowing numbers, deep nesting.
lone_surrogates = st.sampled_from(["\\ud800", "\\udfff", "\\ud83d", "\\ude00\\ud83d", "x\\udbff"])
non_finite = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])


@st.composite
def hostile_values(draw) -> str:
    kind = draw(st.sampled_from(["surrogate", "surrogate_key", "number", "deep_list", "deep_object", "valid"]))
    if kind == "surrogate":
        return f'"{draw(lone_surrogates)}"'
    if kind == "surrogate_key":
        return f'{{"{draw(lone_surrogates)}": 1}}'
    if kind == "number":
        return draw(non_finite)
    depth = draw(st.integers(1, 700))
    if kind == "deep_list":
        return "[" * depth + "]" * depth
    if kind == "deep_object":
        return '{"a": ' * depth + "{}" + "}" * depth
    return json.dumps(draw(json_values))


@st.composite
def hostile_body(draw, endpoint: str) -> bytes:
    """A valid body of `endpoint` with raw members appended: hostile values, often under a name the
    body already has (a duplicate key), often inside page_context."""
    base = json.loads(load_event(EVENTS[endpoint])["body"])
    members = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(FIELDS[endpoint]) | st.text(max_size=8).map(lambda text: json.dumps(text)[1:-1]))
        value = draw(hostile_values())
        if endpoint == "turns" and draw(st.booleans()):
            name, value = "page_context", f'{{"page": {value}}}'
        members.append(f'"{name}": {value}')
    if draw(st.booleans()):
        base = {name: value for name, value in base.items() if name not in {m.split('"')[1] for m in members}}
    text = json.dumps(base)
    return (text[:-1] + (", " if base else "") + ", ".join(members) + "}").encode()


@st.composite
def requests(draw, endpoint: str, valid: dict[str, str]):
    kind = draw(st.sampled_from(["fields", "json", "text", "bytes", "hostile"]))
    if kind == "hostile" and endpoint != "capabilities":
        raw = draw(hostile_body(endpoint))
    elif kind == "fields":
        names = st.sampled_from(FIELDS[endpoint]) if FIELDS[endpoint] else st.text(max_size=8)
        body = draw(st.dictionaries(names | st.text(max_size=8), field_values(valid), max_size=5))
        raw = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    elif kind == "json":
        raw = json.dumps(draw(json_values)).encode()
    elif kind == "text":
        raw = draw(st.text(max_size=300)).encode("utf-8", "surrogatepass")
    else:
        raw = draw(st.binary(max_size=300))
    token = draw(st.text(min_size=0, max_size=60))
    authorization = draw(
        st.sampled_from(
            [f"Bearer {DEMO_TOKEN}", f"bearer {DEMO_TOKEN}", f"Bearer  {DEMO_TOKEN}", None, f"Bearer {token}", token]
        )
    )
    header_name = draw(st.sampled_from(["authorization", "Authorization", "AUTHORIZATION"]))
    if endpoint == "complete_run":  # the path names a run, not a route
        places = st.sampled_from([valid["run_id"], valid["run_id"], "run_1", "no-such-run"])
    else:
        places = st.sampled_from(["demo", "payroll", "no-such-route"])
    route = draw(places | st.text(min_size=1, max_size=30))
    if kind == "hostile":  # a caller the API accepts, so the hostile body is what gets looked at
        authorization, route = f"Bearer {DEMO_TOKEN}", valid["run_id"] if endpoint == "complete_run" else "demo"
    extra_headers = draw(st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=40), max_size=3))
    as_base64 = draw(st.booleans())
    return raw, authorization, header_name, route, extra_headers, as_base64


def build_event(endpoint: str, request) -> dict:
    raw, authorization, header_name, route, extra_headers, as_base64 = request
    event = load_event(EVENTS[endpoint])
    headers = {k: v for k, v in event["headers"].items() if k != "authorization"}
    headers.update(extra_headers)
    headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    if authorization is not None:
        headers[header_name] = authorization
    event["headers"] = headers
    if endpoint == "complete_run":
        event["pathParameters"] = {"run_id": route}
        event["rawPath"] = f"/agent-api/v1/runs/{route}/complete"
    else:
        event["pathParameters"] = {"route": route}
        event["rawPath"] = event["rawPath"].replace("/workspaces/demo/", f"/workspaces/{route}/")
    event["requestContext"]["http"]["path"] = event["rawPath"]
    if endpoint == "capabilities":
        event.pop("body", None)
    elif as_base64:
        event["body"], event["isBase64Encoded"] = base64.b64encode(raw).decode(), True
    else:
        event["body"] = raw.decode("utf-8", "replace")
    return event


def sent_strings(request) -> list[str]:
    """Request content an error must never echo: long enough strings from the body and the bearer."""
    raw, authorization, *_ = request
    found: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str) and len(value) >= 8:
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    try:
        walk(json.loads(raw))
    except ValueError:
        pass
    if authorization and len(authorization.split()[-1] if authorization.split() else "") >= 8:
        found.append(authorization.split()[-1])
    return found


def check(endpoint: str, request, result) -> None:
    count("endpoint")
    assert result.status in DOCUMENTED[endpoint], (result.status, result.body)
    assert result.headers["Cache-Control"] == "no-store"
    assert result.headers["Content-Type"] == "application/json"
    body = json.loads(result.body)
    if result.status == 200:
        return
    assert set(body) == {"error", "message"}
    for value in sent_strings(request):
        assert value not in result.body, f"the error echoes request content: {value!r}"


@pytest.mark.parametrize("endpoint", sorted(EVENTS))
def test_random_requests_get_only_documented_answers(call, valid, endpoint):
    @fuzz
    @given(requests(endpoint, valid))
    def property_(request):
        check(endpoint, request, call(endpoint, build_event(endpoint, request)))

    property_()
