"""The local API gateway: routing by template.yaml, payload 2.0 events shaped like API Gateway's,
and handler results turned back into HTTP — without AWS or sockets."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agent_knowledge_dev.gateway import (
    Gateway,
    HttpRequest,
    RouteTable,
    build_event,
    loopback_host,
    loopback_origins,
    request_time,
    to_response,
)
from agent_knowledge_dev.handlers import load_event
from agent_knowledge_dev.template import FunctionRoute, function_routes

CAPABILITIES = "/agent-api/v1/workspaces/demo/knowledge/capabilities"
SEARCH = "/agent-api/v1/workspaces/demo/knowledge/search"


def _request(method: str = "GET", target: str = CAPABILITIES, body: bytes = b"", **headers: str) -> HttpRequest:
    base = [("Host", "127.0.0.1:3000"), ("User-Agent", "curl/8.5.0"), ("Accept", "application/json")]
    return HttpRequest(method, target, base + [(k.replace("_", "-"), v) for k, v in headers.items()], body)


class Recorder:
    """Stands in for the functions: records the event, answers with a canned result."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[tuple[FunctionRoute, dict[str, Any], str]] = []
        self.result = result if result is not None else {"statusCode": 200, "headers": {}, "body": "{}"}

    def __call__(self, route: FunctionRoute, event: dict[str, Any], request_id: str) -> Any:
        self.calls.append((route, event, request_id))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def _gateway(result: Any = None) -> tuple[Gateway, Recorder]:
    recorder = Recorder(result)
    return Gateway(function_routes(), recorder, clock=lambda: 1_796_227_200.0), recorder


def _key_tree(value: Any) -> Any:
    """The nested key structure of an event, without the values."""
    if isinstance(value, dict):
        return {key: _key_tree(child) for key, child in value.items() if key not in {"headers", "pathParameters"}}
    return type(value).__name__


def test_the_event_has_the_shape_of_a_real_api_gateway_v2_event():
    gateway, recorder = _gateway()
    gateway.handle(_request(Authorization="Bearer demo-local-token-0123456789abcdef"))
    _, event, request_id = recorder.calls[0]
    sample = load_event("capabilities-valid-bearer")
    assert _key_tree(event) == _key_tree(sample)
    assert set(event["headers"]) == set(sample["headers"])
    assert event["version"] == "2.0"
    assert event["routeKey"] == "GET /agent-api/v1/workspaces/{route}/knowledge/capabilities"
    assert event["requestContext"]["routeKey"] == event["routeKey"]
    assert event["rawPath"] == event["requestContext"]["http"]["path"] == CAPABILITIES
    assert event["requestContext"]["http"] == {
        "method": "GET",
        "path": CAPABILITIES,
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "curl/8.5.0",
    }
    assert event["requestContext"]["requestId"] == request_id
    assert event["requestContext"]["stage"] == "$default"
    assert event["requestContext"]["time"] == "02/Dec/2026:16:00:00 +0000"
    assert event["requestContext"]["timeEpoch"] == 1_796_227_200_000
    assert event["pathParameters"] == {"route": "demo"}
    assert event["isBase64Encoded"] is False and "body" not in event


def test_headers_are_lower_cased_and_repeated_ones_joined_with_commas():
    request = HttpRequest(
        "GET", CAPABILITIES, [("Host", "h:1"), ("X-Trace", "a"), ("x-trace", "b"), ("Cookie", "a=1; b=2")]
    )
    event = build_event(request, RouteTable(function_routes()).match("GET", CAPABILITIES), "id", 0)
    assert event["headers"]["x-trace"] == "a,b"
    assert all(name == name.lower() for name in event["headers"])
    assert event["cookies"] == ["a=1", "b=2"] and "cookie" not in event["headers"]


def test_query_strings_are_raw_and_parsed():
    gateway, recorder = _gateway()
    gateway.handle(_request(target=CAPABILITIES + "?a=1&a=2&b=%E4%B8%AD&empty="))
    event = recorder.calls[0][1]
    assert event["rawPath"] == CAPABILITIES
    assert event["rawQueryString"] == "a=1&a=2&b=%E4%B8%AD&empty="
    assert event["queryStringParameters"] == {"a": "1,2", "b": "中", "empty": ""}


