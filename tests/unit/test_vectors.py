"""Vector files of the index (index_format/vectors.py): round trip, corruption, formats, the inverted-file partition,
recall on real embeddings and on a clustered set."""

from __future__ import annotations

import functools
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from agent_knowledge.embedding.local import LocalEmbedder
from agent_knowledge.index_format.vector_writing import quantise, write_quantised, write_vectors
from agent_knowledge.index_format.vectors import FORMAT_VERSION, VectorFile, VectorFileCorrupt, VectorRow, file_name


def unit_rows(count: int, dimensions: int = 16, seed: int = 0) -> np.ndarray:
    matrix = np.random.default_rng(seed).normal(size=(count, dimensions)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def rows_for(count: int) -> list[VectorRow]:
    return [VectorRow(f"doc{n // 3}", f"rev{n // 3}", n % 3, f"{n:016x}") for n in range(count)]


@functools.cache
def real_embeddings() -> tuple[np.ndarray, np.ndarray]:
    """The local model (Universal Sentence Encoder Multilingual v3) on 240 paragraphs of the Python Language Reference,
    and 40 of those paragraphs' first sentences as queries."""
    from pydoc_data.topics import topics

    paragraphs = [p.strip() for text in topics.values() for p in text.split("\n\n") if 80 <= len(p.strip()) <= 400]
    chosen = paragraphs[:: max(1, len(paragraphs) // 240)][:240]
    embedder = LocalEmbedder()
    questions = [p.split(". ")[0] for p in chosen[::6]]
    return embedder.embed_documents(chosen), np.stack([embedder.embed_query(q) for q in questions])


def test_a_written_file_reads_back_rows_vectors_and_metadata():
    vectors = unit_rows(10)
    data = write_vectors("model-x", rows_for(10), vectors)
    opened = VectorFile(data)
    assert (opened.model_id, opened.dimensions, opened.rows) == ("model-x", 16, 10)
    assert list(opened.rows_of()) == rows_for(10)
    assert np.abs(opened.vectors() - vectors).max() < 0.01
    hits = opened.search(vectors[4], 3)
    assert hits[0].row == 4 and hits[0].score == pytest.approx(1.0, abs=0.01)
    assert (hits[0].doc_id, hits[0].revision, hits[0].chunk_index, hits[0].chunk_digest) == (
        "doc1", "rev1", 1, f"{4:016x}",
    )  # fmt: skip
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_the_name_is_derived_from_the_content_and_fits_the_manifest_pattern():
    data = write_vectors("m", rows_for(3), unit_rows(3))
    assert file_name(data) == file_name(bytes(data))
    assert file_name(data) != file_name(write_vectors("m", rows_for(3), unit_rows(3, seed=1)))
    assert file_name(data).endswith(".vectors") and len(file_name(data).split(".")[0]) == 32


def test_an_empty_file_finds_nothing_and_a_wrong_query_is_refused():
    empty = VectorFile(write_vectors("m", [], np.zeros((0, 8), np.float32)))
    assert empty.rows == 0 and empty.search(np.ones(8, np.float32) / 8**0.5, 5) == []
    with pytest.raises(ValueError, match="dimensions"):
        VectorFile(write_vectors("m", rows_for(2), unit_rows(2))).search(np.ones(3, np.float32), 1)


def test_mismatched_rows_and_non_finite_vectors_are_refused():
    with pytest.raises(ValueError, match="rows need"):
        write_vectors("m", rows_for(2), unit_rows(3))
    bad = unit_rows(2)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        write_vectors("m", rows_for(2), bad)


def test_truncated_or_foreign_bytes_are_corrupt():
    data = write_vectors("m", rows_for(20), unit_rows(20))
    with pytest.raises(VectorFileCorrupt):
        VectorFile(data[: len(data) // 2])
    with pytest.raises(VectorFileCorrupt):
        VectorFile(b"not a vector file at all")


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 20), st.integers(1, 40)), elements=st.floats(-4, 4, width=32)))
def test_int8_quantisation_error_is_bounded_by_half_a_step_per_value(matrix):
    codes, scales = quantise(matrix)
    assert np.all(np.abs(codes.astype(np.float32) * scales[:, None] - matrix) <= scales[:, None] * 0.5 + 1e-6)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 60), st.integers(2, 48), st.integers(0, 10_000), st.integers(1, 10))
