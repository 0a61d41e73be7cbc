"""What a source file is: its media type (from its name) and its title.

Shared by the folder upload of the CLI and the ingest function behind the sources bucket, so a
document gets the same title and type whichever way it arrives. How a title is found lives in
`titles.py`; how bytes become text in `content.decode_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from urllib.parse import quote, unquote

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.content import decode_text
from agent_knowledge.ingest.titles import MAX_TITLE_CHARS, document_title

__all__ = [
    "MAX_TITLE_CHARS",
    "MEDIA_TYPES_BY_SUFFIX",
    "TITLE_METADATA",
    "media_type_of",
    "title_from_metadata",
    "title_metadata",
    "title_of",
]

MEDIA_TYPES_BY_SUFFIX = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
}


def media_type_of(name: str) -> str | None:
    """The media type of a file or object name by its suffix, or None if it is not supported."""
    return MEDIA_TYPES_BY_SUFFIX.get(PurePosixPath(name).suffix.lower())


def title_of(content: bytes | str, media_type: str, fallback: str) -> str:
    """The title found in the document, else `fallback` (the source key) without its extension
    (titles.py). Content that cannot be decoded gets that fallback (its ingest fails with the reason)."""
    if isinstance(content, str):
        text = content.removeprefix("\ufeff")
    else:
        try:
            text = decode_text(content, media_type)
        except DocumentRejected:
            text = ""
    return document_title(text, media_type, fallback)


# `doc put --title` travels as the object's user metadata `x-amz-meta-title`. S3 metadata is
# ASCII, so the title is percent-encoded UTF-8; the ingest function decodes it.
TITLE_METADATA = "title"


def title_metadata(title: str) -> dict[str, str]:
    return {TITLE_METADATA: quote(title, safe=" ")}


def title_from_metadata(metadata: Mapping[str, str]) -> str | None:
    """The title an uploader gave in the object's metadata, or None (find it in the document)."""
    value = metadata.get(TITLE_METADATA)
    title = unquote(value, errors="replace").strip() if value else ""
    return title or None
