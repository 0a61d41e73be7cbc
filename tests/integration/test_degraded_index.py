"""Issue 23, finding 10: a degraded index is reported, never served as "ok".

- a KB whose newest generation cannot be loaded is served from an older kept one: its hits are
  still validated and served, but search says `partial` (what was published since is missing);
- no response carries parser or exception text;
- a generation that does not fit the container's ephemeral storage (ENOSPC while writing, or
  refused up front by the size guard) fails that source with a fixed message, frees its partial
  files and backs off like any load failure (no download on every search).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
from collections import namedtuple

import pytest

from agent_knowledge.index_format import local_files as local_files_module
from agent_knowledge.index_format.local_files import (
    DOES_NOT_FIT,
    IndexDoesNotFit,
    LocalFiles,
    LocalStorageFailed,
    storage_failure,
)
from agent_knowledge.index_format.stored_generation import read_manifest
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.knowledge.hints import search_status
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.retrieval import reader_cache
from agent_knowledge.retrieval.query import RetrievalResult, retrieve
from agent_knowledge.retrieval.reader_cache import IndexCache, reset_local_state
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.demo import DEMO_KB
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.retrieval import scope_of

PARSER_TEXT = ("line 1 column", "Expecting value", "char 0", "JSONDecodeError", "Traceback")


@pytest.fixture
def ingestor(stack) -> Ingestor:
    for kb_id in ("kb", "other"):
        create_knowledge_base(stack.repositories, kb_id)
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    published(stack.repositories, ingestor.put("kb", "cats.md", "Cats", "Cats sleep most of the day."))  # generation 1
    published(stack.repositories, ingestor.put("other", "birds.md", "Birds", "Birds watch the cats."))
    return ingestor


@pytest.fixture
def cache(tmp_path):
    """A container of its own: its own cache and /tmp store (the writers' files are elsewhere)."""
    cache = IndexCache(LocalFiles(str(tmp_path / "store")))
    yield cache
    cache.clear()
    cache.files.clear()


def run_search(stack, cache: IndexCache, kb_ids: list[str], query: str) -> RetrievalResult:
    scope = scope_of(stack, kb_ids)
    deps = stack.dependencies()  # the stack's embedder and reranker; the cache is this test's container's
    return retrieve(
        stack.repositories.bodies, stack.repositories.documents, scope, query, 3,
        cache=cache, embedder=deps.embedder(), reranker=deps.reranker(),
    )  # fmt: skip


def titles(result: RetrievalResult) -> list[str]:
    return [found.document.title for found in result.documents]


def newest_key(stack, kb_id: str = "kb") -> str:
    return stack.repositories.knowledge_bases.get(kb_id).index_manifests[0]


def break_manifest(stack, key: str, how: str) -> None:
    bodies = stack.repositories.bodies
    if how == "missing":
        bodies.delete(key)
    elif how == "not json":
        bodies.put(key, b"not json at all", "0" * 64)
    else:  # a manifest of another tantivy version
        raw = json.loads(bodies.read(key))
        bodies.put(key, json.dumps({**raw, "tantivy_version": "0.0.1"}).encode(), "0" * 64)


def local_files_left(cache: IndexCache) -> list[str]:
    return [name for _, _, names in os.walk(cache.files.root) for name in names]


class Downloads:
    """Counts the index files the cache fetches (each one S3 GET)."""

    def __init__(self, stack, monkeypatch) -> None:
        self.keys: list[str] = []
        bodies = stack.repositories.bodies
        original = bodies.download

        def counting(key, target):
            self.keys.append(key)
            return original(key, target)

        monkeypatch.setattr(bodies, "download", counting)


# -- an older generation served: partial, with its validated hits ------------------------------


@pytest.mark.parametrize("how", ["missing", "not json", "other tantivy version"])
def test_an_older_generation_served_in_place_of_the_newest_is_partial(stack, ingestor, cache, how):
    published(stack.repositories, ingestor.put("kb", "dogs.md", "Dogs", "Dogs chase cats."))  # generation 2
    assert run_search(stack, cache, ["kb"], "cats").degraded_kb_ids == []
    cache.clear()
    cache.files.clear()
    break_manifest(stack, newest_key(stack), how)

    result = run_search(stack, cache, ["kb"], "cats")
    assert titles(result) == ["Cats"]  # generation 1's hit, validated against the current record
    assert result.answered_kb_ids == ["kb"] and result.failed_kb_ids == []
    assert result.degraded_kb_ids == ["kb"] and search_status(result) == "partial"
    # With another source answering normally the answer is still partial.
    both = run_search(stack, cache, ["kb", "other"], "cats")
    assert set(titles(both)) == {"Cats", "Birds"} and search_status(both) == "partial"


def test_a_newest_generation_that_failed_is_not_retried_on_every_search(stack, ingestor, cache, monkeypatch):
    published(stack.repositories, ingestor.put("kb", "dogs.md", "Dogs", "Dogs chase cats."))
    newest = newest_key(stack)
    original_manifest = stack.repositories.bodies.read(newest)
    break_manifest(stack, newest, "not json")
    assert search_status(run_search(stack, cache, ["kb"], "cats")) == "partial"

    reads: list[str] = []
    bodies = stack.repositories.bodies
    original_read = bodies.read
    monkeypatch.setattr(bodies, "read", lambda key: reads.append(key) or original_read(key))
    result = run_search(stack, cache, ["kb"], "cats")  # within the back-off: still the old generation
    assert reads == [] and titles(result) == ["Cats"] and search_status(result) == "partial"

    bodies.put(newest, original_manifest, "0" * 64)  # repaired
    monkeypatch.setattr(reader_cache, "RETRY_SECONDS", 0.0)
    result = run_search(stack, cache, ["kb"], "cats")
    assert reads == [newest] and set(titles(result)) == {"Cats", "Dogs"} and search_status(result) == "ok"


def test_the_search_endpoint_says_partial_and_carries_no_parser_text(call, demo, caplog):
    stack = demo
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    published(
        demo.repositories, ingestor.put(DEMO_KB, "vacation.md", "Vacation policy", "Vacation days accrue monthly.")
    )  # generation 1
    published(
        demo.repositories,
        ingestor.put(DEMO_KB, "zeppelin.md", "Zeppelin vacations", "Vacation trips by zeppelin leave on Fridays."),
    )
    event = with_changes(load_event("search-english-query"), body={"query": "vacation zeppelin"})
    before = call("search", event).json()
    assert before["status"] == "ok" and "Zeppelin vacations" in [hint["title"] for hint in before["hints"]]

    break_manifest(stack, newest_key(stack, DEMO_KB), "not json")
    reset_local_state()
    with caplog.at_level(logging.WARNING):
        result = call("search", event)
    body = result.json()
    assert result.status == 200 and body["status"] == "partial"
    found = [hint["title"] for hint in body["hints"]]
    assert found == ["Vacation policy"]  # the older generation's hits, still served
    assert not [text for text in PARSER_TEXT if text in result.body]
    # What failed goes to the logs.
    assert "index manifest is not JSON" in [getattr(record, "error", None) for record in caplog.records]

    # No generation loads at all: unavailable, and still no parser text.
    for key in stack.repositories.knowledge_bases.get(DEMO_KB).index_manifests:
        break_manifest(stack, key, "not json")
    reset_local_state()
    result = call("search", event)
    assert result.status == 200 and result.json()["status"] == "unavailable" and result.json()["hints"] == []
    assert not [text for text in PARSER_TEXT if text in result.body]


def test_search_status_counts_a_degraded_source_as_partial():
    def result(answered, failed, degraded):
        return RetrievalResult([], answered, failed, 0, degraded)

    assert search_status(result(["a"], [], [])) == "ok"
    assert search_status(result(["a"], [], ["a"])) == "partial"
    assert search_status(result(["a"], ["b"], ["a"])) == "partial"
    assert search_status(result([], ["a"], [])) == "unavailable"


# -- ephemeral storage -------------------------------------------------------------------------


def test_a_full_disk_fails_the_source_frees_its_files_and_backs_off(stack, ingestor, cache, monkeypatch, caplog):
    downloads = Downloads(stack, monkeypatch)
    bodies = stack.repositories.bodies
    counting = bodies.download
    lock = threading.Lock()
    of_kb: list[str] = []

    def disk_full_at_the_second_file(key, target):
        with lock:
            of_kb.extend([key] if key.startswith("indexes/kb/") else [])
            second = key.startswith("indexes/kb/") and len(of_kb) == 2
        if second:
            downloads.keys.append(key)
            target.write(b"what fitted")  # stays in the partial file
            raise OSError(errno.ENOSPC, "No space left on device")
        return counting(key, target)

    monkeypatch.setattr(bodies, "download", disk_full_at_the_second_file)
    with caplog.at_level(logging.WARNING):
        result = run_search(stack, cache, ["kb", "other"], "cats")
    assert result.failed_kb_ids == ["kb"] and result.answered_kb_ids == ["other"]
    assert titles(result) == ["Birds"] and search_status(result) == "partial"
    assert DOES_NOT_FIT in caplog.text
    # Neither the partial file nor the files completed beside it are left: only the other KB's files
    # (its chunk texts are read by ranges, never downloaded: index_format/chunk_text).
    other = read_manifest(stack.repositories.bodies, "other", newest_key(stack, "other"))
    downloaded = {e.sha256 for e in other.files.values() if e.role != "text"}
    assert set(os.listdir(os.path.join(cache.files.root, "objects"))) == downloaded
    assert not [name for name in local_files_left(cache) if name.endswith(".part")]
    attempted = len(downloads.keys)
    assert len([key for key in downloads.keys if key.startswith("indexes/kb/")]) >= 2

    # Within the back-off nothing is downloaded again; the only source failing is `unavailable`.
    result = run_search(stack, cache, ["kb"], "cats")
    assert result.failed_kb_ids == ["kb"] and search_status(result) == "unavailable"
    assert len(downloads.keys) == attempted

    # Room again, and the back-off over: the next search loads the index.
    monkeypatch.setattr(bodies, "download", counting)
    monkeypatch.setattr(reader_cache, "RETRY_SECONDS", 0.0)
    result = run_search(stack, cache, ["kb"], "cats")
    assert titles(result) == ["Cats"] and search_status(result) == "ok"


def _free_space(monkeypatch, free: int) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(local_files_module.shutil, "disk_usage", lambda path: usage(10**12, 10**12 - free, free))


def test_the_size_guard_refuses_an_index_larger_than_the_free_space_without_downloading(
    stack, ingestor, cache, monkeypatch, caplog
):
    downloads = Downloads(stack, monkeypatch)
    _free_space(monkeypatch, local_files_module.ROOM_MARGIN_BYTES)  # nothing left beyond the margin
    with caplog.at_level(logging.WARNING):
        result = run_search(stack, cache, ["kb", "other"], "cats")
    assert result.failed_kb_ids == ["kb", "other"] and search_status(result) == "unavailable"
    assert downloads.keys == [] and local_files_left(cache) == []
    assert DOES_NOT_FIT in caplog.text

    _free_space(monkeypatch, 10**11)
    monkeypatch.setattr(reader_cache, "RETRY_SECONDS", 0.0)
    assert search_status(run_search(stack, cache, ["kb"], "cats")) == "ok"


def test_the_size_guard_keeps_serving_the_held_generation_rather_than_dropping_it(stack, ingestor, cache, monkeypatch):
    assert titles(run_search(stack, cache, ["kb"], "cats")) == ["Cats"]  # generation 1 held
    ingestor.put("kb", "dogs.md", "Dogs", "Dogs chase cats.")
    publish_rebuild(
        stack.repositories, "kb", vector_space=process_vector_space()
    )  # generation 2: all new files, which would replace the held ones
    downloads = Downloads(stack, monkeypatch)
    _free_space(monkeypatch, 0)
    result = run_search(stack, cache, ["kb"], "cats")
    assert downloads.keys == [] and titles(result) == ["Cats"]
    assert result.degraded_kb_ids == ["kb"] and search_status(result) == "partial"


def test_os_errors_map_to_fixed_messages():
    full = storage_failure(OSError(errno.ENOSPC, "No space left on device: '/tmp/x'"))
    assert isinstance(full, IndexDoesNotFit) and str(full) == DOES_NOT_FIT
    assert full.context() == {"error_code": "ENOSPC"}
    denied = storage_failure(PermissionError(errno.EACCES, "Permission denied: '/tmp/x'"))
    assert type(denied) is LocalStorageFailed and "/tmp" not in str(denied) and "denied" not in str(denied)


def test_an_indexer_that_cannot_hold_the_index_fails_the_update_clearly_without_downloading_or_rebuilding(
    stack, ingestor, monkeypatch, tmp_path
):
    from agent_knowledge.indexer.update import update_kb_index

    ingestor.put("kb", "dogs.md", "Dogs", "Dogs chase cats.")
    generation = stack.repositories.knowledge_bases.get("kb").generation
    downloads = Downloads(stack, monkeypatch)
    _free_space(monkeypatch, local_files_module.ROOM_MARGIN_BYTES)
    writer_files = LocalFiles(str(tmp_path / "writer"))
    with pytest.raises(IndexDoesNotFit) as failure:
        update_kb_index(
            stack.repositories, "kb", [document_id("dogs.md")], files=writer_files, vector_space=process_vector_space()
        )
    assert str(failure.value) == DOES_NOT_FIT and failure.value.context()["needed_bytes"] > 0
    assert downloads.keys == [] and stack.repositories.knowledge_bases.get("kb").generation == generation


def test_kb_status_shows_the_index_size_and_the_largest_index_the_sizing_serves(stack, ingestor, monkeypatch):
    from agent_knowledge.index_format.sizing import MARGIN_BYTES, MB
    from agent_knowledge.ingest.status import kb_status
    from agent_knowledge.settings import sizing_settings

    newest = read_manifest(stack.repositories.bodies, "kb", newest_key(stack))
    monkeypatch.setenv("SEARCH_EPHEMERAL_STORAGE_MB", "4096")
    monkeypatch.setenv("INDEXER_EPHEMERAL_STORAGE_MB", "2048")
    status = kb_status(stack.repositories, "kb", sizing=sizing_settings())
    # The indexer's rebuild needs two copies: 2,048 MB holds an index of half of it.
    assert status.index_bytes == newest.index_bytes > 0
    assert status.largest_index_bytes == (2048 * MB - MARGIN_BYTES) // 2
    monkeypatch.setenv("INDEXER_EPHEMERAL_STORAGE_MB", "10240")
    assert kb_status(stack.repositories, "kb", sizing=sizing_settings()).largest_index_bytes == 4096 * MB - MARGIN_BYTES
