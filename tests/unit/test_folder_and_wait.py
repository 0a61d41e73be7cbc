"""The CLI's folder walk (symbolic links never followed) and the `--wait` loop, without a stack."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

import pytest

from agent_knowledge.errors import InvalidRequest, KnowledgeUnavailable
from agent_knowledge.ingest.status import DocumentListing
from agent_knowledge_dev import waiting
from agent_knowledge_dev.bulk import FolderOutcomes, SourceFile, UnreadableSource, discover, each_file, read_source
from agent_knowledge_dev.sources import SourceObject
from tests.support.folders import write_folder


def test_discover_skips_and_reports_links_to_files_and_folders_outside(tmp_path: Path) -> None:
    """Issue 17 finding 1 (the old walk returned `passwd.md`, the link to a file outside)."""
    outside = write_folder(tmp_path / "outside", {"secret.md": "secret"})
    root = tmp_path / "root"
    write_folder(
        root,
        {"sub/a.md": "# A", "b.txt": "B", ".hidden.md": "hidden", "image.png": b"\x89PNG"},
        links={
            "passwd.md": outside / "secret.md",
            "inside-link.md": root / "b.txt",  # even a link inside the folder: never followed
            "elsewhere": outside,
        },
    )
    folder = discover(root)
    assert [(f.source_key, f.media_type) for f in folder.files] == [
        ("b.txt", "text/plain"),
        ("sub/a.md", "text/markdown"),
    ]
    assert [(ignored.path, ignored.reason) for ignored in folder.ignored] == [
        (".hidden.md", "hidden"),
        ("elsewhere", "symlink"),
        ("image.png", "unsupported_type"),
        ("inside-link.md", "symlink"),
        ("passwd.md", "symlink"),
    ]


def test_discover_reports_every_entry_it_does_not_take_with_one_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: regular `.gz` files were dropped without a word, hidden folders were not reported
    and too-large files only failed when read."""
    from agent_knowledge_dev import bulk

    root = write_folder(
        tmp_path / "docs",
        {
            "guide.md": "# Guide",
            "notes.markdown": "# Notes",
            "page.htm": "<title>Page</title>",
            "changelog.gz": b"\x1f\x8b",
            "README": "no extension",
            ".git/config": "[core]",
            "big.txt": "x" * 200,
        },
        links={"archive.gz": tmp_path / "docs" / "changelog.gz"},
    )
    os.mkfifo(root / "pipe.txt")
    monkeypatch.setattr(bulk, "MAX_FILE_BYTES", 100)
    folder = discover(root)
    assert [f.source_key for f in folder.files] == ["guide.md", "notes.markdown", "page.htm"]
    assert [(ignored.path, ignored.reason) for ignored in folder.ignored] == [
        (".git", "hidden"),  # once, not walked
        ("README", "unsupported_type"),
        ("archive.gz", "symlink"),
        ("big.txt", "too_large"),
        ("changelog.gz", "unsupported_type"),
        ("pipe.txt", "not_regular_file"),
    ]
    assert {ignored.reason for ignored in folder.ignored} <= set(bulk.IGNORED_REASONS)


def test_read_source_refuses_a_file_swapped_for_a_link_after_the_walk(tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("secret", encoding="utf-8")
    target = tmp_path / "doc.md"
    target.write_text("fine", encoding="utf-8")
    (source,) = [f for f in discover(tmp_path).files if f.source_key == "doc.md"]
    target.unlink()
    target.symlink_to(tmp_path / "secret.md")
    with pytest.raises(UnreadableSource, match="symbolic link"):
        read_source(source.path)


def test_read_source_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(UnreadableSource, match="not a regular file"):
        read_source(tmp_path / "pipe.md")


def _entry(key: str, status: str, revision: str | None, updated_at: str = "2026-01-01T00:00:10Z") -> DocumentListing:
    reason = "bad" if status == "failed" else None
    return DocumentListing(
        source_key=key, title=key, revision=revision, status=status, reason=reason, updated_at=updated_at
    )


class _Listings:
    """Successive listings, one per poll (the last repeats)."""

    def __init__(self, *polls: list[DocumentListing]) -> None:
        self.polls = list(polls)
        self.calls = 0

    def __call__(self, repositories: object, kb_id: str) -> list[DocumentListing]:
        self.calls += 1
        return self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]


