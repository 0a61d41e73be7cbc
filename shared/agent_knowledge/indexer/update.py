"""Apply a batch of changed documents to a KB's search index; the indexer's one entry point.

`document_ids` names documents whose record changed (created, updated or deleted); the update
reads their current records, so a batch is idempotent and the order of changes inside it does
not matter. Starting from the KB's current generation g (a local copy: files this container
already holds are reused, the others downloaded), every chunk of a changed document is deleted by
term and the chunks of the ones now ready are added; only the new files (a small segment, delete
bitsets of the segments that lost chunks, whatever the policy merged) are uploaded and g + 1 is
published conditionally. If another writer published first, the batch is
applied again on top of its generation, with the records read again, so no change is lost. A KB
without a readable current generation (never built, another schema or tantivy version, a corrupt
manifest or file) is rebuilt in full instead (`rebuild.rebuild_kb_index`). A container whose ephemeral
storage cannot hold the index fails the batch with `IndexDoesNotFit` before downloading anything.

Only the segments holding the changed documents are shown to tantivy's writer, together with the
new segment, in one commit; then the merges the policy asks for that fit an update's budget
(`agent_knowledge.indexer.merge_policy`). When a larger merge is due, it runs right after the update
is published, as its own generation (`compact_kb_index`, below).
"""

from __future__ import annotations

from collections.abc import Collection

from agent_knowledge.core.observability import logger
from agent_knowledge.errors import KnowledgeBaseMissing, KnowledgeError, KnowledgeUnavailable
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.index_format.layout import IndexManifest, IndexUnavailable
from agent_knowledge.index_format.local_files import LocalFiles, LocalStorageFailed, local_files
from agent_knowledge.indexer import merge_policy
from agent_knowledge.indexer import writer as index_writer
from agent_knowledge.indexer.chunk_loader import RecentChunks, chunk_loader, verified
from agent_knowledge.indexer.rebuild import rebuild_kb_index
from agent_knowledge.indexer.segment_passes import edit, segment_sizes
from agent_knowledge.indexer.writer import compose_generation
from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bundle import Repositories

_REBUILD = object()


def update_kb_index(
    repositories: Repositories,
    kb_id: str,
    document_ids: Collection[str],
    known: RecentChunks | None = None,
    files: LocalFiles = local_files,
    *,
    vector_space: str,
) -> int:
    """Make the KB's index reflect the current records of `document_ids`; returns the generation
    that does (the current one if nothing had to change). `known` holds chunk texts the caller
    just stored (their bodies are then not read back). `vector_space`: the stack's
    (`writer.compose_generation`)."""
    wanted = sorted(set(document_ids))
    for _ in range(index_writer.MAX_PUBLISH_ATTEMPTS):
        kb = repositories.knowledge_bases.get(kb_id)
        if kb is None:
            raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
        base = _base(repositories, kb)
        if not wanted and (base is not None or kb.generation <= 0):
            return kb.generation  # nothing to change, and the current generation is readable
        outcome = _REBUILD if base is None else _apply(repositories, kb, base, wanted, known, files, vector_space)
        if outcome is _REBUILD:
            return rebuild_kb_index(repositories, kb_id, known=known, files=files, vector_space=vector_space)
        if isinstance(outcome, int):
            return _compact_if_due(repositories, kb_id, outcome, files, vector_space)
    raise KnowledgeUnavailable("the knowledge base index is being updated too often; try again")


def _compact_if_due(
    repositories: Repositories, kb_id: str, generation: int, files: LocalFiles, vector_space: str
) -> int:
    """After the update is published (searchable), the merges it left for compaction, as their own
    generation. A failure is logged only: the update stands, and the next one tries again."""
    try:
        compacted = compact_kb_index(repositories, kb_id, files=files, vector_space=vector_space)
    except (KnowledgeError, IndexUnavailable, OSError, ValueError) as exc:
        logger.warning("index compaction failed", extra={"kb_id": kb_id, "error": type(exc).__name__})
        return generation
    return generation if compacted is None else compacted


def _base(repositories: Repositories, kb: KnowledgeBaseRecord) -> IndexManifest | None:
    if kb.generation <= 0 or not kb.index_manifests:
        return None
    try:
        return index_writer.manifests.get(repositories.bodies, kb.kb_id, kb.index_manifests[0])
    except IndexUnavailable as exc:
        logger.warning("index rebuilt: current generation unreadable", extra={"kb_id": kb.kb_id, "error": str(exc)})
        return None


