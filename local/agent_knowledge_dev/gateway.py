"""A local stand-in for API Gateway HTTP API: HTTP request → payload 2.0 event → handler → HTTP response.

It routes by the `HttpApi` events in `template.yaml`, so a route added there is served locally with
no other change. Events have the fields AWS documents for payload format 2.0 (lower-cased headers,
`cookies` and `queryStringParameters` only when present, comma-joined repeated values, URL-decoded
path parameters, `isBase64Encoded` bodies for non-text content). Unknown paths answer 404 and a known
path with another method 405, both as JSON with `Cache-Control: no-store` like the functions do.

Unlike API Gateway, it answers only requests addressed to it by a loopback name — `Host` is
`localhost`, `127.0.0.1` or `[::1]` with the server's port — and refuses any other `Host` with 403
on every path, before routing: a web page whose domain an attacker rebinds to 127.0.0.1 (DNS
rebinding) reaches this server with its own name in `Host`, and with the demo bearer, which is
public, it could otherwise read the local knowledge. HTTP clients leave the port out of `Host` only
when it is the scheme's default (80), so the bare names are accepted on port 80 only. The MCP
route's `Origin` rule is the function's (`agent_knowledge.mcp.origins`); `serve` gives it the
`loopback_origins` of its port.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from agent_knowledge_dev.template import FunctionRoute

ACCOUNT_ID = "123456789012"
API_ID = "local"
STAGE = "$default"
# Lambda's synchronous invocation payload limit; API Gateway answers 413 above it.
MAX_REQUEST_BYTES = 6 * 1024 * 1024
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-www-form-urlencoded")
_PARAMETER = re.compile(r"\{([A-Za-z0-9_]+)(\+?)\}")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_HOST = re.compile(r"(?P<name>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>[0-9]{1,5}))?")

log = logging.getLogger(__name__)

Invoke = Callable[[FunctionRoute, dict[str, Any], str], dict[str, Any]]


@dataclass(frozen=True)
class HttpRequest:
    method: str
    target: str  # path and query exactly as received, e.g. /a/b?x=1
    headers: list[tuple[str, str]]
    body: bytes = b""
    source_ip: str = "127.0.0.1"
    protocol: str = "HTTP/1.1"


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key.lower() == name.lower()), None)


def loopback_host(value: str | None, port: int | None) -> bool:
    """`value` (a `Host` header) names this server by a loopback name: `localhost`, `127.0.0.1` or
    `[::1]` (any case), with `port`, or without a port when `port` is 80, where clients leave it
    out. `port` None: the server's port is not known (a gateway without a socket): any port."""
    found = _HOST.fullmatch(value.strip().lower()) if value is not None else None
    if found is None or found.group("name") not in LOOPBACK_NAMES:
        return False
    sent = int(found.group("port")) if found.group("port") is not None else 80
    return port is None or sent == port


def loopback_origins(port: int) -> tuple[str, ...]:
    """The origins of this server's own pages, one per loopback name: what the MCP route accepts
    as `Origin` locally (browsers leave the default port 80 out)."""
    suffix = "" if port == 80 else f":{port}"
    return tuple(f"http://{name}{suffix}" for name in LOOPBACK_NAMES)


def json_error(status: int, code: str, message: str, headers: list[tuple[str, str]] | None = None) -> HttpResponse:
    body = json.dumps({"error": code, "message": message}, separators=(",", ":")).encode()
    base = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
    return HttpResponse(status, base + (headers or []), body)


@dataclass(frozen=True)
class RouteMatch:
    route: FunctionRoute
    path_parameters: dict[str, str]

    @property
    def route_key(self) -> str:
        return f"{self.route.method} {self.route.path}"


def _pattern(path: str) -> re.Pattern[str]:
    """`/a/{route}/b` → a regex with a named group per parameter; `{proxy+}` spans segments."""
    parts, position = [], 0
    for match in _PARAMETER.finditer(path):
        parts.append(re.escape(path[position : match.start()]))
        parts.append(f"(?P<{match.group(1)}>{'.+' if match.group(2) else '[^/]+'})")
        position = match.end()
    parts.append(re.escape(path[position:]))
    return re.compile("".join(parts) + r"\Z")


class RouteTable:
    def __init__(self, routes: list[FunctionRoute]) -> None:
        self._routes = [(route, _pattern(route.path)) for route in routes]

    def match(self, method: str, raw_path: str) -> RouteMatch | list[str] | None:
        """The matching route; else the methods the path accepts (405); else None (404)."""
        allowed = []
        for route, pattern in self._routes:
            found = pattern.match(raw_path)
            if not found:
                continue
            if route.method in {method, "ANY"}:
                return RouteMatch(route, {name: unquote(value) for name, value in found.groupdict().items()})
            allowed.append(route.method)
        return allowed or None


