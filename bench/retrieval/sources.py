"""Sources of the development sets' questions (issue 32): public documentation shipped in Debian
packages, in which other people wrote questions as headings (FAQ entries, help pages titled as
questions) and answered them in the text under the heading.

A source is one package's documents (or a named part of them). Each is parsed into sections, one
document per answer/section/page: `Section(key, heading, body)`, the heading never in the body.
`questions_and_documents` then makes the development material of one source:
- a question is a section heading that is really a question (`is_question`), specific enough,
  unique in the source, from the part of the source where the answers are (a FAQ's pages);
- its target is that section, from which every occurrence of the question text is removed, so a
  system must find it by what the answer says;
- the corpus is every section of the source with at least `MIN_BODY_CHARS[language]` characters
  left (questions whose target is dropped are dropped with it), so most documents are not
  targets. 150 characters in English; 60 in Chinese, where the same text is about 2.5 times
  shorter (the Debian FAQ: 136k characters of section text in English, 55k in Chinese);
- in a translated source, a Chinese question counts only if its answer has 20+ CJK characters
  (translations leave some pages in English; those stay in the corpus as documents). The TeX
  FAQs were written in Chinese, and some answers are code alone: they count.

Packages are fetched only by `fetch_packages` (`python -m bench.retrieval.dev_sets --fetch`):
`apt-get download` + `dpkg-deb -x` into the git-ignored `bench/retrieval/.cache/`, as corpus.py
does. Reading a source whose package is not there raises `MissingPackage`, never downloads.
"""

from __future__ import annotations

import gzip
import html as html_lib
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.retrieval.corpus import CACHE, CorpusSpec, Section, page_sections

MIN_BODY_CHARS = {"en": 150, "zh": 60}
MIN_ANSWER_CJK = 20


class MissingPackage(RuntimeError):
    """A source's package has not been fetched into the cache."""


@dataclass(frozen=True)
class Question:
    query: str
    target: str  # Section.key


@dataclass(frozen=True)
class Source:
    name: str  # also the name of its corpus
    language: str  # "en" | "zh"
    packages: tuple[str, ...]
    versions: str  # the versions measured (Debian 12); fetch takes what apt offers
    licence: str
    what: str  # the documents taken, in words
    sections: Callable[[], list[Section]]  # reads the unpacked packages (`unpacked`)
    asks: Callable[[Section], bool]  # may this section's heading be a question?
    translated: bool = True  # a translation, which may leave pages untranslated (Chinese only)


# ---------------------------------------------------------------------------------------------
# Questions

_EN_QUESTION_WORDS = {
    "how", "what", "why", "when", "where", "which", "who", "whom", "whose", "can", "could", "should",
    "would", "will", "is", "are", "was", "were", "do", "does", "did", "may", "must", "shall", "has", "have",
}  # fmt: skip
_ZH_QUESTION = re.compile(r"[？?]|如何|怎么|怎样|为什么|为何|什么|吗|能否|是否|哪|可否|能不能")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def is_question(heading: str, language: str) -> bool:
    """A heading that asks something and says enough to be searched for: English, a `?` at the
    end or a question word first, 3+ words; Chinese, a question mark or word (如何, 怎么, 为什么,
    什么, 吗, 能否, ...), 2+ CJK characters and 4+ CJK characters and ASCII words together."""
    text = heading.strip()
    if language == "zh":
        cjk = len(_CJK.findall(text))
        return bool(_ZH_QUESTION.search(text)) and cjk >= 2 and cjk + len(_ASCII_WORD.findall(text)) >= 4
    words = re.findall(r"\w+", text.lower())
    return len(words) >= 3 and (text.endswith("?") or words[0] in _EN_QUESTION_WORDS)


def chinese_answer(text: str) -> bool:
    """Enough Chinese to be a Chinese answer (help translations leave some pages in English)."""
    return len(_CJK.findall(text)) >= MIN_ANSWER_CJK


