"""The development sets' parsing and cutting (bench/retrieval/sources.py), their identifier and
no-match rules (bench/retrieval/query_rules.py) and the API of bench/retrieval/dev_sets.py, on
tiny inline fixtures: no network, no apt."""

from __future__ import annotations

import re

import pytest
from bench.retrieval import dev_sets, sources
from bench.retrieval.corpus import Section
from bench.retrieval.query_rules import identifiers, no_match_queries, occurrences, occurs_nowhere

POD = """=head1 NAME

perlfaq9 - Web, Email and Networking

=head2 How do I fetch an HTML file?

Use the C<LWP::Simple> module, or L<HTTP::Tiny|HTTP::Tiny>: C<< $ua->get($url) >> returns E<lt>htmlE<gt>.

=over 4

=item getstore

Saves the page in a file. X<getstore>

=back

=head3 A deeper heading stays in its section

    my $html = get("http://example.com/");

=head2 Some heading that is no question

Text.
"""


def test_pod_sections_cut_at_head1_and_head2_and_read_formatting_codes() -> None:
    sections = sources.pod_sections("perlfaq9.pod", POD)
    assert [s.heading for s in sections] == [
        "NAME",
        "How do I fetch an HTML file?",
        "Some heading that is no question",
    ]
    body = sections[1].body
    assert "LWP::Simple" in body and "HTTP::Tiny" in body and "$ua->get($url)" in body and "<html>" in body
    assert "getstore" in body and "A deeper heading stays in its section" in body and 'get("http' in body
    assert "=over" not in body and "=item" not in body and "C<" not in body and "X<" not in body
    assert sections[1].key == "perlfaq9.pod#1"


MALLARD = """<?xml version="1.0" encoding="utf-8"?>
<page xmlns="http://projectmallard.org/1.0/" type="topic" id="power-batterylife" xml:lang="zh-CN">
  <info>
    <link type="guide" xref="power"/>
    <desc>省电的小提示。</desc>
    <credit type="author"><name>Somebody</name></credit>
  </info>
  <title>为什么我的电池用得这么快？</title>
  <p>按 <keyseq><key>Ctrl</key><key>Alt</key></keyseq> 打开 <guiseq><gui>设置</gui><gui>电源</gui></guiseq>。</p>
  <!-- a comment -->
  <section id="dim">
    <title>屏幕变暗</title>
    <p>降低屏幕亮度可以延长电池的使用时间。</p>
    <section id="nested"><title>Nested</title><p>Deeper text.</p></section>
    <p>After the nested section.</p>
  </section>
</page>
"""


def test_mallard_sections_split_a_page_and_drop_its_info_block() -> None:
    sections = sources.mallard_sections("gnome-help/power-batterylife.page", MALLARD)
    assert [s.heading for s in sections] == ["为什么我的电池用得这么快？", "屏幕变暗", "Nested"]
    page, dim, nested = (s.body for s in sections)
    assert "Ctrl+Alt" in page and "设置 电源" in page
    assert "省电的小提示" not in page and "Somebody" not in page and "comment" not in page
    assert "为什么我的电池" not in page  # the title is the heading, not the body
    assert "降低屏幕亮度" in dim and "After the nested section." in dim and "Deeper text." not in dim
    assert nested == "Deeper text."


TEX = r"""\documentclass{article}
\begin{document}
\section{关于~FAQ}
\Question[Q-about-ctex]{\CTeX{}~是干什么的？}{0.1}{0.1}

\CTeX{}~是一个关于~\TeX{}~的中文网站。 % a comment that is dropped
用 \verb|\usepackage{xeCJK}| 和 \href{http://www.ctex.org}{网站}，见~\Qref{Q-x}。

\Question[Q-font]{如何使用 \texttt{Fourier} 字体？}{0.1}{0.2}
\begin{verbatim}
\usepackage{fourier}
\end{verbatim}
\end{document}
ignored after the end
"""


def test_tex_sections_read_questions_with_nested_braces() -> None:
    sections = sources.tex_sections("ctex-faq", TEX, ("section", "Question"))
    assert [s.heading for s in sections] == ["关于 FAQ", "CTeX 是干什么的？", "如何使用 Fourier 字体？"]
    answer = sections[1].body
    assert answer.startswith("CTeX 是一个关于 TeX 的中文网站。")
    assert "\\usepackage{xeCJK}" in answer and "网站" in answer
    assert "comment" not in answer and "Qref" not in answer and "0.1" not in answer and "ctex.org" not in answer
    assert sections[2].body == "\\usepackage{fourier}" and "ignored" not in sections[2].body