def test_path_parameters_are_url_decoded():
    gateway, recorder = _gateway()
    gateway.handle(_request(target="/agent-api/v1/workspaces/caf%C3%A9/knowledge/capabilities"))
    event = recorder.calls[0][1]
    assert event["pathParameters"] == {"route": "café"}
    assert event["rawPath"] == "/agent-api/v1/workspaces/caf%C3%A9/knowledge/capabilities"


def test_text_bodies_pass_as_text_and_binary_ones_as_base64():
    gateway, recorder = _gateway()
    text = json.dumps({"query": "年假"}, ensure_ascii=False).encode("utf-8")
    gateway.handle(_request("POST", SEARCH, text, Content_Type="application/json"))
    gateway.handle(_request("POST", SEARCH, b"\xff\x00\x01", Content_Type="application/json"))
    gateway.handle(_request("POST", SEARCH, b"plain", Content_Type="application/octet-stream"))
    events = [call[1] for call in recorder.calls]
    assert (events[0]["body"], events[0]["isBase64Encoded"]) == (text.decode("utf-8"), False)
    assert (base64.b64decode(events[1]["body"]), events[1]["isBase64Encoded"]) == (b"\xff\x00\x01", True)
    assert (base64.b64decode(events[2]["body"]), events[2]["isBase64Encoded"]) == (b"plain", True)
    assert all(call[0].short_name == "search" for call in recorder.calls)


def test_routing_follows_template_yaml():
    table = RouteTable(function_routes())
    for route in function_routes():
        path = route.path.replace("{route}", "demo")
        match = table.match(route.method, path)
        assert not isinstance(match, list) and match is not None
        assert match.route == route
    assert table.match("POST", CAPABILITIES) == ["GET"]
    assert table.match("GET", "/agent-api/v1/workspaces/demo/knowledge") is None
    assert table.match("GET", "/agent-api/v1/workspaces/a/b/knowledge/capabilities") is None


@pytest.mark.parametrize(
    ("method", "target", "status", "code"),
    [
        ("GET", "/agent-api/v1/nowhere", 404, "not_found"),
        ("GET", "/", 404, "not_found"),
        ("POST", CAPABILITIES, 405, "method_not_allowed"),
        ("GET", SEARCH, 405, "method_not_allowed"),
    ],
)
def test_unknown_paths_and_wrong_methods_never_reach_a_function(method, target, status, code):
    gateway, recorder = _gateway()
    response = gateway.handle(_request(method, target))
    assert response.status == status
    assert json.loads(response.body)["error"] == code
    assert response.header("Cache-Control") == "no-store"
    assert response.header("Content-Type") == "application/json"
    assert recorder.calls == []
    if status == 405:
        assert response.header("Allow") in {"GET", "POST"}


@pytest.mark.parametrize(
    ("host", "port", "accepted"),
    [
        ("127.0.0.1:3000", 3000, True),
        ("localhost:3000", 3000, True),
        ("[::1]:3000", 3000, True),
        ("LOCALHOST:3000", 3000, True),  # names are case-insensitive
        (" localhost:3000 ", 3000, True),
        ("localhost:3001", 3000, False),
        ("localhost", 3000, False),  # a client leaves the port out only for 80
        ("localhost", 80, True),
        ("127.0.0.1:80", 80, True),
        ("[::1]", 80, True),
        ("localhost:3000", None, True),  # the port not yet known: any port
        ("localhost:65000", None, True),
        ("evil.example:3000", 3000, False),
        ("evil.example:3000", None, False),
        ("localhost.:3000", 3000, False),
        ("localhost.evil.example:3000", 3000, False),
        ("127.0.0.2:3000", 3000, False),
        ("::1:3000", 3000, False),  # an IPv6 address in Host is bracketed
        ("[::1]x:3000", 3000, False),
        ("localhost:3000:3000", 3000, False),
        ("localhost:x", 3000, False),
        ("localhost:", 3000, False),
        ("localhost@evil.example:3000", 3000, False),
        ("", 3000, False),
        (None, 3000, False),
    ],
)
def test_only_a_loopback_host_with_the_servers_port_is_this_server(host, port, accepted):
    assert loopback_host(host, port) is accepted


