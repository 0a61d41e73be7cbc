"""PDF, Word (.docx) and PowerPoint (.pptx) documents → their text, as Markdown, and a title.

`prepare_document` calls `extract_document` for these media types, then prepares the text like
any Markdown document (same chunking, same revision rules), so the CLI's local pre-check and the
ingest function compute the same revision.

The text follows the document: PDF pages in order, each after a `[page N]` line; Word paragraphs
and tables (a row per line, cells separated by ` | `), headings (styles Title, Heading 1-6 or an
outline level) as Markdown headings; PowerPoint slide by slide, each after a `[slide N]` line,
its title as a heading, then its shapes, tables and speaker notes. Word headers, footers,
footnotes and comments are left out.

Title: the document's metadata title when it means something (not empty, not a producer's
placeholder like "Microsoft Word - draft3.docx", "Untitled", "PowerPoint Presentation", a file
name); else the first heading (Word), the first slide's title placeholder or, without one, its
text in the largest font (PowerPoint), the largest text of the first page or, when none stands
out, its first line of two words and eight letters (PDF); else `prepare_document` falls back to
the source key. Control characters never reach a title.

Libraries (docs/DESIGN.md §10, "PDF, Word and PowerPoint"): PDFium through pypdfium2 for PDF,
imported here only when a PDF is read (the query functions never load it; PDFium is not
thread-safe, hence `_PDFIUM`); the
standard library's zipfile and defusedxml's ElementTree (a DTD is refused in any encoding) for the
OOXML formats, with every zip bound checked from the archive's directory before anything is
decompressed (`MAX_ZIP_*`, `MAX_PARSED_XML_BYTES`). Every refusal is a `DocumentRejected` with
its reason; `check` (the document's CPU budget) is called per page, per slide and every few
hundred XML elements. The ingest runs all of this in a child process with hard memory and CPU
limits (ingest/parse_process.py): inside one page PDFium cannot be interrupted.
"""

from __future__ import annotations

import io
import posixpath
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.titles import MAX_FIRST_LINE_TITLE_CHARS, MAX_TITLE_CHARS, clean_title

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
BINARY_MEDIA_TYPES = (PDF, DOCX, PPTX)

# A source file of these formats may be this large (text formats: `MAX_SOURCE_BYTES`, 20 MiB):
# PDFs and decks carry images and fonts the text does not need.
MAX_BINARY_SOURCE_BYTES = 50 * 1024 * 1024
# A page costs 3.9-7.3 ms of CPU to extract (bench/README.md, 28 real manuals): 1,200 pages stay
# inside the 10 s budget, so a longer PDF is refused up front instead of failing after the work.
MAX_PDF_PAGES = 1_200
MAX_SLIDES = 1_000
# DOCX/PPTX are zips. Checked from the archive's directory before anything is decompressed: the
# entry count, the size of the directory itself, each entry's uncompressed size and their sum.
# zipfile never yields more than an entry's declared size (a lying entry fails its CRC check).
MAX_ZIP_ENTRIES = 10_000
MAX_ZIP_DIRECTORY_BYTES = 4 * 1024 * 1024
MAX_ZIP_ENTRY_BYTES = 64 * 1024 * 1024
MAX_ZIP_TOTAL_BYTES = 256 * 1024 * 1024
# The parts the parser reads (the main part, styles, slides, notes, core properties and every
# `_rels` part) decompress to at most this much together, checked from the directory before each
# is decompressed: the text they may yield is at most 5 MB (`content.MAX_BODY_BYTES`), and Office's
# markup is a few times its text, not tens of times. A 184 KB file whose `_rels/.rels` unpacks to
# 60 MiB is refused before that part is read.
MAX_PARSED_XML_BYTES = 48 * 1024 * 1024
# The CPU budget is checked every this many XML elements.
CHECK_EVERY_ELEMENTS = 512
# The limits above, as the caller of `parse_process.parse_isolated` has them, are the parser child's.
FORMAT_LIMITS = (
    "MAX_BINARY_SOURCE_BYTES", "MAX_PDF_PAGES", "MAX_SLIDES", "MAX_ZIP_ENTRIES", "MAX_ZIP_DIRECTORY_BYTES",
    "MAX_ZIP_ENTRY_BYTES", "MAX_ZIP_TOTAL_BYTES", "MAX_PARSED_XML_BYTES", "CHECK_EVERY_ELEMENTS",
)  # fmt: skip

