"""Index snapshots in the bodies bucket, and the per-container cache of opened indexes.

A rebuild first claims generation g+1 on the KB item (a conditional write), then builds and
uploads `indexes/{kb_id}/{g+1:012d}.tar`. Claiming first means two builders never write the
same key, and the builder holding the highest generation listed the documents after every
other claim, so its snapshot contains every document written before any rebuild began.
Between a claim and its upload (or if a builder dies), readers use the newest snapshot that
exists below the KB's generation; hits from it are still validated against current records.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass

from agent_knowledge.repositories.bodies import BodyMissing, BodyStore
from agent_knowledge.retrieval.builder import unpack
from agent_knowledge.retrieval.kb_index import KbIndex

# How many older snapshots stay in the bucket (and how far back a reader may fall back).
KEEP_GENERATIONS = 3
# While the KB's generation is claimed but its snapshot not yet uploaded, look again at most this often.
RECHECK_SECONDS = 1.0
CACHE_ROOT = os.path.join(tempfile.gettempdir(), "agent-knowledge-indexes")


class IndexUnavailable(Exception):
    """No snapshot can be loaded for the KB's current generation or the ones just before it."""


def snapshot_key(kb_id: str, generation: int) -> str:
    return f"indexes/{kb_id}/{generation:012d}.tar"


def publish(bodies: BodyStore, kb_id: str, generation: int, snapshot: bytes) -> None:
    bodies.put(snapshot_key(kb_id, generation), snapshot, hashlib.sha256(snapshot).hexdigest())
    stale = generation - KEEP_GENERATIONS
    if stale >= 1:
        bodies.delete(snapshot_key(kb_id, stale))


@dataclass
class _Entry:
    wanted: int
    index: KbIndex
    directory: str
    checked_at: float


class IndexCache:
    """Opened indexes of this container, one per KB, reused until the KB's generation changes."""

    def __init__(self, root: str = CACHE_ROOT) -> None:
        self._root = root
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, bodies: BodyStore, kb_id: str, generation: int) -> KbIndex | None:
        """The KB's index for `generation`, or None when it has never been built (generation 0)."""
        if generation <= 0:
            return None
        with self._lock:
            entry = self._entries.get(kb_id)
            now = time.monotonic()
            if entry and (
                entry.index.generation >= generation
                # Serving an older snapshot because the current one is not uploaded yet: look again now and then.
                or (entry.wanted == generation and now - entry.checked_at < RECHECK_SECONDS)
            ):
                return entry.index
            loaded = self._load(bodies, kb_id, generation, lowest=entry.index.generation + 1 if entry else 1)
            if loaded is None:
                if entry is None:
                    raise IndexUnavailable(kb_id)
                entry.wanted, entry.checked_at = generation, now
                return entry.index
            index, directory = loaded
            if entry:
                shutil.rmtree(entry.directory, ignore_errors=True)
            self._entries[kb_id] = _Entry(wanted=generation, index=index, directory=directory, checked_at=now)
            return index

    def _load(self, bodies: BodyStore, kb_id: str, generation: int, lowest: int) -> tuple[KbIndex, str] | None:
        """Newest snapshot from `generation` down to `lowest` (at most KEEP_GENERATIONS back)."""
        for candidate in range(generation, max(lowest, generation - KEEP_GENERATIONS) - 1, -1):
            try:
                snapshot = bodies.read(snapshot_key(kb_id, candidate))
            except BodyMissing:
                continue
            directory = os.path.join(self._root, f"{kb_id}-{candidate}-{uuid.uuid4().hex}")
            os.makedirs(directory)
            try:
                unpack(snapshot, directory)
                return KbIndex.open(directory, candidate), directory
            except Exception:
                shutil.rmtree(directory, ignore_errors=True)
                raise
        return None

    def clear(self) -> None:
        with self._lock:
            for entry in self._entries.values():
                shutil.rmtree(entry.directory, ignore_errors=True)
            self._entries.clear()


# The container's cache: Lambda keeps module state between invocations of a warm container.
index_cache = IndexCache()
