"""Retrieval, the knowledge side's reading of the index: a query's hits, their validation and texts.

`query` (retrieve), `reader_cache` (the container's opened generations), `query_vector` (the
query's embedding), `dense` (vector search and its background), `hybrid` and `fusion` (lexical and
dense evidence fused into one ranking), `rerank` (the optional reranker).

Imports `index_format`, never `indexer` (docs/DESIGN.md §11).
"""