ENCRYPTED = "the file is encrypted (password protected); upload it without the password protection"
NO_PDF_TEXT = "no extractable text; the PDF may be scanned images — OCR is not done (upload a PDF with a text layer)"


@dataclass(frozen=True)
class ExtractedDocument:
    text: str  # Markdown
    title: str | None  # found in the document (metadata, heading, title slide), else None


def _no_progress(unit: str, where: str) -> None:
    return None


def extract_document(
    content: bytes,
    media_type: str,
    check: Callable[[], None],
    max_text_bytes: int,
    progress: Callable[[str, str], None] = _no_progress,
) -> ExtractedDocument:
    """The text and title of a PDF, DOCX or PPTX file (see the module doc). `progress(unit, where)`
    is told where the parser is ("page", "page 3 of the PDF"), so that a limit broken inside one
    page can be reported with it (ingest/parse_process.py)."""
    if len(content) > MAX_BINARY_SOURCE_BYTES:
        raise DocumentRejected(f"the file is larger than {MAX_BINARY_SOURCE_BYTES} bytes ({len(content)} bytes)")
    text = _TextLimit(max_text_bytes)
    if media_type == PDF:
        return _pdf(content, check, text, progress)
    if media_type == DOCX:
        return _docx(_Package(content, "Word", progress), check, text)
    if media_type == PPTX:
        return _pptx(_Package(content, "PowerPoint", progress), check, text)
    raise DocumentRejected(f"unsupported media type {media_type!r}")


