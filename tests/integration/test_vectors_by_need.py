"""Vector files read by need (issue 36, item 1): a cold container reads a partitioned file's head
and the lists a query probes by ranged GETs on moto, keeps them on local disk and never fetches
them again; flat files are downloaded whole; damage is VectorFileCorrupt. S3 calls and bytes are
counted at the bucket."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest

from agent_knowledge.index_format.layout import VECTOR_ROLE, IndexFile, IndexManifest, VectorFileCorrupt
from agent_knowledge.index_format.local_files import LocalFiles
from agent_knowledge.index_format.vector_ranges import HEAD_READ_BYTES, RangeReads, open_by_need
from agent_knowledge.index_format.vector_writing import write_vectors
from agent_knowledge.index_format.vectors import LISTS_FORMAT, VectorFile, VectorRow, file_name
from agent_knowledge.retrieval.dense import ROWS_PER_DOCUMENT, OpenedVectors, dense_search

SPACE = "test-model/8"
# More rows than EXACT_ROWS: the search probes lists (245 lists of ~245 rows).
ROWS = 60_000


class Counted:
    """The bucket, counting its GETs and the bytes they return."""

    def __init__(self, bodies) -> None:  # type: ignore[no-untyped-def]
        self.bodies = bodies
        self.ranges: list[tuple[int, int]] = []
        self.downloads = 0

    def read_range(self, key, start, end, etag=None):  # type: ignore[no-untyped-def]
        self.ranges.append((start, end))
        return self.bodies.read_range(key, start, end, etag)

    def download(self, key, target):  # type: ignore[no-untyped-def]
        self.downloads += 1
        return self.bodies.download(key, target)

    @property
    def gets(self) -> int:
        return len(self.ranges) + self.downloads

    @property
    def range_bytes(self) -> int:
        return sum(end - start for start, end in self.ranges)


def unit_rows(count: int, dimensions: int = 8, seed: int = 0) -> np.ndarray:
    matrix = np.random.default_rng(seed).normal(size=(count, dimensions)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def rows_for(count: int) -> list[VectorRow]:
    return [VectorRow(f"doc{n // 3}", f"rev{n // 3}", n % 3, f"{n:016x}") for n in range(count)]


@pytest.fixture(scope="module")
def partitioned() -> bytes:
    return write_vectors(SPACE, rows_for(ROWS), unit_rows(ROWS))


def local_store(tmp_path) -> LocalFiles:  # type: ignore[no-untyped-def]
    store = LocalFiles(str(tmp_path / "store"))
    store.by_need_bytes = 0  # these files are small (8 dimensions); at 512, a partitioned file is > 26 MB
    return store


def publish(stack, data: bytes) -> IndexManifest:  # type: ignore[no-untyped-def]
    name = file_name(data)
    entry = IndexFile(sha256=hashlib.sha256(data).hexdigest(), size=len(data), role=VECTOR_ROLE)
    manifest = IndexManifest(
        format_version=1, schema_version=1, tantivy_version="0", kb_id="kb", generation=1, documents=ROWS // 3,
        chunks=ROWS, index_bytes=len(data), files={name: entry}, meta={}, embedding_model_id=SPACE,
    )  # fmt: skip
    stack.repositories.bodies.put_file(manifest.file_key(name), io.BytesIO(data), entry.sha256, "")
    return manifest


def coalesced(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    joined: list[list[int]] = []
    for start, end in sorted(spans):
        if joined and joined[-1][1] == start:
            joined[-1][1] = end
        else:
            joined.append([start, end])
    return [(start, end) for start, end in joined]


def test_a_cold_query_gets_the_head_and_its_probed_lists_only_and_a_second_query_gets_nothing(
    stack, tmp_path, partitioned
):
    manifest = publish(stack, partitioned)
    bucket, store = Counted(stack.repositories.bodies), local_store(tmp_path)
    assert isinstance(bucket, RangeReads) and store.by_need(next(iter(manifest.files.values())), bucket)
    whole = VectorFile(partitioned)
    assert whole.format == LISTS_FORMAT and whole.head_bytes < len(partitioned) // 3  # mostly its document names
    query = unit_rows(1, seed=7)[0]
    documents = 10
    probed = whole.probed_lists(query, documents * ROWS_PER_DOCUMENT)
    spans = coalesced([whole.list_span(n) for n in probed])
    empty = str(tmp_path / "generation")  # the directory the generation was materialized into: no vector file

    opened = OpenedVectors()  # the container's opened files
    cold = dense_search(manifest, empty, query, documents, opened=opened, remote=(bucket, store))

    # Two GETs for the head (its first bytes give its size), then one per run of adjacent lists.
    assert bucket.ranges == [(0, HEAD_READ_BYTES), (HEAD_READ_BYTES, whole.head_bytes), *spans]
    assert bucket.downloads == 0
    assert bucket.range_bytes == whole.head_bytes + sum(end - start for start, end in spans)
    assert bucket.range_bytes < len(partitioned) // 2  # 32 of 245 lists, and the head
    # The same answer, the same background, as the whole file memory-mapped.
    (path,) = [tmp_path / "whole" / name for name in manifest.files]
    path.parent.mkdir()
    path.write_bytes(partitioned)
    warm = dense_search(manifest, str(path.parent), query, documents, opened=OpenedVectors())
    assert cold.hits == warm.hits and cold.background == warm.background and len(cold.hits) == documents

    # A second query probing the same lists: nothing more from the bucket.
    before = bucket.gets
    again = dense_search(manifest, empty, query, documents, opened=opened, remote=(bucket, store))
    assert bucket.gets == before and again.hits == cold.hits


def test_later_queries_fetch_only_the_lists_they_lack(stack, tmp_path, partitioned):
    manifest = publish(stack, partitioned)
    bucket, store, opened = Counted(stack.repositories.bodies), local_store(tmp_path), OpenedVectors()
    whole = VectorFile(partitioned)
    first, second = unit_rows(2, seed=11)
    k = 5 * ROWS_PER_DOCUMENT
    dense_search(manifest, str(tmp_path), first, 5, opened=opened, remote=(bucket, store))
    after_first = list(bucket.ranges)
    dense_search(manifest, str(tmp_path), first, 5, opened=opened, remote=(bucket, store))
    assert bucket.ranges == after_first  # the same lists: no GET at all, not even the head

    dense_search(manifest, str(tmp_path), second, 5, opened=opened, remote=(bucket, store))
    lacking = sorted(set(whole.probed_lists(second, k)) - set(whole.probed_lists(first, k)))
    assert bucket.ranges[len(after_first) :] == coalesced([whole.list_span(n) for n in lacking])
    # What was fetched is on local disk, within the store (pinned, pruned and cleared with it).
    (entry,) = manifest.files.values()
    assert store.stored_bytes() == len(partitioned)  # the sparse file's apparent size
    store.hold("reader", [manifest])
    assert (tmp_path / "store" / "objects" / f"{entry.sha256}.ranges").exists()
    store.hold("reader", [])
    assert not (tmp_path / "store" / "objects" / f"{entry.sha256}.ranges").exists()


def test_a_damaged_list_block_or_a_missing_file_is_a_corrupt_vector_file(stack, tmp_path, partitioned):
    manifest = publish(stack, partitioned)
    whole = VectorFile(partitioned)
    query = unit_rows(1, seed=3)[0]
    start, _ = whole.list_span(whole.probed_lists(query, 3 * ROWS_PER_DOCUMENT)[0])
    damaged = bytearray(partitioned)
    damaged[start + 5] ^= 0xFF  # a code of the first probed list: same size, same header
    (name,) = manifest.files
    stack.repositories.bodies.put_file(manifest.file_key(name), io.BytesIO(bytes(damaged)), "", "")
    store = local_store(tmp_path)
    with pytest.raises(VectorFileCorrupt, match="CRC-32"):
        dense_search(
            manifest, str(tmp_path), query, 3, opened=OpenedVectors(), remote=(stack.repositories.bodies, store)
        )
    stack.repositories.bodies.delete(manifest.file_key(name))
    with pytest.raises(VectorFileCorrupt, match="missing"):
        dense_search(
            manifest, str(tmp_path), query, 3, opened=OpenedVectors(), remote=(stack.repositories.bodies, store)
        )


def test_a_file_of_another_space_read_by_need_is_corrupt(stack, tmp_path, partitioned):
    manifest = publish(stack, partitioned)
    ((name, entry),) = manifest.files.items()
    store = local_store(tmp_path)
    with pytest.raises(VectorFileCorrupt, match="model"):
        open_by_need(stack.repositories.bodies, manifest.file_key(name), entry.sha256, entry.size, store, "other/8")


def test_a_flat_file_is_downloaded_whole_once_and_searched_as_before(stack, tmp_path):
    data = write_vectors(SPACE, rows_for(3000), unit_rows(3000))  # up to EXACT_ROWS: format 2, scanned whole
    manifest = publish(stack, data)
    bucket, store = Counted(stack.repositories.bodies), local_store(tmp_path)
    ((name, entry),) = manifest.files.items()
    assert store.by_need(entry, bucket)
    query = unit_rows(1, seed=5)[0]
    found = dense_search(manifest, str(tmp_path), query, 4, opened=OpenedVectors(), remote=(bucket, store))
    assert bucket.downloads == 1 and bucket.ranges == [(0, HEAD_READ_BYTES)]  # its first bytes: format 2
    assert [hit.doc_id for hit in found.hits] == list(
        dict.fromkeys(hit.doc_id for hit in VectorFile(data).search(query, 4 * ROWS_PER_DOCUMENT))
    )[:4]


def test_materialize_leaves_large_vector_files_to_be_read_by_need(stack, tmp_path, partitioned):
    manifest = publish(stack, partitioned)
    bucket, store = Counted(stack.repositories.bodies), local_store(tmp_path)
    assert store.missing_bytes(manifest, bucket) == 0 and store.missing_bytes(manifest) == len(partitioned)
    directory, downloaded = store.materialize(bucket, manifest, "reader", by_need=True)
    assert downloaded == 0 and bucket.gets == 0 and not any(name in manifest.files for name in _listing(directory))
    # A writer (update, merge, rebuild) reads its previous generation's vector files whole.
    directory, downloaded = store.materialize(bucket, manifest, "writer")
    assert downloaded == len(partitioned) and sorted(_listing(directory)) == sorted([*manifest.files, "meta.json"])
    # A bucket that reads no ranges (a test double, a benchmark's directory) gets every file whole.
    store.clear()
    plain = _Plain(stack.repositories.bodies)
    directory, downloaded = store.materialize(plain, manifest, "other", by_need=True)
    assert downloaded == len(partitioned)


class _Plain:
    def __init__(self, bodies) -> None:  # type: ignore[no-untyped-def]
        self.bodies = bodies

    def download(self, key, target):  # type: ignore[no-untyped-def]
        return self.bodies.download(key, target)


def _listing(directory: str) -> list[str]:
    import os

    return os.listdir(directory)
