"""Plain text and a title from the files the connector reads.

- `.txt`: the text as is; the title is the file name without its suffix.
- `.md` / `.markdown`: the text as is (Markdown reads fine to both legs); the
  title is the first heading (`# Title` or a setext `Title` over `===`/`---`).
- `.rst`: the text of the document as docutils parses it (markup, comments and
  directives' options dropped; `include` and `raw` are never followed); the title
  is the document title, else the first section title.
- `.html` / `.htm`: visible text only (no tags, scripts, styles or templates),
  block elements ending lines so sentences and paragraphs survive; the title
  is `<title>`, else the first `<h1>`.
- `.pdf`: the text of every page through pypdf; the title is the document
  information's title; its other properties as `ingest.properties` reads them.
- `.docx` / `.pptx`: see `ingest.office`.

Text files are decoded by `ingest.decoding` (byte-order mark, UTF-8, an HTML/XML
charset declaration, then detection). Anything that cannot be read, decoded or parsed
raises `ExtractionError` with a message fit for a summary line. The libraries for
PDF, reStructuredText and Office files are imported only when such a file is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.decoding import UndecodableError, decode_text
from ingest.office import OfficeError, docx_text, pptx_text
from ingest.pages import PAGE_SEPARATOR
from ingest.properties import read_properties

if TYPE_CHECKING:
    from pypdf import PdfReader

#: Suffixes (lower case) the connector reads; every other file is skipped.
SUPPORTED_SUFFIXES = frozenset(
    {".txt", ".md", ".markdown", ".rst", ".html", ".htm", ".pdf", ".docx", ".pptx"}
)

_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_SETEXT_UNDERLINE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.DOTALL)
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*(\n\s*)+")

# Elements whose content is never visible text.
_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "iframe"})
# Elements that start a new line of text when they open or close.
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "div",
        "dl", "dt", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
        "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
        "table", "td", "th", "tr", "ul",
    }
)  # fmt: skip
# Void elements never close, so they must not open a hidden region.
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "wbr"})


class ExtractionError(ValueError):
    """The file could not be read or parsed; the message says why."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """What a file contributes to a document: its text, a title, its own fields
    (Markdown front matter's scalar and list-of-strings entries) and its document
    properties (PDF, Word, PowerPoint)."""

    text: str
    title: str
    fields: dict[str, Any] = field(default_factory=dict)
    #: the file's own document properties, raw and untrusted (`ingest.properties`)
    properties: dict[str, Any] = field(default_factory=dict)


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def extract(path: Path) -> Extracted:
    """Text and title of one file, by its suffix; `ExtractionError` when it cannot be read."""
    readers: dict[str, Callable[[Path], Extracted]] = {
        ".txt": _plain,
        ".md": _markdown,
        ".markdown": _markdown,
        ".rst": _rst,
        ".html": _html,
        ".htm": _html,
        ".pdf": _pdf,
        ".docx": _office(docx_text),
        ".pptx": _office(pptx_text),
    }
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ExtractionError(f"unsupported file type {path.suffix or '(none)'!r}")
    return reader(path)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ExtractionError(f"cannot read the file: {error.strerror or error}") from error


def _decode(raw: bytes, *, markup: bool = False) -> str:
    try:
        return decode_text(raw, markup=markup)
    except UndecodableError as error:
        raise ExtractionError(str(error)) from None


def _plain(path: Path) -> Extracted:
    return Extracted(_decode(_read_bytes(path)), path.stem)


def _markdown(path: Path) -> Extracted:
    text = _decode(_read_bytes(path))
    return Extracted(text, markdown_title(text) or path.stem, front_matter_fields(text))


_FRONT_ENTRY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$")


def front_matter_fields(text: str) -> dict[str, Any]:
    """A Markdown file's front matter entries of one line each (`key: value`): numbers,
    `true`/`false`, `[a, b]` lists of strings and strings (quotes taken off); nested
    entries and other lines are left out."""
    found = _FRONT_MATTER.match(text)
    if found is None:
        return {}
    fields: dict[str, Any] = {}
    for line in found.group(0).splitlines()[1:-1]:
        entry = _FRONT_ENTRY.match(line)
        if entry and entry.group(2):
            fields[entry.group(1)] = _front_value(entry.group(2))
    return fields


def _front_value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    if raw.startswith("[") and raw.endswith("]"):
        return [_unquoted(item.strip()) for item in raw[1:-1].split(",") if item.strip()]
    try:
        number = float(raw)
    except ValueError:
        return _unquoted(raw)
    return int(number) if number.is_integer() and "." not in raw else number


def _unquoted(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def markdown_title(text: str) -> str:
    """The first ATX (`# Title`) or setext (`Title` / `=====`) heading, front matter skipped."""
    body = _FRONT_MATTER.sub("", text, count=1)
    previous = ""
    in_fence = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            previous = ""
            continue
        if in_fence:
            continue
        atx = _ATX_HEADING.match(line)
        if atx:
            return atx.group(1).strip()
        if previous.strip() and _SETEXT_UNDERLINE.match(line):
            return previous.strip()
        previous = line
    return ""


def _rst(path: Path) -> Extracted:
    text, title = rst_text(_decode(_read_bytes(path)))
    return Extracted(text, title or path.stem)


def rst_text(source: str) -> tuple[str, str]:
    """Text of a reStructuredText document, block by block, and its title ("" if none).

    Directives and roles docutils does not know (Sphinx's, say) are not errors: an
    unknown role keeps its text (`:ref:`Install <install>`` reads "Install"), an
    unknown directive is left out.
    """
    from docutils import nodes
    from docutils.core import publish_doctree

    try:
        document = publish_doctree(source, settings_overrides=_RST_SETTINGS)
    # docutils reports problems in the tree at these settings; anything raised is a bug
    # of its own on odd input, and still only this file's failure.
    except Exception as error:
        raise ExtractionError(f"not readable reStructuredText: {error}") from error
    for message in list(document.findall(nodes.system_message)):
        if message.parent is not None:
            message.parent.remove(message)
    for problem in list(document.findall(nodes.problematic)):
        if problem.parent is not None:
            problem.parent.replace(problem, nodes.Text(_role_text(problem.astext())))
    blocks = (
        _rst_block(node, titled=document.get("title") is not None)
        for node in document.findall(nodes.TextElement)
        if not isinstance(node, nodes.Inline | nodes.Invisible)
    )
    text = "\n\n".join(block for block in blocks if block)
    first_title = next((node.astext() for node in document.findall(nodes.title)), "")
    return text, " ".join(str(document.get("title") or first_title).split())


def _rst_block(node: Any, *, titled: bool) -> str:
    """One block of a reStructuredText document as text: a section's (or the document's)
    title as a Markdown heading, `#` once per level, so the document's structure
    (`ingest.structure`) finds it; a literal block fenced, so none of its lines reads
    as one; other blocks as they are."""
    from docutils import nodes

    text = str(node.astext()).strip()
    if not text:
        return ""
    if isinstance(node, nodes.title) and isinstance(node.parent, nodes.section | nodes.document):
        depth = sum(1 for parent in _ancestors(node) if isinstance(parent, nodes.section))
        level = min(depth + (1 if titled else 0), 6) or 1
        return f"{'#' * level} {' '.join(text.split())}"
    if isinstance(node, nodes.literal_block):
        return f"```\n{text}\n```"
    return text


def _ancestors(node: Any) -> Iterator[Any]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


# Parse only: no configuration files, no messages, no files or raw output pulled in.
_RST_SETTINGS = {
    "_disable_config": True,
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": False,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "syntax_highlight": "none",
}
_ROLE = re.compile(r"\A(?::[\w.+:-]+:)?`(?P<content>.*)`(?::[\w.+:-]+:)?\Z", re.DOTALL)
_LABELLED_TARGET = re.compile(r"\A(?P<label>.*?\S)\s*<[^<>]*>\Z", re.DOTALL)


def _role_text(source: str) -> str:
    """The readable part of an interpreted-text role docutils does not know."""
    role = _ROLE.match(source)
    if role is None:
        return source
    content = role.group("content")
    labelled = _LABELLED_TARGET.match(content)
    return (labelled.group("label") if labelled else content).lstrip("~!")


def _html(path: Path) -> Extracted:
    text, title = html_text(_decode(_read_bytes(path), markup=True))
    return Extracted(text, title or path.stem)


def html_text(markup: str) -> tuple[str, str]:
    """Visible text and title of an HTML document (the title is "" when it has none)."""
    parser = _TextParser()
    parser.feed(markup)
    parser.close()
    return parser.text(), parser.title()


_HEADINGS = {f"h{level}": level for level in range(1, 7)}


class _TextParser(HTMLParser):
    """Collects visible text; `<title>` and the first `<h1>` are kept aside for the title.
    A heading `<hN>` becomes a line of its own, `#` N times before its text, so the
    document's structure (`ingest.structure`) finds it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        #: the open heading's level and text (level 0: none open)
        self._heading_level = 0
        self._heading: list[str] = []
        self._hidden: list[str] = []  # open hidden elements, innermost last
        self._title: list[str] = []
        self._h1: list[str] = []
        self._in_title = False
        self._in_h1 = False
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _HIDDEN and tag not in _VOID:
            self._hidden.append(tag)
        elif tag == "h1" and not self._h1_done:
            self._in_h1 = True
        if tag in _HEADINGS and not self._hidden and not self._heading_level:
            self._heading_level = _HEADINGS[tag]
        if tag in _BLOCKS:
            self._parts.append("\n\n" if tag in {"p", "div", "section", "article"} else "\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self._parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _HIDDEN and tag in self._hidden:
            while self._hidden and self._hidden.pop() != tag:
                pass
        elif tag == "h1" and self._in_h1:
            self._in_h1 = False
            self._h1_done = True
        if _HEADINGS.get(tag) == self._heading_level and self._heading_level:
            self._close_heading()
        if tag in _BLOCKS:
            self._parts.append("\n\n" if tag in {"p", "div", "section", "article"} else "\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title.append(data)
            return
        if self._hidden:
            return
        if self._in_h1:
            self._h1.append(data)
        (self._heading if self._heading_level else self._parts).append(data)

    def _close_heading(self) -> None:
        text = " ".join("".join(self._heading).split())
        if text:
            self._parts.append(f"\n\n{'#' * self._heading_level} {text}\n\n")
        self._heading_level = 0
        self._heading.clear()

    def close(self) -> None:
        super().close()
        if self._heading_level:
            self._close_heading()

    def text(self) -> str:
        lines = (_SPACES.sub(" ", line).strip() for line in "".join(self._parts).split("\n"))
        return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()

    def title(self) -> str:
        title = " ".join("".join(self._title).split())
        return title or " ".join("".join(self._h1).split())


def _office(
    read: Callable[[Path], tuple[str, str, dict[str, Any]]],
) -> Callable[[Path], Extracted]:
    def reader(path: Path) -> Extracted:
        try:
            text, title, properties = read(path)
        except OfficeError as error:
            raise ExtractionError(str(error)) from error
        return Extracted(text, title or path.stem, properties=properties)

    return reader


def _pdf(path: Path) -> Extracted:
    text, title, properties = read_pdf(_read_bytes(path))
    return Extracted(text, title or path.stem, properties=properties)


def pdf_text(raw: bytes) -> tuple[str, str]:
    """Text of every page (each after the first starting with a form feed) and the
    metadata title."""
    text, title, _ = read_pdf(raw)
    return text, title


def read_pdf(raw: bytes) -> tuple[str, str, dict[str, Any]]:
    """`pdf_text`, and the document's raw properties (`ingest.properties`)."""
    import io

    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    def read() -> tuple[list[str], str, dict[str, Any]]:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("the PDF is encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        metadata = reader.metadata
        title = str(metadata.title or "") if metadata is not None else ""
        return pages, title, _pdf_properties(reader)

    try:
        pages, title, properties = read()
    except ExtractionError:
        raise
    except PyPdfError as error:
        raise ExtractionError(f"not a readable PDF: {error}") from error
    # A damaged file can break pypdf in many ways below its own error classes.
    except Exception as error:
        raise ExtractionError(f"not a readable PDF: {type(error).__name__}: {error}") from error
    # A form feed starts each page after the first, so its passages cite their page
    # (`ingest.pages`); an empty page keeps its place in the count.
    text = PAGE_SEPARATOR.join(page.strip() for page in pages)
    return text, " ".join(title.split()), properties


def _pdf_properties(reader: PdfReader) -> dict[str, Any]:
    """The document information's author, subject, keywords and dates, and the
    catalog's `/Lang`."""
    try:
        info = reader.metadata
    # A damaged information dictionary: no properties from it, the text still read.
    except Exception:
        info = None
    getters: dict[str, Callable[[], Any]] = {
        "content_language": lambda: _pdf_string(reader.root_object.get("/Lang"))
    }
    if info is not None:
        getters |= {
            "author": lambda: _pdf_string(info.get("/Author")),
            "subject": lambda: _pdf_string(info.get("/Subject")),
            "keywords": lambda: _pdf_string(info.get("/Keywords")),
            "created": lambda: info.creation_date,
            "modified": lambda: info.modification_date,
        }
    return read_properties(getters)


def _pdf_string(value: Any) -> str | None:
    """A PDF text string as a `str` (an indirect one resolved); None when it is another
    kind of object (pypdf's own getters would turn a number or an array into text)."""
    resolved = value.get_object() if hasattr(value, "get_object") else value
    return str(resolved) if isinstance(resolved, str) else None
