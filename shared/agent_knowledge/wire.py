"""Exact JSON bytes of our responses and what text costs inside them; and the JSON this API accepts
(`loads`, at the end).

`dumps` is the one JSON serialization used for responses, so budgets count exactly the bytes
sent: compact separators, non-ASCII kept as is (a Chinese character costs its 3 UTF-8 bytes, not
the 6 of a `\\uXXXX` escape), escaping of quotes, backslashes and control characters counted.

Budgets must count escaping: a newline costs 2 bytes, a control character 6, a quote or backslash
2, a CJK character 3, an emoji 4.
"""

from __future__ import annotations

import json
import math
from itertools import accumulate
from typing import Any

from pydantic import BaseModel

from agent_knowledge.errors import JsonRejected
from agent_knowledge.limits import REQUEST_MAX_DEPTH

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


# --- Parsing: the JSON this API accepts -------------------------------------------------------------

# Strict JSON for request bodies (docs/DESIGN.md §7).
#
# Python's `json.loads` accepts what RFC 8259 leaves undefined or forbids, and each of those was a
# way around a check: duplicate object keys (the last one silently wins, so `{"ref": "garbage",
# "ref": "<real>"}` read a document), `NaN`/`Infinity` and numbers that overflow to infinity, and
# `\ud800`-style escapes that decode to lone surrogates, which are not Unicode text and fail later
# when the string is encoded (a 500). `loads` refuses all of them with `JsonRejected`, whose message
# names the problem and never repeats request content; so too an integer of more than
# `MAX_INTEGER_DIGITS` digits, which Python refuses past 4,300 digits with a plain ValueError
# (read as "not JSON").
#
# `check_tree` walks an already-parsed value without recursion, so a hostile nesting depth costs a
# bounded loop, not the interpreter's stack. Pure: no AWS, no HTTP.

# Deeper than any endpoint's own schema (the turns page_context has its own, smaller bound).
MAX_DEPTH = REQUEST_MAX_DEPTH
# Longer than any integer the protocol or JSON-RPC uses (a uint64 has 20 digits): a number of more
# digits is refused by name, not as "not JSON".
MAX_INTEGER_DIGITS = 100


def _pairs_to_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise JsonRejected("request body: duplicate key in a JSON object (each key may appear once)")
    return obj


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRejected("request body: number out of range (JSON numbers are finite)")
    return value


def _bounded_int(text: str) -> int:
    # Python's int() refuses more than 4,300 digits with a ValueError callers took for "not JSON".
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise JsonRejected(f"request body: an integer of more than {MAX_INTEGER_DIGITS} digits")
    return int(text)


def _reject_constant(_: str) -> Any:
    raise JsonRejected("request body: NaN and Infinity are not JSON numbers")


_decoder = json.JSONDecoder(
    object_pairs_hook=_pairs_to_object,
    parse_float=_finite_float,
    parse_int=_bounded_int,
    parse_constant=_reject_constant,
)


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_tree(value: Any, max_depth: int = MAX_DEPTH) -> int:
    """Check every string (keys included) is Unicode text and nesting is at most `max_depth`.

    The top-level value is depth 1 when it is an object or array. Returns the depth found. The
    `JsonRejected` message is a predicate ("nested deeper than 16 levels"): callers name the subject.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                raise JsonRejected("a string is not valid Unicode (a lone surrogate escape)")
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise JsonRejected(f"nested deeper than {max_depth} levels")
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def loads(text: str) -> Any:
    """Parse `text` as strict JSON; `JsonRejected` for what this API refuses, `ValueError` (or
    `RecursionError`, for input nested past the parser's own limit) for what is not JSON at all."""
    value = _decoder.decode(text)
    try:
        check_tree(value)
    except JsonRejected as exc:
        raise JsonRejected(f"request body: {exc}") from None
    return value