class _TextLimit:
    """Collects the extracted blocks; refuses more than `limit` bytes of UTF-8 as soon as they come."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.blocks: list[str] = []
        self._bytes = 0

    def add(self, block: str) -> None:
        self._bytes += len(block.encode("utf-8", "replace")) + 2
        if self._bytes > self.limit:
            raise DocumentRejected(
                f"the extracted text is larger than {self.limit} bytes; split the document into smaller ones"
            )
        self.blocks.append(block)

    def text(self) -> str:
        return "\n\n".join(self.blocks) + "\n"


# --- titles -----------------------------------------------------------------------------------

_GENERIC_TITLES = re.compile(
    r"(?:untitled|untitled document|no title|title|document\d*|doc\d*|presentation\d*|book\d*|"
    r"powerpoint presentation|microsoft powerpoint presentation|microsoft word document|word document|"
    r"slide \d+|page \d+|pdf|none|null|unknown|\(anonymous\)|anonymous|default|template|"
    r"click to (?:add|edit) (?:master )?title(?: style)?)",
    re.IGNORECASE,
)
_PRODUCER_PREFIX = re.compile(r"(?:microsoft\s+)?(?:word|powerpoint|excel|office)\s*-\s", re.IGNORECASE)
_FILE_NAME = re.compile(
    r"(?:^|[\\/])[^\\/]*\.(?:docx?|pptx?|xlsx?|pdf|rtf|odt|odp|txt|tex|dvi|ps|eps|indd|qxd|pages|key|html?|md)$",
    re.IGNORECASE,
)
_PATH_LIKE = re.compile(r"^(?:[a-z]:\\|/|\\\\|file:)", re.IGNORECASE)


def meaningful_title(value: str | None) -> str | None:
    """`value` without control characters and with its white space collapsed, unless it is a
    placeholder or a file name."""
    title = clean_title(value or "")
    if not title or len(title) > MAX_TITLE_CHARS * 2:
        return None
    if _GENERIC_TITLES.fullmatch(title) or _PRODUCER_PREFIX.match(title):
        return None
    if _FILE_NAME.search(title) or _PATH_LIKE.match(title):
        return None
    if not any(character.isalpha() for character in title):
        return None  # "1", "---", "2024-01-02"
    return title[:MAX_TITLE_CHARS]


# --- PDF ----------------------------------------------------------------------------------------

# PDFium keeps global state and is not thread-safe: one document at a time per process (the CLI
# prepares files in threads). Waiting for the lock costs no CPU of the waiting document's budget.
_PDFIUM = threading.Lock()
_PDFIUM_ENCRYPTED = {4, 6}  # FPDF_ERR_PASSWORD, FPDF_ERR_SECURITY (an unsupported handler)
# PDFium's text: `\r\n` line ends, `\x02` for a hyphen it joined across a line break, and the
# odd control character; form feeds are line breaks.
_PDF_TEXT = str.maketrans(
    {
        "\r": None,
        "\x02": None,
        "\x0c": "\n",
        **{chr(code): None for code in range(32) if chr(code) not in "\t\n\r\x02\x0c"},
        "\ufffe": None,
        "\uffff": None,
    }
)
# The largest text on the first page is its title if it is clearly larger than the smallest.
TITLE_FONT_RATIO = 1.25
MAX_TITLE_SCAN_CHARS = 4_000
# Title text: within this ratio of the first page's largest size, in at most this many runs.
TITLE_RUN_RATIO = 0.8
MAX_TITLE_RUNS = 3


def _pdf(
    content: bytes, check: Callable[[], None], text: _TextLimit, progress: Callable[[str, str], None]
) -> ExtractedDocument:
    import pypdfium2 as pdfium  # here only: the query functions never load PDFium

    with _PDFIUM:
        try:
            document = pdfium.PdfDocument(content)
        except pdfium.PdfiumError as exc:
            if exc.err_code in _PDFIUM_ENCRYPTED:
                raise DocumentRejected(ENCRYPTED) from None
            raise DocumentRejected(f"the file is not a readable PDF ({exc})") from None
        refusal: str | None = None
        try:
            extracted = _pdf_document(pdfium, document, check, text, progress)
        except DocumentRejected as exc:
            refusal = exc.message  # the traceback (and the pages its frames hold) goes with `exc`
        del document  # PDFium's handles are freed now, under the lock
    if refusal is not None:
        raise DocumentRejected(refusal)
    return extracted


def _pdf_document(
    pdfium: Any, document: Any, check: Callable[[], None], text: _TextLimit, progress: Callable[[str, str], None]
) -> ExtractedDocument:
    pages = len(document)
    if pages > MAX_PDF_PAGES:
        raise DocumentRejected(f"the PDF has {pages} pages, more than {MAX_PDF_PAGES}; split it into parts")
    if pages == 0:
        raise DocumentRejected("the PDF has no pages")
    found_text = False
    largest: str | None = None
    first_line: str | None = None
    for index in range(pages):
        check()
        progress("page", f"page {index + 1} of the PDF")
        try:
            page = document[index]
            textpage = page.get_textpage()
            raw = textpage.get_text_range()
            if index == 0:
                largest = _largest_text(pdfium, textpage, raw)
            textpage.close()
            page.close()
        except pdfium.PdfiumError as exc:
            raise DocumentRejected(f"page {index + 1} of the PDF cannot be read ({exc})") from None
        lines = [line.rstrip() for line in raw.translate(_PDF_TEXT).split("\n")]
        page_text = "\n".join(lines).strip("\n")
        if index == 0:
            first_line = _first_substantial_line(lines)
        found_text = found_text or bool(page_text.strip())
        text.add(f"[page {index + 1}]\n\n{page_text}" if page_text.strip() else f"[page {index + 1}]")
    if not found_text:
        raise DocumentRejected(NO_PDF_TEXT)
    try:
        metadata_title = document.get_metadata_value("Title")
    except pdfium.PdfiumError:
        metadata_title = None
    title = meaningful_title(metadata_title) or meaningful_title(largest) or meaningful_title(first_line)
    return ExtractedDocument(text.text(), title)


# A line of the first page that can name the document when no text on it stands out by size: at
# least this many letters in at least two words, at most `MAX_FIRST_LINE_TITLE_CHARS` characters
# (longer, it is a paragraph).
MIN_TITLE_LINE_LETTERS = 8


def _first_substantial_line(lines: list[str]) -> str | None:
    return next((line for line in lines[:200] if _title_like(line)), None)


def _title_like(line: str) -> bool:
    words = [word for word in line.split() if any(character.isalpha() for character in word)]
    letters = sum(character.isalpha() for character in line)
    return len(words) >= 2 and letters >= MIN_TITLE_LINE_LETTERS and len(line.strip()) <= MAX_FIRST_LINE_TITLE_CHARS


def _is_text(character: str) -> bool:
    """Whether a PDF character is text: not white space, nor a control or private-use code that
    a symbol font (music, dingbats) maps its glyphs to."""
    return not character.isspace() and unicodedata.category(character) not in {"Cc", "Co"}


def _largest_text(pdfium: Any, textpage: Any, raw: str) -> str | None:
    """A title page's title: the runs of its largest text (within `TITLE_RUN_RATIO` of the largest
    size) in page order, at most `MAX_TITLE_RUNS` — so "LilyPond" … "Notation Reference" (a product
    name and the manual's, in one size) is "LilyPond — Notation Reference", and "R" then "FAQ" (set a
    size smaller, right after it) is "R FAQ". Adjacent runs are joined by a space, others by " — "."""
    count = min(textpage.count_chars(), MAX_TITLE_SCAN_CHARS)
    if count <= 0 or len(raw) < count:
        return None
    raw_api = pdfium.raw
    sizes = [raw_api.FPDFText_GetFontSize(textpage, index) for index in range(count)]
    visible = [size for size, character in zip(sizes, raw, strict=False) if _is_text(character) and size > 0]
    if not visible or max(visible) < min(visible) * TITLE_FONT_RATIO:
        return None  # one size of text: no title stands out
    threshold = max(visible) * TITLE_RUN_RATIO
    runs: list[list[str]] = []
    current: list[str] | None = None  # the run being read; None after smaller text
    adjacent = False  # no smaller text since the last run
    for size, character in zip(sizes, raw, strict=False):
        if not _is_text(character) or size <= 0:
            if current:
                current.append(" ")
        elif size >= threshold:
            if current is None:
                if len(runs) == MAX_TITLE_RUNS:
                    break
                current = [" " if adjacent else " — "] if runs else []
                runs.append(current)
            current.append(character)
        else:
            current, adjacent = None, False
            continue
        if current is not None:
            adjacent = True
    title = " ".join("".join("".join(run) for run in runs).split())
    return title.strip(" —") or None


# --- zips (DOCX, PPTX) ----------------------------------------------------------------------------

_EOCD = b"PK\x05\x06"
_COMPOUND_FILE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # OLE2: .doc, .ppt, and encrypted OOXML
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"


def _zip_directory_bounds(content: bytes) -> None:
    """Refuses an archive whose directory declares too many entries or is too large, before
    zipfile reads that directory."""
    tail_start = max(0, len(content) - (22 + 65_535))
    at = content.rfind(_EOCD, tail_start)
    if at < 0 or len(content) < at + 22:
        raise DocumentRejected("the file is not a readable Office document (not a zip archive)")
    entries = int.from_bytes(content[at + 10 : at + 12], "little")
    directory_bytes = int.from_bytes(content[at + 12 : at + 16], "little")
    if entries == 0xFFFF or directory_bytes == 0xFFFFFFFF:  # Zip64: the counts are in its record
        locator = at - 20
        if locator < 0 or content[locator : locator + 4] != _ZIP64_LOCATOR:
            raise DocumentRejected("the file is not a readable Office document (a broken Zip64 directory)")
        record = int.from_bytes(content[locator + 8 : locator + 16], "little")
        if content[record : record + 4] != _ZIP64_EOCD:
            raise DocumentRejected("the file is not a readable Office document (a broken Zip64 directory)")
        entries = int.from_bytes(content[record + 32 : record + 40], "little")
        directory_bytes = int.from_bytes(content[record + 40 : record + 48], "little")
    if entries > MAX_ZIP_ENTRIES:
        raise DocumentRejected(f"the archive has {entries} entries, more than {MAX_ZIP_ENTRIES} (a zip bomb?)")
    if directory_bytes > MAX_ZIP_DIRECTORY_BYTES:
        raise DocumentRejected(
            f"the archive's directory is larger than {MAX_ZIP_DIRECTORY_BYTES} bytes ({directory_bytes}; a zip bomb?)"
        )


class _Package:
    """An OOXML package (a zip), its bounds checked before any part is decompressed."""

    def __init__(self, content: bytes, kind: str, progress: Callable[[str, str], None] = _no_progress) -> None:
        import zipfile

        self.kind = kind
        self.progress = progress
        self._parsed_bytes = 0  # decompressed bytes of the parts read so far (`MAX_PARSED_XML_BYTES`)
        if content.startswith(_COMPOUND_FILE):  # what Office writes when a password protects the file
            if "EncryptedPackage".encode("utf-16-le") in content:
                raise DocumentRejected(ENCRYPTED)
            raise DocumentRejected(
                f"the file is a legacy binary Office file, not a {kind} document; save it as .docx or .pptx"
            )
        _zip_directory_bounds(content)
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(content))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
            raise DocumentRejected(f"the file is not a readable {kind} document ({exc})") from None
        if len(infos) > MAX_ZIP_ENTRIES:
            raise DocumentRejected(f"the archive has {len(infos)} entries, more than {MAX_ZIP_ENTRIES} (a zip bomb?)")
        total = 0
        for info in infos:
            if info.file_size > MAX_ZIP_ENTRY_BYTES:
                raise DocumentRejected(
                    f"the archive's entry {info.filename[:80]!r} unpacks to {info.file_size} bytes, "
                    f"more than {MAX_ZIP_ENTRY_BYTES} (a zip bomb?)"
                )
            total += info.file_size
        if total > MAX_ZIP_TOTAL_BYTES:
            raise DocumentRejected(
                f"the archive unpacks to {total} bytes, more than {MAX_ZIP_TOTAL_BYTES} (a zip bomb?)"
            )
        self._names = {info.filename for info in infos}
        self._sizes = {info.filename: info.file_size for info in infos}
        if "EncryptionInfo" in self._names or "EncryptedPackage" in self._names:
            raise DocumentRejected(ENCRYPTED)

    def has(self, name: str) -> bool:
        return name in self._names

    def read(self, name: str) -> bytes:
        """A part's bytes, counted against `MAX_PARSED_XML_BYTES` before they are decompressed."""
        import zipfile

        self._parsed_bytes += self._sizes.get(name, 0)
        if self._parsed_bytes > MAX_PARSED_XML_BYTES:
            raise DocumentRejected(
                f"the {self.kind} document's parts unpack to more than {MAX_PARSED_XML_BYTES} bytes "
                f"(the part {name[:80]!r} is {self._sizes.get(name, 0)} bytes; a zip bomb?)"
            )
        self.progress("part", f"the part {name[:80]!r}")
        try:
            return self._zip.read(name)
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
            raise DocumentRejected(f"the {self.kind} document's part {name!r} cannot be read ({exc})") from None

    def events(self, name: str, check: Callable[[], None]) -> Iterator[tuple[str, Any]]:
        """`iterparse` events ("start", "end") of a part, the CPU budget checked as it goes. The
        parser is defusedxml's: a DTD (and so any entity) is refused whatever the part's encoding."""
        from xml.etree.ElementTree import ParseError

        from defusedxml import DefusedXmlException
        from defusedxml.ElementTree import iterparse

        stream: IO[bytes] = io.BytesIO(self.read(name))
        try:
            for count, event in enumerate(iterparse(stream, events=("start", "end"), forbid_dtd=True)):
                if count % CHECK_EVERY_ELEMENTS == 0:
                    check()
                yield event
        except ParseError as exc:
            raise DocumentRejected(f"the {self.kind} document's part {name!r} is not well-formed XML ({exc})") from None
        except DefusedXmlException:
            # OOXML parts never declare a DTD: one that does is refused, not expanded.
            raise DocumentRejected(
                f"the {self.kind} document's part {name!r} declares a DTD, which Office never writes"
            ) from None

    def relationships(self, part: str, check: Callable[[], None]) -> dict[str, tuple[str, str]]:
        """The part's relationships: id → (type's last path segment, target part name)."""
        folder, base = posixpath.split(part)
        rels = posixpath.join(folder, "_rels", base + ".rels")
        if not self.has(rels):
            return {}
        found: dict[str, tuple[str, str]] = {}
        for event, element in self.events(rels, check):
            if event == "end" and _local(element.tag) == "Relationship":
                target = element.get("Target", "")
                if element.get("TargetMode") != "External" and target:
                    name = target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
                    kind = element.get("Type", "").rsplit("/", 1)[-1]
                    found[element.get("Id", "")] = (kind, posixpath.normpath(name))
                element.clear()
        return found

    def main_part(self, default: str, check: Callable[[], None]) -> str:
        for kind, target in self.relationships("", check).values():
            if kind == "officeDocument" and self.has(target):
                return target
        if self.has(default):
            return default
        raise DocumentRejected(f"the file is not a readable {self.kind} document (no main part)")

    def core_title(self, check: Callable[[], None]) -> str | None:
        if not self.has("docProps/core.xml"):
            return None
        for event, element in self.events("docProps/core.xml", check):
            if event == "end" and _local(element.tag) == "title":
                return meaningful_title("".join(element.itertext()))
        return None


