from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge.ingest.chunking import MAX_SENTENCE_CHARS, TARGET_CHARS, byte_offsets, chunk_text


def test_short_body_is_one_chunk_without_surrounding_whitespace() -> None:
    body = "\n\n  Hello world.\n\nSecond paragraph.\n\n"
    (chunk,) = chunk_text(body)
    assert chunk.text == "Hello world.\n\nSecond paragraph."
    assert (chunk.start, chunk.end) == (4, 35)
    assert body[chunk.start : chunk.end] == chunk.text


def test_heading_starts_a_chunk_and_stays_with_its_paragraph() -> None:
    first = "Intro paragraph. " * 20
    body = f"{first}\n\n## Installing\n\nRun the installer. " + "More words here. " * 5
    chunks = chunk_text(body)
    assert [c.text.splitlines()[0] for c in chunks] == [first.strip(), "## Installing"]
    assert "Run the installer." in chunks[1].text


def test_heading_is_never_left_alone_before_a_long_paragraph() -> None:
    body = "# Title\n\n" + "This sentence is long enough. " * 60
    chunks = chunk_text(body)
    assert len(chunks) > 1
    assert chunks[0].text.startswith("# Title\n\nThis sentence")


def test_paragraphs_are_aggregated_to_about_the_target() -> None:
    body = "\n\n".join(f"Paragraph {i} has a few words in it." for i in range(100))
    chunks = chunk_text(body)
    assert len(chunks) > 3
    assert all(len(c.text) <= TARGET_CHARS for c in chunks)
    assert all(len(c.text) > TARGET_CHARS / 2 for c in chunks[:-1])


def test_long_chinese_paragraph_splits_at_chinese_sentence_ends() -> None:
    body = "这是第一句话，内容很长。" * 40 + "问题在这里吗？" * 30 + "分号结尾；" * 40
    chunks = chunk_text(body)
    assert len(chunks) > 1
    for chunk in chunks[:-1]:
        assert chunk.text[-1] in "。！？；"
        assert len(chunk.text) <= TARGET_CHARS


def test_only_an_over_long_sentence_is_cut_hard() -> None:
    sentence = "word " * 400  # 2000 characters, no sentence end
    body = "Short one. " + sentence.strip() + ". Tail sentence."
    chunks = chunk_text(body)
    assert all(len(c.text) <= MAX_SENTENCE_CHARS for c in chunks)
    # Hard cuts fall at spaces: no chunk starts or ends inside a word.
    assert all(c.text.startswith(("word", "Short")) for c in chunks)
    assert all(c.text.endswith(("word", ".")) for c in chunks)


def test_sentence_without_spaces_is_cut_at_the_limit() -> None:
    body = "字" * 2500
    chunks = chunk_text(body)
    assert "".join(c.text for c in chunks) == body
    assert all(len(c.text) <= MAX_SENTENCE_CHARS for c in chunks)


def test_byte_offsets_address_the_utf8_body() -> None:
    body = "# 标题\n\n正文内容。\n\n" + "English text. " * 80 + "\n\n结尾。"
    chunks = chunk_text(body)
    encoded = body.encode("utf-8")
    for chunk, (start, end) in zip(chunks, byte_offsets(body, chunks), strict=True):
        assert encoded[start:end].decode("utf-8") == chunk.text


_pieces = st.sampled_from(list("ab cd.。？！；#\n\t字词中文 Ünï") + ["\r\n", "# ", "\n## h\n", "word " * 30])
_text = st.lists(_pieces, max_size=600).map("".join)


@settings(max_examples=150, deadline=None)
@given(_text)
def test_chunks_are_exact_ordered_substrings_covering_all_text(body: str) -> None:
    chunks = chunk_text(body)
    position = 0
    for chunk in chunks:
        assert body[chunk.start : chunk.end] == chunk.text
        assert chunk.text and not chunk.text[0].isspace() and not chunk.text[-1].isspace()
        assert chunk.start >= position
        assert not body[position : chunk.start].strip()  # only whitespace between chunks
        position = chunk.end
    assert not body[position:].strip()
    encoded = body.encode("utf-8")
    for chunk, (start, end) in zip(chunks, byte_offsets(body, chunks), strict=True):
        assert encoded[start:end] == chunk.text.encode("utf-8")
