"""Test helpers for retrieval: a scope over named KBs and a one-line search."""

from __future__ import annotations

from agent_knowledge.identity.scope import Scope
from agent_knowledge.records import KnowledgeConfig, SourceConfig
from agent_knowledge.retrieval.query import CONFIGURED, RetrievalResult, retrieve


def scope_of(stack, kb_ids: list[str], **config) -> Scope:
    sources = [source if isinstance(source, SourceConfig) else SourceConfig(kb_id=source) for source in kb_ids]
    knowledge = KnowledgeConfig(enabled=True, sources=sources, **config)
    return Scope(knowledge, stack.repositories.knowledge_bases.get_many([s.kb_id for s in sources]))


def search(stack, kb_ids: list, query: str, max_docs: int = 3, embedder=CONFIGURED, **config) -> RetrievalResult:
    """`embedder=None`: lexical only, whatever the stack's embedding provider."""
    scope = scope_of(stack, kb_ids, **config)
    return retrieve(stack.repositories.bodies, stack.repositories.documents, scope, query, max_docs, embedder=embedder)


def search_titles(stack, kb_ids: list, query: str, max_docs: int = 3, embedder=CONFIGURED) -> list[str]:
    return [hit.document.title for hit in search(stack, kb_ids, query, max_docs, embedder).documents]
