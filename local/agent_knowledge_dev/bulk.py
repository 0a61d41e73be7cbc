"""A folder of documents: which files are in it, and reading one without leaving the folder.

Source key = the path relative to the folder (with `/`). Every regular file whose extension the
ingest takes (`MEDIA_TYPES_BY_SUFFIX`: .md/.markdown/.txt/.html/.htm/.pdf/.docx/.pptx) counts.
Everything else below the folder is reported in `Folder.ignored`, each with one reason of
`IGNORED_REASONS`: `hidden` (a name starting with a dot: .git, .DS_Store — a hidden folder is
reported once, not walked), `symlink` (never followed, neither to files nor to folders: a link to
`/etc/passwd` dropped into a docs folder must not end up in front of agents), `not_regular_file`
(FIFOs, devices, sockets — reading a FIFO would block forever), `unsupported_type` (another
extension, or none), `too_large` (larger than the ingest takes a file of its type) and
`unreadable` (the folder cannot be listed, or the entry inspected). A document's access sidecar
`<file>.metadata.json` beside it goes with it (`SourceFile.sidecar`), never on its own; one without
its document is `unsupported_type`. Reading opens with
`O_NOFOLLOW` and checks the opened file again, so a file swapped for a link after the walk is
refused too.

`ingest_directory` stores a folder straight through an `Ingestor` and has the indexer publish
one rebuild (the demo seed of `serve`); `doc put --dir` uploads to the sources bucket instead
(commands/documents.py).
"""

from __future__ import annotations

import bisect
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_knowledge.core.clock import Clock, system_clock
from agent_knowledge.errors import AgentKnowledgeError
from agent_knowledge.identity.document_access import MAX_SIDECAR_BYTES, is_sidecar, parse_sidecar, sidecar_key
from agent_knowledge.ingest.binary_formats import BINARY_MEDIA_TYPES, MAX_BINARY_SOURCE_BYTES
from agent_knowledge.ingest.content import MAX_BODY_BYTES
from agent_knowledge.ingest.source_files import media_type_of
from agent_knowledge_dev.runtime import process_vector_space

if TYPE_CHECKING:
    from agent_knowledge.repositories.bundle import Repositories

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
    sidecar: Path | None = None  # its access sidecar `<file>.metadata.json` (identity/document_access)


# Why a path below the folder is not taken (module doc): one word each, the same on stderr and in
# the JSON summary (`ignored: [{path, reason}]`).
HIDDEN = "hidden"
SYMLINK_IGNORED = "symlink"
NOT_REGULAR_FILE = "not_regular_file"
UNSUPPORTED_TYPE = "unsupported_type"
TOO_LARGE = "too_large"
UNREADABLE = "unreadable"
IGNORED_REASONS = (HIDDEN, SYMLINK_IGNORED, NOT_REGULAR_FILE, UNSUPPORTED_TYPE, TOO_LARGE, UNREADABLE)


@dataclass(frozen=True)
class IgnoredPath:
    path: str  # relative to the folder, with `/`
    reason: str  # one of IGNORED_REASONS

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass
class Folder:
    files: list[SourceFile] = field(default_factory=list)
    ignored: list[IgnoredPath] = field(default_factory=list)


class UnreadableSource(ValueError):
    """A file of the folder that cannot be read as a document (too large, replaced by a link, …)."""


def discover(root: Path) -> Folder:
    """The files to ingest below `root`, in a stable order, and what is not taken, with the reason
    (see module doc)."""
    folder = Folder()
    _walk(root, "", folder)
    folder.files.sort(key=lambda source: source.source_key)
    folder.ignored.sort(key=lambda ignored: ignored.path)
    return folder


def max_file_bytes(media_type: str | None) -> int:
    """How large a file of this type may be (what the ingest takes)."""
    return MAX_BINARY_SOURCE_BYTES if media_type in BINARY_MEDIA_TYPES else MAX_FILE_BYTES


def _classify(entry: os.DirEntry[str]) -> str | None:
    """Why this entry (not a folder) is not taken; None when it is a file to ingest."""
    if entry.name.startswith("."):
        return HIDDEN
    if entry.is_symlink():
        return SYMLINK_IGNORED
    if not entry.is_file(follow_symlinks=False):
        return NOT_REGULAR_FILE
    media_type = media_type_of(entry.name)
    if media_type is None:
        return UNSUPPORTED_TYPE
    if entry.stat(follow_symlinks=False).st_size > max_file_bytes(media_type):
        return TOO_LARGE
    return None


def _walk(directory: Path, prefix: str, folder: Folder) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        folder.ignored.append(IgnoredPath(prefix.rstrip("/") or ".", UNREADABLE))
        return
    sidecars = {entry.name: entry for entry in entries if is_sidecar(entry.name) and not entry.name.startswith(".")}
    taken: set[str] = set()
    for entry in entries:
        relative = prefix + entry.name
        if entry.name in sidecars:
            continue  # taken with its document below, or ignored after the loop
        try:
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                _walk(Path(entry.path), relative + "/", folder)
            elif (reason := _classify(entry)) is not None:
                folder.ignored.append(IgnoredPath(relative, reason))
            else:
                beside = sidecars.get(sidecar_key(entry.name))
                sidecar = None
                if beside is not None and _classify_sidecar(beside) is None:
                    sidecar = Path(beside.path)
                    taken.add(beside.name)
                folder.files.append(SourceFile(Path(entry.path), relative, str(media_type_of(entry.name)), sidecar))
        except OSError:
            folder.ignored.append(IgnoredPath(relative, UNREADABLE))
    for name, entry in sidecars.items():
        if name not in taken:
            try:
                reason = _classify_sidecar(entry) or UNSUPPORTED_TYPE  # a sidecar without its document
            except OSError:
                reason = UNREADABLE
            folder.ignored.append(IgnoredPath(prefix + name, reason))


