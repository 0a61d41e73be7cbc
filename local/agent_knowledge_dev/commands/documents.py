"""`doc put|delete|list|access` and `kb list|status|reindex`: documents go in through the sources bucket.

`doc put` uploads to `s3://<SourcesBucket>/<kb_id>/<source_key>` and the stack's pipeline ingests
and indexes (docs/DESIGN.md §10). Each file is first prepared locally with the same code the ingest
function runs, so a file that cannot be ingested (not UTF-8, empty, too large) is reported and NOT
uploaded: the stored version, if any, stays. Only changed files are uploaded (sources.py); a file
whose document failed or is missing is sent again. `--wait` polls the document listing until
every change is searchable or failed (waiting.py); for one file (`--file`) it follows the object
version uploaded, which may also end `superseded` (a newer put or a delete replaced it), and
`--timeout` bounds the whole command, upload included.

A stack without a sources bucket (deployed, or a `serve` started, before the ingest pipeline)
gets the documents stored directly and its index rebuilt here, as before, with a note on stderr.

Access (issue 33, `identity/document_access`): `doc put --file --allow/--deny` uploads the
document's sidecar `<key>.metadata.json` before the document (a changed sidecar sends the document
again, so that `--wait` follows it); `doc put --dir` uploads each `<file>.metadata.json` found beside
a document as its sidecar (checked here first: a malformed one fails that file, nothing of it is
uploaded); `--prune` also deletes sidecars whose files are gone. Without a sources bucket the access
list goes straight into the record.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_knowledge_dev.arguments import bounded_int
from agent_knowledge_dev.commands import Command, evaluate, sync
from agent_knowledge_dev.console import CliError, LocalStackStopped, note, print_json
from agent_knowledge_dev.runtime import process_vector_space
from agent_knowledge_dev.target import add_target_arguments, connect, local_stack_stopped, sources_bucket

if TYPE_CHECKING:  # imported where used: every CLI run builds this module's parsers
    from agent_knowledge_dev.bulk import FolderOutcomes

_T = TypeVar("_T")
DEFAULT_WORKERS = 4
# More workers than the AWS clients' 32 pooled connections would only wait for one.
MAX_WORKERS = 32


def _wait_arguments(parser: argparse.ArgumentParser, timeout_help: str = "how long --wait waits") -> None:
    parser.add_argument("--wait", action="store_true", help="return once every change is searchable (or failed)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help=f"{timeout_help} (default 300)")


def _put_arguments(parser: argparse.ArgumentParser) -> None:
    from agent_knowledge.ingest.source_files import MEDIA_TYPES_BY_SUFFIX

    suffixes = ", ".join(MEDIA_TYPES_BY_SUFFIX)  # every extension the ingest takes
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument("source_key", metavar="SOURCE_KEY", nargs="?", help="the document's key (with --file)")
    parser.add_argument("--file", type=Path, metavar="PATH", help=f"the document ({suffixes})")
    parser.add_argument("--title", help="with --file: the title (default: found in the document, else the key)")
    parser.add_argument(
        "--allow",
        nargs="+",
        action="extend",
        metavar="ENTRY",
        help="with --file: who may see the document (principal:<id>, role:<name>, tenant:<name>, everyone); "
        "written as its access sidecar <key>.metadata.json",
    )
    parser.add_argument(
        "--deny", nargs="+", action="extend", metavar="ENTRY", help="with --file: who may not (overrides --allow)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help=f"every {suffixes} file below DIR; the rest is listed as ignored, with the reason",
    )
    parser.add_argument("--prune", action="store_true", help="with --dir: delete documents whose files are gone")
    parser.add_argument(
        "--charset",
        metavar="NAME",
        help="the encoding of the .txt, .md and .markdown files when it is not UTF-8 (latin-1, windows-1252, "
        "shift_jis, ...): stored in the object's Content-Type, which the ingest decodes them by",
    )
    _wait_arguments(parser, "how long the whole command may take, uploads and --wait included")
    parser.add_argument(
        "--workers",
        type=bounded_int(1, MAX_WORKERS),
        default=DEFAULT_WORKERS,
        help=f"parallel uploads with --dir, 1-{MAX_WORKERS} (default {DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr: a bar on a terminal (default), a line every 10 s of --wait elsewhere",
    )
    add_target_arguments(parser)


@dataclass
class _Session:
    """What every document command needs: the stack, the KB checked, the bucket."""

    repositories: Any
    bucket: Any  # None: the stack has no sources bucket
    kb_id: str


def _open(arguments: argparse.Namespace, *, writing: bool) -> _Session:
    from agent_knowledge_dev.admin import require_knowledge_base
    from agent_knowledge_dev.sources import SourcesBucket

    repositories = connect(arguments)
    kb = require_knowledge_base(repositories, arguments.kb_id)
    if writing and not kb.enabled:
        raise CliError(
            f"knowledge base {kb.kb_id!r} is disabled, so its documents would be recorded as failed; "
            f"enable it first with `agent-knowledge kb enable {kb.kb_id}`"
        )
    bucket = sources_bucket(arguments)
    if bucket is None and writing:
        note(
            "note: this stack has no sources bucket (it predates the ingest pipeline): documents are stored "
            "directly and the index is rebuilt here; deploy (or restart `serve`) with the current template"
        )
    return _Session(repositories, SourcesBucket(*bucket) if bucket else None, kb.kb_id)


def _check_wait(arguments: argparse.Namespace) -> None:
    if arguments.timeout <= 0:
        raise CliError("--timeout must be a positive number of seconds")


# The text formats that cannot declare their own encoding: `--charset` names it for them (HTML
# declares its own in a `<meta>`; PDF, DOCX and PPTX are binary).
CHARSET_MEDIA_TYPES = ("text/plain", "text/markdown")
CHARSET_HINT = "; if the file is in another encoding, name it with --charset (e.g. --charset windows-1252)"


def _check_charset(arguments: argparse.Namespace) -> None:
    """`--charset` must name a text encoding the ingest decodes (content.text_codec)."""
    from agent_knowledge.ingest.content import text_codec

    if arguments.charset is None:
        return
    if text_codec(arguments.charset) is None:
        raise CliError(
            f"--charset {arguments.charset[:40]!r} is not a text encoding the ingest decodes: use one browsers "
            "decode, e.g. latin-1, windows-1252, shift_jis, gb18030 (UTF-8 needs no --charset)"
        )
    arguments.charset = arguments.charset.strip()


def _declared(content: bytes, media_type: str, charset: str | None) -> tuple[bytes | str, str | None]:
    """The file as the ingest will take it, and the charset its object declares: with `--charset`,
    a plain text or Markdown file is decoded here exactly as the ingest decodes the object
    (`source_events.decode_declared`: an undecodable byte is refused with its offset); any other
    file is left as it is and declares nothing."""
    if charset is None or media_type not in CHARSET_MEDIA_TYPES:
        return content, None
    from agent_knowledge.ingest.source_events import decode_declared

    return decode_declared(content, charset), charset


def _put(arguments: argparse.Namespace) -> int:
    _check_wait(arguments)
    _check_charset(arguments)
    if (arguments.file is None) == (arguments.dir is None):
        raise CliError("give either SOURCE_KEY --file PATH (one document) or --dir DIR (a folder)")
    if arguments.dir is not None:
        if arguments.allow or arguments.deny:
            raise CliError("--allow and --deny go with --file; with --dir, put <file>.metadata.json beside a file")
        if arguments.source_key or arguments.title:
            raise CliError("--dir takes neither SOURCE_KEY nor --title (keys are relative paths, titles headings)")
        if arguments.workers < 1:
            raise CliError("--workers must be at least 1")
        return _put_directory(arguments)
    if arguments.prune:
        raise CliError("--prune goes with --dir")
    if not arguments.source_key:
        raise CliError("--file needs a SOURCE_KEY, e.g. `doc put handbook guides/leave.md --file leave.md`")
    return _put_file(arguments)


# --- one file ---------------------------------------------------------------------------------


def _check_source_key(source_key: str, media_type: str, path: Path) -> None:
    from agent_knowledge.ingest.source_files import MEDIA_TYPES_BY_SUFFIX, media_type_of

    if source_key.startswith("/") or any(part in {"", ".", ".."} for part in source_key.split("/")):
        raise CliError(f"invalid SOURCE_KEY {source_key!r}: use a relative path like guides/leave.md")
    by_key = media_type_of(source_key)
    if by_key is None:
        suffixes = ", ".join(MEDIA_TYPES_BY_SUFFIX)
        raise CliError(f"SOURCE_KEY {source_key!r} must end in one of {suffixes}: the pipeline types a document by it")
    if by_key != media_type:
        raise CliError(f"SOURCE_KEY {source_key!r} is {by_key} but {path.name} is {media_type}: use the same extension")


def _prepare(content: bytes, media_type: str, source_key: str, title: str | None = None) -> Any:
    """The document as the ingest function will store it (its revision is what --wait waits for)."""
    from agent_knowledge.ingest.content import prepare_document

    return prepare_document(title, content, media_type, source_key)


def _check_title_argument(title: str) -> None:
    """Refuse up front a title no document may have (empty, over 255 characters, not Unicode);
    any other title is stored exactly as given (source_files.TITLE_METADATA)."""
    from agent_knowledge.errors import DocumentRejected
    from agent_knowledge.ingest.content import check_title

    try:
        check_title(title)
    except DocumentRejected as exc:
        raise CliError(f"--title cannot be stored (nothing was uploaded): {exc.message}") from None


def _access_arguments(arguments: argparse.Namespace) -> Any:
    """The access list of --allow/--deny (a `DocumentAccess`), None when neither is given."""
    from agent_knowledge.identity.document_access import access_list

    if arguments.allow is None and arguments.deny is None:
        return None
    try:
        return access_list(arguments.allow or [], arguments.deny or [])
    except ValueError as exc:
        raise CliError(f"--allow/--deny: {exc} (nothing was uploaded)") from None


def _put_file(arguments: argparse.Namespace) -> int:
    from agent_knowledge.errors import AgentKnowledgeError, KnowledgeUnavailable, NotUtf8
    from agent_knowledge.ingest.source_files import MEDIA_TYPES_BY_SUFFIX, media_type_of
    from agent_knowledge_dev.bulk import UnreadableSource, read_source

    deadline = time.monotonic() + arguments.timeout  # --timeout bounds the whole command
    path: Path = arguments.file
    source_key: str = arguments.source_key
    access = _access_arguments(arguments)
    if arguments.title is not None:
        _check_title_argument(arguments.title)
    if not path.is_file():
        raise CliError(f"file not found: {path}")
    media_type = media_type_of(path.name)
    if media_type is None:
        raise CliError(f"{path}: only {', '.join(MEDIA_TYPES_BY_SUFFIX)} files can be ingested")
    _check_source_key(source_key, media_type, path)
    if arguments.charset is not None and media_type not in CHARSET_MEDIA_TYPES:
        raise CliError(f"--charset is for .txt, .md and .markdown files; {path.name} is {media_type}")
    try:
        content = read_source(path.resolve())  # a link named on the command line is the user's choice
        text, charset = _declared(content, media_type, arguments.charset)
        prepared = _prepare(text, media_type, source_key, arguments.title)
    except UnreadableSource as exc:
        raise CliError(f"{path}: {exc}") from None
    except AgentKnowledgeError as exc:
        hint = CHARSET_HINT if isinstance(exc, NotUtf8) and media_type in CHARSET_MEDIA_TYPES else ""
        raise CliError(f"{path} cannot be ingested (nothing was uploaded): {exc.message}{hint}") from None

    started = time.time()
    try:
        put = _before(
            deadline, lambda: _upload_file(arguments, content, media_type, charset, prepared, started, access)
        )
    except _Late:
        raise CliError(
            f"{source_key} was not uploaded within --timeout {arguments.timeout:g} s (an upload under way may "
            f"still complete: see `agent-knowledge doc list {arguments.kb_id}`)"
        ) from None
    except KnowledgeUnavailable:
        if not local_stack_stopped():
            raise
        print_json(
            {"outcome": "not_uploaded", "kb_id": arguments.kb_id, "source_key": source_key, "stack_stopped": True}
        )
        raise LocalStackStopped(f"; {source_key} was not uploaded") from None
    session = put.session
    if session.bucket is None:
        return _store_file_directly(session, source_key, text, media_type, arguments.title, access)
    document, status, superseded, stopped = put.document, 0, False, False
    if arguments.wait and put.uploaded is not None:
        try:
            document, status, superseded = _follow_upload(arguments, session, put.uploaded, document, started, deadline)
        except KnowledgeUnavailable:
            if not local_stack_stopped():
                raise
            document, stopped = {**(document or {}), "status": "pending", "reason": NOT_CONFIRMED}, True
    result: dict[str, Any] = {
        "outcome": put.outcome,
        "kb_id": session.kb_id,
        "source_key": source_key,
        "object": session.bucket.uri(session.kb_id, source_key),
        # The object version this run uploaded (skipped: the current one); None in an unversioned bucket.
        "version_id": getattr(put.uploaded or put.current, "version_id", None),
    }
    if access is not None:
        result["access"] = access.model_dump(mode="json")
    if arguments.wait:
        result["superseded"] = superseded
    result["document"] = document
    if stopped:
        result["stack_stopped"] = True
    print_json(result)
    if stopped:
        raise LocalStackStopped(f"; {source_key} was uploaded, but its ingest was not confirmed")
    return status


@dataclass
class _FileUpload:
    session: _Session
    outcome: str  # created, updated, skipped
    document: dict[str, Any] | None
    current: Any = None  # the key's object before (sources.SourceObject), if any
    uploaded: Any = None  # the object this run made (sources.SourceObject); None: skipped


def _upload_file(
    arguments: argparse.Namespace,
    content: bytes,
    media_type: str,
    charset: str | None,
    prepared: Any,
    started: float,
    access: Any = None,
) -> _FileUpload:
    """Upload the file unless the key already holds it (same bytes and title, not failed) and its
    access sidecar (`access`) is unchanged; a sidecar is uploaded before its document."""
    from agent_knowledge_dev.sources import content_etag

    session = _open(arguments, writing=True)
    if session.bucket is None:
        return _FileUpload(session, "", None)
    source_key, title = arguments.source_key, arguments.title
    current = session.bucket.head(session.kb_id, source_key)
    document = _listing_of(session, source_key)
    access_changed = access is not None and _put_sidecar(session, source_key, access)
    unchanged = (
        not access_changed
        and current is not None
        and current.etag == content_etag(content)
        and current.title == title
        and document is not None
        and document["status"] != "failed"
    )
    if unchanged:
        return _FileUpload(session, "skipped", document, current)
    uploaded = session.bucket.upload(session.kb_id, source_key, content, media_type, title, charset)
    outcome = "created" if current is None else "updated"
    return _FileUpload(session, outcome, _expected(source_key, prepared, started), current, uploaded)


def _put_sidecar(session: _Session, source_key: str, access: Any) -> bool:
    """Upload the document's access sidecar unless the bucket holds it already; whether it did."""
    from agent_knowledge.identity.document_access import sidecar_json, sidecar_key
    from agent_knowledge_dev.sources import content_etag

    content = sidecar_json(access)
    current = session.bucket.head(session.kb_id, sidecar_key(source_key))
    if current is not None and current.etag == content_etag(content):
        return False
    session.bucket.upload(session.kb_id, sidecar_key(source_key), content, "application/json")
    return True