@pytest.mark.parametrize(
    ("heading", "language", "expected"),
    [
        ("How do I fetch an HTML file?", "en", True),
        ("Can I use Perl with curses", "en", True),
        ("Why?", "en", False),  # too short to be searched for
        ("Installing packages", "en", False),
        ("如何安装 Debian 软件包", "zh", True),
        ("Debian 只做 GNU/Linux 吗？", "zh", True),
        ("然后呢？", "zh", False),  # 3 CJK characters: not specific
        ("What is GNOME Classic?", "zh", False),  # an untranslated title in a Chinese source
        ("软件包管理", "zh", False),
    ],
)
def test_is_question(heading: str, language: str, expected: bool) -> None:
    assert sources.is_question(heading, language) is expected


def test_questions_are_cut_out_of_their_targets_and_short_sections_dropped() -> None:
    answer = "The package manager installs software; " * 6
    sections = [
        Section("faq#0", "How do I install software?", "How do I install software? " + answer),
        Section("faq#1", "What is a package?", "Too short."),  # dropped, and its question with it
        Section("faq#2", "Where are the logs?", "In /var/log. " * 20),
        Section("faq#3", "Where are the logs?", "A second section of the same heading. " * 5),  # not unique
        Section("faq#4", "Installing packages", "Plain text that is long enough to be kept. " * 5),
        Section("other#0", "How do I read other pages?", "Not from the FAQ part of the source. " * 5),
    ]
    documents, questions = sources.questions_and_documents(sections, "en", lambda s: s.key.startswith("faq"))
    assert [d.key for d in documents] == ["faq#0", "faq#2", "faq#3", "faq#4", "other#0"]
    assert questions == [sources.Question("How do I install software?", "faq#0")]
    assert "how do i install software?" not in documents[0].body.lower()


def test_a_chinese_question_needs_a_chinese_answer_in_a_translation() -> None:
    english = "This page was left untranslated, so its text is all English words. " * 3
    chinese = "打开设置，在电源面板中调整屏幕变暗的时间和挂起的时间，可以延长电池的使用时间。" * 2
    sections = [Section("a#0", "为什么屏幕会变暗？", english), Section("b#0", "如何延长电池时间？", chinese)]
    documents, questions = sources.questions_and_documents(sections, "zh", lambda s: True)
    assert len(documents) == 2 and [q.target for q in questions] == ["b#0"]
    _, written = sources.questions_and_documents(sections, "zh", lambda s: True, translated=False)
    assert [q.target for q in written] == ["a#0", "b#0"]


def test_reading_a_source_that_was_not_fetched_says_how_to_fetch(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sources, "CACHE", tmp_path)
    with pytest.raises(sources.MissingPackage, match=r"--fetch"):
        sources.source_material("en-debian-faq")


CORPUS = [
    Section("a", "", "Run it with --dry-run and PYTHONPATH_EXTRA set; os.path.join builds paths. FooBar here."),
    Section("b", "", "The value of MAX_WIDTH is 80. foobar is case-insensitively the same token as FooBar."),
    Section("c", "", "Error E1234 means the lock is held. 使用os.path.join和MAX_WIDTH。see_also_this here."),
    Section("d", "", "Nothing rare: just words, and max_width_extra (a longer token) and some--dry-run-ish text."),
]


def test_identifiers_occur_in_exactly_one_document() -> None:
    chosen = identifiers(CORPUS, count=50, seed=1)
    tokens = {item.token for item in chosen}
    assert {"--dry-run", "PYTHONPATH_EXTRA", "E1234", "see_also_this"} <= tokens
    assert "MAX_WIDTH" not in tokens  # in b and, next to Chinese characters, in c
    assert "os.path.join" not in tokens  # in a and c
    assert "FooBar" not in tokens  # foobar in b, case-insensitively
    for item in chosen:
        counts = {doc.key: occurrences(item.token, doc.body) for doc in CORPUS}
        assert [key for key, n in counts.items() if n] == [item.target], item
    assert identifiers(CORPUS, count=50, seed=1) == chosen  # seeded


