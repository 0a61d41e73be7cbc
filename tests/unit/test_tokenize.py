from __future__ import annotations

from agent_knowledge.index_format.analyzer import cjk_unigrams, query_tokens, word_tokens
from agent_knowledge.index_format.kb_index import AnalyzedQuery
from agent_knowledge.index_format.schema import normalize_words


def test_latin_words_are_unicode_word_tokens() -> None:
    assert word_tokens("Café résumé, naïve_user x2 — don't!") == [
        "Café", "résumé", "naïve", "user", "x2", "don", "t", "naïve_user",  # the identifier, whole, after
    ]  # fmt: skip


def test_cjk_runs_become_overlapping_bigrams() -> None:
    assert word_tokens("配置文件") == ["配置", "置文", "文件"]
    assert cjk_unigrams("配置 file 文件") == ["配", "置", "文", "件"]


def test_mixed_text_keeps_both_scripts() -> None:
    assert word_tokens("如何配置 SAM template？") == ["如何", "何配", "配置", "SAM", "template"]
    assert word_tokens("使用SAM部署") == ["使用", "SAM", "部署"]


def test_a_one_character_cjk_query_goes_to_the_unigram_field() -> None:
    tokens = query_tokens("锁")
    assert tokens.words == [] and tokens.unigrams == ["锁"]
    mixed = query_tokens("锁 timeout 配置")
    assert mixed.words == ["timeout", "配置"] and mixed.unigrams == ["锁"]


def test_query_without_word_characters_is_empty() -> None:
    assert query_tokens("  ？！ -- ").empty
    assert AnalyzedQuery.of(query_tokens("...")).empty


def test_english_terms_are_lowercased_and_stemmed_cjk_untouched() -> None:
    assert normalize_words(["Templates", "Running", "配置"]) == ["templat", "run", "配置"]
    analyzed = AnalyzedQuery.of(query_tokens("Deploying deployed 部署"))
    assert analyzed.words == ("deploy", "部署")


def test_matched_terms_are_substrings_of_the_text() -> None:
    text = "请问如何配置SAM的Templates文件？锁定，Running café"
    analyzed = AnalyzedQuery.of(query_tokens("如何配置 sam template 锁 run"))
    assert analyzed.matched_terms(text) == ("如何配置", "SAM", "Templates", "锁", "Running")


def test_overlapping_bigrams_merge_and_separate_ones_do_not() -> None:
    analyzed = AnalyzedQuery.of(query_tokens("配置文件 文档"))
    assert analyzed.matched_terms("修改配置文件和文档") == ("配置文件", "文档")
    assert analyzed.matched_terms("配置和文件") == ("配置", "文件")
    assert analyzed.matched_terms("nothing here") == ()