def _follow_upload(
    arguments: argparse.Namespace,
    session: _Session,
    uploaded: Any,
    document: dict[str, Any] | None,
    started: float,
    deadline: float,
) -> tuple[dict[str, Any] | None, int, bool]:
    """`--wait` for one file: follow the object version it uploaded (waiting.wait_for_version).
    Returns the document to show, the exit status and whether the version was superseded: ready
    0; failed 1; not landed by the deadline 1 (pending); superseded 0, said on stderr, with the
    key's document as it is now (another version's, or None once deleted)."""
    from agent_knowledge_dev.waiting import version_listing, wait_for_version

    try:
        waited = _before(
            deadline,
            lambda: wait_for_version(
                session.repositories,
                session.bucket,
                session.kb_id,
                uploaded,
                since=started,
                deadline=deadline,
                stopped=local_stack_stopped,
            ),
        )
    except _Late:
        waited = None
    if waited is None or waited.state == "pending":
        late = {"status": "pending", "reason": f"not searchable after {arguments.timeout:g} s"}
        return {**(document or {}), **late}, 1, False
    found = version_listing(waited.record)
    shown = found.model_dump(mode="json") if found is not None else None
    if waited.state == "superseded":
        uri = session.bucket.uri(session.kb_id, uploaded.source_key)
        ours = f" (version {uploaded.version_id})" if uploaded.version_id else ""
        if waited.current is None:
            what = "deleted"
        else:
            what = f"replaced by version {waited.current.version_id or waited.current.etag}"
        note(f"superseded: {uri} was {what} before this upload{ours} was searchable; that is what the KB gets")
        return shown, 0, True
    return shown or document, (0 if waited.state == "ready" else 1), False


