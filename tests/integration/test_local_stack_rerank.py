"""Reranking is always off locally: moto serves no Bedrock, so the local stack's environment sets
RERANK_MODEL_ID empty whatever the shell that started `serve` has (retrieval/rerank.py)."""

from __future__ import annotations

from agent_knowledge.core.per_container import reset_all
from agent_knowledge.repositories import aws
from agent_knowledge.settings import get_settings, rerank_settings
from agent_knowledge_dev.stack import create_stack


def test_the_local_stack_turns_reranking_off_even_when_the_shell_turned_it_on(stack, monkeypatch):
    monkeypatch.setenv("RERANK_MODEL_ID", "cohere.rerank-v3-5:0")
    environment = create_stack(aws.client)
    assert environment["RERANK_MODEL_ID"] == ""
    assert rerank_settings(environment).model_id is None
    # `serve` and `invoke` put the stack's environment into os.environ (runtime.use_stack_environment).
    monkeypatch.setenv("RERANK_MODEL_ID", environment["RERANK_MODEL_ID"])
    reset_all()
    try:
        assert stack.dependencies().reranker() is None and get_settings().rerank.model_id is None
    finally:
        reset_all()
