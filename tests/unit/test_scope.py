"""Knowledge scope revision (docs/DESIGN.md §3), without storage."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from agent_knowledge.identity.scope import Scope, canonical_json, knowledge_enabled, scope_revision, source_kb_ids
from agent_knowledge.records import KnowledgeBaseRecord, KnowledgeConfig, SourceConfig

CONFIG = KnowledgeConfig(
    enabled=True, sources=[SourceConfig(kb_id="kb-a"), SourceConfig(kb_id="kb-b", top_k=4)], top_k=8, max_docs=3
)
KBS = {"kb-a": KnowledgeBaseRecord(kb_id="kb-a"), "kb-b": KnowledgeBaseRecord(kb_id="kb-b")}


def test_the_revision_is_the_sha256_of_the_canonical_configuration_and_kb_flags():
    document = {"knowledge": CONFIG.model_dump(mode="json"), "kb_enabled": {"kb-a": True, "kb-b": True}}
    expected = hashlib.sha256(
        json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    ).hexdigest()
    assert scope_revision(CONFIG, KBS) == expected


def test_editing_the_route_or_disabling_a_kb_changes_the_revision():
    base = scope_revision(CONFIG, KBS)
    assert scope_revision(CONFIG.model_copy(update={"max_docs": 2}), KBS) != base
    disabled = {**KBS, "kb-b": KnowledgeBaseRecord(kb_id="kb-b", enabled=False)}
    assert scope_revision(CONFIG, disabled) != base


def test_nothing_else_about_a_kb_changes_the_revision():
    renamed = {kb_id: kb.model_copy(update={"name": "renamed", "generation": 7}) for kb_id, kb in KBS.items()}
    unrelated = {**KBS, "kb-z": KnowledgeBaseRecord(kb_id="kb-z", enabled=False)}
    assert scope_revision(CONFIG, renamed) == scope_revision(CONFIG, unrelated) == scope_revision(CONFIG, KBS)


def test_a_missing_kb_counts_as_disabled():
    missing = {"kb-a": KBS["kb-a"]}
    disabled = {**missing, "kb-b": KnowledgeBaseRecord(kb_id="kb-b", enabled=False)}
    assert scope_revision(CONFIG, missing) == scope_revision(CONFIG, disabled)


def test_knowledge_is_on_only_with_the_route_flag_and_an_enabled_source():
    assert knowledge_enabled(CONFIG, KBS)
    assert not knowledge_enabled(CONFIG.model_copy(update={"enabled": False}), KBS)
    off = {kb_id: kb.model_copy(update={"enabled": False}) for kb_id, kb in KBS.items()}
    assert not knowledge_enabled(CONFIG, off)
    scope = Scope(CONFIG, {"kb-b": KBS["kb-b"]})
    assert scope.enabled and scope.enabled_kb_ids() == ["kb-b"]


def test_source_ids_keep_their_order_without_duplicates():
    config = KnowledgeConfig(sources=[SourceConfig(kb_id=k) for k in ["b", "a", "b"]])
    assert source_kb_ids(config) == ["b", "a"]


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5))
def test_canonical_json_does_not_depend_on_key_order(value):
    reordered = dict(reversed(list(value.items())))
    assert canonical_json(value) == canonical_json(reordered)
