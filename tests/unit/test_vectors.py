"""Vector files of the index (index/vectors.py): round trip, corruption, recall on real embeddings."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from agent_knowledge.embedding.local import LocalEmbedder
from agent_knowledge.index.vectors import (
    VectorFile,
    VectorFileCorrupt,
    VectorRow,
    file_name,
    quantise,
    write_vectors,
)


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


def test_recall_at_10_against_exact_cosine_on_real_embeddings():
    documents, queries = real_embeddings()
    opened = VectorFile(write_vectors("local", rows_for(len(documents)), documents))
    exact_top = [set(np.argsort(-(documents @ q))[:10]) for q in queries]
    scanned = [{h.row for h in opened.search(q, 10)} for q in queries]
    # The sign-bit preselection path, forced on this small file: half of the rows rescored.
    preselected = [{h.row for h in opened.search(q, 10, candidates=120, exact_rows=0)} for q in queries]
    recall_scan = np.mean([len(a & b) / 10 for a, b in zip(exact_top, scanned, strict=True)])
    recall_preselected = np.mean([len(a & b) / 10 for a, b in zip(exact_top, preselected, strict=True)])
    assert recall_scan >= 0.98
    assert recall_preselected >= 0.95
