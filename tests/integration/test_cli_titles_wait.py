"""`doc put --file` against a local stack on a moto server, the pipeline running (issue 23,
findings 7 and 8): titles round-trip exactly through the object metadata, and `--wait` follows the
object version it uploaded — ready, failed, or `superseded` by a newer put or a delete — within a
`--timeout` that bounds the whole command."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agent_knowledge.ingest.content import MAX_TITLE_CHARS, prepare_document
from agent_knowledge.ingest.source_files import TITLE_METADATA, title_from_metadata, title_metadata
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev.sources import SourcesBucket
from tests.integration import test_cli

# The CLI test module's local stack (one per module), its environment reset and its `run`.
running_stack = test_cli.running_stack
_restore_environment = test_cli._restore_environment
run = test_cli.run
_events_lost = test_cli._events_lost
_sources_bucket = test_cli._sources_bucket

# What S3 user metadata (and HTTP) used to mangle, and what must travel unharmed anyway.
TITLES = [
    "  Leading spaces",
    "Trailing spaces   ",
    "\tTabs\tinside and around\t",
    "Control \x01\x07\x1b[31m characters\x7f",
    "Line\nbreak\r\nand carriage return",
    "中文标题：请假政策",
    "Emoji 🦉🐢 and combining e\u0301",
    "=?utf-8?B?SGVsbG8gd29ybGQ=?=",
    "=?UTF-8?Q?=E4=B8=AD?= and %41 percent",
    "🦉" * MAX_TITLE_CHARS,  # the longest title, 4 bytes of UTF-8 each: 1,020 bytes
    "x" * MAX_TITLE_CHARS,
]


def _record(kb_id: str, source_key: str) -> DocumentRecord | None:
    return test_cli._repositories().documents.get(kb_id, document_id(source_key))


def _settled(kb_id: str, source_key: str, timeout: float = 60.0) -> DocumentRecord:
    """The key's record once it is ready or failed (set by the pipeline from the bucket)."""
    deadline = time.monotonic() + timeout
    while True:
        record = _record(kb_id, source_key)
        if record is not None and record.status == "failed":
            return record
        if record is not None and record.status == "ready" and record.index_pending_since is None:
            return record
        assert time.monotonic() < deadline, f"{kb_id}/{source_key} not settled after {timeout} s"
        time.sleep(0.1)


# --- finding 7: titles ------------------------------------------------------------------------------


def test_every_title_survives_the_object_metadata_exactly():
    """Through the moto server's HTTP, as S3 would: blanks at the ends were trimmed, the decoded
    title stripped, and percent-encoding made the longest titles exceed S3's 2 KB of metadata."""
    s3, bucket = aws.client("s3"), _sources_bucket()
    for number, title in enumerate(TITLES):
        metadata = title_metadata(title)
        value = metadata[TITLE_METADATA]
        assert value.isascii() and value == value.strip() and "=?" not in value
        assert len(TITLE_METADATA) + len(value) <= 2048  # S3's limit for all user metadata
        with _events_lost():
            s3.put_object(Bucket=bucket, Key=f"meta/{number}.md", Body=b"# T\n\nText.", Metadata=metadata)
        head = s3.head_object(Bucket=bucket, Key=f"meta/{number}.md")
        assert title_from_metadata(head["Metadata"]) == title, repr(title)


