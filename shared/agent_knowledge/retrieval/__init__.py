"""Retrieval: per-KB search indexes (tantivy segments on S3), the container's index cache, the query API."""

from agent_knowledge.retrieval.search import RetrievalResult, RetrievedDocument, retrieve

__all__ = ["RetrievalResult", "RetrievedDocument", "retrieve"]
