"""What full rebuilds and incremental updates share: apply document changes to a local index,
upload what is new of a generation (composed by `compose_generation`, below), publish it,
collect garbage.

Publishing (docs/DESIGN.md §10): every new file is uploaded under its own content-addressed key,
then the manifest under a key unique to this attempt; then one conditional write on the KB record
moves the generation from g (the base this writer started from) to g + 1 and puts the manifest at
the head of the kept list. A writer that loses that race publishes nothing: it starts again from
the winner's generation. After a publish, the objects of the generation that fell off the kept
list are deleted, unless a kept generation still uses them; objects referenced by no kept
generation and older than ORPHAN_GRACE_SECONDS (left by a writer that lost a race or died) are
deleted too. Deleting is best effort: a failure is logged and the next publish tries again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from agent_knowledge.core.observability import logger
from agent_knowledge.core.per_container import on_reset
from agent_knowledge.errors import KnowledgeError
from agent_knowledge.index_format.builder import IndexedChunk
from agent_knowledge.index_format.layout import (
    FILE_CONTENT_TYPE,
    KEEP_GENERATIONS,
    MANIFEST_CONTENT_TYPE,
    TEXT_EXTENSION,
    TEXT_ROLE,
    IndexFile,
    IndexManifest,
    file_keys,
    file_name_ok,
    manifest_key,
    prefix,
    segment_files,
    sha256_of_file,
)
from agent_knowledge.index_format.local_files import LocalFiles
from agent_knowledge.index_format.stored_generation import read_manifest
from agent_knowledge.index_format.versions import FORMAT_VERSION, SCHEMA_VERSION, tantivy_version
from agent_knowledge.indexer import merge_policy
from agent_knowledge.indexer.chunk_loader import left_out, load_all
from agent_knowledge.indexer.segment_passes import Located, SegmentEditor, alive_chunks, edit
from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bodies import BodyMissing, BodyStore
from agent_knowledge.repositories.bundle import Repositories

MAX_PUBLISH_ATTEMPTS = 20
# Longer than any writer runs (a Lambda function runs at most 15 minutes): an unreferenced object
# this young may belong to a writer still at work.
ORPHAN_GRACE_SECONDS = 3600
_MANIFEST_CACHE_SIZE = 64

Loader = Callable[[DocumentRecord], list[IndexedChunk] | None]


def writer_owner(kb_id: str) -> str:
    return f"index-writer:{kb_id}"


class ManifestCache:
    """Manifests already read or written by this process (objects never change under a key)."""

    def __init__(self) -> None:
        self._manifests: dict[str, IndexManifest] = {}
        self._lock = threading.Lock()

    def get(self, bodies: BodyStore, kb_id: str, key: str) -> IndexManifest:
        cached = self._manifests.get(key)
        if cached is None:
            cached = read_manifest(bodies, kb_id, key)
            self.put(key, cached)
        return cached

    def put(self, key: str, manifest: IndexManifest) -> None:
        with self._lock:
            if len(self._manifests) >= _MANIFEST_CACHE_SIZE:
                self._manifests.clear()
            self._manifests[key] = manifest

    def clear(self) -> None:
        with self._lock:
            self._manifests.clear()


manifests = ManifestCache()
on_reset(manifests.clear)


def apply_changes(
    directory: str,
    delete_ids: Iterable[str],
    records: list[DocumentRecord],
    load: Loader,
    located: Located | None = None,
) -> dict[str, str]:
    """Delete every chunk of `delete_ids` (`located`: the segments the caller found them in, and
    how many), add the chunks of `records` (ready ones) as a new segment, run the merges the policy
    asks for within an update's budget (`merge_policy.UPDATE_MERGE_MAX_BYTES`); returns doc_id →
    revision of the documents added (a record whose chunks cannot be had is left out)."""
    added: dict[str, str] = {}

    def chunks() -> Iterator[IndexedChunk]:
        for record, loaded in load_all(records, load):
            if loaded is None:
                left_out(record)
            elif loaded:
                added[record.doc_id] = record.revision
                yield from loaded

    def change(editor: SegmentEditor) -> None:
        editor.replace(delete_ids, chunks(), located)
        editor.merge(merge_policy.UPDATE_MERGE_MAX_BYTES)

    edit(directory, change)
    return added


@dataclass(frozen=True)
class Published:
    generation: int
    manifest: IndexManifest
    manifest_key: str
    uploaded_bytes: int


def publish(
    repositories: Repositories,
    kb: KnowledgeBaseRecord,
    manifest: IndexManifest,
    directory: str,
    base: IndexManifest | None,
    uploaded: set[str],
) -> Published | None:
    """Upload what `base` (the KB's current generation) lacks, then publish `manifest` as the next
    generation. None if another writer published first. `uploaded` collects the file keys this
    writer uploaded (a retry does not upload them again)."""
    bodies = repositories.bodies
    sent = 0
    keys = file_keys(kb.kb_id, manifest.files)
    for name, entry in sorted(manifest.files.items()):
        key = keys[name]
        if (base is not None and base.files.get(name) == entry) or key in uploaded:
            continue
        with open(os.path.join(directory, name), "rb") as source:
            bodies.put_file(key, source, entry.sha256, FILE_CONTENT_TYPE)
        uploaded.add(key)
        sent += entry.size
    key = manifest_key(kb.kb_id, manifest.generation)
    data = manifest.to_bytes()
    bodies.put_file(key, io.BytesIO(data), hashlib.sha256(data).hexdigest(), MANIFEST_CONTENT_TYPE)
    sent += len(data)
    kept = [key, *kb.index_manifests[: KEEP_GENERATIONS - 1]]
    if not repositories.knowledge_bases.publish_index(kb.kb_id, kb.generation, kept):
        _delete_quietly(bodies, [key])  # this manifest's key is this attempt's alone
        return None
    manifests.put(key, manifest)
    logger.info(
        "index published",
        extra={
            "kb_id": kb.kb_id,
            "generation": manifest.generation,
            "kind": manifest.kind,
            "documents": manifest.documents,
            "chunks": manifest.chunks,
            "segments": len(manifest.meta.get("segments", [])),
            "uploaded_bytes": sent,
        },
    )
    collect_garbage(bodies, kb.kb_id, kept, kb.index_manifests[KEEP_GENERATIONS - 1 :])
    return Published(manifest.generation, manifest, key, sent)


def _object_keys(bodies: BodyStore, kb_id: str, key: str) -> set[str] | None:
    """The keys a manifest uses (itself and its files), or None if it cannot be read. Lenient:
    a manifest of another version still names its files."""
    try:
        raw = json.loads(bodies.read(key))
        files = raw["files"]
        return {key} | set(file_keys(kb_id, files).values())
    except BodyMissing:
        return {key}
    except (KnowledgeError, ValueError, KeyError, TypeError, AttributeError):
        return None


def collect_garbage(
    bodies: BodyStore, kb_id: str, kept: list[str], dropped: list[str], now: float | None = None
) -> int:
    """Delete the KB's index objects no kept generation uses: at once those of `dropped`
    generations, after ORPHAN_GRACE_SECONDS any other. Returns how many were deleted."""
    try:
        referenced: set[str] = set()
        for key in kept:
            keys = _object_keys(bodies, kb_id, key)
            if keys is None:
                logger.warning("index garbage not collected: a kept manifest is unreadable", extra={"kb_id": kb_id})
                return 0
            referenced |= keys
        now_dropped: set[str] = set()
        for key in dropped:
            now_dropped |= _object_keys(bodies, kb_id, key) or {key}
        cutoff = (time.time() if now is None else now) - ORPHAN_GRACE_SECONDS
        garbage = [
            listed.key
            for listed in bodies.list(prefix(kb_id))
            if listed.key not in referenced and (listed.key in now_dropped or listed.last_modified.timestamp() < cutoff)
        ]
    except KnowledgeError as exc:
        logger.warning("index garbage not collected", extra={"kb_id": kb_id, "error": type(exc).__name__})
        return 0
    return _delete_quietly(bodies, garbage)


def _delete_quietly(bodies: BodyStore, keys: list[str]) -> int:
    deleted = 0
    for key in keys:
        try:
            bodies.delete(key)
            deleted += 1
        except KnowledgeError as exc:
            logger.warning("index object not deleted", extra={"key": key, "error": type(exc).__name__})
    return deleted


def keep_local_copy(files: LocalFiles, directory: str, published: Published) -> None:
    """The writer's local copy becomes the published generation (the next update starts there)."""
    files.adopt(directory, published.manifest)
    files.hold(writer_owner(published.manifest.kb_id), [published.manifest])


# --- Composing a generation -------------------------------------------------------------------------

# The one way a writer composes a new generation: the segment files it left in a directory, the
# vectors it carries, and the manifest that lists both (docs/DESIGN.md §10).
#
# An update and a compaction edit the current generation (`base`) in place: the files `base` already
# has are listed without hashing them again, its vector files and its documents waiting for vectors
# are carried, and the documents the generation added wait for vectors after them. A rebuild writes
# every segment anew (no `base`): every document it indexed waits for vectors, and the vector files of
# a kept generation it read (`previous`) are linked in if they are of the configured model, so the
# next embedding pass reuses their rows instead of embedding again (`vector_generation`).

Kind = Literal["rebuild", "update", "compaction"]


class LocalGeneration(NamedTuple):
    """A kept generation and the directory holding its files."""

    manifest: IndexManifest
    directory: str


def compose_generation(
    directory: str,
    kb_id: str,
    generation: int,
    documents: int,
    kind: Kind,
    added: Iterable[str],
    *,
    vector_space: str,
    base: IndexManifest | None = None,
    previous: LocalGeneration | None = None,
) -> IndexManifest:
    """The manifest of the index in `directory` as generation `generation`, with its vectors.
    `added`: the documents whose chunks it added (a rebuild: every document it indexed).
    `vector_space`: the space the stack embeds in (`Dependencies.vector_space`; "" lexical only).
    `base`: the generation an update or a compaction edited. `previous`: for a rebuild, a kept
    generation whose vector files may be reused."""
    # Imported here: the vector passes publish through this module (vector_generation imports it).
    from agent_knowledge.indexer.vector_generation import carry_vectors, carry_vectors_into_rebuild

    manifest = describe(directory, kb_id, generation, documents, base, kind)
    if base is None:
        previous_manifest, previous_directory = previous if previous is not None else (None, None)
        return carry_vectors_into_rebuild(
            manifest, previous_manifest, previous_directory, directory, added, vector_space
        )
    return carry_vectors(manifest, base, added, vector_space)


def describe(
    directory: str,
    kb_id: str,
    generation: int,
    documents: int,
    base: IndexManifest | None,
    kind: Kind,
) -> IndexManifest:
    """The manifest of the segment files in `directory` alone (no vectors). Files the base already
    has are immutable, so only new ones are hashed."""
    with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
        meta: dict[str, Any] = json.load(source)
    names = [name for name in os.listdir(directory) if file_name_ok(name)]
    files: dict[str, IndexFile] = {}
    for name in segment_files(meta, names):
        if base is not None and name in base.files:
            files[name] = base.files[name]
        else:
            sha256, size = sha256_of_file(os.path.join(directory, name))
            role = TEXT_ROLE if name.endswith(f".{TEXT_EXTENSION}") else "tantivy"
            files[name] = IndexFile(sha256=sha256, size=size, role=role)
    chunks = sum(alive_chunks(segment) for segment in meta.get("segments", []))
    return IndexManifest(
        format_version=FORMAT_VERSION,
        schema_version=SCHEMA_VERSION,
        tantivy_version=tantivy_version(),
        kb_id=kb_id,
        generation=generation,
        documents=documents,
        chunks=chunks,
        index_bytes=sum(entry.size for entry in files.values()),
        files=files,
        meta=meta,
        kind=kind,
    )