def _wait(monkeypatch: pytest.MonkeyPatch, listings: _Listings, **kwargs: object) -> waiting.WaitResult:
    monkeypatch.setattr(waiting, "document_listing", listings)
    now = [1_767_225_600.0]  # 2026-01-01T00:00:00Z

    def sleep(seconds: float) -> None:
        now[0] += seconds

    defaults: dict[str, object] = {"puts": {}, "deletes": set(), "started": now[0], "timeout": 30.0}
    return waiting.wait_for_changes(None, "kb", clock=lambda: now[0], sleep=sleep, **{**defaults, **kwargs})  # type: ignore[arg-type]


def test_wait_ends_when_the_new_revision_is_ready_and_deletes_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    listings = _Listings(
        [_entry("a.md", "ready", "old"), _entry("gone.md", "ready", "r")],
        [_entry("a.md", "pending", "new"), _entry("gone.md", "pending", "r")],
        [_entry("a.md", "ready", "new")],
    )
    result = _wait(monkeypatch, listings, puts={"a.md": "new"}, deletes={"gone.md"})
    assert list(result.ready) == ["a.md"] and result.removed == ["gone.md"] and result.pending == []
    assert listings.calls == 3


def test_wait_reports_a_failure_of_this_upload_but_not_an_older_one(monkeypatch: pytest.MonkeyPatch) -> None:
    older = _entry("a.md", "failed", None, updated_at="2025-12-31T23:00:00Z")
    listings = _Listings([older], [_entry("a.md", "failed", None, updated_at="2026-01-01T00:00:05Z")])
    result = _wait(monkeypatch, listings, puts={"a.md": "new"})
    assert list(result.failed) == ["a.md"] and result.failed["a.md"].reason == "bad"
    assert listings.calls == 2


def test_wait_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    listings = _Listings([_entry("a.md", "pending", "new")])
    result = _wait(monkeypatch, listings, puts={"a.md": "new", "b.md": "x"}, timeout=5.0)
    assert result.pending == ["a.md", "b.md"] and not result.ready
    assert 5 <= listings.calls <= 12  # backs off to one poll a second


def test_folder_outcomes_count_each_file_and_keep_failures_in_source_key_order() -> None:
    outcomes = FolderOutcomes("handbook", files=5)
    for outcome in ("created", "updated", "created", "skipped"):
        outcomes.count(outcome)
    outcomes.fail("z.md", "too large")
    outcomes.fail("a.md", "not UTF-8")
    assert outcomes.counts() == {
        "kb_id": "handbook",
        "files": 5,
        "created": 2,
        "updated": 1,
        "skipped": 1,
        "deleted": 0,
        "failed": 2,
        "failures": [{"source_key": "a.md", "error": "not UTF-8"}, {"source_key": "z.md", "error": "too large"}],
    }
    with pytest.raises(ValueError, match="'failed'"):
        outcomes.count("failed")  # a failure has a reason: fail()


def test_each_file_reports_what_could_not_be_read_or_stored_and_goes_on(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "docs", {"good.md": "# Good", "refused.md": "# Refused"})
    os.mkfifo(root / "pipe.md")  # a file replaced by a FIFO after the walk (the walk leaves FIFOs out)
    sources = [*discover(root).files, SourceFile(root / "pipe.md", "pipe.md", "text/markdown")]

    def store(source: SourceFile) -> int:
        if source.source_key == "refused.md":
            raise InvalidRequest("refused by the store")
        return len(read_source(source.path))

    finished = {source.source_key: (result, error) for source, result, error in each_file(sources, store, workers=2)}
    assert finished == {
        "good.md": (6, None),
        "pipe.md": (None, "not a regular file"),
        "refused.md": (None, "refused by the store"),
    }


