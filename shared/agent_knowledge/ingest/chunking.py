"""Split a document body into chunks that are exact substrings of it.

Blocks are runs of non-blank lines; a Markdown heading (an ATX `#` line, or a Setext heading with
its `===`/`---` underline; see `markdown.headings`) is a block of its own. Blocks are
aggregated up to about `TARGET_CHARS`; a heading starts a new chunk (once the current one has
some substance) and always stays with what follows it. A block longer than `TARGET_CHARS` is
split at sentence ends (Latin `.!?` followed by space, Chinese `。！？；`, line breaks); only a
single sentence longer than `MAX_SENTENCE_CHARS` is cut hard, preferably at a space.

Every non-whitespace character of the body lies in exactly one chunk; whitespace between
chunks belongs to none. Offsets are character offsets into the body (`str` indices).

Linear in the body whatever it holds: no pattern here can backtrack (blank lines are skipped
possessively; a sentence end matches only at the start of a run of terminators).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from agent_knowledge.ingest.markdown import NON_BLANK_LINE, Heading, headings

TARGET_CHARS = 700
# A heading starts a new chunk only when the current one already has this much text, so a
# run of tiny sections does not become a run of tiny chunks.
MIN_CHARS_BEFORE_HEADING = 200
MAX_SENTENCE_CHARS = 1000

# How often (in units) `chunk_text` calls its checkpoint.
CHECKPOINT_UNITS = 256
# End of a sentence: the position right after the terminator (and any closing quotes/brackets).
# Only at the start of a run of `.!?` (the lookbehind), taken whole (possessive): a long run
# without a space after it is then scanned once, not once from each of its characters.
_SENTENCE_END = re.compile(r"(?:(?<![.!?])[.!?]++[\"'”’)\]]*+(?=\s)|[。！？；]+[”’」』）\]]*|\n)")


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    text: str


class _Unit(NamedTuple):  # (a tuple: there is one per sentence, created fast)
    start: int
    end: int
    heading: bool


def _trimmed(body: str, start: int, end: int) -> tuple[int, int] | None:
    piece = body[start:end]
    stripped = piece.lstrip()
    if not stripped:
        return None
    start += len(piece) - len(stripped)
    return start, start + len(stripped.rstrip())


def _block_spans(body: str) -> Iterator[tuple[int, int]]:
    """Runs of non-blank lines: from the start of the first to the end of the last (no `\\n`)."""
    start = end = -1
    for line in NON_BLANK_LINE.finditer(body):
        if start < 0 or line.start() > end + 1:
            if start >= 0:
                yield start, end
            start = line.start()
        end = line.end()
    if start >= 0:
        yield start, end


def _blocks(body: str) -> Iterator[_Unit]:
    """Paragraph blocks, with headings split out as blocks of their own."""
    pending: list[Heading] = headings(body)[::-1]  # popped in body order
    for block_start, block_end in _block_spans(body):
        cursor = block_start
        while pending and pending[-1].start < block_end:
            heading = pending.pop()
            if (span := _trimmed(body, cursor, heading.start)) is not None:
                yield _Unit(*span, heading=False)
            if (span := _trimmed(body, heading.start, heading.end)) is not None:
                yield _Unit(*span, heading=True)
            cursor = heading.end
        if (span := _trimmed(body, cursor, block_end)) is not None:
            yield _Unit(*span, heading=False)


def _hard_split(body: str, start: int, end: int) -> list[_Unit]:
    if end - start <= MAX_SENTENCE_CHARS:
        return [_Unit(start, end, heading=False)]  # (trimmed already)
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


def _sentences(body: str, unit: _Unit) -> Iterator[_Unit]:
    cursor = unit.start
    for end in _SENTENCE_END.finditer(body, unit.start, unit.end):
        if (span := _trimmed(body, cursor, end.end())) is not None:
            yield from _hard_split(body, *span)
        cursor = end.end()
    if (span := _trimmed(body, cursor, unit.end)) is not None:
        yield from _hard_split(body, *span)


def _units(body: str) -> Iterator[_Unit]:
    for block in _blocks(body):
        if block.end - block.start > TARGET_CHARS and not block.heading:
            yield from _sentences(body, block)
        else:
            yield block


def chunk_text(body: str, checkpoint: Callable[[], None] | None = None) -> list[Chunk]:
    """`checkpoint` is called every `CHECKPOINT_UNITS` units (it may raise to stop the work)."""
    chunks: list[Chunk] = []
    start = end = -1
    has_body = False
    for count, unit in enumerate(_units(body)):
        if checkpoint is not None and count % CHECKPOINT_UNITS == 0:
            checkpoint()
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
