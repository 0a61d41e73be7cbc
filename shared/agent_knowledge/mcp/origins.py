"""Which web pages may call the MCP endpoint: the Streamable HTTP transport's defence against DNS
rebinding (docs/SECURITY.md, "DNS rebinding").

A request without `Origin` is allowed: a non-browser client (an MCP host, the SDK, curl) sends
none, and a browser always sends one with a cross-origin POST. One that is sent must be, after
normalisation (`normalized_origin`), one of:

- the API's own origin, `https://{requestContext.domainName}`: the domain API Gateway received the
  request on (its execute-api domain, or a custom domain mapped to the API). It is never derived
  from the `Host` header, which a rebinding page controls; and API Gateway serves HTTPS on 443 only.
- an origin of `MCP_ALLOWED_ORIGINS` (template parameter `McpAllowedOrigins`, comma-separated,
  empty by default): the pages of other domains, such as a custom domain's front end. The local
  server sets it to its loopback origins (`http://localhost:PORT`, `http://127.0.0.1:PORT`,
  `http://[::1]:PORT`), whichever of them the request was addressed to.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final
from urllib.parse import urlsplit

from agent_knowledge.core.headers import header
from agent_knowledge.errors import ConfigurationError

ENVIRONMENT_VARIABLE: Final = "MCP_ALLOWED_ORIGINS"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def normalized_origin(value: str) -> str | None:
    """`scheme://host:port`, lower-cased, the scheme's default port written out (so
    `https://a.example` and `https://A.example:443` are one origin); None when `value` is not the
    origin of an http or https page: `null` (sandboxed frames, files), a path, a query, a fragment,
    user info, no host, an empty or non-numeric port."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:  # a port that is not a number or out of range, a malformed IPv6 literal
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.netloc.endswith(":"):
        return None
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{scheme}://{host}:{port if port is not None else _DEFAULT_PORTS[scheme]}"


def parse_allowed_origins(value: str) -> frozenset[str]:
    """`MCP_ALLOWED_ORIGINS`: origins separated by commas (spaces around them and empty entries are
    ignored); anything else is a `ConfigurationError` that names the entry. Read once per container
    with the other settings (`Settings.allowed_origins`)."""
    allowed = set()
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        origin = normalized_origin(entry)
        if origin is None:
            raise ConfigurationError(
                f"invalid {ENVIRONMENT_VARIABLE} entry {entry[:200]!r}: "
                "write origins as scheme://host[:port] (http or https, no path), separated by commas"
            )
        allowed.add(origin)
    return frozenset(allowed)


def own_origin(event: dict[str, Any]) -> str | None:
    """The API's own origin: the domain API Gateway received the request on, over HTTPS."""
    domain = (event.get("requestContext") or {}).get("domainName")
    return normalized_origin(f"https://{domain}") if isinstance(domain, str) and domain else None


def origin_allowed(event: dict[str, Any], allowed: Collection[str]) -> bool:
    """No `Origin`, or the API's own origin, or one of `allowed` (normalised origins)."""
    sent = header(event, "origin")
    if sent is None:
        return True
    origin = normalized_origin(sent)
    return origin is not None and (origin in allowed or origin == own_origin(event))
