"""Request bodies are strict JSON on every endpoint (docs/DESIGN.md §7): duplicate keys, NaN,
Infinity, numbers out of float range and lone surrogate escapes are 400 invalid_request, never
"last key wins" and never a 500. Also the bounds of the turns endpoint's opaque `page_context`."""

from __future__ import annotations

import json

import pytest

from agent_knowledge_dev.demo import DEMO_KB
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import put_documents

BODY = "# Travel\n\nKeep the travel receipt for the expense report.\n"
EVENTS = {
    "search": "search-english-query",
    "read": "read-first-page",
    "turns": "turns-legacy",
    "complete_run": "complete-run",
}


@pytest.fixture
def library(demo, call):
    put_documents(demo.repositories, DEMO_KB, {"travel.md": ("Travel", BODY)}, demo.clock())
    demo.run_id = call("turns", load_event("turns-on-demand")).json()["run_id"]
    return demo


@pytest.fixture
def send(call, library):
    def send_(function: str, raw: str):
        event = with_changes(load_event(EVENTS[function]), raw_body=raw)
        if function == "complete_run":  # a run of the demo session, so the body is looked at
            event["pathParameters"]["run_id"] = library.run_id
            event["rawPath"] = event["requestContext"]["http"]["path"] = f"/agent-api/v1/runs/{library.run_id}/complete"
        return call(function, event)

    return send_


def valid_body(function: str) -> str:
    return load_event(EVENTS[function])["body"]


def with_member(raw: str, member: str) -> str:
    """`raw` (a JSON object) with one more member written verbatim at its end."""
    return raw.rstrip().removesuffix("}") + ", " + member + "}"


def error(result) -> tuple[int, str]:
    assert result.headers["Cache-Control"] == "no-store"
    return result.status, result.json()["error"]


def search_ref(send) -> str:
    result = send("search", json.dumps({"query": "travel receipt"}))
    return result.json()["hints"][0]["ref"]


def test_a_duplicate_key_never_picks_the_last_value(send):
    # The reviewer's case: a garbage first value hid behind a real second one, and the read succeeded.
    ref = search_ref(send)
    result = send("read", f'{{"ref": "garbage", "ref": {json.dumps(ref)}}}')
    assert error(result) == (400, "invalid_request")
    assert "duplicate" in result.json()["message"]
    assert ref not in result.body
    assert send("read", json.dumps({"ref": ref})).status == 200


@pytest.mark.parametrize("function", sorted(EVENTS))
def test_duplicate_keys_are_400_at_any_depth(send, function):
    raw = valid_body(function)
    name = next(iter(json.loads(raw)))
    first = json.dumps(json.loads(raw)[name])
    assert error(send(function, with_member(raw, f'"{name}": {first}'))) == (400, "invalid_request")
    if function == "turns":
        nested = with_member(raw, '"page_context": {"page": "a", "page": "b"}')
        assert error(send(function, nested)) == (400, "invalid_request")


@pytest.mark.parametrize("function", sorted(EVENTS))
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_non_finite_numbers_are_400(send, function, number):
    member = {"search": "limit", "read": "max_bytes", "turns": "page_context", "complete_run": "content"}[function]
    value = f'{{"n": {number}}}' if member == "page_context" else number
    result = send(function, with_member(valid_body(function), f'"{member}": {value}'))
    assert error(result) == (400, "invalid_request")
    assert "number" in result.json()["message"]


@pytest.mark.parametrize("function", sorted(EVENTS))
def test_a_lone_surrogate_escape_is_400(send, function):
    body = json.loads(valid_body(function))
    name = next(key for key, value in body.items() if isinstance(value, str))
    body[name] = "\ud800"  # json.dumps writes it as the escape \ud800
    result = send(function, json.dumps(body))
    assert error(result) == (400, "invalid_request")
    assert "Unicode" in result.json()["message"]


# turns: page_context ------------------------------------------------------------------------------


def turn(send, page_context_json: str, **changes: str):
    body = json.loads(valid_body("turns")) | changes
    body.pop("page_context", None)
    return send("turns", with_member(json.dumps(body), f'"page_context": {page_context_json}'))


@pytest.mark.parametrize(
    "page_context",
    [
        '{"page": "\\ud800"}',  # a lone high surrogate as a value
        '{"\\udfff": "key"}',  # a lone low surrogate as a key
        '{"list": ["ok", "\\ud83d"]}',  # half of an emoji's pair, inside an array
        '{"page": "\\ude00\\ud83d"}',  # a pair in the wrong order
    ],
)
def test_page_context_strings_must_be_valid_unicode(send, page_context):
    result = turn(send, page_context)
    assert error(result) == (400, "invalid_request")


def test_page_context_with_a_valid_surrogate_pair_is_accepted(send):
    assert turn(send, '{"page": "\\ud83d\\ude00"}').status == 200


def nested(levels: int) -> str:
    """A page_context object `levels` deep: {"a": {"a": ... {}}}."""
    return '{"a": ' * (levels - 1) + "{}" + "}" * (levels - 1)


def test_hostile_nesting_of_page_context_is_400(send):
    for hostile in (nested(600), '{"a": ' + "[" * 600 + "]" * 600 + "}"):
        result = turn(send, hostile)
        assert error(result) == (400, "invalid_request")
        assert "page_context" in result.json()["message"] or "nested" in result.json()["message"]


def test_page_context_depth_bound_is_16_levels(send):
    assert turn(send, nested(16)).status == 200
    result = turn(send, nested(17), client_turn_id="deeper", user_message_id="deeper")
    assert error(result) == (400, "invalid_request")
    assert "page_context" in result.json()["message"] and "16" in result.json()["message"]


def test_page_context_size_bound_is_64_kib(send):
    overhead = len('{"text":""}')
    at_bound = json.dumps({"text": "p" * (64 * 1024 - overhead)})
    assert turn(send, at_bound).status == 200
    over = json.dumps({"text": "p" * (64 * 1024 - overhead + 1)})
    result = turn(send, over, client_turn_id="bigger", user_message_id="bigger")
    assert error(result) == (400, "invalid_request")
    assert "page_context" in result.json()["message"] and "64 KiB" in result.json()["message"]


def test_page_context_size_counts_utf8_bytes(send):
    # 3 bytes per character: 22,000 characters are 66,000 bytes, over the bound.
    result = turn(send, json.dumps({"text": "页" * 22_000}, ensure_ascii=False))
    assert error(result) == (400, "invalid_request")
