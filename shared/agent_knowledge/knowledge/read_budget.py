"""Plan one read page: as much body as fits in `max_bytes` of serialized response (docs/DESIGN.md §6).

Pure. The caller fetches `window` (body bytes from `offset`, at most `max_bytes` of them and never
past the chain's limit), and this module decides how much of it goes into the page so that the
whole JSON response — escaping included — stays within `max_bytes`. Pages end on code point
boundaries, so the pages of a chain concatenate to exactly the body's first bytes.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any

from agent_knowledge import wire
from agent_knowledge.limits import READ_CHAIN_MAX_BYTES
from agent_knowledge.wire import longest_prefix_within, text_cost


@dataclass(frozen=True)
class PagePlan:
    content: str
    consumed: int  # UTF-8 bytes of `content`
    last: bool  # no further page on this chain
    truncated: bool
    budget_exhausted: bool


def window_end(offset: int, served: int, total: int, max_bytes: int) -> int:
    """Exclusive end of the body bytes worth fetching for a page starting at `offset`."""
    permitted_end = min(total, offset + max(0, READ_CHAIN_MAX_BYTES - served))
    # Escaping never makes content smaller than its UTF-8 bytes, so max_bytes bounds the page.
    return min(permitted_end, offset + max_bytes)


def decode_window(window: bytes) -> str:
    """Decode, leaving out a code point cut by the end of the window."""
    return codecs.getincrementaldecoder("utf-8")("strict").decode(window, final=False)


def plan_page(
    response_without_content: dict[str, Any],
    window: bytes,
    offset: int,
    served: int,
    total: int,
    max_bytes: int,
    cursor_length: int,
) -> PagePlan:
    """`response_without_content` holds every response field in wire order, with `content`,
    `next_cursor`, `truncated` and `budget_exhausted` present (their values are replaced here)."""
    text = decode_window(window)
    permitted_end = min(total, offset + max(0, READ_CHAIN_MAX_BYTES - served))
    reaches_permitted_end = offset + len(window) == permitted_end
    exhausted = permitted_end < total

    def size_with(content: str, cursor: str | None, truncated: bool, budget_exhausted: bool) -> int:
        return wire.size(
            {
                **response_without_content,
                "content": content,
                "next_cursor": cursor,
                "truncated": truncated,
                "budget_exhausted": budget_exhausted,
            }
        )

    if reaches_permitted_end:
        # A cut code point at the chain's limit can never be served whole: the chain ends here.
        fits = size_with("", None, exhausted, exhausted) + text_cost(text) <= max_bytes
        if fits:
            return PagePlan(text, len(text.encode("utf-8")), True, exhausted, exhausted)

    available = max_bytes - size_with("", "x" * cursor_length, True, False)
    content = text[: longest_prefix_within(text, available)]
    if not content and text:
        # Unreachable with the protocol's limits (title ≤ 255 characters, max_bytes ≥ 4096).
        raise ValueError("the page budget cannot hold the response envelope")
    return PagePlan(content, len(content.encode("utf-8")), False, True, False)
