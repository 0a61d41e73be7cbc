"""Small fake servers on loopback (127.0.0.1, port 0) for the host client and the MCP server.

`FakeApi` answers from handlers registered per method and workspace path and records every
request. `FakeKnowledge` adds search and read with real paging: cursors, the 131072-byte
chain, refs bound to the bearer that searched, and refs a test can mark expired or changed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.protocol import LIMITS

ROUTE = "demo"
PREFIX = f"/agent-api/v1/workspaces/{ROUTE}"
CHAIN_MAX_BYTES = LIMITS["read_chain_max_bytes"]
REFERENCE_TTL_SECONDS = LIMITS["reference_ttl_seconds"]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    authorization: str | None
    body: dict[str, Any] | None

    @property
    def token(self) -> str | None:
        scheme, _, token = (self.authorization or "").partition(" ")
        return token if scheme == "Bearer" else None


# (status, JSON-able body or raw bytes) or (status, body, extra headers)
Answer = tuple[int, Any] | tuple[int, Any, dict[str, str]]
Handler = Callable[[Request], Answer]


def error(status: int, code: str, message: str = "refused") -> Answer:
    return status, {"error": code, "message": message}


def capabilities_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema_version": "bailing.agent-knowledge-capabilities.v1",
        "protocol": "bailing.agent-knowledge.v1",
        "supported": True,
        "route": ROUTE,
        "enabled": True,
        "knowledge_scope_revision": "scope-1",
        "delivery_modes": ["inline", "on_demand"],
        "limits": dict(LIMITS),
    }
    body.update(changes)
    return body


def iso_utc(epoch_seconds: float) -> str:
    """The server's `expires_at` format."""
    return datetime.fromtimestamp(int(epoch_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hint_body(ref: str, title: str = "Handbook", revision: str = "rev-1", **changes: Any) -> dict[str, Any]:
    body = {
        "ref": ref,
        "title": title,
        "summary": f"An excerpt of {title}.",
        "revision": revision,
        "score": 1.5,
        "expires_at": iso_utc(time.time() + REFERENCE_TTL_SECONDS),
    }
    body.update(changes)
    return body


def turn_body(request: Request, hints: list[dict[str, Any]] | None = None, **changes: Any) -> dict[str, Any]:
    """A turn answer shaped by what the request asked for, as the spec describes it."""
    assert request.body is not None
    mode = request.body.get("knowledge_delivery")
    document = {"title": "Handbook", "revision": "rev-1", "score": 1.5}
    inline = [{**document, "content": "Inline body.", "content_truncated": False}]
    expires_at = iso_utc(time.time() + REFERENCE_TTL_SECONDS)
    refs = [{**document, "ref": "ref-inline", "expires_at": expires_at}]
    body: dict[str, Any] = {
        "schema_version": "bailing.agent-turn-context.v1",
        "run_id": f"run-{request.body['client_turn_id']}",
        "knowledge_scope_revision": "scope-1",
        "instructions": "Answer politely.",
        "governance": {"knowledge_trust": "reference_only"},
        "knowledge": [] if mode == "on_demand" else inline,
        "knowledge_refs": [] if mode == "on_demand" else refs,
        "context": {},
    }
    if mode is not None:
        body["context"]["knowledge_delivery"] = {
            "schema_version": "bailing.agent-knowledge-delivery.v1",
            "mode": mode,
            "protocol": "bailing.agent-knowledge.v1",
            "knowledge_scope_revision": "scope-1",
            "status": "ok",
        }
        if mode == "on_demand":
            body["context"]["knowledge_delivery"].update(hints=hints or [hint_body("ref-turn")], truncated=False)
    body.update(changes)
    return body


class FakeApi:
    """A threaded HTTP server whose answers the test decides."""

    def __init__(self) -> None:
        self.handlers: dict[tuple[str, str], Handler] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        api = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                request = Request(method, self.path, self.headers.get("Authorization"), body)
                with api._lock:
                    api.requests.append(request)
                handler = api.handlers.get((method, self.path))
                status, body, *extra = handler(request) if handler else error(404, "not_found", "no such endpoint")
                data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def on(self, method: str, path: str, answer: Handler | Answer) -> None:
        """Answer `method PREFIX+path` with a handler or a fixed (status, body)."""
        self.handlers[(method, PREFIX + path)] = answer if callable(answer) else (lambda _request: answer)

    def calls(self, path: str) -> list[Request]:
        with self._lock:
            return [request for request in self.requests if request.path == PREFIX + path]

    def start(self) -> None:
        # A short poll keeps shutdown() (once per test) quick.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def running(api: FakeApi) -> Iterator[FakeApi]:
    api.start()
    try:
        yield api
    finally:
        api.stop()


@dataclass
class Document:
    title: str
    body: str
    revision: str = "rev-1"


@dataclass
class FakeKnowledge:
    """Search and read over a few documents, following the spec's paging rules.

    A ref is `ref:<doc>:<bearer>` so that each bearer gets its own references; a cursor is the
    byte offset already served. Page content is sized to `max_bytes` minus a fixed allowance
    for the JSON around it and never splits a character.
    """

    documents: dict[str, Document]
    expired: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)

    def install(self, api: FakeApi) -> None:
        api.on("POST", "/knowledge/search", self.search)
        api.on("POST", "/knowledge/read", self.read)

    def search(self, request: Request) -> Answer:
        assert request.body is not None
        query = str(request.body["query"]).lower()
        limit = int(request.body.get("limit", 3))
        hints = [
            hint_body(f"ref:{doc_id}:{request.token}", document.title, document.revision)
            for doc_id, document in self.documents.items()
            if query in document.title.lower() or query in document.body.lower()
        ][:limit]
        return 200, {
            "schema_version": "bailing.agent-knowledge-search.v1",
            "route": ROUTE,
            "run_id": request.body.get("run_id"),
            "knowledge_scope_revision": "scope-1",
            "status": "ok",
            "trust": "reference_only",
            "hints": hints,
            "truncated": False,
        }

    def read(self, request: Request) -> Answer:
        assert request.body is not None
        ref = str(request.body["ref"])
        if ref in self.expired:
            return error(410, "knowledge_reference_expired", "the knowledge reference or cursor has expired")
        if ref in self.changed:
            return error(409, "knowledge_changed", "the document changed")
        parts = ref.split(":")
        if len(parts) != 3 or parts[0] != "ref" or parts[1] not in self.documents or parts[2] != request.token:
            return error(400, "knowledge_reference_invalid", "the knowledge reference or cursor is invalid")
        document = self.documents[parts[1]]
        body = document.body.encode("utf-8")
        offset = int(request.body.get("cursor") or 0)
        page_bytes = min(int(request.body.get("max_bytes") or 16384) - 1024, CHAIN_MAX_BYTES - offset)
        end = min(offset + page_bytes, len(body))
        while end < len(body) and (body[end] & 0xC0) == 0x80:  # back off to a character boundary
            end -= 1
        content = body[offset:end].decode("utf-8")
        more = end < len(body)
        exhausted = more and end >= CHAIN_MAX_BYTES - 3  # no room left for another character
        return 200, {
            "schema_version": "bailing.agent-knowledge-read.v1",
            "route": ROUTE,
            "run_id": request.body.get("run_id"),
            "knowledge_scope_revision": "scope-1",
            "ref": ref,
            "revision": document.revision,
            "title": document.title,
            "content": content,
            "trust": "reference_only",
            "next_cursor": str(end) if more and not exhausted else None,
            "truncated": more,
            "budget_exhausted": exhausted,
            "total_content_bytes": len(body),
            "read_chain_max_bytes": CHAIN_MAX_BYTES,
        }
