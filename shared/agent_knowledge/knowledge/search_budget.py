"""Fit a search response into 4096 UTF-8 bytes (docs/DESIGN.md §6), filling the budget well.

Every hint first gets its title and an empty summary; what is left of the budget is shared
among the summaries (water-filling: a hint whose whole chunk fits gives its unused share to
the others). Each summary is a real excerpt of the matching chunk, centred on the first matched
term, cut on character boundaries. Titles are shortened only if hints with minimal summaries
would not fit otherwise, and a hint is dropped only when even a minimal summary cannot fit.
`truncated` is true whenever a summary, a title or a hint was cut or dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_knowledge import wire
from agent_knowledge.limits import SEARCH_MAX_BYTES
from agent_knowledge.wire import longest_prefix_within, prefix_costs, text_cost

MIN_SUMMARY_BYTES = 48
MIN_TITLE_BYTES = 24


@dataclass(frozen=True)
class HintDraft:
    ref: str
    title: str
    chunk_text: str
    matched_terms: tuple[str, ...]
    revision: str
    score: float
    expires_at: str

    def as_hint(self, summary: str, title: str | None = None) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "title": self.title if title is None else title,
            "summary": summary,
            "revision": self.revision,
            "score": self.score,
            "expires_at": self.expires_at,
        }


def _prefix_within(text: str, budget: int) -> str:
    """The longest prefix of `text` costing at most `budget` bytes."""
    return text[: longest_prefix_within(text, budget)]


def _anchor(text: str, terms: tuple[str, ...]) -> tuple[int, int]:
    """Span of the earliest matched term in `text` (case-insensitive), or the start."""
    lowered = text.lower()
    best: tuple[int, int] | None = None
    for term in terms:
        if not term:
            continue
        position = lowered.find(term.lower())
        if position >= 0 and (best is None or position < best[0]):
            best = (position, position + len(term))
    return best or (0, 0)


def excerpt(text: str, terms: tuple[str, ...], budget: int) -> str:
    """The longest substring of `text` costing ≤ `budget` bytes, centred on the first matched term."""
    if budget <= 0:
        return ""
    if text_cost(text) <= budget:
        return text
    start, end = _anchor(text, terms)
    # Every character costs at least one byte, so the excerpt cannot reach further than `budget`
    # characters from the term: only that stretch of a long chunk is costed character by character.
    offset = max(0, start - budget)
    text = text[offset : end + budget]
    start, end = start - offset, end - offset
    costs = prefix_costs(text)
    if costs[end] - costs[start] > budget:  # even the term does not fit: keep what fits of it
        end = start
    # Grow alternately to the right and to the left while the next character fits.
    grow_right = True
    blocked_left = blocked_right = False
    while not (blocked_left and blocked_right):
        if grow_right and not blocked_right:
            if end < len(text) and costs[end + 1] - costs[start] <= budget:
                end += 1
            else:
                blocked_right = True
        elif not grow_right and not blocked_left:
            if start > 0 and costs[end] - costs[start - 1] <= budget:
                start -= 1
            else:
                blocked_left = True
        grow_right = not grow_right
    return text[start:end]


def _envelope_size(envelope: dict[str, Any], hints: list[dict[str, Any]]) -> int:
    return wire.size({**envelope, "hints": hints})


def _share(wants: list[int], available: int) -> list[int]:
    """Water-filling: split `available` bytes among wants, none getting more than it wants."""
    shares = [0] * len(wants)
    remaining = available
    order = sorted(range(len(wants)), key=lambda i: wants[i])
    for position, index in enumerate(order):
        fair = remaining // (len(order) - position)
        shares[index] = min(wants[index], fair)
        remaining -= shares[index]
    return shares


def _shorten_titles(drafts: list[HintDraft], envelope: dict[str, Any], max_bytes: int) -> tuple[list[str], bool]:
    """Titles, shortened (longest first) only as far as needed for minimal summaries to fit."""
    titles = [draft.title for draft in drafts]
    needed = sum(min(MIN_SUMMARY_BYTES, text_cost(d.chunk_text)) for d in drafts)
    overflow = _envelope_size(envelope, [d.as_hint("", t) for d, t in zip(drafts, titles, strict=True)])
    overflow += needed - max_bytes
    shortened = False
    while overflow > 0:
        longest = max(range(len(titles)), key=lambda i: text_cost(titles[i]))
        current = text_cost(titles[longest])
        if current <= MIN_TITLE_BYTES:
            break
        target = max(MIN_TITLE_BYTES, current - overflow)
        titles[longest] = _prefix_within(titles[longest], target)
        overflow -= current - text_cost(titles[longest])
        shortened = True
    return titles, shortened


def fit_search_response(
    envelope: dict[str, Any], drafts: list[HintDraft], max_bytes: int = SEARCH_MAX_BYTES
) -> tuple[list[dict[str, Any]], bool]:
    """Hints for `envelope` (every other response field, `truncated` included) within `max_bytes`.

    Returns the hints and whether anything was cut or dropped.
    """
    envelope = {**envelope, "truncated": True}  # size with the longer literal; never exceed
    dropped = False
    while drafts:
        titles, titles_cut = _shorten_titles(drafts, envelope, max_bytes)
        bare = [d.as_hint("", t) for d, t in zip(drafts, titles, strict=True)]
        available = max_bytes - _envelope_size(envelope, bare)
        minimum = sum(min(MIN_SUMMARY_BYTES, text_cost(d.chunk_text)) for d in drafts)
        if available >= minimum:
            break
        drafts = drafts[:-1]
        dropped = True
    else:
        return [], dropped

    wants = [text_cost(d.chunk_text) for d in drafts]
    shares = _share(wants, available)
    summaries = [excerpt(d.chunk_text, d.matched_terms, share) for d, share in zip(drafts, shares, strict=True)]
    # Character granularity can leave a few bytes unused; offer them to summaries that were cut.
    spare = available - sum(text_cost(s) for s in summaries)
    for index, draft in enumerate(drafts):
        if spare <= 0:
            break
        if len(summaries[index]) < len(draft.chunk_text):
            before = text_cost(summaries[index])
            summaries[index] = excerpt(draft.chunk_text, draft.matched_terms, before + spare)
            spare -= text_cost(summaries[index]) - before

    hints = [d.as_hint(s, t) for d, s, t in zip(drafts, summaries, titles, strict=True)]
    cut = dropped or titles_cut or any(len(s) < len(d.chunk_text) for d, s in zip(drafts, summaries, strict=True))
    return hints, cut


def shrink_to_fit(response: dict[str, Any], max_bytes: int = SEARCH_MAX_BYTES) -> dict[str, Any]:
    """Last line of defence: drop hints until the serialized response fits (never expected to act)."""
    while wire.size(response) > max_bytes and response.get("hints"):
        response = {**response, "hints": response["hints"][:-1], "truncated": True}
    return response
