"""A document's title when nobody gave one: what an agent sees in every search hint.

Markdown: the front matter's `title:`, else the first heading (ATX or Setext). HTML: `<title>`
or the first `<h1>`. Plain text: a short first line standing on its own (followed by a blank line
or an underline). Otherwise the source key without its file extension
(`docs/release-notes/2.22.0`): the bare file name (`2.22.0.txt`, `installation.md` ×N) tells an
agent nothing about which document it is.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

from agent_knowledge.ingest.html_text import html_tokens, unescape
from agent_knowledge.ingest.markdown import MAX_HEADING_CHARS, first_heading, front_matter_title, headings

# The one limit of a document's title, given or found (the protocol's hints carry it whole).
MAX_TITLE_CHARS = 255
# A first line longer than this is a paragraph, not a title.
MAX_FIRST_LINE_TITLE_CHARS = 120
SOURCE_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx", ".pptx")
# A `<title>` or `<h1>` is looked at only up to this far from its start tag: a longer one is not
# a title, and a bound keeps the search linear (unclosed tags are not rescanned to the end).
MAX_HTML_TITLE_SOURCE_CHARS = 16 * 1024
# ... and only in the page's first MiB: titles sit at the start; a page without one stays cheap.
MAX_HTML_TITLE_SCAN_CHARS = 1024 * 1024
# Titles come from real markup only: not from comments (the tokenizer drops them), scripts,
# styles, templates, `<noscript>`, nor an SVG or MathML `<title>`.
_NOT_DOCUMENT_MARKUP = {"script", "style", "template", "noscript", "svg", "math"}
_TITLE_END = re.compile(r"</title(?=[\t\n\f\r />])", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]+>")  # `[^<>]`: each `<` starts at most one scan


def _html_title(text: str) -> str | None:
    """The first `<title>` or `<h1>` of the document, whichever comes first."""
    hidden = 0  # depth inside elements that are not the document's markup
    title_end = -1  # the next `</title` (one search serves every `<title>` before it)
    h1: list[str] | None = None  # the text of the `<h1>` being read, if any
    h1_start = 0
    for kind, value, closed, end in html_tokens(text[:MAX_HTML_TITLE_SCAN_CHARS]):
        if kind == "text":
            if h1 is not None and not hidden:
                h1.append(value)
        elif value in _NOT_DOCUMENT_MARKUP:
            if kind == "end" or not closed:
                hidden = hidden + 1 if kind == "start" else max(0, hidden - 1)
        elif h1 is not None:
            if kind == "end" and value == "h1":
                return unescape("".join(h1))
        elif hidden:
            continue
        elif kind == "start" and value == "title":
            if title_end < end:
                found = _TITLE_END.search(text, end)
                title_end = found.start() if found else len(text)
            if title_end < len(text) and title_end - end <= MAX_HTML_TITLE_SOURCE_CHARS:
                return unescape(_TAG.sub("", text[end:title_end]))
        elif kind == "start" and value == "h1":
            h1, h1_start = [], end
        if h1 is not None and end - h1_start > MAX_HTML_TITLE_SOURCE_CHARS:
            h1 = None  # never closed, or too long to be a title
    return None


def _text_title(text: str) -> str | None:
    start = len(text) - len(text.lstrip())
    if start == len(text):
        return None
    # A heading on the first line ends within MAX_HEADING_CHARS, underline included: look no further.
    prefix_end = text.find("\n", start + MAX_HEADING_CHARS + 1)
    found = headings(text if prefix_end < 0 else text[:prefix_end])
    if found and found[0].text and not text[: found[0].start].strip():
        return found[0].text  # a Setext (or `#`) heading on the first line
    # The first non-blank line, if the next line is blank.
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    first = text[start:line_end].rstrip()
    if text[start + len(first) : line_end].strip(" \t\r"):
        return None  # other trailing white space (form feed, …): not a title line
    next_end = text.find("\n", line_end + 1)
    if line_end < len(text) and text[line_end + 1 : len(text) if next_end < 0 else next_end].strip():
        return None  # the first line runs on into a paragraph
    return first if len(first) <= MAX_FIRST_LINE_TITLE_CHARS else None


def clean_title(value: str) -> str:
    """A found title without control characters (a PDF's metadata may hold BEL or SOH: every
    search hint would carry them) and with its white space collapsed to single spaces."""
    if not value.isprintable():
        value = "".join(
            " " if character.isspace() else character
            for character in value
            if character.isspace() or unicodedata.category(character) != "Cc"
        )
    return " ".join(value.split())


def source_key_title(source_key: str) -> str:
    """The source key without a known file extension: `guides/install.md` → `guides/install`."""
    path = PurePosixPath(source_key)
    if path.suffix.lower() in SOURCE_SUFFIXES and path.stem:
        return str(path.with_suffix(""))
    return source_key


def document_title(text: str, media_type: str, source_key: str) -> str:
    """The title found in the decoded text, else the source key's path (see the module doc)."""
    if media_type == "text/markdown":
        found = front_matter_title(text) or first_heading(text)
    elif media_type == "text/html":
        found = _html_title(text)
    else:
        found = _text_title(text)
    title = clean_title(found or "") or clean_title(source_key_title(source_key)) or "untitled"
    return title[:MAX_TITLE_CHARS]
