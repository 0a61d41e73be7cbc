"""boto3 clients, created lazily and once per container.

Creating a client costs 50-90 ms, so nothing is created at import time: a handler that
never touches S3 never pays for an S3 client. Retries are bounded (standard mode) and the
timeouts stay well under the function timeout set in `template.yaml`.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_session: Any = None


def client(service: str) -> Any:
    cached = _clients.get(service)
    if cached is not None:
        return cached
    global _session
    with _lock:
        if service not in _clients:
            # botocore directly: boto3 adds nothing we use and its import (s3transfer) costs
            # ~100 ms of cold start. botocore honours AWS_ENDPOINT_URL and the usual credentials.
            import botocore.session
            from botocore.config import Config

            # One session per container: it caches the loaded service models between clients.
            if _session is None:
                _session = botocore.session.get_session()

            config = Config(
                retries={"mode": "standard", "max_attempts": 3},
                connect_timeout=2,
                read_timeout=4,
                max_pool_connections=32,
            )
            _clients[service] = _session.create_client(service, config=config)
        return _clients[service]


def reset_clients() -> None:
    """Drop cached clients (tests switch between moto and real endpoints); keep the model cache."""
    with _lock:
        _clients.clear()
