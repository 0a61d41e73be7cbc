"""HTML to clean text, with a small tokenizer that reads the markup once.

Block elements become paragraphs separated by blank lines, headings become Markdown headings
(so the chunker keeps them with their paragraph), `<pre>` keeps its line breaks, scripts,
styles, comments and other non-content elements are dropped, entities are decoded.

Why not `html.parser`: on malformed input (many unclosed `<a b='`, `<!--`, `<meta `) it rescans
the rest of the document from every construct, quadratic time, and `<![` can make it raise.
Here, as in a browser, a comment, tag or script/style body left open runs to the end of the
document, so every character is scanned a bounded number of times: linear in the input.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from typing import Literal

_SKIP = {"script", "style", "head", "noscript", "template", "svg", "nav", "iframe", "object"}
_BLOCK = {
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "header", "hr", "li", "main", "ol", "p", "pre", "section", "summary",
    "table", "tbody", "td", "th", "thead", "tr", "ul", "caption",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}
_SPACES = re.compile(r"[ \t\r\f\v\n]+")

# A start or end tag up to (not including) its `>`: the name, then separators and attributes, a
# quoted value may hold `>`. Possessive (`*+`), so a tag that never closes is scanned once, not
# once per way to split it. The last `sep` ending right before `>` with `/` makes `<br/>`.
_TAG = re.compile(
    r"""</?([A-Za-z][^\t\n\f\r />\x00]*)
    (?:(?P<sep>[\t\n\f\r /]+)
      |[^\t\n\f\r />][^\t\n\f\r /=>]*
       (?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"[^"]*"?|'[^']*'?|[^\t\n\f\r >]*))?
    )*+""",
    re.VERBOSE,
)
# Elements whose content is text up to their end tag, not markup (as `html.parser` reads them).
_RAW_TEXT_END = {name: re.compile(rf"</{name}(?=[\t\n\f\r />])", re.IGNORECASE) for name in ("script", "style")}
_COMMENT_END = re.compile(r"--!?>")
# A decimal character reference of 8+ digits is rewritten before decoding, its value kept (past
# U+10FFFF it is U+FFFD either way): `int()` refuses over 4300 digits, so `html.unescape` raised.
_LONG_DECIMAL_REFERENCE = re.compile(r"&#([0-9]{8,})")
# Long text is decoded in pieces of about this size, each cut before an `&` (no reference holds
# one), with a checkpoint between them: no single step of unbounded length.
UNESCAPE_PIECE_CHARS = 64 * 1024
# How often (in tokens) `html_to_text` calls its checkpoint.
CHECKPOINT_TOKENS = 4096

Kind = Literal["text", "start", "end"]


def _short_reference(match: re.Match[str]) -> str:
    digits = match.group(1).lstrip("0")
    return "&#" + (digits if len(digits) < 8 else "1114112") if digits else "&#0"


def unescape(text: str, checkpoint: Callable[[], None] | None = None) -> str:
    """`html.unescape` that no input makes raise, done in pieces (`checkpoint` between them)."""
    if "&" not in text:
        return text
    text = _LONG_DECIMAL_REFERENCE.sub(_short_reference, text)
    if len(text) <= UNESCAPE_PIECE_CHARS:
        return html.unescape(text)
    pieces: list[str] = []
    start = 0
    while start < len(text):
        cut = len(text)
        if cut - start > UNESCAPE_PIECE_CHARS:
            cut = text.rfind("&", start + 1, start + UNESCAPE_PIECE_CHARS)
            if cut < 0:  # the piece holds one reference at most (at its start): one quick step
                cut = text.find("&", start + 1)
                cut = len(text) if cut < 0 else cut
        pieces.append(html.unescape(text[start:cut]))
        if checkpoint is not None:
            checkpoint()
        start = cut
    return "".join(pieces)


def html_tokens(text: str) -> Iterator[tuple[Kind, str, bool, int]]:
    """(kind, tag name or text, self-closing, end offset) of each token, in order. Text is as
    written (`unescape` it where it is used: decoding is the costly part).

    Comments, declarations and processing instructions yield nothing. Input that ends inside a
    construct ends the tokens."""
    i, n = 0, len(text)
    while i < n:
        j = text.find("<", i)
        if j < 0:
            j = n
        if i < j:
            yield "text", text[i:j], False, j
        if j >= n:
            return
        if (tag := _TAG.match(text, j)) is not None:
            end = tag.end()
            if end >= n:
                return  # a tag left open: the rest of the document is inside it
            closed = text[end - 1] == "/" and tag.group("sep") is not None and tag.end("sep") == end
            name, i = tag.group(1).lower(), end + 1
            if text[j + 1] == "/":
                yield "end", name, False, i
                continue
            yield "start", name, closed, i
            if name in _RAW_TEXT_END and not closed:
                found = _RAW_TEXT_END[name].search(text, i)
                close = found.start() if found else n
                if i < close:
                    yield "text", text[i:close], False, close
                i = close
        elif text.startswith("<!--", j):
            if text.startswith(">", j + 4) or text.startswith("->", j + 4):  # `<!-->`, `<!--->`: empty
                i = text.index(">", j + 4) + 1
                continue
            found = _COMMENT_END.search(text, j + 4)
            i = found.end() if found else n
        elif text.startswith("<![CDATA[", j):
            close = text.find("]]>", j + 9)
            i = close + 3 if close >= 0 else n
        elif text.startswith(("<!", "</", "<?"), j):  # declarations, `</>`, bogus comments
            close = text.find(">", j + 2)
            i = close + 1 if close >= 0 else n
        else:
            yield "text", "<", False, j + 1
            i = j + 1


class _TextExtractor:
    def __init__(self, checkpoint: Callable[[], None] | None) -> None:
        self._checkpoint = checkpoint
        self.paragraphs: list[str] = []
        self._current: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0
        self._heading: int | None = None

    def flush(self) -> None:
        if not self._current:
            return
        text = "".join(self._current)
        self._current = []
        text = text.strip("\n") if self._pre_depth else _SPACES.sub(" ", text).strip()
        if not text.strip():
            return
        if self._heading:
            text = "#" * self._heading + " " + _SPACES.sub(" ", text).strip()
        self.paragraphs.append(text)

    def handle_starttag(self, tag: str) -> None:
        if tag in _SKIP:
            if tag not in _VOID:
                self._skip_depth += 1
            return
        if tag in _HEADINGS or tag in _BLOCK:
            self.flush()
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
            self.flush()
        if tag in _HEADINGS:
            self._heading = None
        elif tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self._current.append(unescape(data, self._checkpoint))


def html_to_text(html: str, checkpoint: Callable[[], None] | None = None) -> str:
    """`checkpoint` is called every `CHECKPOINT_TOKENS` tokens (it may raise to stop the work)."""
    extractor = _TextExtractor(checkpoint)
    for count, (kind, value, closed, _) in enumerate(html_tokens(html)):
        if checkpoint is not None and count % CHECKPOINT_TOKENS == 0:
            checkpoint()
        if kind == "text":
            extractor.handle_data(value)
        elif kind == "end":
            extractor.handle_endtag(value)
        else:  # `<br/>`: a start and an end tag, as `html.parser` reports it
            extractor.handle_starttag(value)
            if closed:
                extractor.handle_endtag(value)
    extractor.flush()
    return "\n\n".join(extractor.paragraphs)
