"""This container's copy of index files in /tmp: one content-addressed store, hard links per generation.

Every file is kept once, under its SHA-256, in `{root}/objects/`. A generation is opened from a
directory of hard links to those objects plus the manifest's `meta.json`, so two generations that
share files share their bytes: moving to the next generation downloads only the files it adds,
and /tmp never holds a file twice. Who uses which files is recorded as pins (the index cache pins
the generation it serves per KB, a writer the generation it last published); objects nobody pins
are deleted.

Downloads run DOWNLOAD_THREADS at a time, largest file first (tantivy opens every component of
every segment when it opens a generation, so all of them are needed before the first answer; the
largest first keeps the threads busy to the end), each streamed to a temporary file that becomes an
object only if its size is the manifest's. The bytes are not hashed again here: the bucket stores
each index file with an S3 checksum (CRC32, `BodyStore.put_file`) that botocore validates while
the object streams in (`BodyStore.download`), so a corrupt transfer fails the download; the
manifest's SHA-256 is the file's name in the bucket, computed once by the writer.

/tmp is the container's ephemeral storage, and an index may not fit in it. Before anything is
downloaded, `materialize` refuses (`IndexDoesNotFit`) a generation whose missing files, by the
manifest's sizes, exceed the free space less a margin; a download that fails anyway (ENOSPC or any
other OS error while writing) removes its partial file and the files it pinned for the failed
generation, and raises `LocalStorageFailed` (a load failure of that source, with a fixed message;
the OS error's own text goes to the logs only).

The root is per process (Lambda runs one per container; locally several processes share /tmp),
and directories of processes that are gone are removed when a store is created.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from agent_knowledge.index_format.layout import VECTOR_ROLE, IndexCorrupt, IndexFile, IndexManifest, IndexUnavailable
from agent_knowledge.index_format.sizing import MARGIN_BYTES
from agent_knowledge.repositories.bodies import BodyMissing, BodyReplaced, Sink

ROOT = os.path.join(tempfile.gettempdir(), "agent-knowledge-indexes")
# Free space left beyond a generation's own files before it is downloaded (its meta.json,
# tantivy's lock files, other KBs' updates, anything else the function writes to /tmp).
ROOM_MARGIN_BYTES = MARGIN_BYTES
# Parallel downloads of one generation's files (S3 serves each GET at roughly 50–100 MB/s).
DOWNLOAD_THREADS = 8
# A vector file larger than this is not downloaded with its generation when the bucket reads ranges:
# search reads its head and the lists it probes (index_format/vector_ranges). Smaller files are read whole.
BY_NEED_BYTES = 4 << 20
DOES_NOT_FIT = "the knowledge base index does not fit this container's ephemeral storage"
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class LocalStorageFailed(IndexUnavailable):
    """The generation could not be written to this container's local storage (/tmp). The message
    is fixed; the OS error is named in `error_code` (for log lines)."""

    default_message = "the knowledge base index could not be written to this container's local storage"
    context_fields = ("error_code", "needed_bytes", "free_bytes")


class IndexDoesNotFit(LocalStorageFailed):
    """The generation is larger than the free space of this container's ephemeral storage."""

    default_message = DOES_NOT_FIT


def storage_failure(exc: OSError) -> LocalStorageFailed:
    """The load failure an OS error while writing index files amounts to."""
    code = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    if exc.errno in _NO_ROOM:
        return IndexDoesNotFit(error_code=code)
    return LocalStorageFailed(error_code=code or type(exc).__name__)


