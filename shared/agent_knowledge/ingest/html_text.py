"""HTML to clean text with the standard library's parser.

Block elements become paragraphs separated by blank lines, headings become Markdown headings
(so the chunker keeps them with their paragraph), `<pre>` keeps its line breaks, scripts,
styles and other non-content elements are dropped, entities are decoded.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = {"script", "style", "head", "noscript", "template", "svg", "nav", "iframe", "object"}
_BLOCK = {
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "header", "hr", "li", "main", "ol", "p", "pre", "section", "summary",
    "table", "tbody", "td", "th", "thead", "tr", "ul", "caption",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
_SPACES = re.compile(r"[ \t\r\f\v\n]+")


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._current: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0
        self._heading: int | None = None

    def _flush(self) -> None:
        text = "".join(self._current)
        self._current = []
        text = text.strip("\n") if self._pre_depth else _SPACES.sub(" ", text).strip()
        if not text.strip():
            return
        if self._heading:
            text = "#" * self._heading + " " + _SPACES.sub(" ", text).strip()
        self.paragraphs.append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            if tag not in _VOID:
                self._skip_depth += 1
            return
        if tag in _HEADINGS or tag in _BLOCK:
            self._flush()
        if tag in _HEADINGS:
            self._heading = _HEADINGS[tag]
        elif tag == "pre":
            self._pre_depth += 1
        elif tag in {"td", "th"}:
            self._current.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
            return
        if tag in _HEADINGS or tag in _BLOCK:
            self._flush()
        if tag in _HEADINGS:
            self._heading = None
        elif tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self._current.append(data)


def html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    parser._flush()
    return "\n\n".join(parser.paragraphs)
