"""Ingest a folder: every .md/.txt/.html file below it, a few at a time, then one index rebuild.

Source key = path relative to the folder (with `/`), title = the first heading (Markdown `#`,
HTML `<title>`/`<h1>`) or else the file name. One bad file is reported and counted as failed; the
rest go on. The index is rebuilt once at the end — per-document rebuilds would make a bulk load
quadratic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_knowledge.errors import KnowledgeError
from agent_knowledge.ingest.documents import MAX_BODY_BYTES
from agent_knowledge.ingest.source_files import MEDIA_TYPES_BY_SUFFIX as MEDIA_TYPES
from agent_knowledge.ingest.source_files import media_type_of as media_type_of_name
from agent_knowledge.ingest.source_files import title_of

__all__ = [
    "MEDIA_TYPES",
    "BulkSummary",
    "SourceFile",
    "discover",
    "ingest_directory",
    "media_type_of",
    "put_file",
    "title_of",
]

DEFAULT_WORKERS = 4


@dataclass(frozen=True)
class SourceFile:
    path: Path
    source_key: str
    media_type: str


def media_type_of(path: Path) -> str | None:
    return media_type_of_name(path.name)


def discover(root: Path) -> list[SourceFile]:
    """Files to ingest, in a stable order; hidden files and folders (.git, .DS_Store) are skipped."""
    files = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        media_type = media_type_of(path)
        if media_type:
            files.append(SourceFile(path, relative.as_posix(), media_type))
    return files


@dataclass
class BulkSummary:
    kb_id: str
    files: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0
    failed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    index_generation: int | None = None
    documents_seconds: float = 0.0
    index_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "kb_id": self.kb_id,
            "files": self.files,
            "created": self.created,
            "updated": self.updated,
            "skipped": self.skipped,
            "failed": self.failed,
            "failures": self.failures,
            "index_generation": self.index_generation,
            "seconds": {"documents": round(self.documents_seconds, 2), "index": round(self.index_seconds, 2)},
        }


def put_file(
    ingestor: Any, kb_id: str, source: SourceFile, title: str | None = None, rebuild_index: bool = False
) -> Any:
    # The ingest API refuses such bodies anyway; do not read a huge file into memory first.
    if source.path.stat().st_size > MAX_BODY_BYTES * 4:
        raise ValueError(f"file is larger than {MAX_BODY_BYTES * 4} bytes")
    content = source.path.read_bytes()
    return ingestor.put(
        kb_id,
        source.source_key,
        title or title_of(content, source.media_type, source.path.name),
        content,
        media_type=source.media_type,
        rebuild_index=rebuild_index,
    )


def ingest_directory(
    ingestor: Any,
    kb_id: str,
    root: Path,
    *,
    workers: int = DEFAULT_WORKERS,
    on_start: Callable[[int], None] | None = None,
    on_result: Callable[[SourceFile, str, str | None], None] | None = None,
) -> BulkSummary:
    """Put every file below `root`; `on_result(file, outcome, error)` follows along (for a progress bar)."""
    started = time.perf_counter()
    sources = discover(root)
    summary = BulkSummary(kb_id=kb_id, files=len(sources))
    if on_start:
        on_start(len(sources))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(put_file, ingestor, kb_id, source): source for source in sources}
        for future in as_completed(futures):
            source = futures[future]
            error = None
            try:
                outcome = future.result().outcome
            except KnowledgeError as exc:  # IngestError and storage failures carry a safe message
                outcome, error = "failed", exc.message
            except (OSError, ValueError) as exc:
                outcome, error = "failed", str(exc)
            if error is not None:
                summary.failures.append({"source_key": source.source_key, "error": error})
            setattr(summary, outcome, getattr(summary, outcome) + 1)
            if on_result:
                on_result(source, outcome, error)
    summary.failures.sort(key=lambda failure: failure["source_key"])
    summary.documents_seconds = time.perf_counter() - started
    summary.index_generation = ingestor.rebuild_index(kb_id)
    summary.index_seconds = time.perf_counter() - started - summary.documents_seconds
    return summary