# Content that is not the document's current text: tracked deletions and moves (their text is
# also where it moved to), and the fallback of markup compatibility (a copy of the choice before it).
_NOT_CURRENT_TEXT = frozenset({"del", "moveFrom", "Fallback"})


def _walk(element: Any, skip: frozenset[str]) -> Iterator[Any]:
    """`element` and its descendants in document order, without the subtrees named in `skip`
    (a loop, not recursion: nesting depth is the file's to choose)."""
    pending = [element]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(child for child in reversed(current) if _local(child.tag) not in skip)


def _local(tag: str) -> str:
    """An element's name without its namespace (Transitional and Strict OOXML alike)."""
    return tag.rsplit("}", 1)[-1]


def _attribute(element: Any, name: str) -> str | None:
    for key, value in element.attrib.items():
        if _local(key) == name:
            return str(value)
    return None


# --- DOCX -------------------------------------------------------------------------------------------

_HEADING_STYLE = re.compile(r"heading\s*([1-9])")


def _docx_styles(package: _Package, check: Callable[[], None]) -> dict[str, int]:
    """Paragraph style id → heading level (Title 1, Heading N → N, or the style's outline level)."""
    levels: dict[str, int] = {}
    if not package.has("word/styles.xml"):
        return levels
    style_id, name, outline = "", "", None
    for event, element in package.events("word/styles.xml", check):
        tag = _local(element.tag)
        if event == "start" and tag == "style":
            style_id, name, outline = _attribute(element, "styleId") or "", "", None
        elif event == "end" and tag == "name":
            name = (_attribute(element, "val") or "").lower()
        elif event == "end" and tag == "outlineLvl":
            outline = _attribute(element, "val")
        elif event == "end" and tag == "style":
            level = _style_level(style_id, name, outline)
            if level:
                levels[style_id] = level
            element.clear()
    return levels


