"""End to end over real HTTP: documents dropped in the local sources bucket (boto3, or the aws CLI
as the README shows) become searchable through `agent-knowledge serve`, and deletes disappear."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_api import ServedApi as LocalApi

DEADLINE_SECONDS = 60  # generous for a loaded 2-core box; freshness is measured in bench/


def _serve_info(api: LocalApi) -> dict[str, Any]:
    return json.loads((Path(api.environment["AGENT_KNOWLEDGE_STATE_DIR"]) / "serve.json").read_text())


def _s3(api: LocalApi) -> Any:
    import botocore.session

    session = botocore.session.get_session()
    return session.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=_serve_info(api)["moto_endpoint"],
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _titles(api: LocalApi, query: str) -> list[str]:
    reply = api.search({"query": query})
    assert reply.status == 200, reply.body
    return [hint["title"] for hint in reply.json()["hints"]]


def _eventually(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_SECONDS} s: {what}"
        time.sleep(0.1)


def test_serve_json_exposes_the_moto_endpoint_and_the_sources_bucket(local_api):
    info = _serve_info(local_api)
    assert info["moto_endpoint"].startswith("http://127.0.0.1:")
    assert info["environment"]["SOURCES_BUCKET"] == "agent-knowledge-sourcesbucket"
    assert info["environment"]["INDEX_QUEUE_URL"].endswith("/IndexQueue.fifo")


def test_an_uploaded_document_becomes_searchable_and_a_deleted_one_disappears(local_api):
    s3, bucket = _s3(local_api), _serve_info(local_api)["environment"]["SOURCES_BUCKET"]
    s3.put_object(Bucket=bucket, Key="handbook/pets.md", Body=b"# Office pets\n\nTortoises are welcome on Fridays.")
    _eventually(lambda: _titles(local_api, "tortoises fridays") == ["Office pets"], "the upload is searchable")
    s3.delete_object(Bucket=bucket, Key="handbook/pets.md")
    _eventually(lambda: "Office pets" not in _titles(local_api, "tortoises fridays"), "the delete is applied")


@pytest.mark.skipif(shutil.which("aws") is None, reason="the aws CLI is not installed")
def test_aws_s3_sync_against_the_local_stack(local_api, tmp_path):
    info = _serve_info(local_api)
    folder = tmp_path / "garden"
    folder.mkdir()
    (folder / "compost.md").write_text("# Compost\n\nWorms turn peelings into soil.", encoding="utf-8")
    (folder / "tools.md").write_text("# Tools\n\nThe wheelbarrow lives in the shed.", encoding="utf-8")
    environment = {**os.environ, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    environment["AWS_DEFAULT_REGION"] = "us-east-1"

    def sync() -> None:
        target = f"s3://{info['environment']['SOURCES_BUCKET']}/handbook/garden/"
        command = ["aws", "s3", "sync", str(folder), target, "--delete", "--endpoint-url", info["moto_endpoint"]]
        subprocess.run(command, env=environment, check=True, capture_output=True, timeout=120)

    sync()
    _eventually(lambda: _titles(local_api, "wheelbarrow shed") == ["Tools"], "synced files are searchable")
    (folder / "tools.md").unlink()
    sync()
    _eventually(lambda: "Tools" not in _titles(local_api, "wheelbarrow shed"), "--delete removes the document")
    assert _titles(local_api, "worms peelings") == ["Compost"]
