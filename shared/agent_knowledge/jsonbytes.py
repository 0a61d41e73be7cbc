"""The one JSON serialization used for responses, so budgets count exactly the bytes sent.

Compact separators, non-ASCII kept as is (a Chinese character costs its 3 UTF-8 bytes, not the
6 of a `\\uXXXX` escape), escaping of quotes, backslashes and control characters counted.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    if hasattr(value, "wire"):
        value = value.wire()
    elif isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return _encoder.encode(value)


def size(value: Any) -> int:
    """UTF-8 byte length of `dumps(value)`."""
    return len(dumps(value).encode("utf-8"))


def string_size(text: str) -> int:
    """Bytes `text` takes inside a JSON document, quotes included."""
    return len(_encoder.encode(text).encode("utf-8"))
