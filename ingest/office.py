"""Text and title of Word (.docx, python-docx) and PowerPoint (.pptx, python-pptx) files.

- `.docx`: body paragraphs and tables in document order (a table row's cells on one
  line, separated by ` | `; a cell spanning columns once), a paragraph in a "Heading N"
  style as a Markdown heading (`## Title`); headers, footers and comments are left out.
  The title is the document properties' title, else the first paragraph in the "Title"
  style.
- `.pptx`: slide by slide, the title first, then the other shapes top to bottom and
  left to right (groups opened, tables row by row), then the speaker notes. The title
  is the document properties' title, else the first slide's title.

Both hand over their core properties (author, subject, keywords, dates, language) raw,
for `ingest.properties` to clean and check.

Both formats are ZIP packages: one whose XML would unpack past `MAX_XML_BYTES` is
refused before it is parsed. The libraries are imported only when such a file is read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ingest.pages import PAGE_SEPARATOR
from ingest.properties import read_properties

if TYPE_CHECKING:
    from docx.document import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph
    from pptx.presentation import Presentation
    from pptx.shapes.base import BaseShape
    from pptx.slide import Slide

#: The most XML an Office file may unpack to (its media do not count).
MAX_XML_BYTES = 256 * 1024 * 1024


class OfficeError(ValueError):
    """The file is not a readable Office document; the message says why."""


def docx_text(path: Path) -> tuple[str, str, dict[str, Any]]:
    """Text of a Word document in reading order, its title ("" if none) and its core
    properties, raw (`ingest.properties`)."""
    _check_package(path, "Word")
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as docx_relationships

    try:
        document = docx.Document(str(path))
        text = "\n\n".join(_docx_blocks(document.iter_inner_content()))
        title = _docx_title(document)
        properties = _core_properties(document.part.package, docx_relationships.CORE_PROPERTIES)
    # A damaged package breaks python-docx and lxml in many ways below any common class.
    except Exception as error:
        raise OfficeError(f"not a readable Word document: {_why(error)}") from error
    return text, " ".join(title.split()), properties


def pptx_text(path: Path) -> tuple[str, str, dict[str, Any]]:
    """Text of a presentation slide by slide (each after the first starting with a form
    feed), its title ("" if none) and its core properties, raw (`ingest.properties`)."""
    _check_package(path, "PowerPoint")
    import pptx
    from pptx.opc.constants import RELATIONSHIP_TYPE as pptx_relationships

    try:
        presentation = pptx.Presentation(str(path))
        slides = [_slide_text(slide) for slide in presentation.slides]
        title = _pptx_title(presentation)
        properties = _core_properties(presentation.part.package, pptx_relationships.CORE_PROPERTIES)
    # Same as for Word: damage surfaces as arbitrary exceptions.
    except Exception as error:
        raise OfficeError(f"not a readable PowerPoint presentation: {_why(error)}") from error
    # A form feed starts each slide after the first (`ingest.pages`): passages cite it.
    return PAGE_SEPARATOR.join(slides), " ".join(title.split()), properties


def _check_package(path: Path, kind: str) -> None:
    try:
        with zipfile.ZipFile(path) as package:
            xml_bytes = sum(
                info.file_size
                for info in package.infolist()
                if info.filename.endswith((".xml", ".rels"))
            )
    except zipfile.BadZipFile:
        raise OfficeError(
            f"not a readable {kind} file: not a ZIP package (damaged, or an older "
            f"binary format under a new name?)"
        ) from None
    except OSError as error:
        raise OfficeError(f"cannot read the file: {error.strerror or error}") from error
    if xml_bytes > MAX_XML_BYTES:
        raise OfficeError(
            f"its XML unpacks to {xml_bytes // 2**20} MiB, over the "
            f"{MAX_XML_BYTES // 2**20} MiB read from an Office file"
        )


def _core_properties(package: Any, relationship: str) -> dict[str, Any]:
    """A package's core properties (`docProps/core.xml`, found by its `relationship`
    type) as `ingest.properties` names them; none for a package without that part (both
    libraries invent defaults then)."""
    try:
        part = package.part_related_by(relationship)
    except KeyError:
        return {}
    # python-docx's part holds its properties in `core_properties`; python-pptx's part
    # is the properties object itself.
    core = getattr(part, "core_properties", part)
    return read_properties(
        {
            "author": lambda: core.author,
            "subject": lambda: core.subject,
            "keywords": lambda: core.keywords,
            "created": lambda: core.created,
            "modified": lambda: core.modified,
            "content_language": lambda: core.language,
        }
    )


def _why(error: Exception) -> str:
    return str(error) or type(error).__name__


# ---- Word ---------------------------------------------------------------------------


def _docx_blocks(items: Iterable[Paragraph | Table], *, headings: bool = True) -> Iterator[str]:
    """Paragraphs and table rows; a body paragraph in a "Heading N" style as a Markdown
    heading (`#` N times, at most 6), so the document's structure (`ingest.structure`)
    finds it."""
    from docx.text.paragraph import Paragraph

    for item in items:
        if isinstance(item, Paragraph):
            text = item.text.strip()
            level = _heading_level(item) if headings and text else 0
            if level:
                yield f"{'#' * level} {' '.join(text.split())}"
            elif text:
                yield text
        else:
            yield from _docx_rows(item)


def _heading_level(paragraph: Paragraph) -> int:
    """N for a paragraph in Word's built-in "Heading N" style (0: none)."""
    style = paragraph.style
    name = str(style.name or "") if style is not None else ""
    kind, _, number = name.partition(" ")
    if kind != "Heading" or not number.isdigit():
        return 0
    return min(int(number), 6) if int(number) >= 1 else 0


