"""Chunk text files (`index_format/chunk_text`): written in document order, read locally or by ranged GETs
(head, then only the blocks of the chunks asked for, kept in memory), damage refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from agent_knowledge.index_format import chunk_text
from agent_knowledge.index_format.chunk_text import ChunkTextCorrupt, ChunkTexts, file_name, write_text_file
from agent_knowledge.index_format.chunks import chunk_digest
from agent_knowledge.index_format.layout import IndexFile, IndexManifest
from agent_knowledge.index_format.versions import FORMAT_VERSION, SCHEMA_VERSION, tantivy_version

SEGMENT = "0123456789abcdef0123456789abcdef"


def _texts(count: int) -> list[str]:
    return [f"chunk {number} of the segment — 配置 {'word ' * (number % 7)}" for number in range(count)]


def _write(directory: str, texts: list[str]) -> str:
    path = os.path.join(directory, file_name(SEGMENT))
    write_text_file(path, ((bytes.fromhex(chunk_digest(text)), text) for text in texts), len(texts))
    return path


class _Ranges:
    """A bucket holding one object, counting ranged GETs."""

    def __init__(self, key: str, data: bytes) -> None:
        self.key, self.data, self.gets = key, data, []

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]:
        assert key == self.key
        self.gets.append((start, end))
        return self.data[start:end], {}


def _remote(tmp_path, texts: list[str]) -> tuple[ChunkTexts, _Ranges]:
    """A reader whose directory lacks the file: every byte comes by ranges from the bucket."""
    data = Path(_write(str(tmp_path), texts)).read_bytes()
    os.unlink(os.path.join(tmp_path, file_name(SEGMENT)))
    entry = IndexFile(sha256=hashlib.sha256(data).hexdigest(), size=len(data), role="text")
    manifest = IndexManifest(
        format_version=FORMAT_VERSION, schema_version=SCHEMA_VERSION, tantivy_version=tantivy_version(),
        kb_id="kb", generation=1, documents=1, chunks=len(texts), index_bytes=len(data),
        files={file_name(SEGMENT): entry}, meta={"segments": []},
    )  # fmt: skip
    bucket = _Ranges(manifest.file_key(file_name(SEGMENT)), data)
    return ChunkTexts(str(tmp_path), bucket, manifest), bucket


@pytest.fixture(autouse=True)
def _empty_cache():
    chunk_text.cache.clear()
    yield
    chunk_text.cache.clear()


def test_a_file_gives_each_chunk_its_text_in_document_order(tmp_path):
    texts = _texts(3 * chunk_text.BLOCK_ENTRIES + 5)  # the last block not full
    _write(str(tmp_path), texts)
    reader = ChunkTexts(str(tmp_path))
    assert [text for _, text in reader.entries(SEGMENT)] == texts
    wanted = [(SEGMENT, number, chunk_digest(texts[number])) for number in (0, 40, len(texts) - 1, 40)]
    assert reader.texts(wanted) == [texts[0], texts[40], texts[-1], texts[40]]


def test_a_small_file_is_read_in_one_get(tmp_path):
    texts = _texts(2 * chunk_text.BLOCK_ENTRIES)
    reader, bucket = _remote(tmp_path, texts)
    assert len(bucket.data) < chunk_text.HEAD_READ_BYTES
    wanted = [(SEGMENT, n, chunk_digest(texts[n])) for n in (0, len(texts) - 1)]
    assert reader.texts(wanted) == [texts[0], texts[-1]]
    assert bucket.gets == [(0, len(bucket.data))]


def test_by_ranges_the_head_then_only_the_blocks_asked_for_each_once(tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_text, "HEAD_READ_BYTES", chunk_text.head_size(4))  # the head alone
    texts = _texts(4 * chunk_text.BLOCK_ENTRIES)
    reader, bucket = _remote(tmp_path, texts)
    assert reader.text(SEGMENT, 5, chunk_digest(texts[5])) == texts[5]
    assert len(bucket.gets) == 2 and bucket.gets[0][0] == 0  # the head, then block 0
    assert reader.text(SEGMENT, 6, chunk_digest(texts[6])) == texts[6]  # same block: kept
    assert len(bucket.gets) == 2
    last, third = len(texts) - 1, 2 * chunk_text.BLOCK_ENTRIES
    assert reader.texts([(SEGMENT, n, chunk_digest(texts[n])) for n in (last, third)]) == [texts[last], texts[third]]
    assert len(bucket.gets) == 4  # one GET per block it lacked
    fetched = sum(end - start for start, end in bucket.gets)
    assert fetched < len(bucket.data)  # block 1 never read


def test_a_head_longer_than_the_first_read_takes_a_second_get(tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_text, "HEAD_READ_BYTES", 24)
    texts = _texts(10 * chunk_text.BLOCK_ENTRIES)
    reader, bucket = _remote(tmp_path, texts)
    assert reader.text(SEGMENT, 300, chunk_digest(texts[300])) == texts[300]
    assert len(bucket.gets) == 3 and bucket.gets[1][0] == 24


def test_an_entry_of_another_chunk_is_refused(tmp_path):
    texts = _texts(10)
    _write(str(tmp_path), texts)
    with pytest.raises(ChunkTextCorrupt, match="does not match"):
        ChunkTexts(str(tmp_path)).text(SEGMENT, 3, chunk_digest(texts[4]))
    with pytest.raises(ChunkTextCorrupt, match="not in its segment"):
        ChunkTexts(str(tmp_path)).text(SEGMENT, 10, chunk_digest(texts[4]))
    with pytest.raises(ChunkTextCorrupt, match="no chunk text file"):
        ChunkTexts(str(tmp_path)).text("f" * 32, 0, chunk_digest(texts[0]))


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"NOTTEXT!" + data[8:],  # another format
        lambda data: data[: len(data) - 3],  # truncated: the offsets pass the end
        lambda data: data[:28] + bytes(8) + data[36:],  # an offset zeroed
        lambda data: data[:-20] + bytes(20),  # a block's bytes damaged
    ],
    ids=["magic", "truncated", "offset", "block"],
)
def test_a_damaged_file_is_corrupt(tmp_path, damage):
    texts = _texts(chunk_text.BLOCK_ENTRIES + 1)
    path = _write(str(tmp_path), texts)
    Path(path).write_bytes(damage(Path(path).read_bytes()))
    with pytest.raises(ChunkTextCorrupt):
        ChunkTexts(str(tmp_path)).text(SEGMENT, len(texts) - 1, chunk_digest(texts[-1]))


def test_a_writer_is_given_exactly_its_segments_chunk_count(tmp_path):
    texts = _texts(3)
    entries = [(bytes.fromhex(chunk_digest(text)), text) for text in texts]
    with pytest.raises(ValueError, match="2 chunk texts for a segment of 3"):
        write_text_file(os.path.join(tmp_path, file_name(SEGMENT)), entries[:2], 3)
    with pytest.raises(ValueError, match="8 bytes"):
        write_text_file(os.path.join(tmp_path, file_name(SEGMENT)), [(b"short", "x")], 1)


def test_a_prefetch_reads_the_missing_blocks_so_the_read_makes_no_get(tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_text, "HEAD_READ_BYTES", 64)  # a head of its own, then blocks by range
    texts = _texts(4 * chunk_text.BLOCK_ENTRIES)
    reader, bucket = _remote(tmp_path, texts)
    wanted = [(SEGMENT, n, chunk_digest(texts[n])) for n in (1, 3 * chunk_text.BLOCK_ENTRIES)]
    prefetch = reader.prefetch(wanted)
    assert prefetch.held == {} and prefetch.reading is not None
    prefetch.reading.result(timeout=10)
    fetched = list(bucket.gets)
    assert len(fetched) == 3  # the head, and the two blocks asked for
    assert reader.texts(wanted) == [texts[1], texts[3 * chunk_text.BLOCK_ENTRIES]]
    assert bucket.gets == fetched  # served from memory
    again = reader.prefetch(wanted)
    assert again.reading is None  # nothing left to read ahead
    assert {place: text for place, (_, text) in again.held.items()} == {
        (SEGMENT, 1): texts[1],
        (SEGMENT, 3 * chunk_text.BLOCK_ENTRIES): texts[3 * chunk_text.BLOCK_ENTRIES],
    }


def test_a_read_given_what_a_prefetch_held_still_checks_each_digest(tmp_path):
    texts = _texts(2)
    reader, _ = _remote(tmp_path, texts)
    wanted = [(SEGMENT, 0, chunk_digest(texts[0]))]
    assert reader.texts(wanted) == [texts[0]]
    held = reader.prefetch(wanted).held
    assert reader.texts(wanted, held) == [texts[0]]
    with pytest.raises(ChunkTextCorrupt):  # an entry held for another chunk is refused
        reader.texts([(SEGMENT, 0, chunk_digest(texts[1]))], held)


def test_a_failed_prefetch_is_retried_and_reported_by_the_read(tmp_path):
    texts = _texts(chunk_text.BLOCK_ENTRIES)
    reader, bucket = _remote(tmp_path, texts)
    data, bucket.data = bucket.data, b""  # the object reads back empty: the head is refused
    wanted = [(SEGMENT, 0, chunk_digest(texts[0]))]
    prefetch = reader.prefetch(wanted)
    assert prefetch.reading is not None and prefetch.reading.result(timeout=10) is None  # nothing raised
    with pytest.raises(ChunkTextCorrupt):
        reader.texts(wanted)
    bucket.data = data
    assert reader.texts(wanted) == [texts[0]]


def test_a_prefetch_of_a_segment_without_a_text_file_starts_nothing(tmp_path):
    prefetch = ChunkTexts(str(tmp_path)).prefetch([(SEGMENT, 0, "00" * 8)])
    assert prefetch.held == {} and prefetch.reading is None