def test_doc_put_wait_with_any_title_lands_with_exactly_that_title(run, tmp_path):
    """The revision `doc put` computes with the title is the one the ingest stores: `--wait`
    returns ready at once, instead of waiting for a revision that never comes."""
    document = tmp_path / "policy.md"
    body = "# Heading in the file\n\nThe wandering albatross glides.\n"
    document.write_text(body, encoding="utf-8")
    run("kb", "create", "titles")
    for number, title in enumerate(TITLES):
        key = f"policies/{number}.md"
        started = time.monotonic()
        result = run(
            "doc", "put", "titles", key, "--file", str(document), "--title", title, "--wait", "--timeout", "20"
        )
        assert result.status == 0, (title, result.stderr)
        assert time.monotonic() - started < 15, repr(title)
        expected = prepare_document(title, body.encode(), "text/markdown", key)
        put = result.json()
        assert put["document"]["status"] == "ready" and put["superseded"] is False
        assert put["document"]["title"] == title and put["document"]["revision"] == expected.revision
        stored = _record("titles", key)
        assert stored is not None and stored.title == title and stored.revision == expected.revision
    # The same file and title again: nothing to upload (the title read back from the object is exact).
    again = run("doc", "put", "titles", "policies/0.md", "--file", str(document), "--title", TITLES[0])
    assert again.status == 0 and again.json()["outcome"] == "skipped"


@pytest.mark.parametrize(
    ("title", "message"),
    [
        ("x" * (MAX_TITLE_CHARS + 1), f"title is longer than {MAX_TITLE_CHARS} characters ({MAX_TITLE_CHARS + 1})"),
        ("🦉" * (MAX_TITLE_CHARS + 1), f"title is longer than {MAX_TITLE_CHARS} characters"),
        (" \t ", "title must not be empty"),
        ("bad \udcff byte", "title is not valid Unicode text"),  # what argv makes of invalid UTF-8
    ],
)
def test_a_title_that_cannot_be_stored_is_refused_up_front(run, tmp_path, title, message):
    document = tmp_path / "leave.md"
    document.write_text("# Leave\n\nTwenty weeks.\n", encoding="utf-8")
    run("kb", "create", "refused")
    result = run("doc", "put", "refused", "leave.md", "--file", str(document), "--title", title)
    assert result.status == 1 and result.stdout == "" and result.stderr.count("\n") == 1
    assert result.stderr.startswith("agent-knowledge: --title cannot be stored (nothing was uploaded): ")
    assert message in result.stderr
    assert "leave.md" not in test_cli._objects("refused")


def test_title_metadata_written_earlier_is_read_and_a_malformed_one_fails_the_document(run):
    """Objects put before the base64url key (or by hand: `aws s3 cp --metadata title=...`) keep
    their percent-encoded `x-amz-meta-title`; a `title-base64url` that is not base64url of UTF-8
    fails the document with the reason (it used to be ignored)."""
    run("kb", "create", "legacy")
    s3, bucket = aws.client("s3"), _sources_bucket()
    s3.put_object(Bucket=bucket, Key="legacy/old.md", Body=b"# File\n\nOld.", Metadata={"title": "Cong%C3%A9 parental"})
    s3.put_object(Bucket=bucket, Key="legacy/bad.md", Body=b"# File\n\nBad.", Metadata={TITLE_METADATA: "not base64!"})
    not_utf8 = {TITLE_METADATA: "_w"}  # base64url of the byte 0xff
    s3.put_object(Bucket=bucket, Key="legacy/binary.md", Body=b"# File\n\nBinary.", Metadata=not_utf8)
    assert _settled("legacy", "old.md").title == "Congé parental"
    for key in ("bad.md", "binary.md"):
        failed = _settled("legacy", key)
        assert failed.status == "failed" and f"x-amz-meta-{TITLE_METADATA}" in (failed.error_reason or "")


# --- finding 8: --wait follows the version it uploaded ---------------------------------------------


class _S3WithAnotherWriter:
    """The CLI's S3 client, with `after_put(s3)` run right after each PutObject it sends (whose
    own event is lost when `lose_event`: the racer's version is then the only one ingested)."""

    def __init__(self, s3: Any, after_put: Callable[[Any], None], lose_event: bool) -> None:
        self._s3, self._after_put, self._lose_event = s3, after_put, lose_event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def put_object(self, **request: Any) -> Any:
        if self._lose_event:
            with _events_lost():
                response = self._s3.put_object(**request)
        else:
            response = self._s3.put_object(**request)
        self._after_put(self._s3)
        return response


