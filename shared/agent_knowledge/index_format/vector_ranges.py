"""A partitioned vector file read by need: its head, then the lists a query probes, by ranged GETs.

A search container does not download a generation's large vector files (`LocalFiles.by_need`).
The first search of a file reads its head — the header, the centroids, the list blocks' places and
CRC-32s and the background sample (`index_format/vectors`, format 3): one GET of HEAD_READ_BYTES, and a
second for the rest of the head if it is longer — and then, per query, the blocks of the lists the
query probes that this container does not hold yet, RANGE_THREADS ranged GETs at a time (adjacent
blocks are one GET). Each block is checked against its CRC-32 when first used (`VectorFile`).

What was fetched is kept on local disk, in a sparse file beside the store's objects
(`LocalFiles.ranges_path`: pinned, pruned and cleared with the object of the same content
address), written with `pwrite` and read through a memory map of the whole file's size, so a list
fetched once is never fetched again by this container. Before each fetch the store's free-space
rule applies (`LocalFiles.ensure_free`: the same margin as a download). No background fill: a
query waits only for its own lists, and lists no query probed are never read.

A vector file that is not format 3 (format 1 or 2: flat arrays, or partitioned by format 2) is
downloaded whole into the store and memory-mapped as before, with its S3 checksum checked.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

from agent_knowledge.index_format.layout import RangeReads as ObjectRanges
from agent_knowledge.index_format.layout import VectorFileCorrupt, read_object_range
from agent_knowledge.index_format.vectors import HEAD_PREFIX, MAGIC, VectorFile, open_vector_file
from agent_knowledge.repositories.bodies import Sink

# The first GET of a file read by need: enough for the header's start, which gives the head's size
# (`vectors.HEAD_PREFIX`); a second GET reads the rest of the head. Of a file that is not read by
# need (format 1 or 2), what is read before it is downloaded whole.
HEAD_READ_BYTES = 64 << 10
# Ranged GETs of one query's missing lists at a time (boto3 clients are thread safe).
RANGE_THREADS = 8


@runtime_checkable
class RangeReads(ObjectRanges, Protocol):
    """What reading by need takes of the bodies bucket (`BodyStore`): ranges, and whole downloads
    for a file that is not read by need."""

    def download(self, key: str, target: Sink) -> int: ...


class Store(Protocol):
    """What reading by need takes of this container's local files (`LocalFiles`)."""

    def ranges_path(self, sha256: str) -> str: ...

    def ensure_free(self, needed: int, freed: int = 0) -> None: ...

    def fetch_object(self, bodies: RangeReads, key: str, sha256: str, size: int) -> str: ...


def _read(objects: ObjectRanges, key: str, start: int, end: int) -> bytes:
    return read_object_range(objects, key, start, end, VectorFileCorrupt, "vector file")


class RangedLists:
    """The list blocks of one vector file, fetched by need and kept in a sparse local file."""

    def __init__(self, objects: RangeReads, key: str, size: int, path: str, store: Store) -> None:
        self._objects, self._key, self._store = objects, key, store
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(self._fd).st_size != size:
            os.ftruncate(self._fd, size)  # sparse: holes cost no disk
        weakref.finalize(self, os.close, self._fd)
        self._map = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self.fetched_bytes = 0
        self.gets = 0

    def blocks(self, spans: Sequence[tuple[int, int, int]]) -> dict[int, memoryview]:
        with self._lock:
            missing = sorted((start, end, number) for number, start, end in spans if number not in self._held)
            if missing:
                self._fetch(missing)
        view = memoryview(self._map)
        return {number: view[start:end] for number, start, end in spans}

    def _fetch(self, missing: list[tuple[int, int, int]]) -> None:
        ranges: list[list[int]] = []  # [start, end], adjacent blocks joined
        for start, end, _ in missing:
            if ranges and ranges[-1][1] == start:
                ranges[-1][1] = end
            else:
                ranges.append([start, end])
        self._store.ensure_free(sum(end - start for start, end in ranges))
        if len(ranges) == 1:
            self._get(*ranges[0])
        else:
            with ThreadPoolExecutor(max_workers=min(RANGE_THREADS, len(ranges))) as pool:
                for done in [pool.submit(self._get, start, end) for start, end in ranges]:
                    done.result()
        self._held.update(number for _, _, number in missing)
        self.fetched_bytes += sum(end - start for start, end in ranges)
        self.gets += len(ranges)

    def _get(self, start: int, end: int) -> None:
        data = _read(self._objects, self._key, start, end)
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], start + written)


def open_by_need(
    objects: RangeReads, key: str, sha256: str, size: int, store: Store, space: str | None = None
) -> VectorFile:
    """The vector file `key` (`size` bytes, content address `sha256`) opened from its head, its
    lists read by need; a file of another format than 3 is downloaded whole and memory-mapped.
    Damage (including a missing object) raises VectorFileCorrupt."""
    first = _read(objects, key, 0, min(size, HEAD_READ_BYTES))
    found = HEAD_PREFIX.match(first, len(MAGIC) + 4)
    if found is None:  # formats 1 and 2 (or damage): read whole
        if size <= len(first):
            opened = VectorFile(first)  # all of it is here (or it is corrupt)
        else:
            opened = open_vector_file(store.fetch_object(objects, key, sha256, size))
    else:
        (header_length,) = struct.unpack_from("<I", first, len(MAGIC))
        start = len(MAGIC) + 4 + header_length
        head_end = start + (-start) % 64 + int(found.group(1))
        if head_end > size:
            raise VectorFileCorrupt("vector file header lists_at lies beyond the file")
        head = first[:head_end] if head_end <= len(first) else first + _read(objects, key, len(first), head_end)
        lists = RangedLists(objects, key, size, store.ranges_path(sha256), store)
        opened = VectorFile(head, size=size, lists=lists)
    if space is not None:
        opened.check_space(space)
    return opened
