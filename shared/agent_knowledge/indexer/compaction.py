"""Compaction: the merges too large for an incremental update, published as their own generation.

An update merges only what stays under `merge_policy.UPDATE_MERGE_MAX_BYTES`; when a tier is full
with segments whose merge would be larger, the update's generation says so (`compaction_due`) and
the writer runs `compact_kb_index` right after publishing it: the update is searchable first, and
what the compaction uploads (one merged segment) is never part of an update. Nothing else changes:
the same chunks, the same documents. Losing the publish race to another writer just means trying
again on the winner's generation, if it still needs it.
"""

from __future__ import annotations

from agent_knowledge.core.observability import logger
from agent_knowledge.errors import KnowledgeBaseMissing
from agent_knowledge.index_format.layout import IndexManifest
from agent_knowledge.index_format.local_files import LocalFiles, local_files
from agent_knowledge.indexer import merge_policy
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.indexer.generation import compose_generation
from agent_knowledge.indexer.segment_passes import edit, segment_sizes
from agent_knowledge.repositories.bundle import Repositories

MAX_ATTEMPTS = 3


def compaction_due(manifest: IndexManifest) -> bool:
    sizes = {name: entry.size for name, entry in manifest.files.items()}
    return merge_policy.compaction_due(segment_sizes(manifest.meta, sizes))


def compact_kb_index(repositories: Repositories, kb_id: str, files: LocalFiles = local_files) -> int | None:
    """Merge what the policy asks for, without a size limit, and publish it; returns the published
    generation, or None if the KB's current generation needs no compaction."""
    for _ in range(MAX_ATTEMPTS):
        kb = repositories.knowledge_bases.get(kb_id)
        if kb is None:
            raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
        if kb.generation <= 0 or not kb.index_manifests:
            return None
        base = index_writer.manifests.get(repositories.bodies, kb_id, kb.index_manifests[0])
        if not compaction_due(base):
            return None
        directory, _ = files.materialize(repositories.bodies, base, index_writer.writer_owner(kb_id))
        try:
            merges = edit(directory, lambda editor: editor.merge(None))
            manifest = compose_generation(
                directory, kb_id, kb.generation + 1, base.documents, "compaction", (), base=base
            )
            published = index_writer.publish(repositories, kb, manifest, directory, base, set())
            if published is not None:
                index_writer.keep_local_copy(files, directory, published)
                logger.info("index compacted", extra={"kb_id": kb_id, "merges": merges})
                return published.generation
        finally:
            files.discard(directory)
    return None