def test_every_search_returns_distinct_rows_best_first_and_the_exact_best(count, dimensions, seed, k):
    vectors = unit_rows(count, dimensions, seed)
    opened = VectorFile(write_vectors("m", rows_for(count), vectors))
    query = unit_rows(1, dimensions, seed + 1)[0]
    hits = opened.search(query, k)
    assert len(hits) == min(k, count) and len({h.row for h in hits}) == len(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    exact = vectors @ query
    assert exact[hits[0].row] >= exact.max() - 0.02  # int8 error only


def source_number(hit) -> int:
    """The row's position in the rows given to `write_vectors` (`rows_for` puts it in the digest):
    a partitioned file stores its rows grouped by list, not in that order."""
    return int(hit.chunk_digest, 16)


def recall_at_10(vectors: np.ndarray, queries: np.ndarray, opened: VectorFile, **search) -> list[float]:
    recalls = []
    for query in queries:
        exact = set(np.argsort(-(vectors @ query))[:10].tolist())
        found = {source_number(hit) for hit in opened.search(query, 10, **search)}
        recalls.append(len(exact & found) / 10)
    return recalls


def test_recall_at_10_against_exact_cosine_on_real_embeddings():
    documents, queries = real_embeddings()
    scanned = VectorFile(write_vectors("local", rows_for(len(documents)), documents))
    assert not scanned.partitioned
    # The partitioned path, forced on this small file: 15 lists of diverse paragraphs, the 8 nearest
    # scanned (about half of the rows; 5 lists gave 0.91: few rows per list partition loosely).
    partitioned = VectorFile(write_vectors("local", rows_for(len(documents)), documents, partition_rows=0))
    assert partitioned.partitioned
    assert np.mean(recall_at_10(documents, queries, scanned)) >= 0.98
    assert np.mean(recall_at_10(documents, queries, partitioned, probes=8, exact_rows=0)) >= 0.95


def clustered_rows(clusters: int, per_cluster: int, dimensions: int = 32, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dimensions))
    matrix = np.repeat(centres, per_cluster, axis=0) + rng.normal(scale=0.35, size=(clusters * per_cluster, dimensions))
    matrix = matrix.astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_a_partitioned_file_finds_the_exact_top_10_of_a_clustered_set_scanning_a_fraction_of_it():
    vectors = clustered_rows(40, 100)
    opened = VectorFile(write_vectors("m", rows_for(len(vectors)), vectors, partition_rows=1000))
    assert opened.partitioned  # 4,000 rows > 1,000: ~63 lists
    queries = clustered_rows(40, 1, seed=4)
    assert np.mean(recall_at_10(vectors, queries, opened, probes=8, exact_rows=0)) >= 0.95


