"""Strict JSON for request bodies (docs/DESIGN.md §7).

Python's `json.loads` accepts what RFC 8259 leaves undefined or forbids, and each of those was a
way around a check: duplicate object keys (the last one silently wins, so `{"ref": "garbage",
"ref": "<real>"}` read a document), `NaN`/`Infinity` and numbers that overflow to infinity, and
`\\ud800`-style escapes that decode to lone surrogates, which are not Unicode text and fail later
when the string is encoded (a 500). `loads` refuses all of them with `JsonRejected`, whose message
names the problem and never repeats request content; so too an integer of more than
`MAX_INTEGER_DIGITS` digits, which Python refuses past 4,300 digits with a plain ValueError
(read as "not JSON").

`check_tree` walks an already-parsed value without recursion, so a hostile nesting depth costs a
bounded loop, not the interpreter's stack. Pure: no AWS, no HTTP.
"""

from __future__ import annotations

import json
import math
from typing import Any

from agent_knowledge.errors import JsonRejected
from agent_knowledge.limits import REQUEST_MAX_DEPTH

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