def _wrap_sources_client(monkeypatch: pytest.MonkeyPatch, wrap: Callable[[Any], Any]) -> None:
    original = SourcesBucket.__init__

    def init(self: SourcesBucket, s3: Any, bucket: str) -> None:
        original(self, wrap(s3), bucket)

    monkeypatch.setattr(SourcesBucket, "__init__", init)


def test_doc_put_wait_follows_the_version_it_uploaded(run, tmp_path):
    document = tmp_path / "note.md"
    document.write_text("# Note\n\nThe first heron.\n", encoding="utf-8")
    run("kb", "create", "versions")
    assert run("doc", "put", "versions", "note.md", "--file", str(document), "--wait", "--timeout", "30").status == 0
    document.write_text("# Note\n\nThe second heron.\n", encoding="utf-8")
    result = run("doc", "put", "versions", "note.md", "--file", str(document), "--wait", "--timeout", "30")
    assert result.status == 0, result.stderr
    put = result.json()
    head = aws.client("s3").head_object(Bucket=_sources_bucket(), Key="versions/note.md")
    assert put["outcome"] == "updated" and put["version_id"] == head["VersionId"] and put["superseded"] is False
    assert put["document"]["status"] == "ready" and "superseded" not in result.stderr
    stored = _record("versions", "note.md")
    assert stored is not None and stored.source_version_id == head["VersionId"]
    assert put["document"]["revision"] == stored.revision


def test_a_doc_put_wait_replaced_by_a_newer_put_says_superseded_at_once(run, tmp_path, monkeypatch):
    """Two writers of one key: the one whose version was replaced before it landed is told so, with
    exit status 0, instead of waiting until its timeout for a revision that will never be stored."""
    document = tmp_path / "race.md"
    document.write_text("# Race\n\nThe slower writer's text.\n", encoding="utf-8")
    run("kb", "create", "race")
    bucket = _sources_bucket()

    def newer_put(s3: Any) -> None:
        s3.put_object(Bucket=bucket, Key="race/race.md", Body=b"# Race\n\nThe newer writer's text.\n")

    _wrap_sources_client(monkeypatch, lambda s3: _S3WithAnotherWriter(s3, newer_put, lose_event=True))
    started = time.monotonic()
    result = run("doc", "put", "race", "race.md", "--file", str(document), "--wait", "--timeout", "20")
    elapsed = time.monotonic() - started
    assert result.status == 0, result.stderr
    put = result.json()
    assert put["superseded"] is True and elapsed < 10
    current = aws.client("s3").head_object(Bucket=bucket, Key="race/race.md")["VersionId"]
    assert put["version_id"] != current
    assert result.stderr.startswith("superseded: ") and f"replaced by version {current}" in result.stderr
    # The newer version is what the KB gets.
    assert "newer writer" in test_cli._objects("race")["race.md"].decode()
    assert _settled("race", "race.md").source_version_id == current


def test_a_doc_put_wait_whose_key_is_deleted_says_superseded(run, tmp_path, monkeypatch):
    document = tmp_path / "gone.md"
    document.write_text("# Gone\n\nSoon deleted.\n", encoding="utf-8")
    run("kb", "create", "deleted")
    bucket = _sources_bucket()

    def delete(s3: Any) -> None:
        s3.delete_object(Bucket=bucket, Key="deleted/gone.md")

    _wrap_sources_client(monkeypatch, lambda s3: _S3WithAnotherWriter(s3, delete, lose_event=True))
    started = time.monotonic()
    result = run("doc", "put", "deleted", "gone.md", "--file", str(document), "--wait", "--timeout", "20")
    assert result.status == 0, result.stderr
    put = result.json()
    assert put["superseded"] is True and put["document"] is None and time.monotonic() - started < 10
    assert "was deleted before this upload" in result.stderr


class _SlowPutObject:
    """The CLI's S3 client whose PutObject takes `seconds` (then, if not `released`, is sent
    with its event lost: that version is never ingested)."""

    def __init__(self, s3: Any, seconds: float, released: threading.Event) -> None:
        self._s3, self._seconds, self._released = s3, seconds, released

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def put_object(self, **request: Any) -> Any:
        if self._released.wait(self._seconds):
            raise RuntimeError("test over")  # the command gave up on this upload long ago
        with _events_lost():
            return self._s3.put_object(**request)