def _joined(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Repeated names are joined with commas, as API Gateway does for headers and query strings."""
    joined: dict[str, str] = {}
    for name, value in pairs:
        joined[name] = f"{joined[name]},{value}" if name in joined else value
    return joined


def _is_text(content_type: str, body: bytes) -> bool:
    if content_type and not content_type.lower().startswith(_TEXT_TYPES):
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def request_time(epoch_ms: int) -> str:
    """`02/Dec/2026:16:00:00 +0000` — API Gateway's requestContext.time, independent of locale."""
    moment = time.gmtime(epoch_ms / 1000)
    return f"{moment.tm_mday:02d}/{_MONTHS[moment.tm_mon - 1]}/{time.strftime('%Y:%H:%M:%S', moment)} +0000"


def build_event(request: HttpRequest, match: RouteMatch, request_id: str, epoch_ms: int) -> dict[str, Any]:
    raw_path, _, raw_query = request.target.partition("?")
    cookies = [
        cookie.strip() for name, value in request.headers if name.lower() == "cookie" for cookie in value.split(";")
    ]
    headers = _joined([(name.lower(), value) for name, value in request.headers if name.lower() != "cookie"])
    host = headers.get("host", "localhost")
    domain = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    port = host.rsplit(":", 1)[1] if ":" in host and not host.endswith("]") else "80"
    headers.setdefault("x-forwarded-for", request.source_ip)
    headers.setdefault("x-forwarded-port", port)
    headers.setdefault("x-forwarded-proto", "http")
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": match.route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
    }
    if cookies:
        event["cookies"] = [cookie for cookie in cookies if cookie]
    event["headers"] = headers
    if raw_query:
        event["queryStringParameters"] = _joined(parse_qsl(raw_query, keep_blank_values=True))
    event["requestContext"] = {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": domain,
        "domainPrefix": domain.split(".")[0],
        "http": {
            "method": request.method,
            "path": raw_path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": match.route_key,
        "stage": STAGE,
        "time": request_time(epoch_ms),
        "timeEpoch": epoch_ms,
    }
    if match.path_parameters:
        event["pathParameters"] = match.path_parameters
    if request.body:
        if _is_text(headers.get("content-type", ""), request.body):
            event["body"] = request.body.decode("utf-8")
            event["isBase64Encoded"] = False
        else:
            event["body"] = base64.b64encode(request.body).decode("ascii")
            event["isBase64Encoded"] = True
    else:
        event["isBase64Encoded"] = False
    return event


def to_response(result: Any) -> HttpResponse:
    """A handler's return value → HTTP, by the payload 2.0 rules (a value without `statusCode` is a
    200 JSON body)."""
    if not (isinstance(result, dict) and "statusCode" in result):
        body = result if isinstance(result, str) else json.dumps(result)
        return HttpResponse(200, [("Content-Type", "application/json")], body.encode("utf-8"))
    headers = [(str(name), str(value)) for name, value in (result.get("headers") or {}).items()]
    for name, values in (result.get("multiValueHeaders") or {}).items():
        if not any(existing.lower() == str(name).lower() for existing, _ in headers):
            headers.extend((str(name), str(value)) for value in values)
    headers.extend(("Set-Cookie", str(cookie)) for cookie in result.get("cookies") or [])
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode("utf-8")
    return HttpResponse(int(result["statusCode"]), headers, body)


class Gateway:
    """Routes one request to a function and converts both ways. `invoke` is injectable for tests.
    `port`: the port the server listens on (`ApiServer` sets it once bound), which `Host` must name."""

    def __init__(
        self,
        routes: list[FunctionRoute],
        invoke: Invoke,
        clock: Callable[[], float] = time.time,
        port: int | None = None,
        documents: dict[str, Callable[[], dict[str, Any]]] | None = None,
    ) -> None:
        self._table = RouteTable(routes)
        # GET path → a JSON document the gateway itself serves (`serve --oauth`: its test issuer's
        # discovery document and JWKS, agent_knowledge_dev.oauth_issuer); no function behind it.
        self._documents = documents or {}
        self._invoke = invoke
        self._clock = clock
        self.port = port

    def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = str(uuid.uuid4())
        raw_path = request.target.partition("?")[0]
        hosts = [value for name, value in request.headers if name.lower() == "host"]
        addressed_here = len(hosts) == 1 and loopback_host(hosts[0], self.port)
        match = self._table.match(request.method, raw_path) if addressed_here else None
        if not addressed_here:
            response = json_error(403, "forbidden", self._foreign_host())
        elif raw_path in self._documents:
            response = self._document(request.method, raw_path)
        elif match is None:
            response = json_error(404, "not_found", "no such endpoint")
        elif isinstance(match, list):
            allowed = ", ".join(sorted(set(match)))
            response = json_error(405, "method_not_allowed", f"use {allowed}", [("Allow", allowed)])
        else:
            event = build_event(request, match, request_id, int(self._clock() * 1000))
            try:
                response = to_response(self._invoke(match.route, event, request_id))
            except Exception:  # what Lambda reports when a function crashes outside its own handling
                log.exception("function %s failed (request id %s)", match.route.function, request_id)
                response = json_error(502, "internal_error", f"the function failed (request id {request_id})")
        response.headers.append(("apigw-requestid", request_id))
        return response

    def add_documents(self, documents: dict[str, Callable[[], dict[str, Any]]]) -> None:
        self._documents.update(documents)

    def _document(self, method: str, path: str) -> HttpResponse:
        if method not in {"GET", "HEAD"}:
            return json_error(405, "method_not_allowed", "use GET", [("Allow", "GET")])
        body = json.dumps(self._documents[path](), separators=(",", ":")).encode()
        return HttpResponse(200, [("Content-Type", "application/json"), ("Cache-Control", "no-store")], body)

    def _foreign_host(self) -> str:
        # Names nothing of the request: its Host is the attacker's to choose.
        port = "its port" if self.port is None else f"port {self.port}"
        return (
            f"this local server answers only requests addressed to localhost, 127.0.0.1 or [::1] on {port}"
            " (the Host header); any other Host is refused as a defence against DNS rebinding"
        )
