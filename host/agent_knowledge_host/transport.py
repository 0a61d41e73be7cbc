"""JSON over HTTP with the standard library.

Why urllib and not httpx: the client makes a handful of synchronous, short JSON calls; the
standard library does that without tying the host library to an HTTP stack it does not
control (the `mcp` SDK has already moved from httpx to httpx2 once). The MCP server runs the
client on worker threads, so blocking calls are fine there too.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from agent_knowledge_host.errors import ProtocolViolation, ServerError, TransportError, error_for

# A guard against a runaway or hostile server, far above any protocol budget (a read page is
# at most 32 KiB, a turn request at most 512 KiB): an answer larger than this is refused.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DEFAULT_TIMEOUT_SECONDS = 30.0


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """The API never redirects. urllib would follow a redirect with the Authorization header,
    to any host; refusing turns the 3xx into an error instead of sending the bearer elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_RefuseRedirects())


@dataclass(frozen=True)
class JsonResponse:
    status: int
    body: dict[str, Any]


class HttpTransport:
    """Sends one request and returns the decoded JSON object, or raises a typed error."""

    def __init__(self, base_url: str, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> JsonResponse:
        data = None if body is None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                status, raw = response.status, _read_bounded(response)
        except urllib.error.HTTPError as error:
            with error:
                raise _error_from(error.code, _read_bounded(error)) from None
        except (urllib.error.URLError, OSError) as error:
            # The reason names the host/port problem; it never contains the token.
            reason = getattr(error, "reason", error)
            raise TransportError(f"{method} {path} failed: {reason}") from None
        return JsonResponse(status, _decode(status, raw))


def _read_bounded(response: Any) -> bytes:
    raw: bytes = response.read(MAX_RESPONSE_BYTES + 1)
    if len(raw) > MAX_RESPONSE_BYTES:
        raise TransportError(f"response larger than {MAX_RESPONSE_BYTES} bytes refused")
    return raw


def _decode(status: int, raw: bytes) -> dict[str, Any]:
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolViolation(f"HTTP {status} answer is not UTF-8 JSON") from None
    if not isinstance(document, dict):
        raise ProtocolViolation(f"HTTP {status} answer is JSON but not an object")
    return document


def _error_from(status: int, raw: bytes) -> ServerError:
    """The typed error for an error status; the body's `error`/`message` when it is ours."""
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        document = None
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        message = document.get("message")
        return error_for(status, document["error"], message if isinstance(message, str) else "no message")
    return error_for(status, None, f"HTTP {status} without a protocol error body")