@pytest.mark.parametrize("wait", [False, True])
def test_the_timeout_bounds_the_whole_single_file_put(run, tmp_path, monkeypatch, wait):
    """`--timeout` used to bound only the wait, which began after the upload: 133 s for 120."""
    document = tmp_path / "slow.md"
    document.write_text("# Slow\n\nA slow upload.\n", encoding="utf-8")
    run("kb", "create", "slow")
    released = threading.Event()
    # Before: the upload, then --timeout more of waiting (8 s with --wait); now 6 s in all.
    upload_seconds, timeout = (6.0, 2.0) if not wait else (2.0, 6.0)
    _wrap_sources_client(monkeypatch, lambda s3: _SlowPutObject(s3, upload_seconds, released))
    arguments = ["doc", "put", "slow", f"slow-{wait}.md", "--file", str(document), "--timeout", str(timeout)]
    try:
        started = time.monotonic()
        result = run(*arguments, *(["--wait"] if wait else []))
        elapsed = time.monotonic() - started
    finally:
        if not wait:
            released.set()
    assert result.status == 1, (result.stdout, result.stderr)
    assert elapsed < timeout + 1.5, elapsed  # slack for a loaded machine, well short of the old sum
    if wait:  # uploaded in time, never ingested (its event was lost): pending when the time is up
        assert result.stdout, result.stderr
        assert result.json()["document"]["status"] == "pending"
        assert f"not searchable after {timeout:g} s" in result.json()["document"]["reason"]
    else:
        assert result.stdout == ""
        assert f"slow-False.md was not uploaded within --timeout {timeout:g} s" in result.stderr


def test_the_timeout_bounds_the_whole_folder_put_and_lists_what_was_not_uploaded(run, tmp_path, monkeypatch):
    """Issue 24: `doc put --dir --timeout 900` ran 1,018 s (the uploads were not counted)."""
    folder = tmp_path / "slow-folder"
    folder.mkdir()
    for name in ("a.md", "b.md", "c.md"):
        (folder / name).write_text(f"# {name}\n\nA slow upload.\n", encoding="utf-8")
    run("kb", "create", "slowdir")
    released = threading.Event()
    _wrap_sources_client(monkeypatch, lambda s3: _SlowPutObject(s3, 6.0, released))
    try:
        started = time.monotonic()
        result = run("doc", "put", "slowdir", "--dir", str(folder), "--workers", "1", "--wait", "--timeout", "2")
        elapsed = time.monotonic() - started
    finally:
        released.set()
    assert result.status == 1, (result.stdout, result.stderr)
    assert elapsed < 2 + 1.5, elapsed  # before: every upload, then --timeout more of waiting
    summary = result.json()
    assert summary["not_uploaded"] == ["a.md", "b.md", "c.md"] and summary["created"] == 0
    assert "not uploaded within --timeout 2 s: 3 of 3 files" in result.stderr


def test_a_folder_put_wait_shows_ready_failed_and_pending_counts_on_stderr(run, tmp_path):
    """Issue 24: progress while waiting, with the counts (the bar on a terminal; forced here)."""
    folder = tmp_path / "progress-folder"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nA heron by the river.\n", encoding="utf-8")
    (folder / "empty.md").write_text("", encoding="utf-8")  # refused before upload: failed, not waited for
    run("kb", "create", "progress")
    result = run("doc", "put", "progress", "--dir", str(folder), "--wait", "--timeout", "60", "--progress")
    assert result.status == 1, result.stderr  # one file failed
    summary = result.json()
    assert (summary["ready"], summary["failed"], summary["pending"]) == (1, 1, [])
    assert "1 ready, 0 failed, 0 pending" in result.stderr
    assert "failed: empty.md: " in result.stderr