def _docx_rows(table: Table) -> Iterator[str]:
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(_docx_blocks(cell.iter_inner_content(), headings=False))
            # python-docx repeats a cell once for every grid column it spans.
            if text and (not cells or cells[-1] != text):
                cells.append(text)
        if cells:
            yield " | ".join(cells)


def _docx_title(document: Document) -> str:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.opc.parts.coreprops import CorePropertiesPart

    # python-docx invents a title ("Word Document") for a package with no properties
    # part, so its presence is checked first.
    try:
        part = document.part.package.part_related_by(RELATIONSHIP_TYPE.CORE_PROPERTIES)
    except KeyError:
        part = None
    if part is not None:
        title = str(cast(CorePropertiesPart, part).core_properties.title or "")
        if title.strip():
            return title
    for paragraph in document.paragraphs:
        style = paragraph.style
        if style is not None and style.name == "Title" and paragraph.text.strip():
            return paragraph.text
    return ""


# ---- PowerPoint ---------------------------------------------------------------------


def _slide_text(slide: Slide) -> str:
    title = slide.shapes.title
    title_id = title.shape_id if title is not None else None
    shapes = sorted(slide.shapes, key=lambda shape: _reading_key(shape, title_id))
    parts = [text for shape in shapes for text in _shape_texts(shape)]
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        if notes is not None:
            parts.append(notes.text)
    return "\n".join(part.replace("\v", "\n").strip() for part in parts if part.strip())


def _reading_key(shape: BaseShape, title_id: int | None) -> tuple[bool, int, int]:
    """Title first, then top to bottom, left to right."""
    # A shape with no position of its own reads as at the top left.
    return shape.shape_id != title_id, int(shape.top or 0), int(shape.left or 0)


def _shape_texts(shape: BaseShape) -> Iterator[str]:
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    if isinstance(shape, GroupShape):
        for inner in sorted(shape.shapes, key=lambda inner: _reading_key(inner, None)):
            yield from _shape_texts(inner)
    elif isinstance(shape, GraphicFrame) and shape.has_table:
        for row in shape.table.rows:
            cells = [cell.text.strip() for cell in row.cells if cell.text.strip()]
            if cells:
                yield " | ".join(cells)
    elif isinstance(shape, Shape) and shape.has_text_frame:
        yield shape.text_frame.text


def _pptx_title(presentation: Presentation) -> str:
    from pptx.opc.constants import RELATIONSHIP_TYPE
    from pptx.parts.coreprops import CorePropertiesPart

    # As python-docx, python-pptx invents a title for a package with no properties part.
    try:
        part = presentation.part.package.part_related_by(RELATIONSHIP_TYPE.CORE_PROPERTIES)
    except KeyError:
        part = None
    if part is not None:
        title = str(cast(CorePropertiesPart, part).title or "")
        if title.strip():
            return title
    slides = list(presentation.slides)
    first_title = slides[0].shapes.title if slides else None
    if first_title is not None and first_title.has_text_frame:
        return str(first_title.text_frame.text).replace("\v", " ")
    return ""
