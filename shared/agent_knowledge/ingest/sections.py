"""Cut a long source's text into sections of at most one read chain each (issue 38, item 1).

A read chain starts at the top of the referenced document and exposes at most
`READ_CHAIN_MAX_BYTES` of it, so a passage deep in a long manual is out of the chain's reach. A
source whose text is longer than that and has structure is therefore stored as several documents,
one per section (docs/DESIGN.md, "Long sources as sections"); this module finds where to cut. Pure:
no storage, no I/O.

Structure is what the extraction keeps in the text: Markdown headings (`markdown.headings`: ATX
and Setext, not inside code fences; HTML, DOCX and PPTX headings come out as Markdown headings)
and the `[page N]` / `[slide N]` lines of PDFs and decks (`binary_formats`). The text is cut at the
highest heading level that occurs; a piece still longer than a chain is cut again at the next level
found inside it, and so on. A piece with no heading inside is packed: consecutive pages (or slides)
while they fit one default read page (`PACK_BYTES`), then paragraphs, then lines, and as the very
last resort characters, so no section is ever longer than a chain. A heading that directly
follows a page or slide line is cut before that line, so the line stays with its page. Sections
are contiguous slices: together they are the text, byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from agent_knowledge.ingest.markdown import headings
from agent_knowledge.limits import READ_CHAIN_MAX_BYTES, READ_DEFAULT_BYTES

# A section piece smaller than this joins the section before it when both fit one chain, so a run
# of one-line headings does not become a run of one-line documents.
MIN_SECTION_BYTES = 2048
# Pages (slides, paragraphs) packed into a section up to this many bytes: one read page of the
# default size, so the first page an agent reads of a hinted run of PDF pages holds the hinted
# passage. A section cut at headings may fill a whole chain (it is read as the unit it names).
PACK_BYTES = READ_DEFAULT_BYTES
_MARKER = re.compile(r"^\[(page|slide) (\d+)\][ \t]*$", re.MULTILINE)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Section:
    """`text[start:end]` of the source; `heading`: what names it within the source (may be empty)."""

    heading: str
    start: int
    end: int


@dataclass(frozen=True)
class _Cut:
    at: int
    level: int  # 1-6: a heading of that level; 7: a page or slide line
    label: str  # the heading's text, or "page 12"


def _cuts(text: str, with_headings: bool) -> tuple[list[_Cut], list[_Cut]]:
    """Where the text may be cut (a heading right after a page line replaces that line's cut), and
    its page and slide lines."""
    markers = {m.start(): _Cut(m.start(), 7, f"{m.group(1)} {m.group(2)}") for m in _MARKER.finditer(text)}
    cuts = dict(markers)
    for heading in headings(text) if with_headings else ():
        if not heading.text:
            continue
        at = heading.start
        # The page (or slide) line just before the heading, with only blank lines between: cut there.
        last = at - 1
        while last >= 0 and text[last] in " \t\r\n":
            last -= 1
        line_start = text.rfind("\n", 0, last + 1) + 1
        if last >= 0 and line_start in markers:
            at = line_start
        cuts[at] = _Cut(at, heading.level, heading.text)
    return sorted(cuts.values(), key=lambda cut: cut.at), sorted(markers.values(), key=lambda cut: cut.at)


def has_structure(text: str, with_headings: bool = True) -> bool:
    """Whether the text has anything to cut at besides paragraphs: a heading, page or slide line
    after its start (a text whose only heading is its title at the top has none)."""
    lead = len(text) - len(text.lstrip())
    return any(cut.at > lead for cut in _cuts(text, with_headings)[0])


class _Splitter:
    def __init__(self, text: str, max_bytes: int, title: str = "", with_headings: bool = True) -> None:
        self.title = title
        self.text = text
        self.max_bytes = max_bytes
        self.pack_bytes = min(max_bytes, PACK_BYTES)
        self.cuts, self.markers = _cuts(text, with_headings)

    def size(self, start: int, end: int) -> int:
        return len(self.text[start:end].encode("utf-8"))

    def fits(self, start: int, end: int, limit: int | None = None) -> bool:
        limit = self.max_bytes if limit is None else limit
        # Cheap bound first: a character is at most 4 bytes of UTF-8.
        return (end - start) * 4 <= limit or self.size(start, end) <= limit

    def split(self, start: int, end: int, heading: str, below: int) -> Iterator[Section]:
        """Sections of `text[start:end]`, named `heading`, cut at headings of level `below` or deeper."""
        if self.fits(start, end):
            yield Section(heading, start, end)
            return
        inner = [cut for cut in self.cuts if start < cut.at < end and below <= cut.level <= 6]
        if not inner:
            yield from self.pack(start, end, heading)
            return
        top = min(cut.level for cut in inner)
        level_cuts = [cut for cut in inner if cut.level == top]
        pieces: list[tuple[int, int, str]] = []
        if self.text[start : level_cuts[0].at].strip():  # what comes before the first heading
            pieces.append((start, level_cuts[0].at, heading or self._leading(start, level_cuts[0].at)))
        else:  # only blanks before it: they go with it
            level_cuts[0] = _Cut(start, top, level_cuts[0].label)
        for cut, following in zip(level_cuts, [*level_cuts[1:], None], strict=True):
            pieces.append((cut.at, following.at if following else end, cut.label))
        for piece_start, piece_end, label in pieces:
            yield from self.split(piece_start, piece_end, label, top + 1)

    def _leading(self, start: int, end: int) -> str:
        """The label of the heading the slice opens with (after blanks), else ""."""
        for cut in self.cuts:
            if start <= cut.at < end and cut.level <= 6:
                opens = not self.text[start : cut.at].strip()
                return cut.label if opens and cut.label != self.title else ""  # the source's title names no section
        return ""

    def pack(self, start: int, end: int, heading: str) -> Iterator[Section]:
        """Consecutive pages (else paragraphs, lines, characters) while they fit `pack_bytes`."""
        part = 0
        for piece_start, piece_end in self._packed(start, end, 0):
            part += 1
            yield Section(self._part_name(heading, piece_start, piece_end, part), piece_start, piece_end)

    def _boundaries(self, start: int, end: int, kind: int) -> list[int] | None:
        """Where a piece may be cut, by kind: 0 pages/slides, 1 paragraphs, 2 lines, 3 characters."""
        if kind == 0:
            return [cut.at for cut in self.markers if start < cut.at < end]
        if kind == 1:
            return [m.end() for m in _PARAGRAPH.finditer(self.text, start, end) if start < m.end() < end]
        if kind == 2:
            found: list[int] = []
            at = self.text.find("\n", start, end)
            while at != -1:
                if start < at + 1 < end:
                    found.append(at + 1)
                at = self.text.find("\n", at + 1, end)
            return found
        return None

    def _packed(self, start: int, end: int, kind: int) -> Iterator[tuple[int, int]]:
        if self.fits(start, end, self.pack_bytes):
            yield start, end
            return
        if kind == 3:
            yield from self._characters(start, end)
            return
        bounds = self._boundaries(start, end, kind)
        if not bounds:
            yield from self._packed(start, end, kind + 1)
            return
        current = start
        for unit_start, unit_end in zip([start, *bounds], [*bounds, end], strict=True):
            if not self.fits(current, unit_end, self.pack_bytes):
                if current < unit_start:  # what fits so far is a section
                    yield current, unit_start
                    current = unit_start
                if not self.fits(unit_start, unit_end, self.pack_bytes):  # one unit too long: cut it finer
                    yield from self._packed(unit_start, unit_end, kind + 1)
                    current = unit_end
        if current < end:
            yield current, end

    def _characters(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        while start < end:
            low, high = start + 1, end  # the longest prefix that fits (one character always does)
            while low < high:
                middle = (low + high + 1) // 2
                if self.fits(start, middle, self.pack_bytes):
                    low = middle
                else:
                    high = middle - 1
            yield start, low
            start = low

    def _part_name(self, heading: str, start: int, end: int, part: int) -> str:
        pages = self._pages(start, end)
        if pages is None:
            where = f"part {part}"
        else:
            kind, first, last = pages
            where = f"{kind} {first}" if first == last else f"{kind}s {first}–{last}"
        return f"{heading} ({where})" if heading else where

    def _pages(self, start: int, end: int) -> tuple[str, str, str] | None:
        """The page (or slide) numbers the slice spans: the one in force at its start to its last."""
        before = [cut for cut in self.markers if cut.at <= start]
        inside = [cut for cut in self.markers if start < cut.at < end]
        first = before[-1] if before else (inside[0] if inside else None)
        if first is None:
            return None
        last = inside[-1] if inside else first
        kind = first.label.split(" ")[0]
        return kind, first.label.split(" ")[1], last.label.split(" ")[1]


def _joined(sections: list[Section], splitter: _Splitter) -> list[Section]:
    """Blank sections and bare headings (a chapter's heading before its first subsection) joined to
    the section after them, then small sections to the one before them, when the two fit one chain."""

    def bare(section: Section) -> bool:
        return "\n" not in splitter.text[section.start : section.end].strip()

    forward: list[Section] = []
    carried: Section | None = None
    for section in sections:
        if carried is not None:
            if splitter.fits(carried.start, section.end):
                heading = carried.heading or section.heading
                section = Section(heading, carried.start, section.end)
            else:
                forward.append(carried)
            carried = None
        if bare(section):
            carried = section
        else:
            forward.append(section)
    if carried is not None:
        forward.append(carried)
    joined: list[Section] = []
    for section in forward:
        small = splitter.size(section.start, section.end) < MIN_SECTION_BYTES
        if joined and (small or bare(joined[-1])) and splitter.fits(joined[-1].start, section.end):
            joined[-1] = Section(joined[-1].heading or section.heading, joined[-1].start, section.end)
        else:
            joined.append(section)
    return joined


def split_sections(
    text: str, max_bytes: int = READ_CHAIN_MAX_BYTES, title: str = "", *, with_headings: bool = True
) -> list[Section] | None:
    """The sections of a text longer than `max_bytes` of UTF-8 that has structure, each at most
    `max_bytes`, contiguous and covering the whole text; None for a text that fits or has none.
    `title`: the source's, which a heading opening the text names no section by. Without
    `with_headings`, only page and slide lines are structure (a PDF's text is the page's text, its
    `---` lines are no Markdown)."""
    if len(text.encode("utf-8")) <= max_bytes or not has_structure(text, with_headings):
        return None
    splitter = _Splitter(text, max_bytes, title, with_headings)
    return _joined(list(splitter.split(0, len(text), "", 1)), splitter)