def _style_level(style_id: str, name: str, outline: str | None) -> int | None:
    if name == "title" or style_id == "Title":
        return 1
    match = _HEADING_STYLE.fullmatch(name) or _HEADING_STYLE.fullmatch(style_id.lower())
    if match:
        return min(int(match.group(1)), 6)
    if outline is not None and outline.isdigit() and int(outline) < 9:
        return min(int(outline) + 1, 6)
    return None


def _docx(package: _Package, check: Callable[[], None], text: _TextLimit) -> ExtractedDocument:
    main = package.main_part("word/document.xml", check)
    levels = _docx_styles(package, check)
    first_heading: str | None = None
    stack: list[Any] = []
    tables: list[tuple[list[str], list[str]]] = []  # per open table: (cells of the row, parts of the cell)
    rows: list[str] = []  # of the open top-level table: one block, a row per line
    skipped = 0  # depth inside content that is not the current text (`_NOT_CURRENT_TEXT`)
    for event, element in package.events(main, check):
        tag = _local(element.tag)
        if event == "start":
            stack.append(element)
            skipped += tag in _NOT_CURRENT_TEXT
            if tag == "tbl":
                tables.append(([], []))
            continue
        stack.pop()
        skipped -= tag in _NOT_CURRENT_TEXT
        if tag == "p":
            line, level = _docx_paragraph(element, levels)
            element.clear()  # its text is taken: an enclosing paragraph (a text box's) does not repeat it
            if not line or skipped:
                continue
            if tables:
                tables[-1][1].append(" ".join(line.split()))
            elif level:
                heading = " ".join(line.split())
                first_heading = first_heading or heading
                text.add("#" * level + " " + heading)
            else:
                text.add(line)
        elif tag == "tc" and tables:
            cells, parts = tables[-1]
            cells.append(" ".join(parts))
            parts.clear()
        elif tag == "tr" and tables:
            cells, _ = tables[-1]
            row = " | ".join(cells)
            cells.clear()
            if row.strip(" |"):
                if len(tables) > 1:
                    tables[-2][1].append(row)  # a nested table's row: part of the outer cell
                else:
                    rows.append(row)
        elif tag == "tbl" and tables:
            tables.pop()
            if not tables and rows:
                text.add("\n".join(rows))
                rows.clear()
        if tag in {"p", "tbl"} and stack:
            stack[-1].remove(element)  # done with: a long document never sits in memory as a tree
    if not text.blocks or not any(block.strip() for block in text.blocks):
        raise DocumentRejected("no extractable text in the Word document")
    title = package.core_title(check) or meaningful_title(first_heading)
    return ExtractedDocument(text.text(), title)