def _classify_sidecar(entry: os.DirEntry[str]) -> str | None:
    """Why a sidecar beside a document is not taken; None when it is."""
    if entry.is_symlink():
        return SYMLINK_IGNORED
    if not entry.is_file(follow_symlinks=False):
        return NOT_REGULAR_FILE
    if entry.stat(follow_symlinks=False).st_size > MAX_SIDECAR_BYTES:
        return TOO_LARGE
    return None


def read_sidecar(source: SourceFile) -> bytes | None:
    """The file's access sidecar, checked (`AccessSidecarInvalid` says what is wrong), or None."""
    if source.sidecar is None:
        return None
    content = _read(source.sidecar, MAX_SIDECAR_BYTES)
    parse_sidecar(content)
    return content


def sidecar_access(source: SourceFile) -> Any:
    """The file's access list (`DocumentAccess`), or None without a sidecar."""
    content = read_sidecar(source)
    return parse_sidecar(content) if content is not None else None


def read_source(path: Path) -> bytes:
    """The file's bytes; refuses a link, a non-regular file or one larger than `MAX_FILE_BYTES`
    (`MAX_BINARY_SOURCE_BYTES` for a PDF, DOCX or PPTX file)."""
    return _read(path, max_file_bytes(media_type_of(path.name)))


def _read(path: Path, limit: int) -> bytes:
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
    sources: list[SourceFile],
    work: Callable[[SourceFile], ResultT],
    workers: int,
    deadline: float | None = None,
) -> Iterator[tuple[SourceFile, ResultT | None, str | None]]:
    """`work` on every file, `workers` at a time, in the order they finish: `(file, result, None)`,
    or `(file, None, error)` for a file that could not be read or stored. With `deadline`
    (`time.monotonic()`), it ends then: files not done by then are not yielded, none is started
    after it, and the workers (daemon threads) never hold up the end of the process."""
    todo: queue.SimpleQueue[SourceFile] = queue.SimpleQueue()
    for source in sources:
        todo.put(source)
    done: queue.SimpleQueue[tuple[SourceFile, Any, str | None, BaseException | None]] = queue.SimpleQueue()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            try:
                source = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((source, work(source), None, None))
            except AgentKnowledgeError as exc:  # DocumentRejected and storage failures carry a safe message
                done.put((source, None, exc.message, None))
            except UnreadableSource as exc:
                done.put((source, None, str(exc), None))
            except BaseException as exc:  # a bug: raised again in the caller's thread
                done.put((source, None, None, exc))

    for index in range(min(max(1, workers), len(sources))):
        threading.Thread(target=worker, name=f"each-file-{index}", daemon=True).start()
    try:
        for _ in sources:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            try:
                source, result, error, crash = done.get(timeout=remaining)
            except queue.Empty:
                return
            if crash is not None:
                raise crash
            yield source, result, error
    finally:
        stop.set()


def ingest_directory(
    repositories: Repositories,
    kb_id: str,
    root: Path,
    *,
    clock: Clock = system_clock,
    workers: int = DEFAULT_WORKERS,
    on_result: Callable[[SourceFile, str, str | None], None] | None = None,
) -> IngestSummary:
    """Store every file below `root` (titles found in the documents), then publish one rebuilt
    index: per-document generations would make a bulk load quadratic."""
    from agent_knowledge.index_format.recent_chunks import RecentChunks
    from agent_knowledge.indexer.publish import publish_rebuild
    from agent_knowledge.ingest.ingestor import Ingestor

    recent = RecentChunks()  # what the rebuild then need not read back from S3
    ingestor = Ingestor(repositories, clock=clock, recent_chunks=recent)
    sources = discover(root).files
    summary = IngestSummary(kb_id=kb_id, files=len(sources))

    def put(source: SourceFile) -> str:
        content = read_source(source.path)
        access = sidecar_access(source)
        result = ingestor.put(kb_id, source.source_key, None, content, media_type=source.media_type, access=access)
        return str(result.outcome)

    for source, outcome, error in each_file(sources, put, workers):
        if error is not None:
            summary.fail(source.source_key, error)
        elif outcome is not None:
            summary.count(outcome)
        if on_result:
            on_result(source, outcome or "failed", error)
    summary.index_generation = publish_rebuild(repositories, kb_id, known=recent, vector_space=process_vector_space())
    from agent_knowledge.indexer.vector_backlog import request_embedding_after_rebuild
    from agent_knowledge.settings import get_settings

    # Vectors follow (hybrid search), by the stack's indexer.
    request_embedding_after_rebuild(kb_id, summary.index_generation, get_settings())
    return summary
