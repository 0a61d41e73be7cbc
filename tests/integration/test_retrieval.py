"""retrieve() against moto: languages, validation of stale hits, scope, failures, limits."""

from __future__ import annotations

import pytest

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.records import SourceConfig
from agent_knowledge.retrieval.reader_cache import index_cache
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import published
from tests.support.retrieval import search, search_titles

DOCS = {
    "sam.md": ("SAM 配置指南", "# 如何配置模板\n\n使用 SAM template 定义函数、接口和存储桶。部署前先运行 sam build。"),
    "lock.md": ("锁与并发", "# 并发控制\n\n数据库使用乐观锁处理并发写入，冲突时重试。"),
    "python.md": ("Python packaging", "# Packaging\n\nBuild wheels with the build frontend, upload them to the index."),
    "deploy.md": ("Deploying stacks", "# Deployment\n\nA stack is deployed with CloudFormation change sets."),
    "cats.md": ("Cats", "Cats sleep most of the day. Dogs do not."),
}


@pytest.fixture
def ingestor(stack) -> Ingestor:
    for kb_id in ("kb", "other"):
        create_knowledge_base(stack.repositories, kb_id)
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    for source_key, (title, body) in DOCS.items():
        ingestor.put("kb", source_key, title, body)
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    return ingestor


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("如何配置 SAM template", "SAM 配置指南"),  # mixed
        ("配置模板", "SAM 配置指南"),  # Chinese
        ("并发写入冲突", "锁与并发"),  # Chinese
        ("锁", "锁与并发"),  # one CJK character
        ("uploading wheels", "Python packaging"),  # English, stemmed
        ("deploy change sets", "Deploying stacks"),
    ],
)
def test_queries_find_the_right_document(stack, ingestor, query, title):
    assert search_titles(stack, ["kb"], query, max_docs=1) == [title]


def test_a_mixed_query_scores_both_parts(stack, ingestor):
    both = search(stack, ["kb"], "配置模板 sam build").documents[0]
    chinese = search(stack, ["kb"], "配置模板").documents[0]
    assert both.document.title == chinese.document.title == "SAM 配置指南"
    assert {"SAM", "sam", "build"} & set(both.matched_terms) and "配置模板" in both.matched_terms
    assert all(term in both.chunk_text for term in both.matched_terms)


def test_hits_carry_exact_chunk_text_and_normalized_scores(stack, ingestor):
    result = search(stack, ["kb"], "cats dogs sleep")
    (hit,) = result.documents
    # The hit carries the record as validation reads it (no chunk offsets): read the whole record.
    record = stack.repositories.documents.get(hit.document.kb_id, hit.document.doc_id)
    start, end = record.chunk_offsets[hit.chunk_index]
    assert stack.repositories.bodies.read(record.body_key)[start:end].decode() == hit.chunk_text
    assert 0 < hit.score < 1
    assert result.answered_kb_ids == ["kb"] and result.failed_kb_ids == [] and result.stale_hits_dropped == 0


def test_terms_found_nowhere_give_no_hits(stack, ingestor):
    result = search(stack, ["kb"], "xylophone 鲸鱼")
    assert result.documents == [] and result.answered_kb_ids == ["kb"]
    assert search(stack, ["kb"], "？！ …").documents == []


def test_results_are_distinct_documents_limited_to_max_docs(stack, ingestor):
    long_body = "\n\n".join(f"## Part {i}\n\n" + "Zebra stripes pattern. " * 40 for i in range(6))
    published(stack.repositories, ingestor.put("kb", "zebra.md", "Zebras", long_body))
    published(stack.repositories, ingestor.put("kb", "zebra2.md", "More zebras", "A zebra is striped."))
    result = search(stack, ["kb"], "zebra stripes", max_docs=3)
    assert [hit.document.title for hit in result.documents] == ["Zebras", "More zebras"]
    assert search_titles(stack, ["kb"], "zebra stripes", max_docs=1) == ["Zebras"]


def test_min_score_and_top_k_apply_per_source_and_route(stack, ingestor):
    assert search_titles(stack, ["kb"], "cats", max_docs=3) == ["Cats"]
    assert search_titles(stack, [SourceConfig(kb_id="kb", min_score=0.99)], "cats") == []
    assert search(stack, ["kb"], "cats", min_score=0.99).documents == []
    assert len(search(stack, ["kb"], "stack deployed build sam", top_k=1).documents) == 1
    assert len(search(stack, [SourceConfig(kb_id="kb", top_k=1)], "stack deployed build sam").documents) == 1


def test_an_update_without_rebuild_drops_the_stale_hit(stack, ingestor):
    ingestor.put("kb", "cats.md", "Cats", "Cats now hunt at night.")
    result = search(stack, ["kb"], "sleep")
    assert result.documents == [] and result.stale_hits_dropped == 1
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    result = search(stack, ["kb"], "cats hunt")
    assert [hit.chunk_text for hit in result.documents] == ["Cats now hunt at night."]
    assert result.stale_hits_dropped == 0


