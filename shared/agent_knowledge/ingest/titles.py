"""A document's title when nobody gave one: what an agent sees in every search hint.

Markdown: the front matter's `title:`, else the first heading (ATX or Setext). HTML: `<title>`
or the first `<h1>`. Plain text: a short first line standing on its own (followed by a blank line
or an underline). Otherwise the source key without its file extension
(`docs/release-notes/2.22.0`): the bare file name (`2.22.0.txt`, `installation.md` ×N) tells an
agent nothing about which document it is.
"""

from __future__ import annotations

import html
import re
from pathlib import PurePosixPath

from agent_knowledge.ingest.markdown import first_heading, front_matter_title, headings

MAX_TITLE_CHARS = 200
# A first line longer than this is a paragraph, not a title.
MAX_FIRST_LINE_TITLE_CHARS = 120
SOURCE_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm")
_HTML_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>|<h1\b[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_FIRST_LINES = re.compile(r"\A\s*([^\n]*\S)[ \t\r]*(?:\n|\Z)([^\n]*)")


def _html_title(text: str) -> str | None:
    match = _HTML_TITLE.search(text)
    if match is None:
        return None
    return html.unescape(_TAG.sub("", match.group(1) or match.group(2) or ""))


def _text_title(text: str) -> str | None:
    found = headings(text)
    if found and found[0].text and not text[: found[0].start].strip():
        return found[0].text  # a Setext (or `#`) heading on the first line
    match = _FIRST_LINES.match(text)
    if match is None or match.group(2).strip():
        return None  # the first line runs on into a paragraph
    first = match.group(1).strip()
    return first if len(first) <= MAX_FIRST_LINE_TITLE_CHARS else None


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
    title = " ".join((found or "").split()) or source_key_title(source_key) or "untitled"
    return title[:MAX_TITLE_CHARS]
