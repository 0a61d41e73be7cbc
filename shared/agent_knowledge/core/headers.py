"""Reading a request's headers from an API Gateway (HTTP API) event: for the adapter and for the
modules that answer from a header (OAuth's resource URL, MCP's origin check)."""

from __future__ import annotations

from typing import Any


def header(event: dict[str, Any], name: str) -> str | None:
    """Case-insensitive header lookup (API Gateway v2 lower-cases names; a person may not)."""
    headers = event.get("headers") or {}
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None
