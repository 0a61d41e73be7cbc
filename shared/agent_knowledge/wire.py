"""Exact JSON bytes of our responses and what text costs inside them.

`dumps` is the one JSON serialization used for responses, so budgets count exactly the bytes
sent: compact separators, non-ASCII kept as is (a Chinese character costs its 3 UTF-8 bytes, not
the 6 of a `\\uXXXX` escape), escaping of quotes, backslashes and control characters counted.

Budgets must count escaping: a newline costs 2 bytes, a control character 6, a quote or backslash
2, a CJK character 3, an emoji 4.
"""

from __future__ import annotations

import json
from itertools import accumulate
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


_SHORT_ESCAPES = {"\b", "\f", "\n", "\r", "\t", '"', "\\"}
_ASCII_COST = [6 if code < 0x20 else 1 for code in range(128)]
for _char in _SHORT_ESCAPES:
    _ASCII_COST[ord(_char)] = 2


def char_cost(char: str) -> int:
    code = ord(char)
    if code < 0x80:
        return _ASCII_COST[code]
    if code < 0x800:
        return 2
    if code < 0x10000:
        return 3
    return 4


def char_costs(text: str) -> list[int]:
    return [char_cost(char) for char in text]


def _all_single_byte(text: str) -> bool:
    """Every character costs exactly 1 byte: printable ASCII, no quote, no backslash."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def text_cost(text: str) -> int:
    """Bytes of `text` inside a JSON string, quotes excluded: `dumps` itself measures it (a lone
    surrogate, which the UTF-8 codec refuses, counts its 3 bytes as `char_cost` does)."""
    if _all_single_byte(text):
        return len(text)
    return len(_encoder.encode(text).encode("utf-8", "surrogatepass")) - 2


def prefix_costs(text: str) -> list[int]:
    """prefix[i] = cost of text[:i]; len(prefix) == len(text) + 1."""
    if _all_single_byte(text):
        return list(range(len(text) + 1))
    return [0, *accumulate(char_costs(text))]


def longest_prefix_within(text: str, budget: int) -> int:
    """Length (in characters) of the longest prefix of `text` costing at most `budget` bytes.

    A binary search measuring prefixes with `text_cost`; no prefix longer than `budget` characters
    can fit, since every character costs at least one byte."""
    if budget <= 0:
        return 0
    low, high = 0, min(len(text), budget)
    while low < high:
        middle = (low + high + 1) // 2
        if text_cost(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return low
