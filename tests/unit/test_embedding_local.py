"""The offline provider (embedding/local.py): real model, English and Chinese, cross-lingual."""

from __future__ import annotations

import functools

import numpy as np

from agent_knowledge.embedding.local import DIMENSIONS, LocalEmbedder


@functools.cache
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def test_documents_are_unit_rows_in_order_and_nothing_gives_no_rows():
    vectors = embedder().embed_documents(["The lock file is removed on exit.", "配置文件在 /etc 目录下。"])
    assert vectors.shape == (2, DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder().embed_documents([]).shape == (0, DIMENSIONS)


def test_a_question_is_closest_to_the_passage_that_answers_it_in_either_language():
    passages = [
        "To remove a package together with its configuration files, use apt purge.",
        "The try statement specifies exception handlers and cleanup code.",
        "时区可以用 timedatectl 命令设置。",
    ]
    vectors = embedder().embed_documents(passages)
    assert int(np.argmax(vectors @ embedder().embed_query("how do I delete a package and its config"))) == 0
    assert int(np.argmax(vectors @ embedder().embed_query("如何处理程序中的异常"))) == 1
    assert int(np.argmax(vectors @ embedder().embed_query("how to change the time zone"))) == 2