def test_a_partitioned_file_keeps_every_row_with_its_own_vector_and_is_written_the_same_twice():
    vectors = clustered_rows(10, 30, dimensions=16)
    data = write_vectors("m", rows_for(len(vectors)), vectors, partition_rows=0)
    opened = VectorFile(data)
    numbers = [int(row.chunk_digest, 16) for row in opened.rows_of()]
    assert sorted(numbers) == list(range(len(vectors)))
    assert list(opened.rows_of()) == [rows_for(len(vectors))[n] for n in numbers]
    assert np.abs(opened.vectors() - vectors[numbers]).max() < 0.01
    assert write_vectors("m", rows_for(len(vectors)), vectors, partition_rows=0) == data  # same name


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 80), st.integers(2, 24), st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 4))
def test_a_partitioned_search_returns_k_distinct_rows_best_first_even_when_few_lists_are_probed(
    count, dimensions, seed, k, probes
):
    vectors = unit_rows(count, dimensions, seed)
    opened = VectorFile(write_vectors("m", rows_for(count), vectors, partition_rows=0))
    hits = opened.search(unit_rows(1, dimensions, seed + 1)[0], k, probes=probes, exact_rows=0)
    assert len(hits) == min(k, count) and len({h.row for h in hits}) == len(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def with_format(data: bytes, version: int) -> bytes:
    current = f'"format":{FORMAT_VERSION},'.encode()
    assert data.count(current) == 1
    return data.replace(current, f'"format":{version},'.encode())


def test_format_1_files_are_read_and_scanned_exactly_and_unknown_formats_are_refused():
    vectors = unit_rows(30)
    data = write_vectors("m", rows_for(30), vectors)
    # A format 1 file's arrays are a superset of an unpartitioned format 2 file's, minus the partition.
    old = VectorFile(with_format(data, 1))
    assert not old.partitioned and old.search(vectors[7], 1, exact_rows=0)[0].row == 7
    with pytest.raises(VectorFileCorrupt, match="format 9"):
        VectorFile(with_format(data, 9))


def test_list_offsets_that_do_not_cover_the_rows_are_corrupt():
    vectors = unit_rows(12)
    header, arrays = header_and_arrays(write_vectors("m", rows_for(12), vectors, partition_rows=0))
    offset, _, shape = header["arrays"]["list_offsets"]  # the last offset is the row count, as uint64
    last = offset + 8 * (shape[0] - 1)
    assert arrays[last : last + 8] == np.uint64(12).tobytes()
    damaged = arrays[:last] + np.uint64(11).tobytes() + arrays[last + 8 :]
    with pytest.raises(VectorFileCorrupt, match="list offsets"):
        VectorFile(file_of(header, damaged))


def test_document_names_out_of_order_or_not_utf8_are_corrupt():
    vectors = unit_rows(12)
    header, arrays = header_and_arrays(write_vectors("m", rows_for(12), vectors, partition_rows=0))
    offset, _, shape = header["arrays"]["doc_offsets"]
    swapped = arrays[:offset] + np.uint32(5).tobytes() + arrays[offset + 4 :]  # the first must be 0
    with pytest.raises(VectorFileCorrupt, match="document names"):
        VectorFile(file_of(header, swapped))
    names = header["arrays"]["doc_names"][0]
    broken = VectorFile(file_of(header, arrays[:names] + b"\xff" + arrays[names + 1 :]))
    with pytest.raises(VectorFileCorrupt, match="UTF-8"):
        broken.search(vectors[0], 12, exact_rows=0)  # every row: document 0's among them
    with pytest.raises(VectorFileCorrupt, match="UTF-8"):
        _ = broken.documents


@pytest.mark.parametrize("partition_rows", [0, 10_000])
def test_a_file_written_from_int8_rows_keeps_their_codes_and_is_the_file_write_vectors_makes(partition_rows):
    # What a merge does (vector_generation._merged): the rows' codes are carried, not re-quantised,
    # and streamed to the file; the bytes are those write_vectors makes of the same vectors.
    vectors = clustered_rows(10, 30, dimensions=16)
    rows = rows_for(len(vectors))
    codes, scales = quantise(vectors)
    streamed = io.BytesIO()
    write_quantised(streamed, "m", rows, codes, scales, partition_rows)
    assert streamed.getvalue() == write_vectors("m", rows, vectors, partition_rows=partition_rows)
    opened = VectorFile(streamed.getvalue())
    numbers = [int(row.chunk_digest, 16) for row in opened.rows_of()]
    carried_codes, carried_scales = opened.quantised(np.arange(opened.rows))
    assert (carried_codes == codes[numbers]).all() and (carried_scales == scales[numbers]).all()
    # Merged again (rows in the file's order, as `_merged` reads them): every row keeps its codes.
    again = io.BytesIO()
    write_quantised(again, "m", list(opened.rows_of()), carried_codes, carried_scales, partition_rows)
    merged = VectorFile(again.getvalue())
    codes_by_row = {
        int(row.chunk_digest, 16): code.tolist()
        for row, code in zip(merged.rows_of(), merged.quantised(np.arange(merged.rows))[0], strict=True)
    }
    assert codes_by_row == {number: codes[number].tolist() for number in range(len(vectors))}


def header_and_arrays(data: bytes) -> tuple[dict, bytes]:
    """A vector file's header (parsed) and its array region (from the padded start)."""
    import json
    import struct

    (length,) = struct.unpack_from("<I", data, 8)
    start = 8 + 4 + length + (-(8 + 4 + length)) % 64
    return json.loads(data[12 : 12 + length]), data[start:]


def file_of(header: dict, arrays: bytes) -> bytes:
    """The file of `header` and an array region (offsets in the header are relative to it)."""
    import json
    import struct

    encoded = json.dumps(header, separators=(",", ":")).encode()
    head = b"AKVEC\x00\x01\x00" + struct.pack("<I", len(encoded)) + encoded
    return head + b"\0" * ((-len(head)) % 64) + arrays


def format_1_file(rows: list[VectorRow], vectors: np.ndarray) -> bytes:
    """A vector file as format 1 wrote it (5f44fbb): codes, scales, the sign bits of the centred
    vectors and their mean, no partition."""
    codes, scales = quantise(vectors)
    mean = vectors.mean(axis=0).astype(np.float32)
    bits = np.packbits(vectors - mean > 0, axis=1)
    bits = np.pad(bits, ((0, 0), (0, (-bits.shape[1]) % 8)))
    documents: dict[tuple[str, str], int] = {}
    numbers = np.array([documents.setdefault((r.doc_id, r.revision), len(documents)) for r in rows], np.uint32)
    arrays = {
        "codes": codes,
        "scales": scales,
        "bits": bits,
        "mean": mean,
        "doc_numbers": numbers,
        "chunk_indexes": np.array([r.chunk_index for r in rows], np.uint32),
        "digests": np.frombuffer(b"".join(bytes.fromhex(r.chunk_digest) for r in rows), np.uint8).reshape(-1, 8),
    }
    region, layout = b"", {}
    for name, array in arrays.items():
        layout[name] = [len(region), array.dtype.str, list(array.shape)]
        region += array.tobytes() + b"\0" * ((-array.nbytes) % 64)
    header = {"format": 1, "model_id": "m", "dimensions": vectors.shape[1], "rows": len(rows)}
    return file_of({**header, "documents": [list(key) for key in documents], "arrays": layout}, region)


def test_a_format_1_file_as_written_then_is_read_and_scanned_exactly():
    vectors = unit_rows(30)
    opened = VectorFile(format_1_file(rows_for(30), vectors))
    assert not opened.partitioned and opened.rows == 30
    assert [hit.row for hit in opened.search(vectors[7], 3)][0] == 7
    assert list(opened.rows_of()) == rows_for(30)


@pytest.mark.parametrize(
    "damage",
    [
        lambda h: h["arrays"]["centroids"].__setitem__(2, []),  # a 0-d centroid array
        lambda h: h["arrays"]["doc_numbers"].__setitem__(1, "<i4"),  # signed: -1 would name a document
        lambda h: h["arrays"]["codes"].__setitem__(1, "|S1"),
        lambda h: h["arrays"]["scales"].__setitem__(0, -64),  # reads the header's bytes
        lambda h: h.__setitem__("documents", ["ab", *h["documents"][1:]]),
        lambda h: h.__setitem__("dimensions", -16),
        lambda h: h["arrays"].pop("codes"),
        lambda h: h.__setitem__("documents", 7),
    ],
)
def test_a_damaged_header_is_a_corrupt_vector_file_never_another_error(damage):
    # Search catches VectorFileCorrupt (an IndexUnavailable) per KB; any other exception here would
    # fail the whole request.
    header, arrays = header_and_arrays(write_vectors("m", rows_for(12), unit_rows(12), partition_rows=100))
    damage(header)
    with pytest.raises(VectorFileCorrupt):
        VectorFile(file_of(header, arrays))


def test_non_finite_scales_are_refused_by_the_writer_and_the_reader():
    vectors = unit_rows(6)
    codes, scales = quantise(vectors)
    bad = scales.copy()
    bad[2] = np.inf
    with pytest.raises(ValueError, match="finite"):
        write_quantised(io.BytesIO(), "m", rows_for(6), codes, bad)
    header, arrays = header_and_arrays(write_vectors("m", rows_for(6), vectors))
    offset = header["arrays"]["scales"][0]
    damaged = arrays[:offset] + np.float32(np.nan).tobytes() + arrays[offset + 4 :]
    with pytest.raises(VectorFileCorrupt, match="scale"):
        VectorFile(file_of(header, damaged))
    with pytest.raises(ValueError, match="int8"):
        write_quantised(io.BytesIO(), "m", rows_for(6), codes.astype(np.float64), scales)


@pytest.mark.parametrize(
    "damage",
    [
        lambda h: h.__setitem__("arrays", [["codes", 0]]),  # not an object (was AttributeError)
        lambda h: h.__setitem__("arrays", "codes"),
        lambda h: h.__setitem__("rows", float("nan")),  # NaN, which Python's JSON writes and reads
        lambda h: h.__setitem__("dimensions", float("inf")),
        lambda h: h.__setitem__("dimensions", 16.0),
        lambda h: h.__setitem__("dimensions", True),
        lambda h: h.__setitem__("dimensions", "16"),
        lambda h: h.__setitem__("rows", 10**400),
        lambda h: h.__setitem__("rows", -1),
        lambda h: h.__setitem__("format", "2"),
        lambda h: h.__setitem__("format", True),  # True == 1 in Python
        lambda h: h.__setitem__("model_id", ["m"]),
        lambda h: h["arrays"].__setitem__("codes", {"offset": 0}),
        lambda h: h["arrays"]["codes"].__setitem__(0, 1e300),
        lambda h: h["arrays"]["codes"].__setitem__(0, 2**70),
        lambda h: h["arrays"]["codes"].__setitem__(2, [2**62, 2**62]),  # a product that wraps in int64
        lambda h: h["arrays"]["codes"].__setitem__(2, [12, "16"]),
        lambda h: h["arrays"]["codes"].__setitem__(1, 7),
        lambda h: h["arrays"]["codes"].__setitem__(1, "int8"),  # the same dtype, not as written
        lambda h: h["arrays"]["list_offsets"].pop(),
        lambda h: h["arrays"].pop("list_offsets"),  # format 2 has a partition, even an empty one
        lambda h: h["documents"].__setitem__(0, {"doc": "rev"}),
        lambda h: h.clear(),
    ],
)
def test_every_malformed_header_shape_is_a_corrupt_vector_file(damage):
    header, arrays = header_and_arrays(write_vectors("m", rows_for(12), unit_rows(12), partition_rows=100))
    damage(header)
    with pytest.raises(VectorFileCorrupt):
        VectorFile(file_of(header, arrays))


@pytest.mark.parametrize(
    "raw",
    [b"[]", b"7", b'"text"', b"{", b"\xff\xfe{}", b'{"format": NaN}', b'{"format": Infinity}', b"[" * 200_000],
)
def test_a_header_that_is_no_json_object_is_a_corrupt_vector_file(raw):
    import struct

    with pytest.raises(VectorFileCorrupt):
        VectorFile(b"AKVEC\x00\x01\x00" + struct.pack("<I", len(raw)) + raw + b"\0" * 64)
    # A header length beyond the file's end.
    with pytest.raises(VectorFileCorrupt, match="truncated"):
        VectorFile(b"AKVEC\x00\x01\x00" + struct.pack("<I", 2**32 - 1) + raw)


def test_a_deeply_nested_header_is_a_corrupt_vector_file():
    # What an outside review sent: a header whose documents nest 100,000 lists deep (RecursionError).
    header, arrays = header_and_arrays(write_vectors("m", rows_for(12), unit_rows(12)))
    data = file_of({**header, "documents": "NESTED"}, arrays)
    raw = data[12 : data.index(b"\0", 12)].replace(b'"NESTED"', b"[" * 100_000 + b"]" * 100_000)
    import struct

    with pytest.raises(VectorFileCorrupt, match="nested too deeply"):
        VectorFile(b"AKVEC\x00\x01\x00" + struct.pack("<I", len(raw)) + raw + b"\0" * ((-len(raw) - 12) % 64) + arrays)


JUNK = [None, True, -1, 0, 2**64, 1e308, -0.5, "", "x", [], [1, 2, 3], {}, {"a": 1}, [[["deep"]]]]


def leaves(value: object, path: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (objects' keys and lists' indexes), the value's own first."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += leaves(item, (*path, index))
    return found


def replaced(value: object, path: tuple, junk: object) -> object:
    if not path:
        return junk
    copy = dict(value) if isinstance(value, dict) else list(value)  # type: ignore[call-overload]
    copy[path[0]] = replaced(copy[path[0]], path[1:], junk)
    return copy


@pytest.mark.parametrize("partition_rows", [0, 10_000])
def test_any_header_value_replaced_by_any_junk_opens_and_searches_or_is_corrupt(partition_rows):
    # Every place of the header (format 3 partitioned, format 2 not) times every JSON type and a few
    # extreme values: the file opens and searches, or is VectorFileCorrupt, never another error.
    vectors = unit_rows(12)
    header, arrays = header_and_arrays(write_vectors("m", rows_for(12), vectors, partition_rows=partition_rows))
    outcomes = {"corrupt": 0, "searched": 0}
    for path in leaves(header):
        for junk in JUNK:
            try:
                opened = VectorFile(file_of(replaced(header, path, junk), arrays))
                # A format 3 file's list blocks are checked when a search first reads them.
                found = opened.search(vectors[3], 5, exact_rows=0)
            except VectorFileCorrupt:
                outcomes["corrupt"] += 1
                continue
            assert len(found) == min(5, opened.rows)
            outcomes["searched"] += 1
    assert outcomes["corrupt"] > 300 and outcomes["searched"] > 0  # e.g. another model id, a revision


def test_a_file_of_another_model_or_dimensions_than_the_index_is_corrupt(tmp_path):
    from agent_knowledge.index_format.vectors import open_vector_file

    path = tmp_path / "one.vectors"
    path.write_bytes(write_vectors("model/16", rows_for(3), unit_rows(3)))
    assert open_vector_file(str(path), "model/16").rows == 3
    with pytest.raises(VectorFileCorrupt, match="model 'model/16'"):
        open_vector_file(str(path), "other/16")
    header, arrays = header_and_arrays(path.read_bytes())
    path.write_bytes(file_of({**header, "model_id": "model/32"}, arrays))
    with pytest.raises(VectorFileCorrupt, match="16 dimensions"):
        open_vector_file(str(path), "model/32")
