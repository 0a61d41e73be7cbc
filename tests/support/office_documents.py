"""Small PDF, DOCX and PPTX files written by the tests themselves (a few KB each).

PDF: pages of text lines in Helvetica (WinAnsi text only), with an optional Info title; an
"encrypted" file carries a standard security handler whose user password is not empty, so no
reader opens it without one. DOCX and PPTX: zips of the minimal OOXML parts a reader needs, with
optional core properties (`docProps/core.xml`, the metadata title).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def pdf(
    pages: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    encrypted: bool = False,
    images_only: bool = False,
    heading_size: float | None = None,
    first_page_sizes: Sequence[float] | None = None,
    padding: bytes = b"",
) -> bytes:
    """A PDF whose page N shows the lines `pages[N-1]`, top to bottom; with `heading_size`, the first
    line of page 1 in that font size (a title page), with `first_page_sizes` each line of page 1 in
    its own size; `padding` is an unused stream on each page (size)."""
    objects: list[bytes] = []  # object N is objects[N-1]

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below
    page_tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    kids = []
    for lines in pages:
        if images_only:  # a filled rectangle: marks on the page, no text
            stream = b"0.5 g 72 72 400 600 re f"
        elif first_page_sizes and not kids:
            stream = " ".join(
                f"BT /F1 {size:g} Tf 72 {740 - 30 * row} Td {_pdf_string(line)} Tj ET"
                for row, (line, size) in enumerate(zip(lines, first_page_sizes, strict=True))
            ).encode("cp1252")
        elif heading_size and not kids and lines:
            shown = " T* ".join(f"{_pdf_string(line)} Tj" for line in lines[1:])
            stream = (
                f"BT /F1 {heading_size:g} Tf 72 740 Td {_pdf_string(lines[0])} Tj ET "
                f"BT /F1 11 Tf 14 TL 72 700 Td {shown} ET"
            ).encode("cp1252")
        else:
            shown = " T* ".join(f"{_pdf_string(line)} Tj" for line in lines)
            stream = f"BT /F1 11 Tf 14 TL 72 760 Td {shown} ET".encode("cp1252")
        if padding:
            add(b"<< /Length %d >>\nstream\n" % len(padding) + padding + b"\nendstream")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (page_tree, content, font)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % page_tree
    objects[page_tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids),
        len(kids),
    )
    info = add(f"<< /Title {_pdf_string(title)} /Producer (tests) >>".encode("cp1252")) if title else None
    encrypt = None
    if encrypted:  # RC4 40-bit, P = -4; O and U do not match the empty password
        encrypt = add(b"<< /Filter /Standard /V 1 /R 2 /O <" + b"ab" * 32 + b"> /U <" + b"cd" * 32 + b"> /P -4 >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    trailer = b"<< /Size %d /Root %d 0 R" % (len(objects) + 1, catalog)
    if info:
        trailer += b" /Info %d 0 R" % info
    if encrypt:
        trailer += b" /Encrypt %d 0 R /ID [<%s> <%s>]" % (encrypt, b"00" * 16, b"00" * 16)
    out.write(b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


_CORE = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></cp:coreProperties>'
)
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PACKAGE_R = "http://schemas.openxmlformats.org/package/2006/relationships"
_TYPES = '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>'


def _package_relations(main: str) -> str:
    return (
        f'<?xml version="1.0"?><Relationships xmlns="{_PACKAGE_R}">'
        f'<Relationship Id="rId1" Type="{_R}/officeDocument" Target="{main}"/></Relationships>'
    )


def _zip(parts: Mapping[str, str | bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return out.getvalue()


def _paragraph(text: str, style: str | None = None) -> str:
    properties = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f'<w:p>{properties}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def docx_body(*blocks: str | tuple[str, str] | list[list[str]]) -> str:
    """Body XML: a str is a paragraph, (style, text) a styled one, a list of rows a table."""
    parts = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(_paragraph(block))
        elif isinstance(block, tuple):
            parts.append(_paragraph(block[1], block[0]))
        else:
            rows = "".join(
                "<w:tr>" + "".join(f"<w:tc>{_paragraph(cell)}</w:tc>" for cell in row) + "</w:tr>" for row in block
            )
            parts.append(f"<w:tbl>{rows}</w:tbl>")
    return "".join(parts)


def docx(
    *blocks: str | tuple[str, str] | list[list[str]],
    title: str | None = None,
    extra: Mapping[str, str | bytes] | None = None,
) -> bytes:
    """A Word document of `blocks` (see `docx_body`); styles are the built-in ids (`Heading1`, `Title`)."""
    document = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{_W}">'
        f"<w:body>{docx_body(*blocks)}</w:body></w:document>"
    )
    parts: dict[str, str | bytes] = {
        "[Content_Types].xml": _TYPES,
        "_rels/.rels": _package_relations("word/document.xml"),
        "word/document.xml": document,
    }
    if title is not None:
        parts["docProps/core.xml"] = _CORE.format(title=escape(title))
    parts.update(extra or {})
    return _zip(parts)


def _shape(text_lines: Sequence[str], placeholder: str | None) -> str:
    ph = f'<p:nvPr><p:ph type="{placeholder}"/></p:nvPr>' if placeholder else "<p:nvPr/>"
    paragraphs = "".join(f"<a:p><a:r><a:t>{escape(line)}</a:t></a:r></a:p>" for line in text_lines)
    return (
        f'<p:sp><p:nvSpPr><p:cNvPr id="1" name="s"/><p:cNvSpPr/>{ph}</p:nvSpPr><p:txBody>{paragraphs}</p:txBody></p:sp>'
    )


def pptx(
    slides: Sequence[tuple[str | None, Sequence[str], str | None]],
    *,
    title: str | None = None,
    extra: Mapping[str, str | bytes] | None = None,
) -> bytes:
    """A presentation of (title, body lines, speaker notes) slides, in order."""
    slide_ids = "".join(f'<p:sldId id="{256 + n}" r:id="rId{n + 1}"/>' for n in range(len(slides)))
    relations = "".join(
        f'<Relationship Id="rId{n + 1}" Type="{_R}/slide" Target="slides/slide{n + 1}.xml"/>'
        for n in range(len(slides))
    )
    parts: dict[str, str | bytes] = {
        "[Content_Types].xml": _TYPES,
        "_rels/.rels": _package_relations("ppt/presentation.xml"),
        "ppt/presentation.xml": (
            f'<?xml version="1.0"?><p:presentation xmlns:p="{_P}" xmlns:r="{_R}">'
            f"<p:sldIdLst>{slide_ids}</p:sldIdLst></p:presentation>"
        ),
        "ppt/_rels/presentation.xml.rels": (
            f'<?xml version="1.0"?><Relationships xmlns="{_PACKAGE_R}">{relations}</Relationships>'
        ),
    }
    for number, (slide_title, lines, notes) in enumerate(slides, start=1):
        shapes = (_shape([slide_title], "title") if slide_title else "") + (_shape(lines, None) if lines else "")
        parts[f"ppt/slides/slide{number}.xml"] = (
            f'<?xml version="1.0"?><p:sld xmlns:p="{_P}" xmlns:a="{_A}" xmlns:r="{_R}">'
            f"<p:cSld><p:spTree>{shapes}</p:spTree></p:cSld></p:sld>"
        )
        if notes is not None:
            parts[f"ppt/slides/_rels/slide{number}.xml.rels"] = (
                f'<?xml version="1.0"?><Relationships xmlns="{_PACKAGE_R}">'
                f'<Relationship Id="rId9" Type="{_R}/notesSlide" Target="../notesSlides/notesSlide{number}.xml"/>'
                "</Relationships>"
            )
            parts[f"ppt/notesSlides/notesSlide{number}.xml"] = (
                f'<?xml version="1.0"?><p:notes xmlns:p="{_P}" xmlns:a="{_A}"><p:cSld><p:spTree>'
                f"{_shape(['Slide image'], 'sldImg')}{_shape([notes], 'body')}</p:spTree></p:cSld></p:notes>"
            )
    if title is not None:
        parts["docProps/core.xml"] = _CORE.format(title=escape(title))
    parts.update(extra or {})
    return _zip(parts)


def pdf_page(stream: bytes, *, title: bytes | None = None, pages: int = 1) -> bytes:
    """A PDF of `pages` pages that all show one content stream, `stream`, Flate-compressed (so a
    bomb of millions of operators stays small on disk), with Helvetica as /F1 and `title` as its
    raw metadata title."""
    compressed = zlib.compress(stream, 6)
    kids = b" ".join(b"%d 0 R" % (6 + n) for n in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< /Length 0 >>\nstream\n\nendstream",  # unused
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(compressed) + compressed + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>"
    ] * pages
    if title is not None:
        objects.append(b"<< /Title (" + title + b") >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    info = b" /Info %d 0 R" % len(objects) if title is not None else b""
    out.write(b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref))
    return out.getvalue()


def pptx_text_boxes(boxes: Sequence[tuple[str, int]], *more_slides: Sequence[str]) -> bytes:
    """A deck whose first slide holds only text boxes (no placeholder), each (text, font size in
    hundredths of a point), then slides of body lines."""
    shapes = "".join(
        '<p:sp><p:nvSpPr><p:cNvPr id="1" name="TextBox"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:txBody>'
        f'<a:p><a:r><a:rPr lang="en-US" sz="{size}"/><a:t>{escape(text)}</a:t></a:r></a:p></p:txBody></p:sp>'
        for text, size in boxes
    )
    first = (
        f'<?xml version="1.0"?><p:sld xmlns:p="{_P}" xmlns:a="{_A}" xmlns:r="{_R}">'
        f"<p:cSld><p:spTree>{shapes}</p:spTree></p:cSld></p:sld>"
    )
    slides = [(None, ["placeholder"], None)] + [(None, list(lines), None) for lines in more_slides]
    return pptx(slides, extra={"ppt/slides/slide1.xml": first})