def _docx_paragraph(paragraph: Any, levels: dict[str, int]) -> tuple[str, int | None]:
    parts: list[str] = []
    level: int | None = None
    numbered = False
    for element in _walk(paragraph, _NOT_CURRENT_TEXT):
        tag = _local(element.tag)
        if tag == "t":
            parts.append(element.text or "")
        elif tag == "tab":
            parts.append("\t")
        elif tag in {"br", "cr"}:
            parts.append("\n")
        elif tag == "pStyle":
            style = _attribute(element, "val") or ""
            level = levels.get(style) or _style_level(style, "", None)
        elif tag == "outlineLvl" and level is None:
            value = _attribute(element, "val") or ""
            level = min(int(value) + 1, 6) if value.isdigit() and int(value) < 9 else None
        elif tag == "numPr":
            numbered = True
    line = "".join(parts).strip()
    if line and numbered and not level:
        line = "- " + line
    return line, level


# --- PPTX -------------------------------------------------------------------------------------------

_TITLE_PLACEHOLDERS = {"title", "ctrTitle"}
# Placeholders that are not the slide's content (slide number, date, footer, header, notes image).
_FURNITURE_PLACEHOLDERS = {"sldNum", "dt", "ftr", "sldImg", "hdr"}
_TABLE_ROW = "table row"
# DrawingML run properties: `sz` is a run's font size in hundredths of a point.
_RUN_PROPERTIES = {"rPr", "defRPr", "endParaRPr"}  # what `_shapes` gives as the placeholder of a table's row


