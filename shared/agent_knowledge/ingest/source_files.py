"""What a source file is: its media type (from its name or Content-Type) and its title.

Shared by the folder upload of the CLI and the ingest function behind the sources bucket, so a
document gets the same title and type whichever way it arrives.
"""

from __future__ import annotations

import html
import re
from pathlib import PurePosixPath

MEDIA_TYPES_BY_SUFFIX = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
}
MAX_TITLE_CHARS = 200
_MARKDOWN_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title>|<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def media_type_of(name: str) -> str | None:
    """The media type of a file or object name by its suffix, or None if it is not supported."""
    return MEDIA_TYPES_BY_SUFFIX.get(PurePosixPath(name).suffix.lower())


def title_of(content: bytes | str, media_type: str, fallback: str) -> str:
    text = content.decode("utf-8", errors="replace") if isinstance(content, bytes) else content
    found = None
    if media_type == "text/markdown":
        match = _MARKDOWN_HEADING.search(text)
        found = match.group(1) if match else None
    elif media_type == "text/html":
        match = _HTML_TITLE.search(text)
        found = html.unescape(_TAG.sub("", match.group(1) or match.group(2))) if match else None
    title = " ".join((found or "").split()) or fallback
    return title[:MAX_TITLE_CHARS]