def test_a_delete_without_rebuild_drops_the_stale_hit(stack, ingestor):
    ingestor.delete("kb", "cats.md")
    result = search(stack, ["kb"], "cats")
    assert result.documents == [] and result.stale_hits_dropped == 1


def test_a_disabled_kb_is_excluded(stack, ingestor):
    published(stack.repositories, ingestor.put("other", "dogs.md", "Dogs", "Dogs bark at cats."))
    assert sorted(search_titles(stack, ["kb", "other"], "cats")) == ["Cats", "Dogs"]
    stack.repositories.knowledge_bases.set_enabled("other", False)
    result = search(stack, ["kb", "other"], "cats")
    assert [hit.document.title for hit in result.documents] == ["Cats"]
    assert result.answered_kb_ids == ["kb"] and result.failed_kb_ids == []


def test_a_hit_from_a_kb_outside_the_scope_is_never_returned(stack, ingestor):
    published(stack.repositories, ingestor.put("other", "dogs.md", "Dogs", "Dogs bark at cats."))
    assert search_titles(stack, ["kb"], "dogs bark") == ["Cats"]


def test_kbs_outside_the_scope_do_not_change_scores(stack, ingestor):
    before = search(stack, ["kb"], "cats sleep").documents[0].score
    for i in range(20):
        ingestor.put("other", f"c{i}.md", f"C{i}", "cats " * (i + 1))
    publish_rebuild(stack.repositories, "other", vector_space=process_vector_space())
    assert search(stack, ["kb"], "cats sleep").documents[0].score == before


def test_a_failing_source_is_reported_failed_not_empty(stack, ingestor, monkeypatch):
    published(stack.repositories, ingestor.put("other", "dogs.md", "Dogs", "Dogs bark at cats."))
    index_cache.clear()  # a cold container: the index must be loaded from storage
    bodies = stack.repositories.bodies
    original = bodies.read

    def read(key: str) -> bytes:
        if key.startswith("indexes/other/"):
            raise KnowledgeUnavailable("document storage is temporarily unavailable")
        return original(key)

    monkeypatch.setattr(bodies, "read", read)
    result = search(stack, ["kb", "other"], "cats")
    assert [hit.document.title for hit in result.documents] == ["Cats"]
    assert result.answered_kb_ids == ["kb"] and result.failed_kb_ids == ["other"]


def test_a_failing_document_store_fails_the_sources_with_hits(stack, ingestor, monkeypatch):
    def broken(keys):
        raise KnowledgeUnavailable("document storage is temporarily unavailable")

    monkeypatch.setattr(stack.repositories.documents, "get_many", broken)
    result = search(stack, ["kb", "other"], "cats")
    assert result.documents == [] and result.failed_kb_ids == ["kb"] and result.answered_kb_ids == ["other"]


def test_a_kb_without_an_index_answers_with_no_hits(stack, ingestor):
    result = search(stack, ["other"], "cats")
    assert result.documents == [] and result.answered_kb_ids == ["other"] and result.failed_kb_ids == []


def test_a_missing_manifest_falls_back_to_the_previous_generation(stack, ingestor):
    published(stack.repositories, ingestor.put("kb", "new.md", "New", "Fresh cats."))  # generation 2
    newest, previous = stack.repositories.knowledge_bases.get("kb").index_manifests[:2]
    stack.repositories.bodies.delete(newest)  # generation 2's manifest is lost: readers use 1
    index_cache.clear()
    result = search(stack, ["kb"], "cats")
    assert [hit.document.title for hit in result.documents] == ["Cats"] and result.failed_kb_ids == []
    assert result.degraded_kb_ids == ["kb"]  # an older generation: search says partial
    stack.repositories.bodies.delete(previous)
    index_cache.clear()
    assert search(stack, ["kb"], "cats").failed_kb_ids == ["kb"]


def test_the_index_is_reused_until_the_generation_changes(stack, ingestor, monkeypatch):
    search(stack, ["kb"], "cats")
    reads: list[str] = []
    original = stack.repositories.bodies.read
    monkeypatch.setattr(stack.repositories.bodies, "read", lambda key: reads.append(key) or original(key))
    search(stack, ["kb"], "cats")
    assert reads == []
    published(stack.repositories, ingestor.put("kb", "new.md", "New", "Fresh cats."))  # updates the index: generation 2
    reads.clear()
    assert "New" in search_titles(stack, ["kb"], "fresh cats")
    assert reads == [stack.repositories.knowledge_bases.get("kb").index_manifests[0]]


def test_english_stop_words_do_not_score(stack, ingestor):
    result = search(stack, ["kb"], "the of is")
    assert result.documents == [] and result.answered_kb_ids == ["kb"]
    assert search_titles(stack, ["kb"], "the cats", max_docs=1) == ["Cats"]
    assert search(stack, ["kb"], "the cats").documents[0].matched_terms == ("Cats",)