class _Late(Exception):
    """The work did not finish before the command's deadline."""


def _before(deadline: float, work: Callable[[], _T]) -> _T:
    """`work()`, run in a daemon thread so that the command returns by `deadline` (time.monotonic)
    whatever a storage call does (botocore retries and read timeouts exceed any --timeout): its
    result, its exception, or `_Late` (the work goes on in the background until the process ends)."""
    import threading

    finished: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            finished.append((True, work()))
        except Exception as exc:  # raised again in the caller's thread
            finished.append((False, exc))

    thread = threading.Thread(target=run, name="doc-put", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if not finished:
        raise _Late
    done, value = finished[0]
    if not done:
        raise value
    return value  # type: ignore[no-any-return]


def _store_file_directly(
    session: _Session, source_key: str, content: bytes | str, media_type: str, title: str | None, access: Any = None
) -> int:
    from agent_knowledge.indexer.publish import publish_pending
    from agent_knowledge.ingest.ingestor import Ingestor

    ingestor = Ingestor(session.repositories)
    if access is None:  # no sidecars without a bucket: the record's access list stays as it is
        existing = ingestor.document(session.kb_id, source_key)
        access = existing.access if existing is not None else None
    result = ingestor.put(session.kb_id, source_key, title, content, media_type=media_type, access=access)
    if result.document.index_pending_since is not None:  # no indexer without the pipeline: publish now
        publish_pending(session.repositories, session.kb_id, result.doc_ids, vector_space=process_vector_space())
    print_json(
        {
            "outcome": result.outcome,
            "kb_id": session.kb_id,
            "source_key": source_key,
            "object": None,
            "document": _listing_of(session, source_key),
        }
    )
    return 0


def _listing_of(session: _Session, source_key: str) -> dict[str, Any] | None:
    from agent_knowledge.ingest.status import document_listing

    for entry in document_listing(session.repositories, session.kb_id):
        if entry.source_key == source_key:
            return entry.model_dump(mode="json")
    return None


def _expected(source_key: str, prepared: Any, uploaded_at: float) -> dict[str, Any]:
    from agent_knowledge.ingest.status import iso_utc

    return {
        "source_key": source_key,
        "title": prepared.title,
        "revision": prepared.revision,
        "status": "pending",
        "reason": None,
        "updated_at": iso_utc(uploaded_at),
    }


# Without a terminal, `--wait` says how far it got on stderr this often (with one, the bar does).
WAIT_PROGRESS_SECONDS = 10.0


def _wait(
    arguments: argparse.Namespace,
    session: _Session,
    puts: dict[str, str | None],
    deletes: set[str],
    started: float,
    timeout: float | None = None,
) -> Any:
    """Wait for the changes (waiting.wait_for_changes) at most `timeout` seconds (default
    --timeout), with progress on stderr: ready / failed / pending counts."""
    from agent_knowledge_dev.progress import ProgressBar
    from agent_knowledge_dev.waiting import WaitProgress, wait_for_changes

    bar = ProgressBar(
        len(puts) + len(deletes),
        enabled=getattr(arguments, "progress", None),
        every=WAIT_PROGRESS_SECONDS,
        label="waiting",
    )

    def follow(progress: WaitProgress) -> None:
        removed = f", {progress.removed} removed" if deletes else ""
        landed = progress.ready + progress.failed + progress.removed
        bar.show(landed, f"{progress.ready} ready, {progress.failed} failed, {progress.pending} pending{removed}")

    try:
        return wait_for_changes(
            session.repositories,
            session.kb_id,
            puts,
            deletes,
            started=started,
            timeout=arguments.timeout if timeout is None else timeout,
            on_progress=follow,
        )
    finally:
        bar.close()


# --- a folder -------------------------------------------------------------------------------------


# What a change whose landing the command did not see is, when the local stack stopped under it.
NOT_CONFIRMED = "not confirmed: the local stack stopped"


def _put_directory(arguments: argparse.Namespace) -> int:
    from agent_knowledge.errors import KnowledgeUnavailable
    from agent_knowledge.ingest.status import document_listing
    from agent_knowledge_dev.bulk import FolderOutcomes, discover
    from agent_knowledge_dev.progress import ProgressBar

    deadline = time.monotonic() + arguments.timeout  # --timeout bounds the whole command
    root: Path = arguments.dir
    if not root.is_dir():
        raise CliError(f"folder not found: {root}")
    root = root.resolve()  # the folder itself may be a link; nothing below it is followed
    session = _open(arguments, writing=True)
    if session.bucket is None:
        return _store_folder_directly(arguments, session, root)
    started, clock = time.time(), time.perf_counter()
    folder = discover(root)
    summary = FolderOutcomes(session.kb_id, files=len(folder.files))
    remote = session.bucket.objects(session.kb_id)
    documents = {entry.source_key: entry.status for entry in document_listing(session.repositories, session.kb_id)}
    bar = ProgressBar(len(folder.files), enabled=arguments.progress)
    for ignored in folder.ignored:
        bar.message(f"ignored: {ignored.path}: {ignored.reason}")
    pruned: set[str] = set()
    try:
        uploaded, not_uploaded, stopped = _upload_all(
            session, folder.files, remote, documents, summary, bar, arguments.workers, deadline, arguments.charset
        )
        if arguments.prune and not not_uploaded and not stopped:
            from agent_knowledge.identity.document_access import sidecar_key

            present = {source.source_key for source in folder.files}
            present |= {sidecar_key(source.source_key) for source in folder.files if source.sidecar is not None}
            try:
                for source_key in sorted(set(remote) - present):
                    if not (root / source_key).exists():  # only files that are gone, not ones left out
                        session.bucket.delete(session.kb_id, source_key)
                        pruned.add(source_key)
            except KnowledgeUnavailable:
                if not local_stack_stopped():
                    raise
                stopped = True
            summary.deleted = len(pruned)
    finally:
        bar.close()
    upload_seconds = time.perf_counter() - clock
    if not_uploaded and not stopped:
        note(
            f"not uploaded within --timeout {arguments.timeout:g} s: {len(not_uploaded)} of {len(folder.files)} "
            "files (listed in not_uploaded; run the same command again to send them)"
        )
    result: dict[str, Any] = {
        **summary.counts(),
        "ignored": [ignored.as_dict() for ignored in folder.ignored],
        "not_uploaded": not_uploaded,
    }
    status = 1 if summary.failed or not_uploaded else 0
    confirmed = False  # whether --wait saw every change land (or fail)
    if arguments.wait and not stopped:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            waited = _before(deadline, lambda: _wait(arguments, session, uploaded, pruned, started, remaining))
            ready, pending = len(waited.ready), waited.pending
            for source_key, entry in sorted(waited.failed.items()):
                summary.fail(source_key, entry.reason or "failed")
            confirmed = True
        except _Late:
            ready, pending = 0, sorted([*uploaded, *pruned])
        except KnowledgeUnavailable:
            if not local_stack_stopped():
                raise
            ready, pending, stopped = 0, sorted([*uploaded, *pruned]), True
        result.update(failed=summary.failed, failures=summary.failures, ready=ready, pending=pending)
        status = 1 if summary.failed or pending or not_uploaded else 0
    elif arguments.wait:
        result.update(ready=0, pending=sorted([*uploaded, *pruned]))
    from agent_knowledge.ingest.status import kb_status
    from agent_knowledge.settings import sizing_settings

    generation = None
    if not stopped:
        try:
            generation = kb_status(session.repositories, session.kb_id, sizing=sizing_settings()).index_generation
        except KnowledgeUnavailable:
            if not local_stack_stopped():
                raise
            stopped = True
    result["index_generation"] = generation
    result["seconds"] = {"upload": round(upload_seconds, 2), "total": round(time.perf_counter() - clock, 2)}
    if stopped:
        # Everything this run uploaded or deleted went with the stack, unless --wait saw it land first.
        result["not_confirmed"] = [] if confirmed else sorted([*uploaded, *pruned])
        result["stack_stopped"] = True
    print_json(result)
    if stopped:
        what = f"{len(result['not_uploaded'])} files not uploaded, {len(result['not_confirmed'])} not confirmed"
        raise LocalStackStopped(f" ({what}: listed in not_uploaded and not_confirmed)")
    return status


def _store_folder_directly(arguments: argparse.Namespace, session: _Session, root: Path) -> int:
    from agent_knowledge_dev.bulk import discover, ingest_directory

    if arguments.prune or arguments.charset:
        option = "--prune" if arguments.prune else "--charset"
        raise CliError(f"{option} with --dir needs the stack's sources bucket (deploy the current template)")
    started = time.perf_counter()
    ignored = [ignored.as_dict() for ignored in discover(root).ignored]
    stored = ingest_directory(session.repositories, session.kb_id, root, workers=arguments.workers)
    for failure in stored.failures:
        note(f"failed: {failure['source_key']}: {failure['error']}")
    result = {
        **stored.counts(),
        "ignored": ignored,
        "index_generation": stored.index_generation,
        "seconds": {
            "upload": round(time.perf_counter() - started, 2),
            "total": round(time.perf_counter() - started, 2),
        },
    }
    if arguments.wait:
        result.update(ready=stored.created + stored.updated + stored.skipped, pending=[])
    print_json(result)
    return 1 if stored.failed else 0


def _upload_all(
    session: _Session,
    files: list[Any],
    remote: dict[str, Any],
    documents: dict[str, str],
    summary: FolderOutcomes,
    bar: Any,
    workers: int,
    deadline: float,
    charset: str | None = None,
) -> tuple[dict[str, str | None], list[str], bool]:
    """Upload the files that changed, counting each file's outcome in `summary`, until `deadline`
    (time.monotonic) or until the local stack stops; returns the revision of each file uploaded,
    by source key, the source keys of the files not done by then, and whether the local stack
    stopped. `charset` (`--charset`): the encoding of the plain text and Markdown files."""
    from agent_knowledge.errors import KnowledgeUnavailable, NotUtf8
    from agent_knowledge_dev.bulk import each_file, read_sidecar, read_source
    from agent_knowledge_dev.sources import content_etag

    def upload(source: Any) -> tuple[str, str | None]:
        from agent_knowledge.identity.document_access import sidecar_key

        content = read_source(source.path)
        try:
            text, declared = _declared(content, source.media_type, charset)
            prepared = _prepare(text, source.media_type, source.source_key)
        except NotUtf8 as exc:
            hint = CHARSET_HINT if source.media_type in CHARSET_MEDIA_TYPES else ""
            raise NotUtf8(exc.message + hint) from None
        sidecar = read_sidecar(source)  # checked before anything of the file is uploaded
        access_changed = False
        if sidecar is not None:
            stored = remote.get(sidecar_key(source.source_key))
            if stored is None or stored.etag != content_etag(sidecar):
                session.bucket.put(session.kb_id, sidecar_key(source.source_key), sidecar, "application/json")
                access_changed = True
        current = remote.get(source.source_key)
        healthy = documents.get(source.source_key) in {"ready", "pending"}
        if current is not None and current.etag == content_etag(content) and healthy and not access_changed:
            return "skipped", None
        try:
            session.bucket.put(session.kb_id, source.source_key, content, source.media_type, charset=declared)
        except KnowledgeUnavailable:
            if local_stack_stopped():  # not this file's failure: ends the run (each_file raises it here)
                raise LocalStackStopped from None
            raise
        return ("created" if current is None else "updated"), prepared.revision

    uploaded: dict[str, str | None] = {}
    finished: set[str] = set()
    stopped = False
    try:
        for source, done, error in each_file(files, upload, workers, deadline):
            finished.add(source.source_key)
            if error is not None:
                summary.fail(source.source_key, error)
                bar.message(f"failed: {source.source_key}: {error}")
            elif done is not None:
                outcome, revision = done
                summary.count(outcome)
                if outcome != "skipped":
                    uploaded[source.source_key] = revision
            bar.advance(source.source_key)
    except LocalStackStopped:
        stopped = True
    return uploaded, sorted(source.source_key for source in files if source.source_key not in finished), stopped


# --- delete, list -------------------------------------------------------------------------------


def _delete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument("source_key", metavar="SOURCE_KEY")
    _wait_arguments(parser)
    add_target_arguments(parser)


def _delete(arguments: argparse.Namespace) -> int:
    _check_wait(arguments)
    session = _open(arguments, writing=False)
    source_key: str = arguments.source_key
    started = time.time()
    result: dict[str, Any] = {"kb_id": session.kb_id, "source_key": source_key, "deleted": True}
    if session.bucket is not None and session.bucket.head(session.kb_id, source_key) is not None:
        session.bucket.delete(session.kb_id, source_key)
        result["object"] = session.bucket.uri(session.kb_id, source_key)
    elif _listing_of(session, source_key) is not None:
        _delete_stored_document(session, source_key)
        result["object"] = None  # stored before the sources bucket (e.g. the demo seed): removed directly
    else:
        raise CliError(f"no document {source_key!r} in knowledge base {session.kb_id!r}")
    status = 0
    if arguments.wait:
        waited = _wait(arguments, session, {}, {source_key}, started)
        result["removed_from_search"] = not waited.pending
        status = 1 if waited.pending else 0
    print_json(result)
    return status


def _delete_stored_document(session: _Session, source_key: str) -> None:
    from agent_knowledge.indexer.update import update_kb_index
    from agent_knowledge.ingest.ingestor import Ingestor

    deleted = Ingestor(session.repositories).delete(session.kb_id, source_key)
    # Their chunks leave the index now.
    update_kb_index(session.repositories, session.kb_id, deleted, vector_space=process_vector_space())


def _kb_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    add_target_arguments(parser)


def _list(arguments: argparse.Namespace) -> int:
    from agent_knowledge.ingest.status import document_listing

    # Every object of the bucket (not_ingested ones too, with the reason), not only the records.
    listing = _pipeline_view(arguments, document_listing)
    # Each document's access list as its record holds it (null: none, the KB's default_access).
    stored = connect(arguments).documents.list(arguments.kb_id, with_chunks=False)
    # A long source's sections share its key (their titles are listed under it, `sections`).
    records = {record.source_key: record for record in stored if record.section_of is None}
    shown = []
    for entry in listing:
        record = records.get(entry.source_key)
        access = record.access if record is not None and record.status != "deleted" else None
        shown.append({**entry.model_dump(mode="json"), "access": access.model_dump(mode="json") if access else None})
    print_json(shown)
    return 0


def _access_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument("source_key", metavar="SOURCE_KEY")
    add_target_arguments(parser)


def _access(arguments: argparse.Namespace) -> int:
    """Who may see the document: its access list (its sidecar's, as last ingested) and the KB's default."""
    from agent_knowledge.identity.document_access import sidecar_key
    from agent_knowledge.repositories.documents import document_id
    from agent_knowledge_dev.admin import require_knowledge_base

    repositories = connect(arguments)
    kb = require_knowledge_base(repositories, arguments.kb_id)
    record = repositories.documents.get(kb.kb_id, document_id(arguments.source_key))
    if record is None or record.status == "deleted":
        raise CliError(f"no document {arguments.source_key!r} in knowledge base {kb.kb_id!r}")
    print_json(
        {
            "kb_id": kb.kb_id,
            "source_key": record.source_key,
            "status": record.status,
            "reason": record.error_reason,
            "sidecar": sidecar_key(record.source_key) if record.access_etag else None,
            "access": record.access.model_dump(mode="json") if record.access else None,
            "default_access": kb.default_access,
            "follows": "access" if record.access else "default_access",
        }
    )
    return 0


def _pipeline_view(arguments: argparse.Namespace, view: Callable[..., _T], **extra: Any) -> _T:
    """`view` (`document_listing` or `kb_status`) of the KB named in `arguments`: its records, the
    sources bucket's objects and the dead-letter queues' messages; `extra`: the view's own arguments."""
    from agent_knowledge_dev.admin import require_knowledge_base
    from agent_knowledge_dev.pipeline_state import dead_letters, source_objects

    repositories = connect(arguments)
    require_knowledge_base(repositories, arguments.kb_id)
    return view(
        repositories,
        arguments.kb_id,
        sources=source_objects(arguments),
        dead_letters=dead_letters(arguments, arguments.kb_id),
        **extra,
    )


# --- kb list, status, reindex --------------------------------------------------------------------


def _kb_list(arguments: argparse.Namespace) -> int:
    repositories = connect(arguments)
    print_json([record.model_dump(mode="json") for record in repositories.knowledge_bases.list()])
    return 0


def _kb_status(arguments: argparse.Namespace) -> int:
    from agent_knowledge.ingest.status import kb_status
    from agent_knowledge.settings import sizing_settings

    # The storage of this process's environment: a deployed stack's is not read back.
    print_json(_pipeline_view(arguments, kb_status, sizing=sizing_settings()).model_dump(mode="json"))
    return 0


def _kb_reindex(arguments: argparse.Namespace) -> int:
    from agent_knowledge.indexer.rebuild import rebuild_kb_index
    from agent_knowledge_dev.admin import require_knowledge_base

    repositories = connect(arguments)
    require_knowledge_base(repositories, arguments.kb_id)
    started = time.perf_counter()
    generation = rebuild_kb_index(repositories, arguments.kb_id, vector_space=process_vector_space())
    from agent_knowledge.indexer.vector_backlog import request_embedding_after_rebuild
    from agent_knowledge.settings import get_settings

    request_embedding_after_rebuild(arguments.kb_id, generation, get_settings())  # the indexer embeds it again
    print_json(
        {"kb_id": arguments.kb_id, "index_generation": generation, "seconds": round(time.perf_counter() - started, 2)}
    )
    return 0


def _target_only(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)


COMMAND = Command(
    "doc",
    "documents of a knowledge base",
    subcommands=[
        Command("put", "upload one document (--file) or a folder (--dir) to the sources bucket", _put_arguments, _put),
        Command("delete", "delete a document (its object in the sources bucket)", _delete_arguments, _delete),
        Command(
            "list",
            "every object of the KB: status ready/pending/failed/not_ingested with the reason",
            _kb_arguments,
            _list,
        ),
        Command(
            "access",
            "who may see a document: its access list (sidecar) and the KB's default",
            _access_command_arguments,
            _access,
        ),
    ],
)

KB_COMMANDS = [
    Command("list", "every knowledge base", _target_only, _kb_list),
    Command(
        "status",
        "objects ready/pending/failed/not_ingested, dead-lettered messages, index generation, last sync",
        _kb_arguments,
        _kb_status,
    ),
    Command("reindex", "rebuild the KB's search index from its documents", _kb_arguments, _kb_reindex),
    sync.COMMAND,  # reconcile the KB with the sources bucket now
    evaluate.COMMAND,  # kb eval: MRR@3, recall@3, hit@1 of known questions
]