def _apply(
    repositories: Repositories,
    kb: KnowledgeBaseRecord,
    base: IndexManifest,
    wanted: list[str],
    known: RecentChunks | None,
    files: LocalFiles,
    vector_space: str,
) -> object:
    """Published generation, the base's generation if nothing changed, None if another writer
    published first, or _REBUILD."""
    try:
        directory, _ = files.materialize(repositories.bodies, base, index_writer.writer_owner(kb.kb_id))
    except LocalStorageFailed:
        raise  # this container cannot hold the index: a rebuild would not fit either
    except IndexUnavailable as exc:
        logger.warning("index rebuilt: current generation unreadable", extra={"kb_id": kb.kb_id, "error": str(exc)})
        return _REBUILD
    try:
        try:
            current = KbIndex.open(directory, base.generation)
        except ValueError as exc:
            logger.warning(
                "index rebuilt: current generation does not open", extra={"kb_id": kb.kb_id, "error": str(exc)}
            )
            return _REBUILD
        # Records are read after the KB record: a generation published before that read holds
        # only changes older than these records.
        records = repositories.documents.get_whole([(kb.kb_id, doc_id) for doc_id in wanted])
        present: set[str] = set()
        changed: list[str] = []
        ready: list[DocumentRecord] = []
        for doc_id in wanted:
            record = records.get((kb.kb_id, doc_id))
            stored = current.stored_chunks(doc_id)
            if stored:
                present.add(doc_id)
            is_ready = record is not None and record.status == "ready"
            if (is_ready and record is not None and verified(record, stored) is not None) or (
                not is_ready and not stored
            ):
                continue  # the index already says what the record says (e.g. a batch delivered twice)
            changed.append(doc_id)
            if is_ready and record is not None:
                ready.append(record)
        if not changed:
            return base.generation
        located: dict[str, int] = {}
        for doc_id in changed:
            for segment_id, count in current.locate(doc_id).items():
                located[segment_id] = located.get(segment_id, 0) + count
        del current  # the writer below must be the only one holding the segments
        load = chunk_loader(repositories.bodies, [known])
        added = index_writer.apply_changes(directory, changed, ready, load, located=located)
        documents = base.documents - len(present & set(changed)) + len(added)
        manifest = compose_generation(
            directory, kb.kb_id, kb.generation + 1, documents, "update", added, vector_space=vector_space, base=base
        )
        published: index_writer.Published | None = index_writer.publish(
            repositories, kb, manifest, directory, base, set()
        )
        if published is None:
            return None
        index_writer.keep_local_copy(files, directory, published)
        return published.generation
    finally:
        files.discard(directory)


# --- Compaction after an update ---------------------------------------------------------------------

# Compaction: the merges too large for an incremental update, published as their own generation.
#
# An update merges only what stays under `merge_policy.UPDATE_MERGE_MAX_BYTES`; when a tier is full
# with segments whose merge would be larger, the update's generation says so (`compaction_due`) and
# the writer runs `compact_kb_index` right after publishing it: the update is searchable first, and
# what the compaction uploads (one merged segment) is never part of an update. Nothing else changes:
# the same chunks, the same documents. Losing the publish race to another writer just means trying
# again on the winner's generation, if it still needs it.

MAX_ATTEMPTS = 3


def compaction_due(manifest: IndexManifest) -> bool:
    sizes = {name: entry.size for name, entry in manifest.files.items()}
    return merge_policy.compaction_due(segment_sizes(manifest.meta, sizes))


def compact_kb_index(
    repositories: Repositories, kb_id: str, files: LocalFiles = local_files, *, vector_space: str
) -> int | None:
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
                directory,
                kb_id,
                kb.generation + 1,
                base.documents,
                "compaction",
                (),
                vector_space=vector_space,
                base=base,
            )
            published = index_writer.publish(repositories, kb, manifest, directory, base, set())
            if published is not None:
                index_writer.keep_local_copy(files, directory, published)
                logger.info("index compacted", extra={"kb_id": kb_id, "merges": merges})
                return published.generation
        finally:
            files.discard(directory)
    return None
