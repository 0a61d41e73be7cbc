"""What a source file is: its media type (from its name) and its title.

Shared by the folder upload of the CLI and the ingest function behind the sources bucket, so a
document gets the same title and type whichever way it arrives. How a title is found lives in
`titles.py`; how bytes become text in `content.decode_text`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from urllib.parse import unquote

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.binary_formats import BINARY_MEDIA_TYPES, DOCX, PDF, PPTX
from agent_knowledge.ingest.content import decode_text, prepare_document
from agent_knowledge.ingest.titles import MAX_TITLE_CHARS, document_title, source_key_title

__all__ = [
    "MAX_TITLE_CHARS",
    "MEDIA_TYPES_BY_SUFFIX",
    "PLAIN_TITLE_METADATA",
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
    ".pdf": PDF,
    ".docx": DOCX,
    ".pptx": PPTX,
}


def media_type_of(name: str) -> str | None:
    """The media type of a file or object name by its suffix, or None if it is not supported."""
    return MEDIA_TYPES_BY_SUFFIX.get(PurePosixPath(name).suffix.lower())


def title_of(content: bytes | str, media_type: str, fallback: str) -> str:
    """The title found in the document, else `fallback` (the source key) without its extension
    (titles.py). Content that cannot be decoded gets that fallback (its ingest fails with the reason)."""
    if media_type in BINARY_MEDIA_TYPES:  # PDF, DOCX, PPTX: the title their extraction finds
        try:
            return prepare_document(None, content, media_type, fallback).title
        except DocumentRejected:
            return source_key_title(fallback) or fallback
    if isinstance(content, str):
        text = content.removeprefix("\ufeff")
    else:
        try:
            text = decode_text(content, media_type)
        except DocumentRejected:
            text = ""
    return document_title(text, media_type, fallback)


# `doc put --title` travels in the object's user metadata `x-amz-meta-title-base64url`: the title's
# UTF-8 in base64url (RFC 4648 §5, padded). S3 user metadata is US-ASCII, and S3 and HTTP trim
# values and may read `=?utf-8?...?=` in them as RFC 2047; a base64url value has no blank, no control
# character and no `=?`, so the title the ingest reads is exactly the one `doc put` computed the
# revision with. The longest title (`content.MAX_TITLE_CHARS`, 255 characters of at most 4 bytes of
# UTF-8 each) takes 1,360 characters: within S3's 2 KB of user metadata (percent-encoding could take 3,060).
TITLE_METADATA = "title-base64url"
# Objects written before (and uploads by hand: `aws s3 cp --metadata title=...`) carry the title
# percent-encoded in `x-amz-meta-title`; read as before (blanks around it trimmed).
PLAIN_TITLE_METADATA = "title"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


def title_metadata(title: str) -> dict[str, str]:
    """The object metadata that carries `title` exactly (see `TITLE_METADATA`)."""
    return {TITLE_METADATA: base64.urlsafe_b64encode(title.encode("utf-8")).decode("ascii")}


def title_from_metadata(metadata: Mapping[str, str]) -> str | None:
    """The title an uploader gave in the object's metadata, or None (find it in the document).
    DocumentRejected if `x-amz-meta-title-base64url` is not base64url of UTF-8 text."""
    encoded = metadata.get(TITLE_METADATA)
    if encoded:
        try:
            if not _BASE64URL.fullmatch(encoded):
                raise ValueError(encoded)
            return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise DocumentRejected(
                f"the object's metadata x-amz-meta-{TITLE_METADATA} is not a title in base64url-encoded UTF-8"
            ) from None
    value = metadata.get(PLAIN_TITLE_METADATA)
    title = unquote(value, errors="replace").strip() if value else ""
    return title or None
