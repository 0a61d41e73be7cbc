"""Mapping AWS failures to domain errors, for every service the repositories call.

Any failure becomes `KnowledgeUnavailable` naming the store, never the AWS detail (table, bucket,
request id, message). A few failures are answers rather than outages and are classified here so
callers can act on them: a DynamoDB condition that did not hold, an S3 object that is gone or
was replaced (`IfMatch` failed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from botocore.exceptions import BotoCoreError, ClientError

from agent_knowledge.errors import KnowledgeUnavailable


def error_code(exc: ClientError) -> str | None:
    return exc.response.get("Error", {}).get("Code")


def http_status(exc: ClientError) -> int | None:
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def is_conditional_failure(exc: ClientError) -> bool:
    """A DynamoDB write whose condition did not hold."""
    return error_code(exc) == "ConditionalCheckFailedException"


def is_transaction_conflict(exc: ClientError) -> bool:
    """A single-item DynamoDB write refused because a transaction is writing the same item at that
    moment; botocore does not retry it, and it resolves as soon as the transaction commits."""
    return error_code(exc) == "TransactionConflictException"


def is_cancelled_transaction(exc: ClientError) -> bool:
    """A DynamoDB transaction that wrote nothing: one of its conditions did not hold, or another
    request was writing one of its items at the same moment."""
    return error_code(exc) == "TransactionCanceledException"


def is_replaced_object(exc: ClientError) -> bool:
    """An S3 read conditional on an ETag (`IfMatch`) found another object under the key."""
    return error_code(exc) in {"PreconditionFailed", "412"} or http_status(exc) == 412


def is_missing_object(exc: ClientError) -> bool:
    """An S3 object that is not there (or not the one recorded, which is as good as gone)."""
    return error_code(exc) in {"NoSuchKey", "404", "NotFound"} or http_status(exc) == 404 or is_replaced_object(exc)


@contextlib.contextmanager
def storage_errors(store: str, passthrough: Callable[[ClientError], bool] = is_conditional_failure) -> Iterator[None]:
    """Turn any storage failure into `KnowledgeUnavailable` without leaking its details.

    Errors `passthrough` accepts (by default conditional-check failures) are re-raised
    untouched: callers use them for control flow.
    """
    try:
        yield
    except ClientError as exc:
        if passthrough(exc):
            raise
        raise KnowledgeUnavailable.of(store) from exc
    except BotoCoreError as exc:
        raise KnowledgeUnavailable.of(store) from exc
