"""The little Markdown structure the ingest needs: where the headings are, and the front matter.

Headings are ATX (`## Install`) and Setext (a paragraph underlined with `===` or `---`), as
CommonMark defines them, except inside fenced code blocks (a `# comment` in a shell snippet is not
a heading). A leading YAML front matter block (`---` … `---`) is neither heading nor title text.
The chunker uses the heading spans to keep a heading with what follows it; the title finder
uses the first heading's text. Everything works on `str` offsets of the given text.

Every line is read once with bounded work (string methods, regular expressions that cannot
backtrack): linear in the text, whatever it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# A longer "heading" is a paragraph: no real heading is that long, and the chunker never splits
# a heading, so an unbounded one would make an unbounded chunk.
MAX_HEADING_CHARS = 1000
_SETEXT_UNDERLINE = re.compile(r"[ ]{0,3}(?:=+|-+)[ \t\r]*")
_THEMATIC_BREAK = re.compile(r"[ ]{0,3}([-*_])(?:[ \t]*+\1){2,}+[ \t\r]*+")
_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})")
# The characters (after at most three spaces) a line must start with to be anything but paragraph
# text: a fence, heading, underline, thematic break or another block (every pattern here).
_BLOCK_MARKS = frozenset("`~#=-*_+>|<0123456789")
# A line with something on it (a run of blank lines between two is skipped in one step).
NON_BLANK_LINE = re.compile(r"^[^\S\n]*+\S[^\n]*", re.MULTILINE)
# Lines that open another kind of block, so they cannot be (the start of) a Setext heading's text.
_OTHER_BLOCK = re.compile(r"[ ]{0,3}(?:[-*+][ \t]|\d{1,9}[.)](?:[ \t]|\r?$)|>|\||<[A-Za-z/!?])")
# Front matter starts with `---` on the first line and a `key:` line (so a document that merely
# opens with a thematic break is not mistaken for one).
_FRONT_MATTER = re.compile(
    r"---[ \t]*\r?\n(?=[A-Za-z_][\w -]*:)(?:.*?\r?\n)??(?:---|\.\.\.)[ \t]*(?:\r?\n|$)", re.DOTALL
)
_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(.+)$", re.MULTILINE)  # (trailing blanks: rstrip)


@dataclass(frozen=True)
class Heading:
    start: int
    end: int
    level: int
    text: str  # the heading's content, whitespace collapsed (may be empty: `#` alone)


def front_matter_end(text: str) -> int:
    """Offset just after a leading `---` … `---` block, or 0 when the text has none."""
    match = _FRONT_MATTER.match(text)
    return match.end() if match else 0


def front_matter_title(text: str) -> str | None:
    """`title:` of the front matter, without YAML quotes."""
    end = front_matter_end(text)
    match = _FRONT_MATTER_TITLE.search(text, 0, end)
    if match is None:
        return None
    value = match.group(1).rstrip(" \t\r")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return " ".join(value.split()) or None


def _clean(text: str) -> str:
    return " ".join(text.split())


def _atx(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line as CommonMark reads it (`## Install ##` → 2, Install);
    what `[ ]{0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t\r]*` would match, with string methods
    (that pattern backtracks quadratically on a long run of blanks)."""
    marks = line.lstrip(" ")
    if len(line) - len(marks) > 3 or not marks.startswith("#") or len(line) > MAX_HEADING_CHARS:
        return None
    rest = marks.lstrip("#")
    level = len(marks) - len(rest)
    if level > 6:
        return None
    if not rest.startswith((" ", "\t")):
        return None if rest.strip(" \t\r") else (level, "")
    text = rest.lstrip(" \t").rstrip(" \t\r")
    unclosed = text.rstrip("#")  # a closing `#` sequence counts only after a blank
    if unclosed != text and unclosed[-1:] in (" ", "\t"):
        text = unclosed
    return level, _clean(text)


def _headings(text: str) -> Iterator[Heading]:
    fence: str | None = None  # the open code fence (its backticks or tildes), if any
    paragraph: int | None = None  # start offset of the run of paragraph lines the next line may underline
    previous_end = last_end = 0  # the end of the last paragraph line, of the last non-blank line
    for found in NON_BLANK_LINE.finditer(text, front_matter_end(text)):
        start, end = found.span()
        line, blank_before, last_end = found.group(), start > last_end + 1, end
        if fence is not None:
            closing = _FENCE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                if not line[closing.end() :].strip():
                    fence = None
            continue
        if blank_before:
            paragraph = None
        if line[:4].lstrip(" ")[:1] not in _BLOCK_MARKS:  # paragraph text (the common case)
            if paragraph is None:
                paragraph = start
        elif opening := _FENCE.match(line):
            fence, paragraph = opening.group(1), None
        elif atx := _atx(line):
            yield Heading(start, end, atx[0], atx[1])
            paragraph = None
        elif (
            paragraph is not None
            and max(previous_end - paragraph, len(line)) <= MAX_HEADING_CHARS
            and _SETEXT_UNDERLINE.fullmatch(line)
        ):
            level = 1 if line.strip()[0] == "=" else 2
            yield Heading(paragraph, end, level, _clean(text[paragraph:previous_end]))
            paragraph = None
        elif _THEMATIC_BREAK.fullmatch(line) or _OTHER_BLOCK.match(line):
            paragraph = None
        elif paragraph is None:
            paragraph = start
        previous_end = end


def headings(text: str) -> list[Heading]:
    """Every heading of the text, in order; a Setext heading spans its text and its underline."""
    return list(_headings(text))


def first_heading(text: str) -> str | None:
    """The text of the first non-empty heading."""
    return next((heading.text for heading in _headings(text) if heading.text), None)
