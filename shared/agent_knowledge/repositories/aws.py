"""boto3 clients, created lazily and once per container.

Creating a client costs 50-90 ms, so nothing is created at import time: a handler that
never touches S3 never pays for an S3 client. Retries are bounded (standard mode) and the
timeouts stay well under the function timeout set in `template.yaml`.
"""

from __future__ import annotations

import threading
from typing import Any

from agent_knowledge.core.per_container import on_reset

MAX_ATTEMPTS = 3
CONNECT_TIMEOUT_SECONDS = 1
READ_TIMEOUT_SECONDS = 2

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_session: Any = None


def client(service: str) -> Any:
    # Worst case of one call: 3 attempts x (1 s connect + 2 s read) + at most 1 + 2 s of
    # throttling backoff = 12 s, under the 15 s function timeout, so a stuck AWS call ends in
    # our 503 rather than a Lambda timeout.
    return _client(service, service, MAX_ATTEMPTS, CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)


def client_with_budget(service: str, *, attempts: int, connect_timeout: float, read_timeout: float) -> Any:
    """A client of `service` with its own retries and timeouts, for a call that may cost a request
    less than storage may (the optional reranker, retrieval/rerank.py); created once per container
    and budget, like every client."""
    key = f"{service}#{attempts}/{connect_timeout}/{read_timeout}"
    return _client(key, service, attempts, connect_timeout, read_timeout)


def _client(key: str, service: str, attempts: int, connect_timeout: float, read_timeout: float) -> Any:
    cached = _clients.get(key)
    if cached is not None:
        return cached
    global _session
    with _lock:
        if key not in _clients:
            # botocore directly: boto3 adds nothing we use and its import (s3transfer) costs
            # ~100 ms of cold start. botocore honours AWS_ENDPOINT_URL and the usual credentials.
            import botocore.session
            from botocore.config import Config

            # One session per container: it caches the loaded service models between clients.
            if _session is None:
                _session = botocore.session.get_session()

            # `total_max_attempts` counts the first attempt; botocore's `max_attempts` would count
            # retries only (3 → 4 attempts).
            config = Config(
                retries={"mode": "standard", "total_max_attempts": attempts},
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                max_pool_connections=32,
            )
            _clients[key] = _session.create_client(service, config=config)
        return _clients[key]


def renew_session() -> None:
    """A new session and no client (each made again on use): credentials resolved anew and no
    pooled connection kept, the loaded service models kept (runtime/snapstart, after a restore)."""
    global _session
    with _lock:
        _clients.clear()
        if _session is not None:
            import botocore.session

            models = _session.get_component("data_loader")
            _session = botocore.session.get_session()
            _session.register_component("data_loader", models)


def reset_clients() -> None:
    """Drop cached clients (tests switch between moto and real endpoints); keep the model cache."""
    with _lock:
        _clients.clear()


on_reset(reset_clients)
