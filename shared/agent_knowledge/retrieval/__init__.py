"""Retrieval: per-KB search indexes (tantivy), their snapshots, and the query API."""

from agent_knowledge.retrieval.search import RetrievalResult, RetrievedDocument, retrieve

__all__ = ["RetrievalResult", "RetrievedDocument", "retrieve"]
