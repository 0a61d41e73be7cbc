"""moto_s3: the S3 events the pipeline relies on (sequencer, versionId, delete markers), and
listings by prefix that answer as S3 (and moto's own code) does.

Each test runs on the in-process stack (`stack` fixture: `create_stack` installs the patches).
"""

from __future__ import annotations

import json
from typing import Any

from agent_knowledge.repositories import aws
from agent_knowledge_dev.moto_pin import unpatched


def _events(stack: Any) -> list[dict[str, Any]]:
    """Every S3 record waiting in the sources queue (received and deleted)."""
    sqs, url = aws.client("sqs"), stack.environment["SOURCE_QUEUE_URL"]
    records = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            records += json.loads(message["Body"]).get("Records", [])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return records


def test_events_carry_a_sequencer_and_the_version_and_a_delete_sends_one(stack):
    """`s3.events`: without sequencers the ingest function cannot order a key's events; without the
    delete marker's event no delete ever reaches the index."""
    s3, bucket = aws.client("s3"), stack.environment["SOURCES_BUCKET"]
    _events(stack)
    first = s3.put_object(Bucket=bucket, Key="kb/a.md", Body=b"one")["VersionId"]
    second = s3.put_object(Bucket=bucket, Key="kb/a.md", Body=b"two")["VersionId"]
    s3.delete_object(Bucket=bucket, Key="kb/a.md")
    records = _events(stack)
    assert [record["eventName"] for record in records] == [
        "ObjectCreated:Put",
        "ObjectCreated:Put",
        "ObjectRemoved:DeleteMarkerCreated",
    ]
    objects = [record["s3"]["object"] for record in records]
    assert [found["versionId"] for found in objects[:2]] == [first, second]
    marker = s3.list_object_versions(Bucket=bucket, Prefix="kb/a.md")["DeleteMarkers"][0]["VersionId"]
    assert objects[2]["versionId"] == marker and "size" not in objects[2] and "eTag" not in objects[2]
    sequencers = [found["sequencer"] for found in objects]
    assert sequencers == sorted(sequencers) and len(set(sequencers)) == 3  # hexadecimal, same length

    with unpatched("s3.events"):  # moto's own: no sequencer, no version, no event for the delete
        s3.put_object(Bucket=bucket, Key="kb/b.md", Body=b"one")
        s3.delete_object(Bucket=bucket, Key="kb/b.md")
        plain = _events(stack)
    assert [record["eventName"] for record in plain] == ["ObjectCreated:Put"]
    assert "sequencer" not in plain[0]["s3"]["object"] and "versionId" not in plain[0]["s3"]["object"]


def test_a_prefix_listing_reads_only_the_prefix_and_answers_as_s3_does(stack):
    s3 = aws.client("s3")
    bucket = stack.environment["SOURCES_BUCKET"]
    keys = [f"kb/{folder}/doc-{n:02d}.md" for folder in ("a", "b") for n in range(12)] + ["kb/top.md", "kc/other.md"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    s3.delete_object(Bucket=bucket, Key="kb/a/doc-03.md")  # a delete marker in the versioned bucket
    listed, token = [], None
    while True:
        extra = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket=bucket, Prefix="kb/", MaxKeys=5, **extra)
        listed += [item["Key"] for item in page.get("Contents", [])]
        token = page.get("NextContinuationToken")
        if not token:
            break
    expected = sorted(key for key in keys if key.startswith("kb/") and key != "kb/a/doc-03.md")
    assert listed == expected
    folders = s3.list_objects_v2(Bucket=bucket, Prefix="kb/", Delimiter="/")
    assert [p["Prefix"] for p in folders["CommonPrefixes"]] == ["kb/a/", "kb/b/"]
    assert [item["Key"] for item in folders["Contents"]] == ["kb/top.md"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="kb/zzz").get("KeyCount") == 0


def test_a_prefix_listing_answers_as_moto_does(stack):
    """`s3.listing` against moto's own walk of the bucket."""
    s3, bucket = aws.client("s3"), stack.environment["SOURCES_BUCKET"]
    for key in [f"p/{folder}/{n}" for folder in "xyz" for n in range(5)] + ["p/x", "q/1"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    s3.delete_object(Bucket=bucket, Key="p/y/2")

    def listings() -> list[Any]:
        return [
            {key: page.get(key) for key in ("Contents", "CommonPrefixes", "KeyCount", "IsTruncated")}
            for page in (
                s3.list_objects_v2(Bucket=bucket, Prefix="p/"),
                s3.list_objects_v2(Bucket=bucket, Prefix="p/", Delimiter="/"),
                s3.list_objects_v2(Bucket=bucket, Prefix="p/y", MaxKeys=2),
                s3.list_objects(Bucket=bucket, Prefix="p/z/", Marker="p/z/1"),
            )
        ]

    patched = listings()
    with unpatched("s3.listing"):
        assert listings() == patched


class _ReadCounter:
    """A stored object's buffer that counts the bytes read from it."""

    def __init__(self, buffer: Any) -> None:
        self.buffer, self.read_bytes = buffer, 0

    def read(self, size: int = -1) -> bytes:
        data = self.buffer.read(size)
        self.read_bytes += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.buffer, name)


def _stored_key(bucket: str, key: str) -> Any:
    from moto.s3.models import s3_backends

    return s3_backends["123456789012"]["aws"].get_object(bucket, key)


_RANGES = [
    "bytes=0-0",
    "bytes=10-19",
    "bytes=100-",
    "bytes=990-5000",
    "bytes=-30",
    "bytes=5-2",
    "bytes=0-1,5-6",
    "x=1-2",
]


def test_a_one_range_get_reads_only_the_range_and_answers_as_moto_does(stack):
    """`s3.ranges`: the slice is read from the stored bytes, not the whole object; every range form
    (and a range past the end, and a versioned read) answers what moto's own code answers."""
    s3, bucket = aws.client("s3"), stack.environment["SOURCES_BUCKET"]
    body = bytes(range(256)) * 4  # 1,024 bytes
    first = s3.put_object(Bucket=bucket, Key="kb/ranged.bin", Body=body)["VersionId"]
    s3.put_object(Bucket=bucket, Key="kb/ranged.bin", Body=body[::-1])

    key = _stored_key(bucket, "kb/ranged.bin")
    counter = key._value_buffer = _ReadCounter(key._value_buffer)
    got = s3.get_object(Bucket=bucket, Key="kb/ranged.bin", Range="bytes=100-149")
    assert got["Body"].read() == body[::-1][100:150]
    assert got["ContentRange"] == "bytes 100-149/1024" and got["ContentLength"] == 50
    assert counter.read_bytes == 50

    def answers() -> list[Any]:
        found: list[Any] = []
        for version in ({}, {"VersionId": first}):
            for spec in _RANGES:
                try:
                    got = s3.get_object(Bucket=bucket, Key="kb/ranged.bin", Range=spec, **version)
                    found.append(
                        (spec, got["ResponseMetadata"]["HTTPStatusCode"], got.get("ContentRange"), got["Body"].read())
                    )
                except s3.exceptions.ClientError as error:
                    found.append((spec, error.response["Error"]["Code"]))
            try:
                s3.get_object(Bucket=bucket, Key="kb/ranged.bin", Range="bytes=2000-2001", **version)
            except s3.exceptions.ClientError as error:
                found.append(("past the end", error.response["Error"]["Code"]))
        return found

    patched = answers()
    assert ("past the end", "InvalidRange") in patched
    with unpatched("s3.ranges"):
        assert answers() == patched
