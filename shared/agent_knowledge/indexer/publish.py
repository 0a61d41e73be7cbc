"""Publish a KB's pending changes in one index generation, then clear their pending marks.

Every write of a document record marks it `index_pending_since`; a change is searchable once a
generation that includes it is published and the mark is cleared. The marks are read *before*
the index is updated and cleared conditionally on the record being unchanged, so a change that
lands while the index is being built keeps its mark and is taken by the next pass. If the
update fails, the marks stay: a retry (the indexer's queue, or a repeated `doc put`) re-indexes.

This is the one place generations of pending changes are published: the indexer function calls
it per queue batch (`index_batch`); the CLI, bulk loads, benchmarks and tests call it directly
when they need a change searchable now. The ingestor only stores documents and marks them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from agent_knowledge.index_format.recent_chunks import RecentChunks
from agent_knowledge.indexer.rebuild import rebuild_kb_index
from agent_knowledge.indexer.update import update_kb_index
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.bundle import Repositories

CLEARERS = 8


class UpdateIndex(Protocol):
    """`update.update_kb_index`, or a test's stand-in for it."""

    def __call__(
        self, repositories: Repositories, kb_id: str, document_ids: Collection[str], *, vector_space: str
    ) -> int: ...


@dataclass(frozen=True)
class IndexPass:
    kb_id: str
    generation: int
    # Changes the generation published, and how many marks were cleared (fewer when some of
    # those documents changed again meanwhile).
    changes: int
    cleared: int
    oldest_pending_since: float


def marked_records(repositories: Repositories, kb_id: str, doc_ids: Iterable[str] = ()) -> list[DocumentRecord]:
    """The KB's records that carry a pending mark: those the `pending` index lists, and `doc_ids`
    (the index is eventually consistent; the queue message names the change that was just made)."""
    wanted = dict.fromkeys([*doc_ids, *(change.doc_id for change in repositories.documents.pending(kb_id))])
    records = repositories.documents.get_marks([(kb_id, doc_id) for doc_id in wanted])
    return sorted(
        (record for record in records.values() if record.index_pending_since is not None),
        key=lambda record: record.doc_id,
    )


def clear_marks(repositories: Repositories, records: list[DocumentRecord]) -> int:
    if not records:
        return 0
    with ThreadPoolExecutor(max_workers=min(CLEARERS, len(records))) as pool:
        return sum(pool.map(repositories.documents.clear_pending, records))


def publish_pending(
    repositories: Repositories,
    kb_id: str,
    doc_ids: Iterable[str],
    update_index: UpdateIndex = update_kb_index,
    *,
    vector_space: str,
) -> IndexPass | None:
    """One generation for everything pending in the KB; None if nothing is pending (a duplicate
    message, or a pass that already took these changes). `vector_space`: the stack's
    (`Dependencies.vector_space`)."""
    marked = marked_records(repositories, kb_id, doc_ids)
    if not marked:
        return None
    generation = update_index(repositories, kb_id, [record.doc_id for record in marked], vector_space=vector_space)
    cleared = clear_marks(repositories, marked)
    oldest = min(record.index_pending_since for record in marked if record.index_pending_since is not None)
    return IndexPass(kb_id, generation, len(marked), cleared, oldest)


def publish_rebuild(
    repositories: Repositories, kb_id: str, known: RecentChunks | None = None, *, vector_space: str
) -> int:
    """Rebuild the KB's index in full and publish it; returns the new generation. Every change
    pending before the rebuild is in it, so their marks are cleared. `known`: chunk texts the caller
    just stored (a bulk load), so their bodies are not read back."""
    marked = marked_records(repositories, kb_id)
    generation = rebuild_kb_index(repositories, kb_id, known=known, vector_space=vector_space)
    clear_marks(repositories, marked)
    return generation
