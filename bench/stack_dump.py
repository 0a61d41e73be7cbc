"""Copy a seeded moto stack into another process: dump its items, objects and secret; restore them.

A cold-start child must not run any of the layer's code before the handler it measures (that
would import and warm it), so the parent seeds with the layer and the child restores the raw
items with plain boto3 calls only.

    python -m bench.stack_dump restore DUMP_PATH ENDPOINT_URL   # into a moto server
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.environment import SERVER_TOKEN

ClientFactory = Callable[[str], Any]


def dump(client: ClientFactory, environment: dict[str, str]) -> dict[str, Any]:
    from agent_knowledge_dev.stack import bucket_name, table_name
    from agent_knowledge_dev.template import resources_of_type

    dynamodb, s3 = client("dynamodb"), client("s3")
    tables: dict[str, list[dict[str, Any]]] = {}
    for logical_id in resources_of_type("AWS::DynamoDB::Table"):
        items: list[dict[str, Any]] = []
        for page in dynamodb.get_paginator("scan").paginate(TableName=table_name(logical_id)):
            items.extend(page["Items"])
        tables[table_name(logical_id)] = items
    objects: dict[str, tuple[bytes, dict[str, str]]] = {}
    buckets = [bucket_name(logical_id) for logical_id in resources_of_type("AWS::S3::Bucket")]
    for bucket in buckets:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for entry in page.get("Contents", []):
                found = s3.get_object(Bucket=bucket, Key=entry["Key"])
                objects[f"{bucket}/{entry['Key']}"] = (found["Body"].read(), found.get("Metadata", {}))
    return {"tables": tables, "objects": objects, "environment": environment}


def restore(state: dict[str, Any], client: ClientFactory) -> dict[str, str]:
    """Create the template's stack through `client` and put the dumped state into it; returns its environment."""
    from agent_knowledge_dev.stack import create_stack

    environment = create_stack(client, server_token=SERVER_TOKEN)
    dynamodb, s3 = client("dynamodb"), client("s3")
    for table, items in state["tables"].items():
        for start in range(0, len(items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            dynamodb.batch_write_item(RequestItems={table: batch})
    for path, (body, metadata) in state["objects"].items():
        bucket, key = path.split("/", 1)
        s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata)
    return environment


def save(state: dict[str, Any], path: Path) -> None:
    path.write_bytes(pickle.dumps(state))


def load(path: Path) -> dict[str, Any]:
    return pickle.loads(path.read_bytes())  # noqa: S301 — our own file, written by this run


def main(argv: list[str]) -> None:
    import boto3

    command, path, endpoint = argv
    assert command == "restore"
    restore(load(Path(path)), lambda service: boto3.client(service, endpoint_url=endpoint))


if __name__ == "__main__":
    main(sys.argv[1:])
