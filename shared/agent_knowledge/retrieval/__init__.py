"""Retrieval: per-KB search indexes (tantivy segments on S3), the container's index cache, the query API.

Lazy, so that the write side can name a chunk (`retrieval.chunks`) without loading tantivy.
"""

from typing import TYPE_CHECKING

from agent_knowledge import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {"search": "RetrievalResult RetrievedDocument retrieve"})

if TYPE_CHECKING:
    from agent_knowledge.retrieval.search import RetrievalResult as RetrievalResult
    from agent_knowledge.retrieval.search import RetrievedDocument as RetrievedDocument
    from agent_knowledge.retrieval.search import retrieve as retrieve
