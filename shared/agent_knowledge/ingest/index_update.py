"""Apply a batch of changed documents to a KB's search index; the indexer's one entry point.

`document_ids` names documents whose record changed (created, updated or deleted); the update
reads their current records, so a batch is idempotent and the order of changes inside it does
not matter. Today this rebuilds the whole index; the segment layout replaces it with an
incremental update of only these documents.
"""

from __future__ import annotations

from collections.abc import Collection

from agent_knowledge.ingest.index_rebuild import rebuild_kb_index
from agent_knowledge.repositories import Repositories


def update_kb_index(repositories: Repositories, kb_id: str, document_ids: Collection[str]) -> int:
    """Make the KB's index reflect the current records of `document_ids`; returns the published generation."""
    del document_ids  # a full rebuild covers every document
    return rebuild_kb_index(repositories, kb_id)