def test_doc_put_help_names_every_extension_the_ingest_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24: `--help` said .md/.txt/.html while .markdown and .htm were taken too."""
    from agent_knowledge.ingest.source_files import MEDIA_TYPES_BY_SUFFIX
    from agent_knowledge_dev.cli import main

    with pytest.raises(SystemExit):
        main(["doc", "put", "--help"])
    words = capsys.readouterr().out.translate(str.maketrans(",()", "   ")).split()
    assert [suffix for suffix in MEDIA_TYPES_BY_SUFFIX if words.count(suffix) < 2] == []  # --file and --dir


def test_a_command_builds_only_its_own_arguments() -> None:
    """Start-up: building every command's arguments imported the MCP host package (and what it
    imports) for `kb list` too."""
    import subprocess
    import sys

    code = (
        "import sys; from agent_knowledge_dev.cli import build_parser; "
        "build_parser(argv=['kb', 'list']).parse_args(['kb', 'list']); "
        "print(sorted(m for m in ('agent_knowledge_host', 'mcp', 'moto', 'tantivy', 'yaml') if m in sys.modules))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


def test_the_banner_names_the_cli_the_way_it_can_be_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: the banner printed `agent-knowledge …` though only `.venv/bin/agent-knowledge` existed."""
    import sys

    from agent_knowledge_dev.server import cli_command

    script = tmp_path / "project" / ".venv" / "bin" / "agent-knowledge"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    assert cli_command(str(script), cwd=tmp_path / "project") == ".venv/bin/agent-knowledge"
    assert cli_command(str(script), cwd=tmp_path / "other") == str(script)  # not below: the absolute path
    monkeypatch.setenv("PATH", str(script.parent))  # activated virtualenv: the bare name works
    assert cli_command(str(script), cwd=tmp_path) == "agent-knowledge"
    python = os.path.abspath(sys.executable)  # run as a module: that interpreter, by its path
    assert cli_command("/src/agent_knowledge_dev/cli.py", cwd=tmp_path) == f"{python} -m agent_knowledge_dev.cli"


def test_the_template_reads_the_same_with_libyaml_as_with_pure_python_yaml() -> None:
    """Issue 24: `doc list` and `kb status` read template.yaml (the queue names); the pure-Python
    parser took seconds of their start-up. libyaml's must give exactly the same document."""
    import yaml

    from agent_knowledge_dev import template

    class PurePython(yaml.SafeLoader):
        pass

    PurePython.add_multi_constructor("!", template._construct_tag)
    with template.TEMPLATE_PATH.open(encoding="utf-8") as handle:
        expected = yaml.load(handle, Loader=PurePython)  # noqa: S506 - SafeLoader subclass
    assert template.load_template() == expected
    assert expected["Resources"]["SourceQueue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["SourceDeadLetterQueue", "Arn"]
    }


class _StorageGone:
    """Repositories and bucket whose every call fails as a stopped local stack's do."""

    def __init__(self) -> None:
        self.calls = 0
        self.documents = self

    def get(self, kb_id: str, doc_id: str) -> None:
        self.calls += 1
        raise KnowledgeUnavailable.of("documents storage")


def test_waiting_for_a_version_ends_at_once_when_the_stack_stopped() -> None:
    uploaded = SourceObject("a.md", "etag", version_id="v1")
    gone = _StorageGone()
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    wait = functools.partial(
        waiting.wait_for_version, gone, None, "kb", uploaded, since=0.0, deadline=30.0, clock=lambda: now[0]
    )
    # A stack that is up but failing: asked again at every poll until the deadline, then pending.
    assert wait(sleep=sleep).state == "pending" and gone.calls > 10
    gone.calls, now[0] = 0, 0.0
    # A stopped stack: the failure is raised at the first poll, nothing is waited for.
    with pytest.raises(KnowledgeUnavailable):
        wait(sleep=sleep, stopped=lambda: True)
    assert gone.calls == 1 and now[0] == 0.0


def test_a_command_on_a_deployed_stack_never_takes_its_failures_for_a_stopped_serve() -> None:
    from agent_knowledge_dev import target

    target._connected_serve.clear()  # no local serve connected (--aws, or nothing yet)
    assert target.local_stack_stopped() is False


def test_a_local_stack_whose_serve_is_gone_has_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_knowledge_dev import target
    from agent_knowledge_dev.localstate import STATE_DIR_ENV, ServeLock, ServerInfo

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    with socket.create_server(("127.0.0.1", 0)) as listening:
        endpoint = f"http://127.0.0.1:{listening.getsockname()[1]}"
        monkeypatch.setitem(target._connected_serve, "moto_endpoint", endpoint)
        lock = ServeLock()
        lock.acquire()
        lock.publish(ServerInfo(os.getpid(), "http://127.0.0.1:1", endpoint, {}, 0.0))
        assert target.local_stack_stopped() is False  # held lock, storage answering
        lock.publish(ServerInfo(os.getpid(), "http://127.0.0.1:1", "http://127.0.0.1:9", {}, 0.0))
        assert target.local_stack_stopped() is True  # another serve: a new, empty stack
        lock.publish(ServerInfo(os.getpid(), "http://127.0.0.1:1", endpoint, {}, 0.0))
        listening.close()
        assert target.local_stack_stopped() is True  # storage stopped before the lock is released
        lock.release()
        assert target.local_stack_stopped() is True  # no serve at all