def test_the_loopback_origins_name_the_port_except_80():
    assert loopback_origins(3000) == ("http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000")
    assert loopback_origins(80) == ("http://localhost", "http://127.0.0.1", "http://[::1]")


@pytest.mark.parametrize(
    "hosts",
    [
        [("Host", "evil.example:3000")],
        [("Host", "localhost:3001")],
        [],  # HTTP/1.0 without Host
        [("Host", "localhost:3000"), ("Host", "evil.example:3000")],
    ],
)
@pytest.mark.parametrize("target", [CAPABILITIES, SEARCH, "/agent-api/v1/workspaces/demo/mcp", "/nowhere"])
def test_a_request_not_addressed_to_a_loopback_name_and_the_port_is_403_on_every_path(hosts, target):
    recorder = Recorder()
    gateway = Gateway(function_routes(), recorder, port=3000)
    auth = [("Authorization", "Bearer demo-local-token-0123456789abcdef"), ("Origin", "http://evil.example:3000")]
    response = gateway.handle(HttpRequest("POST", target, [*hosts, *auth], b"{}"))
    assert response.status == 403
    body = json.loads(response.body)
    assert body["error"] == "forbidden"
    assert "localhost, 127.0.0.1 or [::1] on port 3000" in body["message"] and "DNS rebinding" in body["message"]
    assert "evil" not in body["message"]  # nothing of the request is echoed
    assert response.header("Cache-Control") == "no-store" and response.header("apigw-requestid")
    assert recorder.calls == []


def test_each_loopback_name_with_the_port_reaches_the_function():
    recorder = Recorder()
    gateway = Gateway(function_routes(), recorder, port=3000)
    for host in ("localhost:3000", "127.0.0.1:3000", "[::1]:3000"):
        assert gateway.handle(HttpRequest("GET", CAPABILITIES, [("Host", host)])).status == 200
    assert [event["requestContext"]["domainName"] for _, event, _ in recorder.calls] == [
        "localhost",
        "127.0.0.1",
        "[::1]",
    ]


def test_a_crashing_function_is_a_502_without_details():
    gateway, _ = _gateway(RuntimeError("secret /var/task detail"))
    response = gateway.handle(_request())
    assert response.status == 502
    assert b"secret" not in response.body
    assert response.header("Cache-Control") == "no-store"


def test_results_become_http_responses():
    response = to_response(
        {
            "statusCode": 201,
            "headers": {"Content-Type": "application/json", "Cache-Control": "no-store"},
            "cookies": ["a=1", "b=2"],
            "body": '{"ok":true}',
            "isBase64Encoded": False,
        }
    )
    assert response.status == 201
    assert response.body == b'{"ok":true}'
    assert ("Set-Cookie", "a=1") in response.headers and ("Set-Cookie", "b=2") in response.headers
    assert response.header("cache-control") == "no-store"
    binary = to_response({"statusCode": 200, "body": base64.b64encode(b"\x00\xff").decode(), "isBase64Encoded": True})
    assert binary.body == b"\x00\xff"
    multi = to_response({"statusCode": 200, "multiValueHeaders": {"X-A": ["1", "2"]}, "body": ""})
    assert [value for name, value in multi.headers if name == "X-A"] == ["1", "2"]


def test_a_result_without_status_code_is_a_200_json_body():
    """Payload format 2.0: API Gateway serializes such a result as the body."""
    response = to_response({"hello": "world"})
    assert (response.status, json.loads(response.body)) == (200, {"hello": "world"})
    assert response.header("Content-Type") == "application/json"


def test_every_response_carries_a_request_id():
    gateway, recorder = _gateway()
    response = gateway.handle(_request())
    assert response.header("apigw-requestid") == recorder.calls[0][2]


def test_request_time_is_locale_independent():
    assert request_time(0) == "01/Jan/1970:00:00:00 +0000"
    assert request_time(1_796_227_200_123) == "02/Dec/2026:16:00:00 +0000"
