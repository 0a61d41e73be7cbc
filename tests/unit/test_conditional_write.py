"""Conditional writes: a failed condition is an answer, a write that meets another request's
transaction is retried briefly, everything else is `KnowledgeUnavailable` (docs/DESIGN.md §9)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.repositories.dynamo import CONFLICT_RETRY_DELAYS_SECONDS, Table, conditional_write


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "details that must not leak"}}, "PutItem")


class Operation:
    """Fails with the given error codes in order, then succeeds; records each call."""

    def __init__(self, *codes: str) -> None:
        self.codes = list(codes)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        if self.codes:
            raise _error(self.codes.pop(0))
        return {}


def test_a_write_that_meets_a_transaction_waits_and_tries_again():
    operation, slept = Operation("TransactionConflictException", "TransactionConflictException"), []
    assert conditional_write("run storage", operation, sleep=slept.append, TableName="Runs") is True
    assert operation.calls == [{"TableName": "Runs"}] * 3
    assert len(slept) == 2
    for delay, base in zip(slept, CONFLICT_RETRY_DELAYS_SECONDS, strict=False):
        assert base <= delay <= base * 1.5


def test_after_the_transaction_the_condition_decides():
    operation = Operation("TransactionConflictException", "ConditionalCheckFailedException")
    assert conditional_write("run storage", operation, sleep=lambda _: None) is False
    assert len(operation.calls) == 2


def test_a_conflict_that_outlasts_the_retries_is_unavailable():
    operation = Operation(*["TransactionConflictException"] * (len(CONFLICT_RETRY_DELAYS_SECONDS) + 1))
    with pytest.raises(KnowledgeUnavailable) as raised:
        conditional_write("run storage", operation, sleep=lambda _: None)
    assert raised.value.store == "run storage" and "details" not in raised.value.message
    assert len(operation.calls) == len(CONFLICT_RETRY_DELAYS_SECONDS) + 1


@pytest.mark.parametrize(
    ("code", "outcome"),
    [("ConditionalCheckFailedException", False), ("ProvisionedThroughputExceededException", KnowledgeUnavailable)],
)
def test_other_answers_are_not_retried(code, outcome):
    operation, slept = Operation(code), []
    if outcome is False:
        assert conditional_write("run storage", operation, sleep=slept.append) is False
    else:
        with pytest.raises(outcome):
            conditional_write("run storage", operation, sleep=slept.append)
    assert len(operation.calls) == 1 and slept == []


class FakeDynamoDB:
    def __init__(self, put_item: Operation) -> None:
        self.put_item = put_item


def test_table_writes_retry_a_conflict_too():
    put_item = Operation("TransactionConflictException")
    table = Table(FakeDynamoDB(put_item), "Runs", "run storage")
    assert table.put_new({"pk": "turn#k"}, key_attribute="pk") is True
    assert len(put_item.calls) == 2
    assert put_item.calls[0]["ConditionExpression"] == "attribute_not_exists(pk)"
