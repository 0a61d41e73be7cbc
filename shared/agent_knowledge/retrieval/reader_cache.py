"""The per-container cache of opened KB indexes, kept in step with each KB's newest generation.

A request brings the KB record it just read (the generation and the manifests of the kept
generations, newest first). While the cache serves that newest manifest, nothing is fetched.
When a newer one appears, the cache reads its manifest, downloads only the files this container
does not hold (`agent_knowledge.index_format.local_files`), opens the new generation, swaps it in and
lets go of the files only the old one used. If the newer generation cannot be loaded (manifest or
file missing, corrupt, written by another schema or tantivy version; larger than the container's
ephemeral storage, or any OS error while writing its files), the cache falls back to the previous
kept generations, or keeps what it serves, and tries again after RETRY_SECONDS — also when nothing
loaded, so a failing KB is not downloaded again by every search. Hits from an older generation are
validated against the current records like any others, but the source is served `stale`: the
documents published since are missing, and search says `partial`. Only when no generation loads
does the source fail (`IndexUnavailable`: search status `partial` or `unavailable`). The next
published generation repairs it (docs/DESIGN.md §10).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from agent_knowledge.core.observability import logger
from agent_knowledge.core.per_container import on_reset
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.index_format.layout import IndexManifest, IndexUnavailable
from agent_knowledge.index_format.local_files import LocalFiles, LocalStorageFailed, local_files, storage_failure
from agent_knowledge.index_format.stored_generation import IndexObjects, open_generation, read_manifest, without_texts
from agent_knowledge.records import KnowledgeBaseRecord

# After a generation failed to load, serve what we have and try it again at most this often.
RETRY_SECONDS = 30.0


@dataclass
class _Entry:
    manifest: IndexManifest
    manifest_key: str
    index: KbIndex
    directory: str
    objects: IndexObjects | None = None  # where its vector files read by need come from


@dataclass(frozen=True)
class ServedIndex:
    """The generation a search uses. `stale`: older than the KB's newest, which failed to load —
    the documents published since are missing from it (search status `partial`)."""

    index: KbIndex
    stale: bool
    # The generation's manifest and the directory its files are in (vector files: `retrieval/dense`).
    manifest: IndexManifest | None = None
    directory: str | None = None
    # Vector files not in `directory` are read by need from `objects` into `files` (index_format/vector_ranges).
    objects: IndexObjects | None = None
    files: LocalFiles | None = None


def _served(entry: _Entry, stale: bool, files: LocalFiles) -> ServedIndex:
    return ServedIndex(
        entry.index, stale=stale, manifest=entry.manifest, directory=entry.directory, objects=entry.objects, files=files
    )


@dataclass(frozen=True)
class SyncReport:
    """What the last sync of a KB did (benchmarks and tests read it)."""

    manifest_key: str
    downloaded_bytes: int


class IndexCache:
    """Opened indexes of this container, one generation per KB."""

    def __init__(self, files: LocalFiles = local_files) -> None:
        self.files = files
        self._entries: dict[str, _Entry] = {}
        self._failed: dict[str, tuple[str, float]] = {}  # kb_id → (manifest key, when it failed)
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.last_sync: dict[str, SyncReport] = {}

    def _kb_lock(self, kb_id: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(kb_id, threading.Lock())

    def get(self, bodies: IndexObjects, kb: KnowledgeBaseRecord) -> KbIndex | None:
        """The KB's index (its newest loadable generation), or None if it has never been built."""
        served = self.serve(bodies, kb)
        return served.index if served is not None else None

    def serve(self, bodies: IndexObjects, kb: KnowledgeBaseRecord) -> ServedIndex | None:
        """The KB's newest loadable generation and whether it is older than the newest one, or None
        if the KB has never been built. Raises IndexUnavailable if no generation loads (also,
        without trying again, for RETRY_SECONDS after that)."""
        if kb.generation <= 0:
            return None
        if not kb.index_manifests:
            # Published before index manifests existed: `agent-knowledge kb reindex` rebuilds it.
            raise IndexUnavailable("the knowledge base's index must be rebuilt")
        newest = kb.index_manifests[0]
        entry = self._entries.get(kb.kb_id)
        if entry is not None and entry.manifest_key == newest:
            return _served(entry, stale=False, files=self.files)
        with self._kb_lock(kb.kb_id):
            entry = self._entries.get(kb.kb_id)
            if entry is not None and entry.manifest_key == newest:
                return _served(entry, stale=False, files=self.files)
            failed = self._failed.get(kb.kb_id)
            recently_failed = (
                failed is not None and failed[0] == newest and time.monotonic() - failed[1] < RETRY_SECONDS
            )
            if recently_failed:
                if entry is None:
                    raise IndexUnavailable("the knowledge base's index cannot be loaded; retrying shortly")
                return _served(entry, stale=True, files=self.files)
            served = self._sync(bodies, kb, entry)
            return _served(served, stale=served.manifest_key != newest, files=self.files)

    def _sync(self, bodies: IndexObjects, kb: KnowledgeBaseRecord, entry: _Entry | None) -> _Entry:
        newest = kb.index_manifests[0]
        for key in kb.index_manifests:
            if entry is not None and key == entry.manifest_key:
                return entry  # the newest generation that loads is the one we serve
            try:
                loaded = self._load(bodies, kb.kb_id, key, entry)
            except IndexUnavailable as exc:
                _log_failure(kb.kb_id, key, exc)
                if key == newest:
                    self._failed[kb.kb_id] = (key, time.monotonic())
                entry = self._entries.get(kb.kb_id)  # _load may have let go of it
                continue
            if key == newest:
                self._failed.pop(kb.kb_id, None)
            return loaded
        if entry is not None:
            logger.warning("serving an index older than every kept generation", extra={"kb_id": kb.kb_id})
            return entry
        raise IndexUnavailable(f"no generation of the index of {kb.kb_id!r} can be loaded")

    def _load(self, bodies: IndexObjects, kb_id: str, key: str, entry: _Entry | None) -> _Entry:
        manifest = read_manifest(bodies, kb_id, key)
        owner = f"index-cache:{kb_id}"
        # Mostly new files (a full rebuild): let go of the old generation first, so /tmp never
        # holds two whole copies of the index.
        local = without_texts(manifest)
        replace = entry is not None and 2 * self.files.missing_bytes(local, bodies) > local.total_bytes
        try:
            try:
                # Refused before anything is downloaded (or let go of) if it cannot fit.
                self.files.ensure_room(
                    local, replacing=entry.manifest if entry is not None and replace else None, bodies=bodies
                )
                if entry is not None and replace:
                    self._drop(kb_id, entry)
                index, directory, downloaded = open_generation(self.files, bodies, manifest, owner, by_need=True)
            except OSError as exc:  # ENOSPC or any other failure to write /tmp: a load failure
                raise storage_failure(exc) from exc
        except (IndexUnavailable, KnowledgeUnavailable):
            current = self._entries.get(kb_id)
            self.files.hold(owner, [current.manifest] if current else [])  # frees the partial files
            raise
        loaded = _Entry(manifest=manifest, manifest_key=key, index=index, directory=directory, objects=bodies)
        self._entries[kb_id] = loaded
        self.last_sync[kb_id] = SyncReport(manifest_key=key, downloaded_bytes=downloaded)
        if entry is not None:
            self.files.discard(entry.directory)  # searches still running keep their open files
        self.files.hold(owner, [manifest])
        return loaded

    def _drop(self, kb_id: str, entry: _Entry) -> None:
        if self._entries.get(kb_id) is entry:
            del self._entries[kb_id]
        self.files.discard(entry.directory)
        self.files.hold(f"index-cache:{kb_id}", [])

    def opened_directory(self, kb_id: str) -> str | None:
        """The directory the KB's served generation was opened from (benchmarks open the same files)."""
        entry = self._entries.get(kb_id)
        return entry.directory if entry else None

    def clear(self) -> None:
        with self._lock:
            for kb_id, entry in list(self._entries.items()):
                self._drop(kb_id, entry)
            self._entries.clear()
            self._failed.clear()
            self.last_sync.clear()


def _log_failure(kb_id: str, key: str, exc: IndexUnavailable) -> None:
    """Log lines only: what failed may name the OS error, never reach a response."""
    if isinstance(exc, LocalStorageFailed):
        logger.error(str(exc), extra={"kb_id": kb_id, "manifest": key, **exc.context()})
    else:
        logger.warning("index generation not loaded", extra={"kb_id": kb_id, "manifest": key, "error": str(exc)})


# The container's cache: Lambda keeps module state between invocations of a warm container.
index_cache = IndexCache()


def reset_local_state() -> None:
    """Forget every opened index and local index file of this process (a new container's state)."""
    index_cache.clear()
    index_cache.files.clear()


on_reset(reset_local_state)
