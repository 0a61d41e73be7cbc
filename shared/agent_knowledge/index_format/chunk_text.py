"""Chunk texts out of tantivy: one file of our own per segment, read by ranged GETs for the hits answered.

tantivy keeps what ranking and validation need (postings, the `doc_key` fast field, ids, revision,
digest, access terms); the chunk texts of a segment are in `{segment_id}.chunks`, listed in the
generation's manifest with the role `text`, written when the segment is written (`builder`,
`segment_passes`) and never changed after — like the segment, whose documents it follows one for
one, in tantivy's document order (a deleted chunk keeps its entry until its segment is merged away).

    MAGIC (8) | entries u32 | entries per block u32 | blocks u32 | (blocks + 1) offsets u64
    block: zlib( digests (8 bytes each) | lengths (u32 each) | UTF-8 texts )

The head (the first four fields and the offsets) is at the start, so a reader that lacks the file
reads the head with one ranged GET of HEAD_READ_BYTES (a second for the rest of a longer head) and
then the one block that holds a hit's entry; each entry carries its chunk's digest, checked against
the hit's, so a text is never served for another chunk. Heads and blocks are kept in this process's
memory (`BLOCK_CACHE_BYTES` of decoded blocks, least recently used first out), keyed by the file's
content address, so a container moving to the next generation keeps the blocks of the segments
both share. A writer holds the whole files in its local copy of the generation and reads them there.
"""

from __future__ import annotations

import functools
import os
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from agent_knowledge.core.per_container import on_reset
from agent_knowledge.index_format.layout import (
    TEXT_EXTENSION,
    TEXT_ROLE,
    IndexCorrupt,
    IndexManifest,
    RangeReads,
    read_object_range,
)

MAGIC = b"AKTXT\x00\x01\x00"
_HEAD = struct.Struct("<8sIII")
DIGEST_BYTES = 8
# Chunks per compressed block (the head records it: readers take any): ~38 KB of text at the
# benchmark's ~605 bytes a chunk, ~18 KB compressed — what one hint costs to fetch. Measured on
# 20,000 chunks of bench.segments' corpus, bytes per chunk with zlib level 6 (digest and length
# included): 16 → 310, 32 → 300, 64 → 277, 128 → 261 (level 9: within 1 byte, 1.3× the CPU).
BLOCK_ENTRIES = 64
COMPRESSION_LEVEL = 6
# The first ranged GET of a file's head: the whole head of a segment of up to ~65,000 chunks.
HEAD_READ_BYTES = 16 * 1024
# Decoded blocks kept in memory per process.
BLOCK_CACHE_BYTES = 32 * 1024 * 1024
# Decoded blocks a writer's reader keeps of files it knows by path only.
OWN_CACHE_BYTES = 4 * 1024 * 1024
# Ranged GETs of one search's missing blocks at a time (boto3 clients are thread safe).
RANGE_THREADS = 8
# Searches whose missing blocks are read ahead at a time (`ChunkTexts.prefetch`); each fans out
# to RANGE_THREADS ranged GETs of its own.
PREFETCH_THREADS = 2


class ChunkTextCorrupt(IndexCorrupt):
    """A chunk text file is missing, truncated, of an unknown format, or does not match its segment."""


def file_name(segment_id: str) -> str:
    return f"{segment_id}.{TEXT_EXTENSION}"


def head_size(blocks: int) -> int:
    return _HEAD.size + 8 * (blocks + 1)


def _encode_block(entries: Sequence[tuple[bytes, str]]) -> bytes:
    encoded = [text.encode("utf-8") for _, text in entries]
    lengths = struct.pack(f"<{len(encoded)}I", *(len(data) for data in encoded))
    return zlib.compress(b"".join(digest for digest, _ in entries) + lengths + b"".join(encoded), COMPRESSION_LEVEL)


def _decode_block(data: bytes, count: int) -> list[tuple[bytes, str]]:
    try:
        raw = zlib.decompress(data)
        lengths = struct.unpack_from(f"<{count}I", raw, count * DIGEST_BYTES)
        position = count * (DIGEST_BYTES + 4)
        entries = []
        for number, length in enumerate(lengths):
            digest = raw[number * DIGEST_BYTES : (number + 1) * DIGEST_BYTES]
            entries.append((digest, raw[position : position + length].decode("utf-8")))
            position += length
    except (zlib.error, struct.error, UnicodeDecodeError) as exc:
        raise ChunkTextCorrupt("a chunk text block does not decode") from exc
    if position != len(raw):
        raise ChunkTextCorrupt("a chunk text block is not the size its entries say")
    return entries


