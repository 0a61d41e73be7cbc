"""Test helpers for retrieval: a scope over named KBs and a one-line search."""

from __future__ import annotations

from typing import Any

from agent_knowledge.identity.scope import Scope
from agent_knowledge.records import KnowledgeConfig, SourceConfig
from agent_knowledge.retrieval.query import RetrievalResult, retrieve

# `embedder`'s default: the stack's, as its search functions embed (`Dependencies.embedder`).
STACK = "stack"


def scope_of(stack, kb_ids: list[str], **config) -> Scope:
    sources = [source if isinstance(source, SourceConfig) else SourceConfig(kb_id=source) for source in kb_ids]
    knowledge = KnowledgeConfig(enabled=True, sources=sources, **config)
    return Scope(knowledge, stack.repositories.knowledge_bases.get_many([s.kb_id for s in sources]))


def search(stack, kb_ids: list, query: str, max_docs: int = 3, embedder: Any = STACK, **config) -> RetrievalResult:
    """A search as the stack's search functions run it (their `Dependencies`); `embedder=None`:
    lexical only, whatever the stack's embedding provider."""
    scope = scope_of(stack, kb_ids, **config)
    deps = stack.dependencies()
    return retrieve(
        stack.repositories.bodies,
        stack.repositories.documents,
        scope,
        query,
        max_docs,
        cache=deps.index_cache(),
        embedder=deps.embedder() if embedder == STACK else embedder,
        reranker=deps.reranker(),
    )


def search_titles(stack, kb_ids: list, query: str, max_docs: int = 3, embedder: Any = STACK) -> list[str]:
    return [hit.document.title for hit in search(stack, kb_ids, query, max_docs, embedder).documents]
