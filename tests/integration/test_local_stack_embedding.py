"""`serve --embedding-provider`: the local stack's EmbeddingProvider parameter (issue 24: the
lexical pipeline measured alone, with `none`)."""

from __future__ import annotations

import pytest

from agent_knowledge.repositories import aws
from agent_knowledge_dev.commands.serve import EMBEDDING_PROVIDERS
from agent_knowledge_dev.stack import LOCAL_EMBEDDING_PROVIDERS, create_stack


def test_the_stack_takes_the_provider_serve_chooses(stack):
    assert stack.environment["EMBEDDING_PROVIDER"] == "local"  # the default of `make serve`
    assert create_stack(aws.client, embedding_provider="none")["EMBEDDING_PROVIDER"] == "none"
    assert create_stack(aws.client, embedding_provider="local-e5")["EMBEDDING_PROVIDER"] == "local-e5"
    assert EMBEDDING_PROVIDERS == LOCAL_EMBEDDING_PROVIDERS


def test_a_provider_moto_cannot_serve_is_refused(stack):
    with pytest.raises(ValueError, match="'bedrock' cannot run locally"):
        create_stack(aws.client, embedding_provider="bedrock")
