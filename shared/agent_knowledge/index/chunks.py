"""A chunk as the index stores it. No tantivy here: the write side names chunks without opening an
index (the ingest function never builds one)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexedChunk:
    doc_id: str
    revision: str
    chunk_index: int
    digest: str
    text: str
