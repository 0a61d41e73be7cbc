"""Storage faults injected at botocore's `before-send` hook.

The fault replaces the HTTP exchange only: botocore still parses the error, the standard retry
mode still decides whether and how often to retry, and the repositories still map the final
error. So the tests see exactly what a Lambda would see from a throttled, failing or slow AWS.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def aws_response(request: AWSPreparedRequest, status: int, body: bytes, content_type: str) -> AWSResponse:
    headers = {"Content-Type": content_type, "Content-Length": str(len(body)), "x-amzn-RequestId": "fault"}
    return AWSResponse(request.url, status, headers, _Raw(body))


def _dynamodb_error(code: str, status: int) -> Callable[[AWSPreparedRequest], AWSResponse]:
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"}).encode()
    return lambda request: aws_response(request, status, body, "application/x-amz-json-1.0")


def _xml_error(code: str, status: int) -> Callable[[AWSPreparedRequest], AWSResponse]:
    body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
    return lambda request: aws_response(request, status, body, "application/xml")


def _json_error(code: str, status: int) -> Callable[[AWSPreparedRequest], AWSResponse]:
    body = json.dumps({"__type": code, "message": "injected"}).encode()
    return lambda request: aws_response(request, status, body, "application/x-amz-json-1.1")


def _read_timeout(request: AWSPreparedRequest) -> AWSResponse:
    raise ReadTimeoutError(endpoint_url=request.url)


def _connection_refused(request: AWSPreparedRequest) -> AWSResponse:
    raise EndpointConnectionError(endpoint_url=request.url)


@dataclass(frozen=True)
class Fault:
    name: str
    service: str  # botocore service id as used in event names: dynamodb, s3, secrets-manager
    answer: Callable[[AWSPreparedRequest], AWSResponse]


FAULTS: dict[str, Fault] = {
    fault.name: fault
    for fault in [
        Fault("dynamodb-throttled", "dynamodb", _dynamodb_error("ProvisionedThroughputExceededException", 400)),
        Fault("dynamodb-request-limit", "dynamodb", _dynamodb_error("RequestLimitExceeded", 400)),
        Fault("dynamodb-500", "dynamodb", _dynamodb_error("InternalServerError", 500)),
        Fault("dynamodb-503", "dynamodb", _dynamodb_error("ServiceUnavailable", 503)),
        Fault("dynamodb-read-timeout", "dynamodb", _read_timeout),
        Fault("dynamodb-connection-refused", "dynamodb", _connection_refused),
        Fault("dynamodb-access-denied", "dynamodb", _dynamodb_error("AccessDeniedException", 400)),
        Fault("s3-slow-down", "s3", _xml_error("SlowDown", 503)),
        Fault("s3-500", "s3", _xml_error("InternalError", 500)),
        Fault("s3-read-timeout", "s3", _read_timeout),
        Fault("s3-connection-refused", "s3", _connection_refused),
        Fault("s3-access-denied", "s3", _xml_error("AccessDenied", 403)),
        Fault("secrets-500", "secrets-manager", _json_error("InternalServiceError", 500)),
        Fault("secrets-throttled", "secrets-manager", _json_error("ThrottlingException", 400)),
        Fault("secrets-read-timeout", "secrets-manager", _read_timeout),
    ]
}


class FaultInjector:
    """Counts the HTTP attempts that reached a faulted operation (retries included)."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def inject(
        self,
        client: Any,
        fault: Fault,
        operation: str = "*",
        when: Callable[[AWSPreparedRequest], bool] = lambda request: True,
    ) -> Iterator[None]:
        event = f"before-send.{fault.service}.{operation}"

        def answer(request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse | None:
            if not when(request):
                return None
            with self._lock:
                self.attempts[event_name.rsplit(".", 1)[-1]] += 1
            return fault.answer(request)

        # First: in-process moto answers at `before-send` too, and the first non-None answer wins.
        client.meta.events.register_first(event, answer)
        try:
            yield
        finally:
            client.meta.events.unregister(event, answer)