class _Shape(NamedTuple):
    placeholder: str | None  # its placeholder type, `_TABLE_ROW`, or None (a shape of its own)
    text: str
    size: int  # the largest font size its runs set (hundredths of a point); 0 if they set none


def _pptx(package: _Package, check: Callable[[], None], text: _TextLimit) -> ExtractedDocument:
    main = package.main_part("ppt/presentation.xml", check)
    relations = package.relationships(main, check)
    slides: list[str] = []
    for event, element in package.events(main, check):
        if event == "end" and _local(element.tag) == "sldId":
            relation = next((value for key, value in element.attrib.items() if key.endswith("}id")), "")
            found = relations.get(relation)
            if found and found[0] == "slide" and package.has(found[1]):
                slides.append(found[1])
    if len(slides) > MAX_SLIDES:
        raise DocumentRejected(
            f"the presentation has {len(slides)} slides, more than {MAX_SLIDES}; split it into parts"
        )
    if not slides:
        raise DocumentRejected("no extractable text in the PowerPoint document (it has no slides)")
    first_title: str | None = None
    found_text = False
    for number, slide in enumerate(slides, start=1):
        check()
        package.progress("slide", f"slide {number}")
        shapes = list(_shapes(package, slide, check))
        title, blocks = _slide_shapes(shapes)
        notes = [
            shape.text
            for kind, target in package.relationships(slide, check).values()
            if kind == "notesSlide" and package.has(target)
            for shape in _shapes(package, target, check)
            if shape.placeholder == "body"
        ]
        if number == 1:
            first_title = title or _prominent_text(shapes)
        found_text = found_text or bool(title or blocks or notes)
        parts = [f"[slide {number}]"]
        if title:
            parts.append("# " + title)
        parts.extend(blocks)
        if notes:
            parts.append("Notes: " + "\n".join(notes))
        text.add("\n\n".join(parts))
    if not found_text:
        raise DocumentRejected("no extractable text in the PowerPoint document")
    title = package.core_title(check) or meaningful_title(first_title)
    return ExtractedDocument(text.text(), title)