def test_occurrences_are_whole_tokens_case_insensitive() -> None:
    assert occurrences("MAX_WIDTH", "max_width, MAX_WIDTH_EXTRA, 用MAX_WIDTH。") == 2
    assert occurrences("--dry-run", "--dry-run and x--dry-run") == 1


def test_no_match_queries_occur_nowhere() -> None:
    documents = [
        Section("a", "", "软件包管理系统可以安装和删除软件 and the quick brown fox"),
        Section("b", "", "网络配置与防火墙 jumps over the lazy dog " + "x" * 50),
    ]
    made = no_match_queries(documents, "zh", count=40, seed=3)
    assert len(made) == 40 and len({q for q, _ in made}) == 40
    assert {kind for _, kind in made} == {"letters", "alphanumeric", "words", "cjk"}
    text = "\n".join(doc.body.lower() for doc in documents)
    for query, kind in made:
        assert all(word.lower() not in text for word in query.split()), query
        if kind == "cjk":
            assert 3 <= len(query) <= 6
            assert not any(query[i : i + 2] in text for i in range(len(query) - 1))
            assert not any(ch in text for ch in query)
        else:
            assert re.fullmatch(r"[A-Za-z0-9 ]+", query)
    assert no_match_queries(documents, "zh", count=40, seed=3) == made
    assert {kind for _, kind in no_match_queries(documents, "en", count=9, seed=3)} == {
        "letters",
        "alphanumeric",
        "words",
    }
    assert not occurs_nowhere("quick", text, set())


def test_the_api_lists_every_set_with_its_corpus_and_holds_out_the_man_pages() -> None:
    assert "heldout-en-known-item" in dev_sets.HELD_OUT_SETS
    assert "heldout-en-known-item" not in dev_sets.TUNING_SETS and "en-known-item" not in dev_sets.TUNING_SETS
    assert all(dev_sets.SET_INFO[name].corpus != "man" for name in dev_sets.TUNING_SETS)
    kinds = {"questions", "known-item", "identifier", "no-match", "cross-lingual"}
    assert {dev_sets.SET_INFO[name].kind for name in dev_sets.TUNING_SETS} == kinds
    for language in ("en", "zh"):
        question_sources = {
            info.corpus
            for info in dev_sets.SET_INFO.values()
            if info.language == language and info.corpus in sources.SOURCES
        }
        assert len(question_sources) >= 3
    assert all(name in dev_sets.SOURCE_SETS[dev_sets.SET_INFO[name].corpus] for name in dev_sets.TUNING_SETS)
    corpus_of_source = {info.source: info.corpus for info in dev_sets.SET_INFO.values()}
    assert all(corpus_of_source[info.source] == info.corpus for info in dev_sets.SET_INFO.values())  # one per source
    with pytest.raises(ValueError, match="held out"):
        dev_sets.queries("en-known-item")
    with pytest.raises(ValueError, match="unknown set"):
        dev_sets.queries("no-such-set")
    with pytest.raises(ValueError, match="unknown corpus"):
        dev_sets.corpus("no-such-corpus")


def test_the_hand_written_sets_stay_loadable() -> None:
    for name in ("en-questions", "cross-zh-en"):  # their corpus is the standard library's pydoc_data
        items = dev_sets.queries(name)
        keys = {doc.key for doc in dev_sets.corpus(dev_sets.SET_INFO[name].corpus)}
        assert len(items) >= 20 and all(item.targets and set(item.targets) <= keys for item in items)


def test_tantivy_scores() -> None:
    items = [dev_sets.DevQuery("q1", ("a",)), dev_sets.DevQuery("q2", ("b", "c")), dev_sets.DevQuery("q3", ("d",))]
    scores = dev_sets.tantivy_scores([["a", "x"], ["x", "c"], ["x", "y", "z"]], items)
    assert scores == {
        "mrr_at_3": pytest.approx(0.5),
        "recall_at_3": pytest.approx(2 / 3),
        "hit_at_1": pytest.approx(1 / 3),
    }
    empty = [dev_sets.DevQuery("zzzz", ()), dev_sets.DevQuery("qqqq", ())]
    assert dev_sets.tantivy_scores([[], ["a"]], empty) == {"answered": 0.5}
