"""Known-item corpora from real public documentation shipped by Debian.

English: the CPython 3.11 documentation (`python3.11-doc`, HTML by Sphinx). Chinese: the
Debian Reference in simplified Chinese (`debian-reference-zh-cn`, HTML by DocBook). Both are
fetched with `apt-get download` and unpacked with `dpkg-deb -x` into a git-ignored cache.

Every page is split at its <h1>–<h4> headings into sections; a section is one document. A query
is a section's heading (numbering and permalink signs removed); its target is that section,
whose text never contains the heading (it is cut at the heading, and every further occurrence
of the query text is removed). Only headings that are unique in the corpus and specific enough
(two or more words, or two or more CJK characters) become queries.
"""

from __future__ import annotations

import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agent_knowledge.ingest.html_text import html_to_text

CACHE = Path(__file__).resolve().parent / ".cache"


@dataclass(frozen=True)
class CorpusSpec:
    language: str
    package: str
    pattern: str  # glob of the HTML pages inside the unpacked package
    start: str  # content starts after this marker (first occurrence)
    end: str  # and ends before this one


CORPORA = {
    "en": CorpusSpec(
        "en", "python3.11-doc", "usr/share/doc/python3.11/html/**/*.html", 'role="main">', '<div class="sphinxsidebar"'
    ),
    "zh": CorpusSpec(
        "zh", "debian-reference-zh-cn", "usr/share/debian-reference/*.zh-cn.html", "</div>", '<div class="navfooter"'
    ),
}


@dataclass(frozen=True)
class Section:
    key: str  # page#n
    heading: str
    body: str


@dataclass(frozen=True)
class KnownItem:
    query: str
    target: str  # Section.key


def fetch(spec: CorpusSpec) -> Path:
    """Download and unpack the package once; returns the unpacked root."""
    root = CACHE / spec.package
    if root.is_dir() and any(root.glob(spec.pattern)):
        return root
    downloads = CACHE / "debs"
    downloads.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", spec.package], cwd=downloads, check=True, capture_output=True)
    (deb,) = sorted(downloads.glob(f"{spec.package}_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


_HEADING = re.compile(r"<h([1-4])\b[^>]*>(.*?)</h\1>", re.S | re.I)
_TOC = re.compile(r'<div class="(?:toc|list-of-tables|list-of-figures|navheader)">.*?</div>', re.S)
_NUMBERING = re.compile(r"^(?:第\s*\d+\s*章|附录\s*[A-Z]|[A-Z]?\d+(?:\.\d+)*\.?)\s+")
_SPACES = re.compile(r"\s+")


def clean_heading(html: str) -> str:
    text = html_to_text(html).replace("¶", "").lstrip("#")
    return _NUMBERING.sub("", _SPACES.sub(" ", text).strip()).strip()


def page_sections(name: str, html: str, spec: CorpusSpec) -> list[Section]:
    start = html.find(spec.start)
    end = html.find(spec.end, max(start, 0))
    content = _TOC.sub("", html[start + len(spec.start) if start >= 0 else 0 : end if end >= 0 else len(html)])
    matches = list(_HEADING.finditer(content))
    headings = [clean_heading(m.group(2)) for m in matches]
    listed = {h for h in headings if h}
    sections: list[Section] = []
    for number, (match, heading) in enumerate(zip(matches, headings, strict=True)):
        stop = matches[number + 1].start() if number + 1 < len(matches) else len(content)
        paragraphs = html_to_text(content[match.end() : stop]).split("\n\n")
        # Drop leftovers of tables of contents: paragraphs that are just another heading of the page.
        body = "\n\n".join(p for p in paragraphs if _NUMBERING.sub("", p.strip()) not in listed)
        sections.append(Section(f"{name}#{number}", heading, body))
    return sections


def load_sections(spec: CorpusSpec, root: Path | None = None) -> list[Section]:
    root = root or fetch(spec)
    sections: list[Section] = []
    for path in sorted(root.glob(spec.pattern)):
        html = path.read_text(encoding="utf-8", errors="replace")
        sections.extend(page_sections(str(path.relative_to(root)), html, spec))
    return sections


_CJK = re.compile(r"[\u3400-\u9fff]")


def _specific(heading: str, language: str) -> bool:
    if language == "zh":
        return len(_CJK.findall(heading)) >= 2
    return len(re.findall(r"\w+", heading)) >= 2


def known_items(
    sections: list[Section], language: str, max_queries: int, min_body_chars: int = 200, seed: int = 7
) -> tuple[list[Section], list[KnownItem]]:
    """Documents (each section, query text removed from the targets) and the known-item queries."""
    counts: dict[str, int] = {}
    for section in sections:
        counts[section.heading.lower()] = counts.get(section.heading.lower(), 0) + 1
    documents: list[Section] = []
    items: list[KnownItem] = []
    for section in sections:
        body = section.body
        usable = section.heading and counts[section.heading.lower()] == 1 and _specific(section.heading, language)
        if usable:
            body = re.sub(re.escape(section.heading), " ", body, flags=re.I)
        if len(body.strip()) < min_body_chars:
            continue
        documents.append(Section(section.key, section.heading, body))
        if usable:
            items.append(KnownItem(section.heading, section.key))
    random.Random(seed).shuffle(items)
    return documents, items[:max_queries]