def questions_and_documents(
    sections: Iterable[Section],
    language: str,
    asks: Callable[[Section], bool],
    min_body_chars: int | None = None,
    translated: bool = True,
) -> tuple[list[Section], list[Question]]:
    """The corpus of one source and its questions (module docstring)."""
    sections = list(sections)
    min_body_chars = MIN_BODY_CHARS[language] if min_body_chars is None else min_body_chars
    counts: dict[str, int] = {}
    for section in sections:
        counts[section.heading.lower()] = counts.get(section.heading.lower(), 0) + 1
    documents: list[Section] = []
    questions: list[Question] = []
    for section in sections:
        body = section.body
        asked = (
            bool(section.heading)
            and counts[section.heading.lower()] == 1
            and asks(section)
            and is_question(section.heading, language)
        )
        if asked:
            body = re.sub(re.escape(section.heading), " ", body, flags=re.I)
            asked = language != "zh" or not translated or chinese_answer(body)
        if len(body.strip()) < min_body_chars:
            continue
        documents.append(Section(section.key, section.heading, body))
        if asked:
            questions.append(Question(section.heading, section.key))
    return documents, questions


# ---------------------------------------------------------------------------------------------
# Parsers: HTML (corpus.py's), POD, Mallard, LaTeX


def html_sections(folder: Path, patterns: Iterable[str], start: str, end: str) -> list[Section]:
    """corpus.page_sections over the pages matching `patterns` in `folder` (sorted), keys
    relative to it."""
    spec = CorpusSpec("", "", "", start, end)
    sections: list[Section] = []
    for path in sorted({p for pattern in patterns for p in folder.glob(pattern)}):
        text = path.read_text(encoding="utf-8", errors="replace")
        sections.extend(page_sections(str(path.relative_to(folder)), text, spec))
    return sections


_POD_HEADING = re.compile(r"^=head([12])[ \t]+(.*)$", re.M)
_POD_COMMAND = re.compile(r"^=(?:over|back|cut|pod|encoding|for|begin|end)\b.*$", re.M)
_POD_ITEM = re.compile(r"^=(?:item|head[3-6])[ \t]*(.*)$", re.M)
_POD_CODE_DOUBLE = re.compile(r"([A-Z])<<+\s+(.*?)\s+>>+", re.S)
_POD_CODE = re.compile(r"([A-Z])<([^<>]*)>")
_POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def _pod_code(match: re.Match[str]) -> str:
    code, content = match.group(1), match.group(2)
    if code in "XZ":
        return ""
    if code == "E":
        return _POD_ESCAPES.get(content, html_lib.unescape(f"&{content};") if content.isalpha() else "")
    if code == "L":
        text = content.split("|", 1)[0] if "|" in content else content
        return text.replace('/"', " ").replace('"', "")
    return content


