"""The CLI's sources bucket reports S3 failures as `KnowledgeUnavailable` (one file's failure in a
folder upload), and a missing object as absent."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge_dev.sources import SourcesBucket


class FailingS3:
    class exceptions:  # noqa: N801 - the shape of a boto3 client
        ClientError = ClientError

    def __init__(self, code: str) -> None:
        self.code = code

    def _fail(self, **_: Any) -> Any:
        raise ClientError({"Error": {"Code": self.code, "Message": "bucket details"}}, "S3")

    put_object = head_object = delete_object = _fail


@pytest.mark.parametrize("call", ["put", "delete"])
def test_a_failed_write_is_unavailable_source_storage(call):
    bucket = SourcesBucket(FailingS3("SlowDown"), "sources")
    arguments = ("kb", "doc.md", b"text", "text/markdown") if call == "put" else ("kb", "doc.md")
    with pytest.raises(KnowledgeUnavailable) as raised:
        getattr(bucket, call)(*arguments)
    assert raised.value.store == "source storage" and "bucket details" not in raised.value.message


def test_head_of_a_missing_object_is_none_and_other_failures_are_unavailable():
    assert SourcesBucket(FailingS3("404"), "sources").head("kb", "doc.md") is None
    with pytest.raises(KnowledgeUnavailable):
        SourcesBucket(FailingS3("AccessDenied"), "sources").head("kb", "doc.md")
