"""The performance summary's Markdown tables (bench/report.py), without running a benchmark."""

from __future__ import annotations

import pytest
from bench.report import table


def test_a_table_is_its_caption_a_blank_line_the_header_the_alignment_and_one_line_per_row() -> None:
    lines = table("**9. Example** (abc1234)", ["handler", "AWS calls", "target"], "lrl", [["search", 3, "met"]])
    assert lines == [
        "**9. Example** (abc1234)",
        "",
        "| handler | AWS calls | target |",
        "|---|---:|---|",
        "| search | 3 | met |",
    ]


@pytest.mark.parametrize(
    ("align", "rows", "complaint"),
    [
        ("lr", [], "one letter, l or r, for each of the 3 columns"),
        ("lrc", [], "one letter, l or r, for each of the 3 columns"),
        ("lrl", [["search", 3]], "a row of 2 cells in a table of 3 columns"),
    ],
)
def test_a_table_refuses_a_mismatched_alignment_or_row(align: str, rows: list[list[object]], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        table("caption", ["handler", "AWS calls", "target"], align, rows)