def write_text_file(path: str, entries: Iterable[tuple[bytes, str]], count: int) -> None:
    """Write the texts of a segment's `count` chunks, (8-byte digest, text) in document order."""
    blocks = -(-count // BLOCK_ENTRIES)
    offsets = [head_size(blocks)]
    written = 0
    batch: list[tuple[bytes, str]] = []
    with open(path, "wb") as target:
        target.write(b"\0" * offsets[0])

        def flush() -> None:
            data = _encode_block(batch)
            target.write(data)
            offsets.append(offsets[-1] + len(data))
            batch.clear()

        for digest, text in entries:
            if len(digest) != DIGEST_BYTES:
                raise ValueError("a chunk digest is 8 bytes")
            batch.append((digest, text))
            written += 1
            if len(batch) == BLOCK_ENTRIES:
                flush()
        if batch:
            flush()
        if written != count:
            raise ValueError(f"{written} chunk texts for a segment of {count} chunks")
        target.seek(0)
        target.write(_HEAD.pack(MAGIC, count, BLOCK_ENTRIES, blocks) + struct.pack(f"<{blocks + 1}Q", *offsets))


@dataclass(frozen=True)
class Head:
    entries: int
    block_entries: int
    offsets: tuple[int, ...]

    def block_of(self, doc: int) -> int:
        if not 0 <= doc < self.entries:
            raise ChunkTextCorrupt("a chunk is not in its segment's text file")
        return doc // self.block_entries

    def count_in(self, block: int) -> int:
        return min(self.block_entries, self.entries - block * self.block_entries)


def _head_length(prefix: bytes) -> int:
    if len(prefix) < _HEAD.size or prefix[:8] != MAGIC:
        raise ChunkTextCorrupt("not a chunk text file")
    _, entries, block_entries, blocks = _HEAD.unpack_from(prefix)
    if block_entries == 0 or blocks != -(-entries // block_entries):
        raise ChunkTextCorrupt("a chunk text file's head is inconsistent")
    return head_size(blocks)


def _parse_head(data: bytes, size: int) -> Head:
    length = _head_length(data)
    if len(data) < length:
        raise ChunkTextCorrupt("a chunk text file's head is truncated")
    _, entries, block_entries, blocks = _HEAD.unpack_from(data)
    offsets = struct.unpack_from(f"<{blocks + 1}Q", data, _HEAD.size)
    if offsets[0] != length or offsets[-1] != size or any(b < a for a, b in zip(offsets, offsets[1:], strict=False)):
        raise ChunkTextCorrupt("a chunk text file's offsets do not match its size")
    return Head(entries, block_entries, offsets)


class _Cache:
    """Heads and decoded blocks of this process, least recently used first out."""

    def __init__(self, max_bytes: int = BLOCK_CACHE_BYTES) -> None:
        self._heads: OrderedDict[object, Head] = OrderedDict()
        self._blocks: OrderedDict[tuple[object, int], tuple[list[tuple[bytes, str]], int]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def head(self, key: object) -> Head | None:
        with self._lock:
            head = self._heads.get(key)
            if head is not None:
                self._heads.move_to_end(key)
            return head

    def put_head(self, key: object, head: Head) -> None:
        with self._lock:
            self._heads[key] = head
            while len(self._heads) > 4096:
                self._heads.popitem(last=False)

    def block(self, key: object, block: int) -> list[tuple[bytes, str]] | None:
        with self._lock:
            found = self._blocks.get((key, block))
            if found is None:
                return None
            self._blocks.move_to_end((key, block))
            return found[0]

    def put_block(self, key: object, block: int, entries: list[tuple[bytes, str]]) -> None:
        size = sum(len(text) for _, text in entries) + DIGEST_BYTES * len(entries)
        with self._lock:
            if (key, block) in self._blocks:
                return
            self._blocks[(key, block)] = (entries, size)
            self._bytes += size
            while self._bytes > self._max_bytes and len(self._blocks) > 1:
                _, (_, dropped) = self._blocks.popitem(last=False)
                self._bytes -= dropped

    def entries_of(self, places: Sequence[tuple[object, int]]) -> list[tuple[bytes, str] | None]:
        """The entry of each (file key, document number) held in memory, None where its head or
        block is not: one lock for a whole search's hits (the warm path)."""
        found: list[tuple[bytes, str] | None] = []
        with self._lock:
            for key, doc in places:
                head = self._heads.get(key)
                if head is None or not 0 <= doc < head.entries:
                    found.append(None)
                    continue
                block = self._blocks.get((key, doc // head.block_entries))
                if block is None:
                    found.append(None)
                    continue
                self._blocks.move_to_end((key, doc // head.block_entries))
                found.append(block[0][doc % head.block_entries])
        return found

    def forget_blocks(self) -> None:
        """Drop the decoded blocks, keep the heads (what a warm container holds once its blocks were
        evicted: the benchmark of a hint's ranged read)."""
        with self._lock:
            self._blocks.clear()
            self._bytes = 0

    def clear(self) -> None:
        with self._lock:
            self._heads.clear()
            self._blocks.clear()
            self._bytes = 0


cache = _Cache()
on_reset(cache.clear)


@functools.cache
def _prefetcher() -> ThreadPoolExecutor:
    """Created on a search's first prefetch (never at import: no thread is in a SnapStart snapshot
    unless a search ran before it was taken)."""
    return ThreadPoolExecutor(max_workers=PREFETCH_THREADS, thread_name_prefix="chunk-text-prefetch")


@functools.cache
def _range_reader_pool() -> ThreadPoolExecutor:
    """The threads that read one search's missing heads and blocks in parallel, kept: a pool per
    read started RANGE_THREADS threads for every search that missed the cache. Like the
    prefetcher, created on first use, never at import. Its tasks read and decode only (none waits
    on this pool), so a prefetch thread waiting on them cannot deadlock it."""
    return ThreadPoolExecutor(max_workers=RANGE_THREADS, thread_name_prefix="chunk-text-range")


class _File:
    """One segment's text file: a local file, or an object read by ranges."""

    def __init__(self, key: object, size: int, read: RangeReader, kept: _Cache) -> None:
        self.key, self.size, self._read, self.cache = key, size, read, kept
        # What the head's read brought beyond the head (all of a small file): blocks in it are
        # served without another GET.
        self._prefix = b""

    def head(self) -> Head:
        head = self.cache.head(self.key)
        if head is None:
            prefix = self._read(0, min(HEAD_READ_BYTES, self.size))
            length = _head_length(prefix)
            if length > len(prefix):
                prefix += self._read(len(prefix), length)
            head = _parse_head(prefix, self.size)
            self._prefix = prefix
            self.cache.put_head(self.key, head)
        return head

    def block(self, head: Head, block: int) -> list[tuple[bytes, str]]:
        entries = self.cache.block(self.key, block)
        if entries is None:
            start, end = head.offsets[block], head.offsets[block + 1]
            data = self._prefix[start:end] if end <= len(self._prefix) else self._read(start, end)
            entries = _decode_block(data, head.count_in(block))
            self.cache.put_block(self.key, block, entries)
        return entries


class RangeReader(Protocol):
    def __call__(self, start: int, end: int, /) -> bytes: ...


def _local_reader(path: str) -> RangeReader:
    def read(start: int, end: int) -> bytes:
        with open(path, "rb") as source:
            source.seek(start)
            data = source.read(end - start)
        if len(data) != end - start:
            raise ChunkTextCorrupt("a chunk text file is shorter than its head says")
        return data

    return read


def _remote_reader(objects: RangeReads, key: str) -> RangeReader:
    def read(start: int, end: int) -> bytes:
        return read_object_range(objects, key, start, end, ChunkTextCorrupt, "a chunk text file")

    return read


Wanted = tuple[str, int, str]  # segment id, document number in the segment, chunk digest (hex)
# A chunk's entry (digest, text) by (segment id, document number): what a prefetch found in memory.
Held = dict[tuple[str, int], tuple[bytes, str]]


class Prefetch(NamedTuple):
    """A prefetch's outcome: the entries it found in memory, and the read of the others it started
    (None when nothing was missing or a file could not be placed; the read returns, never raises)."""

    held: Held
    reading: Future[object] | None


class ChunkTexts:
    """The chunk texts of an opened generation: from its directory when the file is there (a
    writer's copy), else — given the bucket and the manifest — by ranged GETs of its object."""

    def __init__(
        self, directory: str, objects: RangeReads | None = None, manifest: IndexManifest | None = None
    ) -> None:
        self._directory = directory
        self._objects = objects
        self._manifest = manifest
        self._files: dict[str, _File] = {}
        self._own = _Cache(OWN_CACHE_BYTES)
        self._lock = threading.Lock()

    def _file(self, segment_id: str) -> _File:
        found = self._files.get(segment_id)
        if found is not None:
            return found
        name = file_name(segment_id)
        path = os.path.join(self._directory, name)
        entry = self._manifest.files.get(name) if self._manifest is not None else None
        if entry is not None and entry.role != TEXT_ROLE:
            raise ChunkTextCorrupt("the manifest lists a chunk text file under another role")
        if os.path.exists(path):
            stat = os.stat(path)
            if entry is not None:  # content-addressed: shared with every generation that has it
                found = _File(entry.sha256, stat.st_size, _local_reader(path), cache)
            else:  # a writer's file, known by its path only: kept by this reader alone
                found = _File(path, stat.st_size, _local_reader(path), self._own)
        elif entry is not None and self._objects is not None and self._manifest is not None:
            found = _File(entry.sha256, entry.size, _remote_reader(self._objects, self._manifest.file_key(name)), cache)
        else:
            raise ChunkTextCorrupt("a segment has no chunk text file")
        with self._lock:
            self._files[segment_id] = found
        return found

    def prefetch(self, wanted: Sequence[Wanted]) -> Prefetch:
        """What this process holds of `wanted` now, and the background read of the blocks it
        lacks, so that their ranged GETs overlap what the caller does meanwhile (a search reads its
        hits' records: docs/DESIGN.md §10); `texts` given `held` then looks nothing up twice. No
        read starts when nothing is missing, or when a file cannot be placed (`texts` reports
        that, not the prefetch). The read never raises for the caller to handle: a failed read is
        retried by `texts`."""
        try:
            places = [(self._file(segment_id), doc) for segment_id, doc, _ in wanted]
        except ChunkTextCorrupt:
            return Prefetch({}, None)
        entries = self._in_memory(places)
        held = {
            (segment_id, doc): entry
            for (segment_id, doc, _), entry in zip(wanted, entries, strict=True)
            if entry is not None
        }
        if all(entry is not None for entry in entries):
            return Prefetch(held, None)

        def fetch() -> object:
            try:
                return self._fetch(places)
            except Exception:  # noqa: BLE001 — retried, and reported, by the read that follows
                return None

        return Prefetch(held, _prefetcher().submit(fetch))

    def text(self, segment_id: str, doc: int, digest: str) -> str:
        return self.texts([(segment_id, doc, digest)])[0]

    def texts(self, wanted: Sequence[Wanted], held: Held | None = None) -> list[str]:
        """The texts of `wanted` chunks, in order; the blocks this process lacks are fetched
        RANGE_THREADS at a time. `held`: entries a prefetch already found in memory (not looked up
        again). ChunkTextCorrupt if an entry is not the chunk its digest names."""
        entries: list[tuple[bytes, str] | None] = []
        if held:
            entries = [held.get((segment_id, doc)) for segment_id, doc, _ in wanted]
        if not held or any(entry is None for entry in entries):
            places = [(self._file(segment_id), doc) for segment_id, doc, _ in wanted]
            entries = self._in_memory(places)
            if any(entry is None for entry in entries):
                fetched = self._fetch(places)
                entries = [
                    entry if entry is not None else fetched[(file.key, doc)]
                    for entry, (file, doc) in zip(entries, places, strict=True)
                ]
        found = []
        for entry, (_, _, digest) in zip(entries, wanted, strict=True):
            assert entry is not None
            if entry[0].hex() != digest:
                raise ChunkTextCorrupt("a chunk text file does not match its segment")
            found.append(entry[1])
        return found

    @staticmethod
    def _in_memory(places: Sequence[tuple[_File, int]]) -> list[tuple[bytes, str] | None]:
        caches = {id(file.cache): file.cache for file, _ in places}
        if len(caches) == 1:  # the usual case: every file content-addressed in the process's cache
            return next(iter(caches.values())).entries_of([(file.key, doc) for file, doc in places])
        return [file.cache.entries_of([(file.key, doc)])[0] for file, doc in places]

    def _fetch(self, places: Sequence[tuple[_File, int]]) -> dict[tuple[object, int], tuple[bytes, str]]:
        """The entries of `places`, reading the heads and then the blocks this process lacks, in
        parallel; returned directly, so an eviction in between cannot lose one."""
        heads = {file.key: file for file, _ in places if file.cache.head(file.key) is None}
        self._run([file.head for file in heads.values()])
        blocks: dict[tuple[object, int], tuple[_File, Head, int]] = {}
        for file, doc in places:
            head = file.head()
            block = head.block_of(doc)
            blocks.setdefault((file.key, block), (file, head, block))
        decoded: dict[tuple[object, int], list[tuple[bytes, str]]] = {}

        def read(file: _File, head: Head, block: int) -> None:
            decoded[(file.key, block)] = file.block(head, block)

        self._run([functools.partial(read, file, head, block) for file, head, block in blocks.values()])
        found = {}
        for file, doc in places:
            head = file.head()
            found[(file.key, doc)] = decoded[(file.key, head.block_of(doc))][doc % head.block_entries]
        return found

    @staticmethod
    def _run(calls: Sequence[Callable[[], object]]) -> None:
        if len(calls) <= 1:
            for call in calls:
                call()
            return
        for done in [_range_reader_pool().submit(call) for call in calls]:
            done.result()

    def entries(self, segment_id: str) -> Iterator[tuple[bytes, str]]:
        """Every entry of the segment's file, (digest, text) in document order (merges)."""
        file = self._file(segment_id)
        head = file.head()
        for block in range(len(head.offsets) - 1):
            # Read straight through, not through the cache: a merge reads each block once.
            yield from _decode_block(file._read(head.offsets[block], head.offsets[block + 1]), head.count_in(block))
