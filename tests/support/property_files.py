"""Tiny real PDF, Word and PowerPoint files carrying document properties, made with the
libraries the readers use (pypdf, python-docx, python-pptx), and hostile variants."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any

import docx
import pptx
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DictionaryObject,
    NameObject,
    NumberObject,
    TextStringObject,
)


def text_pdf(text: str, title: str) -> bytes:
    """A one-page PDF with one line of Helvetica text and an info title."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Title (%s) >>" % title.encode("latin-1"),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def pdf_with(
    text: str, info: dict[str, Any], *, lang: Any = None, raw: dict[str, Any] | None = None
) -> bytes:
    """`text_pdf` rewritten by pypdf with this document information (as text strings),
    `raw` entries of it as the pypdf objects given, and a catalog `/Lang`."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(text, "Untitled"))))
    writer.add_metadata(info)
    for key, value in (raw or {}).items():
        writer.add_metadata({key: ""})  # the entry, then its value in place
        information = writer._info  # pypdf's only handle on the raw entry
        assert information is not None
        entries = information.get_object()
        assert isinstance(entries, DictionaryObject)
        entries[NameObject(key)] = value
    if lang is not None:
        value = TextStringObject(lang) if isinstance(lang, str) else lang
        writer.root_object[NameObject("/Lang")] = value
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def hostile_pdf(text: str) -> bytes:
    """A PDF whose properties are of the wrong type, hold control characters, are huge or
    are no date."""
    return pdf_with(
        text,
        {
            "/Title": "Hostile manual",
            "/Subject": "Bad\x00\x1b[2J subject",
            "/Keywords": "k" * 100_000,
            "/CreationDate": "D:garbage",
            "/ModDate": "D:20240301120000Z",
        },
        lang=ArrayObject([TextStringObject("en")]),
        raw={"/Author": NumberObject(5)},
    )


def docx_with(path: Path, paragraphs: list[str], **properties: Any) -> Path:
    """A Word document of these paragraphs whose core properties are set as given."""
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    for name, value in properties.items():
        setattr(document.core_properties, name, value)
    document.save(str(path))
    return path


def pptx_with(path: Path, title: str, body: str, **properties: Any) -> Path:
    """A one-slide presentation (a title and a body) whose core properties are set."""
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    assert slide.shapes.title is not None
    slide.shapes.title.text = title
    slide.placeholders[1].text = body  # the layout's body placeholder
    for name, value in properties.items():
        setattr(presentation.core_properties, name, value)
    presentation.save(str(path))
    return path


_HOSTILE_CORE = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
    'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:dcterms="http://purl.org/dc/terms/" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
    "<dc:creator>{creator}</dc:creator>"
    "<dc:subject>line one&#10;&#9;line two</dc:subject>"
    "<cp:keywords>{keywords}</cp:keywords>"
    '<dcterms:created xsi:type="dcterms:W3CDTF">not a date</dcterms:created>'
    "<dc:language>{language}</dc:language>"
    "</cp:coreProperties>"
)


def hostile_docx(path: Path, paragraphs: list[str]) -> Path:
    """A Word document whose core properties (written as XML, past python-docx's checks)
    hold a huge author, a subject over lines, 1000 keywords, no date and a long language."""
    docx_with(path, paragraphs)
    core = _HOSTILE_CORE.format(
        creator="A" * 100_000,
        keywords=",".join(f"k{number}" for number in range(1000)),
        language="x" * 5000,
    )
    with zipfile.ZipFile(path) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    parts["docProps/core.xml"] = core.encode("utf-8")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        for name, data in parts.items():
            package.writestr(name, data)
    return path


def moment(text: str) -> datetime:
    """A naive UTC datetime, as python-docx and python-pptx take them."""
    return datetime.fromisoformat(text)