class Downloads(Protocol):
    def download(self, key: str, target: Sink) -> int: ...


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_dead_roots(parent: str) -> None:
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return
    for name in names:
        if name.isdigit() and int(name) != os.getpid() and not _process_alive(int(name)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


class LocalFiles:
    def __init__(self, root: str | None = None) -> None:
        if root is None:
            _remove_dead_roots(ROOT)
            root = os.path.join(ROOT, str(os.getpid()))
        self.root = root
        self._objects = os.path.join(root, "objects")
        self._open = os.path.join(root, "open")
        self._pins: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self.by_need_bytes = BY_NEED_BYTES

    def by_need(self, entry: IndexFile, bodies: object) -> bool:
        """Whether `entry` is left out of a search container's `materialize` and read by need (a
        large vector file, from a bucket that reads ranges; `bodies` None: never)."""
        if bodies is None or entry.role != VECTOR_ROLE or entry.size <= self.by_need_bytes:
            return False
        from agent_knowledge.index_format.vector_ranges import RangeReads  # numpy: only for a KB with vectors

        return isinstance(bodies, RangeReads)

    def ranges_path(self, sha256: str) -> str:
        """The sparse local copy of a file read by need (pinned and pruned with the object)."""
        os.makedirs(self._objects, exist_ok=True)
        return f"{self._object(sha256)}.ranges"

    def fetch_object(self, bodies: Downloads, key: str, sha256: str, size: int) -> str:
        """The stored object `sha256`, downloaded whole first if this store lacks it (a vector file
        found not to be read by need). The caller's generation pins it."""
        if not os.path.exists(self._object(sha256)):
            try:
                self.ensure_free(size)
                os.makedirs(self._objects, exist_ok=True)
                self._download(bodies, key, sha256, size)
            except OSError as exc:
                raise storage_failure(exc) from exc
        return self._object(sha256)

    def _object(self, sha256: str) -> str:
        return os.path.join(self._objects, sha256)

    def missing_bytes(self, manifest: IndexManifest, bodies: object = None) -> int:
        """Bytes of `manifest`'s files this store lacks (less those read by need from `bodies`)."""
        return sum(
            entry.size
            for entry in manifest.files.values()
            if not os.path.exists(self._object(entry.sha256)) and not self.by_need(entry, bodies)
        )

    def free_bytes(self) -> int:
        """Free space of the file system this store writes to."""
        os.makedirs(self._objects, exist_ok=True)
        return shutil.disk_usage(self._objects).free

    def ensure_room(
        self, manifest: IndexManifest, replacing: IndexManifest | None = None, bodies: object = None
    ) -> None:
        """Raise IndexDoesNotFit, before anything is downloaded, if the files of `manifest` this
        store lacks do not fit in the free space less ROOM_MARGIN_BYTES. `replacing`: a generation
        let go of before the download (its own files free their space). OSError if the store's
        directory cannot even be created."""
        needed = self.missing_bytes(manifest, bodies)
        if needed == 0:
            return
        freed = 0
        if replacing is not None:
            kept = {entry.sha256 for entry in manifest.files.values()}
            own = {e.sha256: e.size for e in replacing.files.values() if e.sha256 not in kept}
            freed = sum(size for sha256, size in own.items() if os.path.exists(self._object(sha256)))
        self.ensure_free(needed, freed)

    def ensure_free(self, needed: int, freed: int = 0) -> None:
        """Raise IndexDoesNotFit unless `needed` bytes (less `freed`, to be let go of first) fit
        in the free space less ROOM_MARGIN_BYTES."""
        free = self.free_bytes()
        if needed > free + freed - ROOM_MARGIN_BYTES:
            raise IndexDoesNotFit(needed_bytes=needed, free_bytes=free)

    def materialize(
        self, bodies: Downloads, manifest: IndexManifest, owner: str, by_need: bool = False
    ) -> tuple[str, int]:
        """A new directory holding `manifest`'s generation, and the bytes downloaded for it. Its
        files are pinned for `owner` (in addition to what it pinned before) until `hold` or
        `release`. Raises IndexDoesNotFit before downloading if the missing files do not fit,
        IndexCorrupt if a file is missing or not the size the manifest says, LocalStorageFailed if
        the local files cannot be written; on any failure nothing of it stays pinned (files
        downloaded for it are deleted unless another generation uses them). `by_need` (a search
        container): its large vector files are left out, to be read by need (`by_need`); a writer
        gets every file."""
        lazy_from = bodies if by_need else None
        try:
            self.ensure_room(manifest, bodies=lazy_from)
        except OSError as exc:
            raise storage_failure(exc) from exc
        wanted = frozenset(entry.sha256 for entry in manifest.files.values())
        directory = self.new_directory(f"{manifest.kb_id}.{manifest.generation}")
        with self._lock:
            before = self._pins.get(owner, frozenset())
            self._pins[owner] = before | wanted
            # The directory's own lease: no prune (another thread finishing its work) deletes these
            # objects between their download and their link, whatever `owner` pins meanwhile.
            self._pins[directory] = wanted
        try:
            os.makedirs(self._objects, exist_ok=True)
            here = {name: entry for name, entry in manifest.files.items() if not self.by_need(entry, lazy_from)}
            missing = {
                entry.sha256: (manifest.file_key(name), entry.size)
                for name, entry in here.items()
                if not os.path.exists(self._object(entry.sha256))
            }
            downloaded = self._download_all(bodies, sorted(missing.items(), key=lambda item: -item[1][1]))
            for name, entry in here.items():
                target = os.path.join(directory, name)
                try:
                    os.link(self._object(entry.sha256), target)
                except FileNotFoundError:
                    # Gone since it was found (seen once in the concurrent-ingest test, cause not
                    # found): fetched again rather than failing the update.
                    downloaded += self._download(bodies, manifest.file_key(name), entry.sha256, entry.size)
                    os.link(self._object(entry.sha256), target)
            with open(os.path.join(directory, "meta.json"), "w", encoding="utf-8") as meta:
                json.dump(manifest.meta, meta)
        except BaseException as exc:
            with self._lock:
                if self._pins.get(owner) == before | wanted:  # nobody changed them meanwhile
                    self._pins[owner] = before
            self.discard(directory)  # and prunes what the failed generation alone pinned
            if isinstance(exc, OSError):
                raise storage_failure(exc) from exc
            raise
        return directory, downloaded

    def _download_all(self, bodies: Downloads, files: list[tuple[str, tuple[str, int]]]) -> int:
        if len(files) <= 1:
            return sum(self._download(bodies, key, sha256, size) for sha256, (key, size) in files)
        with ThreadPoolExecutor(max_workers=min(DOWNLOAD_THREADS, len(files))) as pool:
            futures = [pool.submit(self._download, bodies, key, sha256, size) for sha256, (key, size) in files]
            try:
                return sum(future.result() for future in futures)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def _download(self, bodies: Downloads, key: str, sha256: str, size: int) -> int:
        partial = f"{self._object(sha256)}.{uuid.uuid4().hex}.part"
        try:
            with open(partial, "wb") as target:
                try:
                    written = bodies.download(key, target)
                except BodyReplaced as exc:
                    raise IndexCorrupt("an index file failed its S3 checksum") from exc
                except BodyMissing as exc:
                    raise IndexCorrupt("an index file is missing") from exc
            if written != size:
                raise IndexCorrupt("an index file is not what its manifest says")
            os.replace(partial, self._object(sha256))
            return written
        finally:
            if os.path.exists(partial):
                os.unlink(partial)

    def new_directory(self, label: str) -> str:
        """An empty directory beside the store (same file system: its files can become objects)."""
        directory = os.path.join(self._open, f"{label}.{uuid.uuid4().hex[:12]}")
        os.makedirs(directory)
        return directory

    def adopt(self, directory: str, manifest: IndexManifest) -> None:
        """Keep the files a writer produced in `directory` (now `manifest`'s generation), so the
        next update in this container starts from them without downloading.

        A file the writer wrote itself replaces a stored object of the same name: downloads are
        checked by size only, so that object may be a damaged copy (a vector file the indexer found
        corrupt, dropped and wrote again has the same content, hence the same name, as the healthy
        file the damaged one was)."""
        os.makedirs(self._objects, exist_ok=True)
        for name, entry in manifest.files.items():
            target = self._object(entry.sha256)
            source = os.path.join(directory, name)
            if not os.path.exists(target):
                try:
                    os.link(source, target)
                    continue
                except FileExistsError:
                    pass
            try:
                same = os.path.samefile(source, target)
            except FileNotFoundError:  # pruned meanwhile by another thread: put ours in its place
                same = False
            if not same:  # searches that opened the old copy keep it
                # `.part`: a concurrent prune spares in-flight names, as it spares downloads.
                replacement = f"{target}.{uuid.uuid4().hex}.adopted.part"
                os.link(source, replacement)
                os.replace(replacement, target)

    def hold(self, owner: str, manifests: Iterable[IndexManifest]) -> None:
        """`owner` now needs exactly the files of `manifests`; files nobody needs are deleted."""
        wanted = frozenset(entry.sha256 for manifest in manifests for entry in manifest.files.values())
        with self._lock:
            self._pins[owner] = wanted
            self._prune()

    def discard(self, directory: str) -> None:
        """Drop a directory from `materialize` or `new_directory` (its links; searches that have its
        files open keep them) and its lease on the objects."""
        shutil.rmtree(directory, ignore_errors=True)
        with self._lock:
            if self._pins.pop(directory, None) is not None:
                self._prune()

    def release(self, owner: str) -> None:
        self.hold(owner, [])

    def _prune(self) -> None:
        pinned = frozenset().union(*self._pins.values()) if self._pins else frozenset()
        try:
            names = os.listdir(self._objects)
        except FileNotFoundError:
            return
        for name in names:
            # `{sha256}.ranges`, a file read by need, goes with the object `sha256`.
            if name.partition(".")[0] not in pinned and not name.endswith(".part"):
                try:
                    os.unlink(os.path.join(self._objects, name))
                except FileNotFoundError:
                    pass

    def clear(self) -> None:
        with self._lock:
            self._pins.clear()
            shutil.rmtree(self.root, ignore_errors=True)

    def stored_bytes(self) -> int:
        """Bytes the store holds (each file once, however many directories link it)."""
        try:
            return sum(os.path.getsize(os.path.join(self._objects, name)) for name in os.listdir(self._objects))
        except FileNotFoundError:
            return 0


# The container's store, shared by the index cache (readers) and index writers.
local_files = LocalFiles()
