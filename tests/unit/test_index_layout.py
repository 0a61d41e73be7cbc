"""The index manifest: version checks, safe file names, the one tantivy pin."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from agent_knowledge.index_format.layout import IndexCorrupt, IndexIncompatible, parse_manifest
from agent_knowledge.index_format.versions import FORMAT_VERSION, SCHEMA_VERSION, tantivy_version

ROOT = Path(__file__).resolve().parents[2]
SEGMENT = "0123456789abcdef0123456789abcdef"


def manifest(**changes) -> dict:
    raw = {
        "format_version": FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "tantivy_version": tantivy_version(),
        "kb_id": "kb",
        "generation": 3,
        "documents": 1,
        "chunks": 2,
        "index_bytes": 20,
        "files": {
            f"{SEGMENT}.idx": {"sha256": "a" * 64, "size": 10},
            f"{SEGMENT}.7.del": {"sha256": "b" * 64, "size": 4},
            f"{SEGMENT}.chunks": {"sha256": "d" * 64, "size": 6, "role": "text"},
        },
        "meta": {"segments": [{"segment_id": SEGMENT, "max_doc": 3, "deletes": {"num_deleted_docs": 1, "opstamp": 7}}]},
        "kind": "update",
    }
    raw.update(changes)
    return raw


def encode(raw: dict) -> bytes:
    return json.dumps(raw).encode()


def test_a_valid_manifest_parses_with_its_file_keys():
    parsed = parse_manifest(encode(manifest()), "kb")
    assert parsed.total_bytes == 20
    assert parsed.object_keys() == {
        f"indexes/kb/files/{'a' * 64}.{SEGMENT}.idx",
        f"indexes/kb/files/{'b' * 64}.{SEGMENT}.7.del",
        f"indexes/kb/files/{'d' * 64}.{SEGMENT}.chunks",
    }
    assert parse_manifest(parsed.to_bytes(), "kb") == parsed


@pytest.mark.parametrize(
    "changes",
    [{"schema_version": SCHEMA_VERSION + 1}, {"tantivy_version": "0.1.0"}, {"format_version": FORMAT_VERSION + 1}],
)
def test_another_version_is_incompatible(changes):
    with pytest.raises(IndexIncompatible):
        parse_manifest(encode(manifest(**changes)), "kb")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe",
        b"[1, 2]",
        encode(manifest())[:-20],
        encode(manifest(kb_id="other")),
        encode(manifest(files={"../../etc/passwd": {"sha256": "a" * 64, "size": 1}})),
        encode(manifest(files={f"{SEGMENT}.idx": {"sha256": "not hex", "size": 1}})),
        encode(manifest(files={f"{SEGMENT}.idx": {"sha256": "a" * 64, "size": -1}})),
        encode(manifest(generation=0)),
        encode(manifest(index_bytes=19)),  # not the sum of its files' sizes
        encode(manifest(files={f"{SEGMENT}.idx": {"sha256": "a" * 64, "size": 14, "role": "../x"}}, meta={})),
        encode(manifest(extra="field")),
        # The segment's current delete file missing, or a file no segment uses.
        encode(manifest(files={f"{SEGMENT}.idx": {"sha256": "a" * 64, "size": 10}})),
        encode(manifest(files={**manifest()["files"], f"{'f' * 32}.idx": {"sha256": "c" * 64, "size": 1}})),
        # A segment without its chunk text file, or a text file listed as a tantivy file.
        encode(
            manifest(files={k: v for k, v in manifest()["files"].items() if not k.endswith(".chunks")}, index_bytes=14)
        ),
        encode(manifest(files={**manifest()["files"], f"{SEGMENT}.chunks": {"sha256": "d" * 64, "size": 6}})),
    ],
)
def test_anything_else_is_corrupt(data):
    with pytest.raises(IndexCorrupt):
        parse_manifest(data, "kb")


def test_tantivy_is_pinned_once_and_the_pin_is_what_is_installed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pins = [d for d in project["project"]["dependencies"] if re.match(r"tantivy\b", d)]
    layer = [line.strip() for line in (ROOT / "shared/requirements.txt").read_text().splitlines()]
    assert pins == [f"tantivy=={tantivy_version()}"]
    assert [line for line in layer if line.startswith("tantivy")] == pins
