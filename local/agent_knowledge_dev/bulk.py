"""A folder of documents: which files are in it, and reading one without leaving the folder.

Source key = the path relative to the folder (with `/`). Every .md/.markdown/.txt/.html/.htm/
.pdf/.docx/.pptx file counts; hidden files and folders (.git, .DS_Store) and other extensions are left out silently.
Symbolic links are never followed, neither to files nor to folders: a link to `/etc/passwd`
dropped into a docs folder must not end up in front of agents. They, and anything else that is
not a regular file (FIFOs, devices, sockets — reading a FIFO would block forever) or cannot be
listed, are reported in `Folder.skipped` with the reason. Reading opens with `O_NOFOLLOW` and
checks the opened file again, so a file swapped for a link after the walk is refused too.

`ingest_directory` stores a folder straight through an `Ingestor` (the demo seed of `serve`);
`doc put --dir` uploads to the sources bucket instead (commands/documents.py).
"""

from __future__ import annotations

import bisect
import os
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from agent_knowledge.errors import AgentKnowledgeError
from agent_knowledge.ingest.binary_formats import BINARY_MEDIA_TYPES, MAX_BINARY_SOURCE_BYTES
from agent_knowledge.ingest.content import MAX_BODY_BYTES
from agent_knowledge.ingest.source_files import media_type_of

DEFAULT_WORKERS = 4
# Files larger than this are refused before reading (the ingest refuses the body anyway); PDF,
# DOCX and PPTX files may be as large as the ingest takes them (`MAX_BINARY_SOURCE_BYTES`).
MAX_FILE_BYTES = MAX_BODY_BYTES * 4
SYMLINK = "symbolic link (not followed)"


@dataclass(frozen=True)
class SourceFile:
    path: Path
    source_key: str
    media_type: str


@dataclass(frozen=True)
class SkippedPath:
    path: str  # relative to the folder, with `/`
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass
class Folder:
    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)


class UnreadableSource(ValueError):
    """A file of the folder that cannot be read as a document (too large, replaced by a link, …)."""


def discover(root: Path) -> Folder:
    """The files to ingest below `root`, in a stable order, and what was skipped (see module doc)."""
    folder = Folder()
    _walk(root, "", folder)
    folder.files.sort(key=lambda source: source.source_key)
    folder.skipped.sort(key=lambda skipped: skipped.path)
    return folder


def _walk(directory: Path, prefix: str, folder: Folder) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        folder.skipped.append(SkippedPath(prefix.rstrip("/") or ".", f"cannot list the folder: {exc.strerror}"))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        relative = prefix + entry.name
        try:
            if entry.is_symlink():
                folder.skipped.append(SkippedPath(relative, SYMLINK))
            elif entry.is_dir(follow_symlinks=False):
                _walk(Path(entry.path), relative + "/", folder)
            elif (media_type := media_type_of(entry.name)) is None:
                continue
            elif entry.is_file(follow_symlinks=False):
                folder.files.append(SourceFile(Path(entry.path), relative, media_type))
            else:
                folder.skipped.append(SkippedPath(relative, "not a regular file"))
        except OSError as exc:
            folder.skipped.append(SkippedPath(relative, f"cannot inspect: {exc.strerror}"))


def read_source(path: Path) -> bytes:
    """The file's bytes; refuses a link, a non-regular file or one larger than `MAX_FILE_BYTES`
    (`MAX_BINARY_SOURCE_BYTES` for a PDF, DOCX or PPTX file)."""
    limit = MAX_BINARY_SOURCE_BYTES if media_type_of(path.name) in BINARY_MEDIA_TYPES else MAX_FILE_BYTES
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if os.path.islink(path):
            raise UnreadableSource(SYMLINK) from None
        raise UnreadableSource(f"cannot read: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableSource("not a regular file")
        if status.st_size > limit:
            raise UnreadableSource(f"file is larger than {limit} bytes")
        return handle.read(limit + 1)


@dataclass
class FolderOutcomes:
    """How the files of one folder fared, by outcome, with each failure's reason: what both ways of
    loading a folder report (`ingest_directory` here, `doc put --dir`'s uploads)."""

    kb_id: str
    files: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0  # unchanged
    deleted: int = 0
    failed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)

    def count(self, outcome: str) -> None:
        """One more file `created`, `updated` or `skipped`."""
        if outcome not in ("created", "updated", "skipped"):
            raise ValueError(f"not an outcome of a stored file: {outcome!r}")
        setattr(self, outcome, getattr(self, outcome) + 1)

    def fail(self, source_key: str, error: str) -> None:
        self.failed += 1
        # Kept in source-key order: files finish in any order.
        bisect.insort(self.failures, {"source_key": source_key, "error": error}, key=lambda item: item["source_key"])

    def counts(self) -> dict[str, Any]:
        """The outcomes as the CLI prints them, from `kb_id` to `failures`."""
        return {outcome.name: getattr(self, outcome.name) for outcome in fields(FolderOutcomes)}


@dataclass
class IngestSummary(FolderOutcomes):
    index_generation: int | None = None


ResultT = TypeVar("ResultT")


def each_file(
    sources: list[SourceFile], work: Callable[[SourceFile], ResultT], workers: int
) -> Iterator[tuple[SourceFile, ResultT | None, str | None]]:
    """`work` on every file, `workers` at a time, in the order they finish: `(file, result, None)`,
    or `(file, None, error)` for a file that could not be read or stored."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(work, source): source for source in sources}
        for future in as_completed(futures):
            source = futures[future]
            try:
                result = future.result()
            except AgentKnowledgeError as exc:  # DocumentRejected and storage failures carry a safe message
                yield source, None, exc.message
            except UnreadableSource as exc:
                yield source, None, str(exc)
            else:
                yield source, result, None


def ingest_directory(
    ingestor: Any,
    kb_id: str,
    root: Path,
    *,
    workers: int = DEFAULT_WORKERS,
    on_result: Callable[[SourceFile, str, str | None], None] | None = None,
) -> IngestSummary:
    """Store every file below `root` through `ingestor` (titles found in the documents), then
    rebuild the index once: per-document rebuilds would make a bulk load quadratic."""
    sources = discover(root).files
    summary = IngestSummary(kb_id=kb_id, files=len(sources))

    def put(source: SourceFile) -> str:
        content = read_source(source.path)
        result = ingestor.put(
            kb_id, source.source_key, None, content, media_type=source.media_type, rebuild_index=False
        )
        return str(result.outcome)

    for source, outcome, error in each_file(sources, put, workers):
        if error is not None:
            summary.fail(source.source_key, error)
        elif outcome is not None:
            summary.count(outcome)
        if on_result:
            on_result(source, outcome or "failed", error)
    summary.index_generation = ingestor.rebuild_index(kb_id)
    return summary
