"""Split a document body into chunks that are exact substrings of it.

Blocks are runs of non-blank lines; a Markdown heading (an ATX `#` line, or a Setext heading with
its `===`/`---` underline; see `markdown.headings`) is a block of its own. Blocks are
aggregated up to about `TARGET_CHARS`; a heading starts a new chunk (once the current one has
some substance) and always stays with what follows it. A block longer than `TARGET_CHARS` is
split at sentence ends (Latin `.!?` followed by space, Chinese `。！？；`, line breaks); only a
single sentence longer than `MAX_SENTENCE_CHARS` is cut hard, preferably at a space.

Every non-whitespace character of the body lies in exactly one chunk; whitespace between
chunks belongs to none. Offsets are character offsets into the body (`str` indices).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_knowledge.ingest.markdown import Heading, headings

TARGET_CHARS = 700
# A heading starts a new chunk only when the current one already has this much text, so a
# run of tiny sections does not become a run of tiny chunks.
MIN_CHARS_BEFORE_HEADING = 200
MAX_SENTENCE_CHARS = 1000

_BLOCK = re.compile(r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")
# End of a sentence: the position right after the terminator (and any closing quotes/brackets).
_SENTENCE_END = re.compile(r"(?:[.!?]+[\"'”’)\]]*(?=\s)|[。！？；]+[”’」』）\]]*|\n)")


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    heading: bool


def _trimmed(body: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and body[start].isspace():
        start += 1
    while end > start and body[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _blocks(body: str) -> list[_Unit]:
    """Paragraph blocks, with headings split out as blocks of their own."""
    units: list[_Unit] = []
    pending: list[Heading] = headings(body)[::-1]  # popped in body order
    for block in _BLOCK.finditer(body):
        cursor = block.start()
        while pending and pending[-1].start < block.end():
            heading = pending.pop()
            if (span := _trimmed(body, cursor, heading.start)) is not None:
                units.append(_Unit(*span, heading=False))
            if (span := _trimmed(body, heading.start, heading.end)) is not None:
                units.append(_Unit(*span, heading=True))
            cursor = heading.end
        if (span := _trimmed(body, cursor, block.end())) is not None:
            units.append(_Unit(*span, heading=False))
    return units


def _hard_split(body: str, start: int, end: int) -> list[_Unit]:
    pieces: list[_Unit] = []
    while end - start > MAX_SENTENCE_CHARS:
        cut = start + TARGET_CHARS
        space = body.rfind(" ", start + TARGET_CHARS // 2, cut)
        if space > start:
            cut = space
        if (span := _trimmed(body, start, cut)) is not None:
            pieces.append(_Unit(*span, heading=False))
        start = cut
    if (span := _trimmed(body, start, end)) is not None:
        pieces.append(_Unit(*span, heading=False))
    return pieces


def _sentences(body: str, unit: _Unit) -> list[_Unit]:
    pieces: list[_Unit] = []
    cursor = unit.start
    for end in _SENTENCE_END.finditer(body, unit.start, unit.end):
        if (span := _trimmed(body, cursor, end.end())) is not None:
            pieces.extend(_hard_split(body, *span))
        cursor = end.end()
    if (span := _trimmed(body, cursor, unit.end)) is not None:
        pieces.extend(_hard_split(body, *span))
    return pieces


def _units(body: str) -> list[_Unit]:
    units: list[_Unit] = []
    for block in _blocks(body):
        if block.end - block.start > TARGET_CHARS and not block.heading:
            units.extend(_sentences(body, block))
        else:
            units.append(block)
    return units


def chunk_text(body: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    start = end = -1
    has_body = False
    for unit in _units(body):
        if start >= 0 and has_body:
            size = end - start
            if (unit.heading and size >= MIN_CHARS_BEFORE_HEADING) or unit.end - start > TARGET_CHARS:
                chunks.append(Chunk(start, end, body[start:end]))
                start = -1
        if start < 0:
            start, has_body = unit.start, False
        end = unit.end
        has_body = has_body or not unit.heading
    if start >= 0:
        chunks.append(Chunk(start, end, body[start:end]))
    return chunks


def byte_offsets(body: str, chunks: list[Chunk]) -> list[tuple[int, int]]:
    """[start, end) of each chunk in the UTF-8 encoding of `body` (chunks in body order)."""
    offsets: list[tuple[int, int]] = []
    char_pos = byte_pos = 0
    for chunk in chunks:
        byte_pos += len(body[char_pos : chunk.start].encode("utf-8"))
        start = byte_pos
        byte_pos += len(chunk.text.encode("utf-8"))
        char_pos = chunk.end
        offsets.append((start, byte_pos))
    return offsets
