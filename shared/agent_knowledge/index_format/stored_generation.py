"""A generation as it is stored: its manifest read from the bodies bucket, its files materialized
in this container (`local_files`) and opened as one index. Both sides need it: the reader cache
opens the generation it serves, and a rebuild opens the newest kept one to reuse its chunk texts
and vectors; the writer reads the manifests it starts from.
"""

from __future__ import annotations

from typing import Protocol

from agent_knowledge.index_format.chunk_text import ChunkTexts
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.index_format.layout import TEXT_ROLE, IndexCorrupt, IndexManifest, parse_manifest
from agent_knowledge.index_format.local_files import LocalFiles
from agent_knowledge.repositories.bodies import BodyMissing, Sink


class IndexObjects(Protocol):
    """What loading an index needs of the bodies bucket (`BodyStore`): small objects read whole,
    index files streamed, chunk texts read by ranges."""

    def read(self, key: str) -> bytes: ...

    def download(self, key: str, target: Sink) -> int: ...

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> tuple[bytes, dict[str, str]]: ...


def read_manifest(bodies: IndexObjects, kb_id: str, key: str) -> IndexManifest:
    try:
        return parse_manifest(bodies.read(key), kb_id)
    except BodyMissing as exc:
        raise IndexCorrupt("index manifest is missing") from exc


def without_texts(manifest: IndexManifest) -> IndexManifest:
    """The manifest as a search container downloads it: without the chunk text files, which it
    reads by ranges (`index_format/chunk_text`); its room and its download are reckoned from this."""
    kept = {name: entry for name, entry in manifest.files.items() if entry.role != TEXT_ROLE}
    return manifest.model_copy(update={"files": kept, "index_bytes": sum(entry.size for entry in kept.values())})


def open_generation(
    files: LocalFiles, bodies: IndexObjects, manifest: IndexManifest, owner: str, by_need: bool = False
) -> tuple[KbIndex, str, int]:
    """Materialize and open `manifest`'s generation: (index, its directory, bytes downloaded).
    `by_need`: for search, its large vector files are read by need instead (index_format/vector_ranges),
    and its chunk text files are not downloaded: the blocks of the hits a search answers are read
    by ranged GETs (index_format/chunk_text). A writer (`by_need` False) gets every file."""
    fetched = without_texts(manifest) if by_need else manifest
    directory, downloaded = files.materialize(bodies, fetched, owner, by_need=by_need)
    try:
        texts = ChunkTexts(directory, bodies, manifest) if by_need else None
        return KbIndex.open(directory, manifest.generation, texts), directory, downloaded
    except (KeyboardInterrupt, SystemExit):
        files.discard(directory)
        raise
    except BaseException as exc:  # tantivy reports broken files as ValueError, OSError or a Rust panic
        files.discard(directory)
        raise IndexCorrupt(f"index files do not open: {type(exc).__name__}") from exc
