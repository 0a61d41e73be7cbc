"""The local HTTP server itself (`agent_knowledge_dev.server`), in-process on a loopback port in
front of the real gateway and a stub function: what it logs, and how it answers requests that never
reach a function (issue 17, findings 9 and 10). Raw sockets, so malformed requests go out as written.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agent_knowledge_dev.gateway import Gateway
from agent_knowledge_dev.server import ApiServer
from agent_knowledge_dev.template import function_routes

CAPABILITIES = "/agent-api/v1/workspaces/demo/knowledge/capabilities"
SEARCH = "/agent-api/v1/workspaces/demo/knowledge/search"
BEARER = "local-server-bearer-0123456789abcdef"
BODY = b'{"query":"vacation"}'  # 20 bytes


class Functions:
    """Stands in for the Lambda functions: records each event, answers 200 with a small JSON body."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, route: Any, event: dict[str, Any], request_id: str) -> dict[str, Any]:
        self.events.append(event)
        headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
        return {"statusCode": 200, "headers": headers, "body": json.dumps({"function": route.function})}


@pytest.fixture
def functions() -> Functions:
    return Functions()


@pytest.fixture
def server(functions: Functions) -> Iterator[ApiServer]:
    api = ApiServer(("127.0.0.1", 0), Gateway(function_routes(), functions), quiet=False)
    thread = threading.Thread(target=api.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.shutdown()
        api.server_close()
        thread.join(timeout=10)


class Answer:
    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers: dict[str, list[str]] = {}
        for line in lines:
            name, _, value = line.partition(":")
            self.headers.setdefault(name.strip().lower(), []).append(value.strip())

    def header(self, name: str) -> str:
        (value,) = self.headers[name]
        return value

    def json(self) -> Any:
        assert self.header("content-type") == "application/json"
        assert len(self.body) == int(self.header("content-length"))
        return json.loads(self.body)


def exchange(server: ApiServer, request: bytes) -> Answer:
    """Send `request` as is, its `localhost:PORT` (the Host) naming the server's port, half-close,
    and read the whole answer (every error answer closes)."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), port), timeout=30) as connection:
        connection.sendall(request.replace(b"localhost:PORT", f"localhost:{port}".encode()))
        connection.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return Answer(received)


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: localhost:PORT", f"Authorization: Bearer {BEARER}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def assert_json_error(answer: Answer, status: int, code: str) -> None:
    assert answer.status == status
    assert answer.header("cache-control") == "no-store"
    assert answer.json()["error"] == code
    assert b"<html" not in answer.body.lower() and b"<!doctype" not in answer.body.lower()


# Finding 9 -----------------------------------------------------------------------------------------


def test_the_access_log_names_the_path_never_the_query_string(server, functions, capsys) -> None:
    secret = "bearer-in-the-query-string-fedcba9876543210"
    answer = exchange(server, get(f"{CAPABILITIES}?access_token={secret}&x=1"))

    assert answer.status == 200 and len(functions.events) == 1
    assert functions.events[0]["rawQueryString"] == f"access_token={secret}&x=1"  # the function still gets it
    logged = capsys.readouterr().err
    assert f"GET {CAPABILITIES} → 200" in logged
    assert secret not in logged and "access_token" not in logged and "?" not in logged


def test_the_access_log_escapes_control_characters_in_the_path(server, capsys) -> None:
    exchange(server, get("/nowhere/\x1b[31mred\x07"))

    logged = capsys.readouterr().err
    assert "\x1b" not in logged and "\x07" not in logged
    assert "/nowhere/\\x1b[31mred\\x07 → 404" in logged


# Finding 10 ----------------------------------------------------------------------------------------


def test_an_unknown_method_is_answered_by_the_gateway_as_json(server, functions) -> None:
    request = f"BREW {CAPABILITIES} HTTP/1.1\r\nHost: localhost:PORT\r\nContent-Length: 0\r\n\r\n".encode()

    answer = exchange(server, request)

    assert_json_error(answer, 405, "method_not_allowed")
    assert answer.header("allow") == "GET"
    assert exchange(server, b"BREW /nowhere HTTP/1.1\r\nHost: localhost:PORT\r\n\r\n").status == 404
    assert functions.events == []


def test_a_70_kb_header_is_431_json_with_no_store(server, functions) -> None:
    answer = exchange(server, get(CAPABILITIES, "X-Padding: " + "a" * 70_000))

    assert_json_error(answer, 431, "request_header_fields_too_large")
    assert answer.header("connection") == "close"
    assert functions.events == []


def test_150_headers_are_431_json_with_no_store(server, functions) -> None:
    answer = exchange(server, get(CAPABILITIES, *(f"X-Header-{n}: {n}" for n in range(150))))

    assert_json_error(answer, 431, "request_header_fields_too_large")
    assert functions.events == []


def test_a_request_line_over_64_kib_is_414_json_with_no_store(server, functions) -> None:
    answer = exchange(server, get(CAPABILITIES + "?q=" + "a" * 70_000))

    assert_json_error(answer, 414, "request_uri_too_long")
    assert functions.events == []


@pytest.mark.parametrize(
    ("request_line", "status", "code"),
    [
        ("GARBAGE", 400, "invalid_request"),
        ("GET /x", 400, "invalid_request"),  # HTTP/0.9: http.server would answer without a status line
        ("GET /x HTTP/1.1 extra", 400, "invalid_request"),
        ("GET /x SPDY/3", 400, "invalid_request"),
        ("GET /x HTTP/9.9", 505, "http_version_not_supported"),
    ],
)
def test_a_malformed_request_line_is_json_with_no_store(server, functions, request_line, status, code) -> None:
    answer = exchange(server, f"{request_line}\r\nHost: localhost:PORT\r\n\r\n".encode())

    assert_json_error(answer, status, code)
    assert functions.events == []


def post_search(*content_lengths: str) -> bytes:
    """A search request whose body is BODY, sent with exactly the given Content-Length headers."""
    lines = [f"POST {SEARCH} HTTP/1.1", "Host: localhost:PORT", f"Authorization: Bearer {BEARER}"]
    lines += ["Content-Type: application/json", *(f"Content-Length: {value}" for value in content_lengths)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + BODY


def test_two_different_content_lengths_are_refused_with_400(server, functions) -> None:
    answer = exchange(server, post_search(str(len(BODY)), "2"))

    assert_json_error(answer, 400, "invalid_request")
    assert "Content-Length" in answer.json()["message"]
    assert answer.header("connection") == "close"
    assert functions.events == []


@pytest.mark.parametrize("value", ["+20", "2_0", "0x14", " 20 20", "-1", "20, 20"])
def test_a_content_length_that_is_not_plain_digits_is_refused_with_400(server, functions, value) -> None:
    answer = exchange(server, post_search(value))

    assert_json_error(answer, 400, "invalid_request")
    assert functions.events == []


def test_identical_repeated_content_lengths_are_one_length(server, functions) -> None:
    answer = exchange(server, post_search(str(len(BODY)), str(len(BODY))))

    assert answer.status == 200
    assert functions.events[0]["body"] == BODY.decode()