def pod_to_text(pod: str) -> str:
    """POD to plain text: commands dropped (=item and =head3+ keep their text), formatting codes
    (C<...>, L<text|target>, E<lt>, ...) replaced by their text, verbatim blocks kept."""
    text = _POD_COMMAND.sub("", pod)
    text = _POD_ITEM.sub(r"\1", text)
    previous = None
    while previous != text:
        previous = text
        text = _POD_CODE_DOUBLE.sub(_pod_code, text)
        text = _POD_CODE.sub(_pod_code, text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def pod_sections(name: str, pod: str) -> list[Section]:
    """One section per =head1/=head2 (deeper headings stay in their section's text)."""
    matches = list(_POD_HEADING.finditer(pod))
    sections = []
    for number, match in enumerate(matches):
        stop = matches[number + 1].start() if number + 1 < len(matches) else len(pod)
        heading = " ".join(pod_to_text(match.group(2)).split())
        sections.append(Section(f"{name}#{number}", heading, pod_to_text(pod[match.end() : stop])))
    return sections


_MALLARD_INFO = re.compile(r"<info\b[^>]*>(.*?)</info>", re.S)
_MALLARD_DROP = re.compile(r"<(comment|media)\b[^>]*>.*?</\1>|<!--.*?-->", re.S)
_MALLARD_SECTION = re.compile(r"<section\b[^>]*>|</section>|<page\b[^>]*>|</page>")
_MALLARD_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title>", re.S)
_MALLARD_BLOCK_END = re.compile(r"</(?:p|item|title|tr|td|th|code|screen|note|list|steps|terms|tree)>|<br\s*/?>")
_MALLARD_KEYS = re.compile(r"</key>\s*<key\b[^>]*>")
_MALLARD_ADJACENT = re.compile(r"(</[A-Za-z]+>)(<[A-Za-z])")
_TAGS = re.compile(r"<[^>]+>")


def mallard_text(xml: str) -> str:
    text = _MALLARD_KEYS.sub("+", xml)  # <keyseq><key>Ctrl</key><key>Alt</key></keyseq> reads Ctrl+Alt
    text = _MALLARD_ADJACENT.sub(r"\1 \2", text)  # <guiseq><gui>Settings</gui><gui>Color</gui>: two words
    text = _MALLARD_BLOCK_END.sub("\n", text)
    text = html_lib.unescape(_TAGS.sub("", text))
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n|\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def mallard_sections(name: str, xml: str) -> list[Section]:
    """A Mallard help page (GNOME's `.page`) as sections: the page's own text under its title,
    then each <section> (nested ones separately) under its title. <info> blocks (links, credits,
    and the <desc> summary that guide pages show beside links, not on the page), comments and
    media are dropped."""
    xml = _MALLARD_DROP.sub("", xml)
    xml = _MALLARD_INFO.sub("", xml)
    own: list[list[str]] = []  # the text of each section, nested sections excluded
    stack: list[int] = []
    position = 0
    for match in _MALLARD_SECTION.finditer(xml):
        if stack:
            own[stack[-1]].append(xml[position : match.start()])
        if match.group(0).startswith("</"):
            if stack:
                stack.pop()
        else:
            own.append([])
            stack.append(len(own) - 1)
        position = match.end()
    sections = []
    for number, parts in enumerate(own):
        text = "".join(parts)
        title = _MALLARD_TITLE.search(text)
        heading = mallard_text(title.group(1)).replace("\n\n", " ") if title else ""
        body = text[: title.start()] + text[title.end() :] if title else text
        sections.append(Section(f"{name}#{number}", heading, mallard_text(body)))
    return sections


_TEX_COMMENT = re.compile(r"(?<!\\)%.*$", re.M)
_TEX_DROP = re.compile(
    r"\\(?:label|index|Qref|qref|ref|footnotemark|protect|vspace|hspace)\*?(?:\[[^\]]*\])?(?:\{[^{}]*\})?"
)
_TEX_VERB = re.compile(r"\\verb\*?([^A-Za-z\s])(.*?)\1")
_TEX_HREF = re.compile(r"\\href\{[^{}]*\}")
_TEX_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[^{}]*\}(?:\[[^\]]*\])?")
# A command's {argument} stays as written (\usepackage{xeCJK}); other grouping braces go.
_TEX_BRACES = re.compile(r"(\\[A-Za-z]+\*?(?:\[[^\]]*\])?\{[^{}]*\})|(?<!\\)[{}]")
_TEX_LOGO = re.compile(r"\\([A-Za-z]+)\{\}")
_TEX_FORMAT = re.compile(
    r"\\(?:textbf|textit|texttt|textsf|textrm|emph|url|mbox|footnotetext|footnote|bf|it|tt|sf|small|large|Large"
    r"|item|centering|noindent|par|newline|quad|qquad|smallskip|medskip|bigskip|danger|ddanger|enddanger)\b\*?"
)


