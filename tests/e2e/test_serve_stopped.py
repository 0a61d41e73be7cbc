"""What `serve` and the commands beside it say (issue 38, items 4 and 5).

`serve` stopped under a running `doc put --dir --wait`: the command says the local stack stopped,
lists what was not uploaded or not confirmed, prints its JSON summary and exits with status 3
(console.STACK_STOPPED_STATUS) — not one "failed: <file>: source storage is temporarily
unavailable" line per remaining file, blaming the files, and nothing on stdout.

`serve`'s own output while documents are ingested: the functions' INFO lines (one JSON line per
document) are summed up (log_summary), not written one per document."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import boto3

from agent_knowledge_dev.console import STACK_STOPPED_STATUS
from tests.support.local_api import CLI, PROJECT_ROOT, start_server

FILES = 400  # enough that the uploads are under way when serve is stopped (one worker)


def _objects_uploaded(state_dir: Path, kb_id: str) -> int:
    info = json.loads((state_dir / "serve.json").read_text(encoding="utf-8"))
    s3 = boto3.client(
        "s3",
        endpoint_url=info["moto_endpoint"],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    listed = s3.list_objects_v2(Bucket=info["environment"]["SOURCES_BUCKET"], Prefix=f"{kb_id}/")
    return int(listed.get("KeyCount", 0))


def test_serve_stopped_mid_put_gives_the_summary_and_its_own_exit_status(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for index in range(FILES):
        (folder / f"note-{index:03}.md").write_text(f"# Note {index}\n\nThe heron number {index}.\n", encoding="utf-8")
    state_dir = tmp_path / "state"
    api = start_server(state_dir, tmp_path / "serve.out", quiet=True, serve_options=("--embedding-provider", "none"))
    stopped = False
    try:
        assert api.cli("kb", "create", "notes").returncode == 0
        put = subprocess.Popen(
            [*CLI, "doc", "put", "notes", "--dir", str(folder), "--wait", "--workers", "1", "--no-progress"],
            env=api.environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
        )
        while _objects_uploaded(state_dir, "notes") == 0:  # the command is uploading: stop serve now
            assert put.poll() is None, put.communicate()
            time.sleep(0.05)
        assert api.stop() == 0
        stopped = True
        out, err = put.communicate(timeout=120)
    finally:
        if not stopped:
            api.stop()

    assert put.returncode == STACK_STOPPED_STATUS, err
    summary = json.loads(out)
    assert summary["stack_stopped"] is True and summary["index_generation"] is None
    # No file is blamed: each one is either not uploaded or uploaded without a confirmed ingest.
    assert summary["failed"] == 0 and summary["failures"] == []
    names = {f"note-{index:03}.md" for index in range(FILES)}
    assert set(summary["not_uploaded"]).isdisjoint(summary["not_confirmed"])
    assert set(summary["not_uploaded"]) | set(summary["not_confirmed"]) == names
    assert summary["created"] == len(summary["not_confirmed"]) >= 1
    assert summary["pending"] == summary["not_confirmed"] and summary["ready"] == 0
    assert "temporarily unavailable" not in err and "failed:" not in err and "--timeout" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("agent-knowledge: the local stack stopped: `agent-knowledge serve` is no longer running")
    assert f"{len(summary['not_uploaded'])} files not uploaded, {len(summary['not_confirmed'])} not confirmed" in last


def test_serve_sums_up_the_ingest_lines_instead_of_one_per_document(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for index in range(6):
        (folder / f"note-{index}.md").write_text(f"# Note {index}\n\nThe egret number {index}.\n", encoding="utf-8")
    output = tmp_path / "serve.out"
    api = start_server(tmp_path / "state", output, quiet=True, serve_options=("--embedding-provider", "none"))
    try:
        assert api.cli("kb", "create", "notes").returncode == 0
        put = api.cli("doc", "put", "notes", "--dir", str(folder), "--wait", "--no-progress")
        assert put.returncode == 0, put.stderr
    finally:
        assert api.stop() == 0  # the last summary is written as serve stops
    lines = output.read_text(encoding="utf-8").splitlines()
    assert not [line for line in lines if '"message":"source applied"' in line]
    summaries = [line for line in lines if line.startswith("functions, last 5 s: ")]
    created = sum(int(match) for line in summaries for match in re.findall(r"x source applied \((\d+) created", line))
    assert created == 6, lines
