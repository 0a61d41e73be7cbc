"""How many fuzz cases ran in this session (printed at the end, for the figures in the report)."""

from __future__ import annotations

from collections import Counter

CASES: Counter[str] = Counter()


def count(kind: str) -> None:
    CASES[kind] += 1