def tex_to_text(tex: str) -> str:
    """LaTeX source to readable text: comments, labels and references dropped, \\verb, \\href,
    logos (\\TeX{}) and formatting commands reduced to their text, ~ to a space. Other commands
    stay as written: in a FAQ about TeX they are the content."""
    text = _TEX_COMMENT.sub("", tex)
    text = _TEX_VERB.sub(lambda m: m.group(2), text)
    text = _TEX_DROP.sub("", text)
    text = _TEX_HREF.sub("", text)
    text = _TEX_ENVIRONMENT.sub("\n", text)
    text = _TEX_LOGO.sub(r"\1", text)
    text = _TEX_FORMAT.sub("", text)
    text = text.replace("\\\\", "\n").replace("~", " ")
    text = _TEX_BRACES.sub(lambda m: m.group(1) or "", text)
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return "\n\n".join(p for p in paragraphs if p)


def _braced(text: str, start: int) -> tuple[str, int]:
    """The balanced {...} group at text[start] (which must be "{") and the index after it."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{" and text[index - 1 : index] != "\\":
            depth += 1
        elif text[index] == "}" and text[index - 1 : index] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index], index + 1
    raise ValueError(f"unbalanced braces from offset {start}")


def tex_sections(name: str, tex: str, commands: tuple[str, ...]) -> list[Section]:
    """One section per `\\command[opt]{heading}` of `commands` (e.g. section, subsection, the
    CTeX FAQ's \\Question), its text running to the next one or to \\end{document}."""
    tex = _TEX_COMMENT.sub("", tex)
    end = tex.find("\\end{document}")
    tex = tex[: end if end >= 0 else len(tex)]
    pattern = re.compile(r"\\(?:" + "|".join(commands) + r")\*?(?:\[[^\]]*\])?(?=\{)")
    heads = []
    for match in pattern.finditer(tex):
        heading, after = _braced(tex, match.end())
        heads.append((match.start(), after, " ".join(tex_to_text(heading).split())))
    sections = []
    for number, (_, after, heading) in enumerate(heads):
        stop = heads[number + 1][0] if number + 1 < len(heads) else len(tex)
        body = re.sub(r"^(?:\{[^{}]*\})+", "", tex[after:stop].lstrip())  # \Question's version arguments
        sections.append(Section(f"{name}#{number}", heading, tex_to_text(body)))
    return sections


def _read_maybe_gzip(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# The sources

PYTHON_HTML = "usr/share/doc/python3.11/html"
PERL_POD = "usr/share/perl/5.36.0/pod"
# Not answers: release notes, and pages that list every heading (the questions) of the others.
PERL_SKIPPED = re.compile(r"^perl(?:\d+delta|toc|faq|api|intern)\.pod$")
DEBIAN_FAQ_LICENCE = "SPI's permission notice (verbatim and modified copies may be distributed)"
DOCBOOK = ("</div>", '<div class="navfooter"')  # DocBook HTML: after the navigation header, before the footer


def _python() -> list[Section]:
    parts = ("faq", "howto", "tutorial", "reference", "using", "extending")
    patterns = [f"{part}/*.html" for part in parts]
    return html_sections(
        unpacked("python3.11-doc") / PYTHON_HTML, patterns, 'role="main">', '<div class="sphinxsidebar"'
    )


def _perl() -> list[Section]:
    sections = []
    for path in sorted((unpacked("perl-doc") / PERL_POD).glob("*.pod")):
        if not PERL_SKIPPED.match(path.name):
            sections.extend(pod_sections(path.name, path.read_text(encoding="utf-8", errors="replace")))
    return sections


# GNOME Help: the desktop's help (gnome-user-docs) and the help of GNOME applications whose
# Chinese translation has questions as titles.
GNOME_HELP = {
    "gnome-user-docs": "gnome-help",
    "evince-common": "evince",
    "gnome-boxes": "gnome-boxes",
    "gnome-logs": "gnome-logs",
    "epiphany-browser-data": "epiphany",
}


GNOME_VERSIONS = (
    "gnome-user-docs 43.0-2, evince-common 43.1-2+deb12u1, gnome-boxes 43.2-1, gnome-logs 43.0-1, "
    "epiphany-browser-data 43.1-1"
)
GNOME_LICENCES = "CC-BY-SA-3.0 (gnome-user-docs); the applications' help under their own free licences"


def _gnome_help(locale: str) -> list[Section]:
    sections = []
    for package, app in GNOME_HELP.items():
        folder = unpacked(package) / "usr/share/help" / locale / app
        for path in sorted(folder.glob("*.page")):
            sections.extend(mallard_sections(f"{app}/{path.name}", path.read_text(encoding="utf-8", errors="replace")))
    return sections


TEX_DOC = "usr/share/doc/texlive-doc"
TEX_FAQS = {
    "latex/ctex-faq/src/ctex-faq.tex.gz": ("section", "Question"),
    "support/asymptote-faq-zh-cn/src/asy-faq.tex.gz": ("section", "subsection"),
}


def _tex_faqs() -> list[Section]:
    root = unpacked("texlive-lang-chinese") / TEX_DOC
    sections = []
    for path, commands in TEX_FAQS.items():
        sections.extend(tex_sections(path.split("/")[1], _read_maybe_gzip(root / path), commands))
    return sections


# Debian's manuals in simplified Chinese (DocBook HTML), each a book of sections.
DEBIAN_MANUALS = {
    "debian-handbook": ("usr/share/doc/debian-handbook/html/zh-CN", "*.html", DOCBOOK),
    "debian-reference-zh-cn": ("usr/share/debian-reference", "*.zh-cn.html", DOCBOOK),
    "installation-guide-amd64": ("usr/share/doc/installation-guide-amd64/zh_CN", "*.html", DOCBOOK),
    "debian-edu-doc-legacy-zh-cn": ("usr/share/doc/debian-edu-doc-legacy-zh-cn", "*.html", ("<body", "</body>")),
    "debian-edu-doc-zh-cn": (
        "usr/share/doc/debian-edu-doc-zh-cn",
        "debian-edu-bookworm-manual.html",
        ("<body", "</body>"),
    ),
}


def _debian_manuals() -> list[Section]:
    sections = []
    for package, (folder, pattern, (start, end)) in DEBIAN_MANUALS.items():
        found = html_sections(unpacked(package) / folder, [pattern], start, end)
        sections.extend(Section(f"{package}/{s.key}", s.heading, s.body) for s in found)
    return sections


def _everywhere(section: Section) -> bool:
    return True


SOURCES = {
    source.name: source
    for source in (
        Source(
            "en-python", "en", ("python3.11-doc",), "3.11.2-6+deb12u9", "PSF-2.0",
            "CPython 3.11 documentation: FAQ, HOWTOs, tutorial, language reference, using, extending "
            "(the library reference left out); questions from the FAQ pages",
            _python, lambda s: s.key.startswith("faq/"),
        ),
        Source(
            "en-perl", "en", ("perl-doc",), "5.36.0-7+deb12u4", "GPL-1+ or Artistic",
            "Perl 5.36 POD pages (perlfaq1-9 and the other manuals; release notes, perltoc, perlapi, "
            "perlintern and the perlfaq index left out); questions from perlfaq1-9",
            _perl, lambda s: bool(re.match(r"perlfaq\d\.pod#", s.key)),
        ),
        Source(
            "en-debian-faq", "en", ("debian-faq",), "11.1", DEBIAN_FAQ_LICENCE,
            "The Debian GNU/Linux FAQ, English HTML",
            lambda: html_sections(unpacked("debian-faq") / "usr/share/doc/debian/FAQ", ["*.en.html"], *DOCBOOK),
            _everywhere,
        ),
        Source(
            "en-gnome-help", "en", tuple(GNOME_HELP), GNOME_VERSIONS, GNOME_LICENCES,
            "GNOME Help, C locale: the desktop help and four applications' help, Mallard pages and their sections",
            lambda: _gnome_help("C"), _everywhere,
        ),
        Source(
            "zh-debian-faq", "zh", ("debian-faq-zh-cn",), "11.1", DEBIAN_FAQ_LICENCE,
            "The Debian GNU/Linux FAQ, simplified Chinese HTML",
            lambda: html_sections(
                unpacked("debian-faq-zh-cn") / "usr/share/doc/debian/FAQ/zh-cn", ["*.zh-cn.html"], *DOCBOOK
            ),
            _everywhere,
        ),
        Source(
            "zh-tex-faq", "zh", ("texlive-lang-chinese",), "2022.20230122-1",
            "CTeX FAQ: GFDL-1.2+ (stated in its source); Asymptote FAQ translation: no statement in its files, "
            "shipped in TeX Live",
            "The CTeX FAQ (吴凌云; LaTeX questions collected on the CTeX forum) and the Chinese "
            "Asymptote FAQ, from their LaTeX sources in texlive-doc",
            _tex_faqs, _everywhere, translated=False,
        ),
        Source(
            "zh-gnome-help", "zh", tuple(GNOME_HELP), GNOME_VERSIONS, GNOME_LICENCES,
            "GNOME Help, zh_CN locale: the desktop help and four applications' help, Mallard pages and "
            "their sections (pages left untranslated stay in the corpus; their questions do not count)",
            lambda: _gnome_help("zh_CN"), _everywhere,
        ),
        Source(
            "zh-libreoffice-help", "zh", ("libreoffice-help-zh-cn",), "4:7.4.7-1+deb12u14", "MPL-2.0",
            "LibreOffice 7.4 Help, zh-CN HTML pages and their sections",
            lambda: html_sections(
                unpacked("libreoffice-help-zh-cn") / "usr/share/libreoffice/help/zh-CN", ["text/**/*.html"],
                '<div id="DisplayArea"', '<div id="SearchFrame"',
            ),
            _everywhere,
        ),
        Source(
            "zh-debian-manuals", "zh", tuple(DEBIAN_MANUALS), "debian-handbook 11.20220922, debian-reference 2.100, "
            "installation-guide-amd64 20230508+deb12u1, debian-edu-doc(-legacy) 2.12.23~deb12u1", "GPL-2+",
            "Debian's manuals in simplified Chinese: the Debian Administrator's Handbook, the Debian "
            "Reference, the installation guide (amd64), the Debian Edu bookworm manual and the "
            "legacy Debian Edu manuals",
            _debian_manuals, _everywhere,
        ),
    )
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Packages


def unpacked(package: str) -> Path:
    root = CACHE / package
    if not root.is_dir():
        raise MissingPackage(f"{package} is not in {CACHE}: run `python -m bench.retrieval.dev_sets --fetch` first")
    return root


def fetch_packages(packages: Iterable[str]) -> list[Path]:
    """`apt-get download` + `dpkg-deb -x` each package not yet unpacked; the unpacked roots."""
    downloads = CACHE / "debs"
    downloads.mkdir(parents=True, exist_ok=True)
    roots = []
    for package in dict.fromkeys(packages):
        root = CACHE / package
        if not root.is_dir():
            result = subprocess.run(["apt-get", "download", package], cwd=downloads, capture_output=True, text=True)
            if result.returncode != 0:
                raise MissingPackage(f"apt-get download {package} failed: {result.stderr.strip()}")
            debs = sorted(downloads.glob(f"{package}_*.deb"))
            if not debs:
                raise MissingPackage(f"apt-get download {package} left no {package}_*.deb in {downloads}")
            partial = CACHE / f"{package}.partial"
            subprocess.run(["rm", "-rf", str(partial)], check=True)
            subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(partial)], check=True)
            partial.rename(root)
        roots.append(root)
    return roots


def source_material(name: str) -> tuple[list[Section], list[Question]]:
    source = SOURCES[name]
    return questions_and_documents(source.sections(), source.language, source.asks, translated=source.translated)