def _slide_shapes(shapes: list[_Shape]) -> tuple[str | None, list[str]]:
    title: str | None = None
    blocks: list[str] = []
    for shape in shapes:
        if shape.placeholder in _TITLE_PLACEHOLDERS and title is None:
            title = " ".join(shape.text.split())
        elif shape.placeholder not in _FURNITURE_PLACEHOLDERS:
            blocks.append(shape.text)
    return title, blocks


def _prominent_text(shapes: list[_Shape]) -> str | None:
    """A slide's title when it has no title placeholder (text boxes only, as many tools and
    hand-made decks do): the first line of the shape in the largest font its runs set, the earliest
    of equals (the first shape when none sets a size); a line longer than
    `MAX_FIRST_LINE_TITLE_CHARS` is a paragraph, not a title."""
    candidates = [
        (-shape.size, order, title)
        for order, shape in enumerate(shapes)
        if shape.placeholder not in _FURNITURE_PLACEHOLDERS and shape.placeholder != _TABLE_ROW
        for line in [shape.text.strip().split("\n", 1)[0]]
        if len(line) <= MAX_FIRST_LINE_TITLE_CHARS
        for title in [meaningful_title(line)]
        if title
    ]
    return min(candidates)[2] if candidates else None


def _shapes(package: _Package, part: str, check: Callable[[], None]) -> Iterator[_Shape]:
    """Each shape with text, and each table row, in order."""
    placeholder: str | None = None
    paragraphs: list[str] = []
    cells: list[str] = []
    size = 0
    skipped = 0  # depth inside a markup-compatibility fallback (a copy of the choice before it)
    for event, element in package.events(part, check):
        tag = _local(element.tag)
        if event == "start":
            skipped += tag == "Fallback"
            if tag == "sp":
                placeholder, paragraphs, size = None, [], 0
            continue
        if tag == "Fallback":
            skipped -= 1
            element.clear()
            continue
        if skipped:
            continue
        if tag == "ph":
            placeholder = _attribute(element, "type") or "body"
        elif tag in _RUN_PROPERTIES:
            value = element.get("sz", "")
            size = max(size, int(value)) if value.isdigit() else size
        elif tag == "p":  # a DrawingML paragraph (PresentationML has no element of that name)
            line = "".join(
                (child.text or "") if _local(child.tag) == "t" else "\n"
                for child in _walk(element, _NOT_CURRENT_TEXT)
                if _local(child.tag) in {"t", "br"}
            ).strip()
            element.clear()
            if line:
                paragraphs.append(line)
        elif tag == "tc":
            cells.append(" ".join(" ".join(paragraphs).split()))
            paragraphs = []
        elif tag == "tr":
            row = " | ".join(cells)
            cells = []
            if row.strip(" |"):
                yield _Shape(_TABLE_ROW, row, 0)
        elif tag == "sp":
            if paragraphs:
                yield _Shape(placeholder, "\n".join(paragraphs), size)
            placeholder, paragraphs, size = None, [], 0
            element.clear()
