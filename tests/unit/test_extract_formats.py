"""Extraction of real files written by the tests: encodings, reStructuredText, Word, PowerPoint.

Each file is made on disk (Office files with python-docx / python-pptx) and read back
through `ingest.extract.extract`, the function the connector calls.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import docx
import pptx
import pytest
from pptx.util import Inches

from ingest.extract import ExtractionError, extract

LEAVE = (
    "Déjà vu: the résumé was naïve.\n"
    "Employees accrue two days of paid leave per month; unused leave carries over into "
    "the next year\u2019s first quarter, per the café policy.\n"
)


# ---- encodings -------------------------------------------------------------------------


def test_html_declaring_latin1_in_its_meta_tag_is_read_in_that_charset(tmp_path: Path) -> None:
    """An HTML file saved as ISO-8859-1 that says so in `<meta http-equiv>` reads with its
    accents (and its windows-1252 dash) intact, title included."""
    page = tmp_path / "menu.html"
    page.write_bytes(
        b'<html><head><meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
        + "<title>Café guide</title></head><body><p>The café is naïve \u2013 and proud.</p>"
        "</body></html>".encode("cp1252")
    )
    extracted = extract(page)
    assert extracted.title == "Café guide"
    assert extracted.text == "The café is naïve \u2013 and proud."


def test_meta_charset_and_xml_declaration_are_honoured(tmp_path: Path) -> None:
    """`<meta charset=...>` and an XML declaration's encoding both choose the charset."""
    meta = tmp_path / "meta.htm"
    meta.write_bytes(
        '<meta charset="windows-1251"><title>Справка</title><p>Установка пакета</p>'.encode(
            "cp1251"
        )
    )
    assert extract(meta).title == "Справка"
    assert extract(meta).text == "Установка пакета"
    xhtml = tmp_path / "xhtml.html"
    xhtml.write_bytes(
        b'<?xml version="1.0" encoding="ISO-8859-1"?>\n'
        + "<html><head><title>Naïve</title></head><body><p>Crème brûlée</p></body></html>".encode(
            "latin-1"
        )
    )
    assert (extract(xhtml).title, extract(xhtml).text) == ("Naïve", "Crème brûlée")


def test_utf16_with_byte_order_mark_reads_as_text(tmp_path: Path) -> None:
    """A UTF-16 (little-endian) text file with its BOM reads as text, the BOM dropped."""
    note = tmp_path / "note.txt"
    note.write_bytes("\ufeffThe café opens at nine.".encode("utf-16-le"))
    assert extract(note).text == "The café opens at nine."


def test_undeclared_windows_1252_text_is_detected(tmp_path: Path) -> None:
    """A cp1252 text file with no declaration is detected and read with its accents and
    curly apostrophe."""
    legacy = tmp_path / "leave.txt"
    legacy.write_bytes(LEAVE.encode("cp1252"))
    assert extract(legacy).text == LEAVE


def test_valid_utf8_reads_as_utf8_whatever_the_declaration(tmp_path: Path) -> None:
    """Bytes that are valid UTF-8 are read as UTF-8 (a UTF-8 BOM dropped), even under a
    stale latin-1 declaration."""
    stale = tmp_path / "stale.html"
    stale.write_bytes('<meta charset="iso-8859-1"><p>naïve café</p>'.encode())
    assert extract(stale).text == "naïve café"
    bom = tmp_path / "bom.md"
    bom.write_bytes(b"\xef\xbb\xbf# Caf\xc3\xa9\n\nbody")
    assert (extract(bom).title, extract(bom).text) == ("Café", "# Café\n\nbody")


def test_binary_data_under_a_text_name_is_refused_with_a_reason(tmp_path: Path) -> None:
    """A gzip archive named .txt is refused as binary data, not read as garbage text."""
    archive = tmp_path / "notes.txt"
    archive.write_bytes(gzip.compress(b"leave policy " * 200, mtime=0))
    with pytest.raises(ExtractionError, match="binary data, not text"):
        extract(archive)


# ---- reStructuredText ------------------------------------------------------------------


def test_rst_reads_text_and_title_without_markup(tmp_path: Path) -> None:
    """A .rst file gives its document title and prose without markup, its titles as headings
    (`#` once per level); Sphinx roles keep their text, unknown directives and comments are
    dropped, and `include` never reads other files."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET CONTENT", encoding="utf-8")
    page = tmp_path / "install.rst"
    page.write_text(
        f""".. _install:

============
Installation
============

.. a comment that is not text

Run ``pip install kbgate`` as shown in :ref:`the quickstart <quick>` and :doc:`usage`.

.. toctree::
   :maxdepth: 2

.. include:: {secret}

.. note::

   Python 3.11 is **required**.

Upgrading
---------

- keep your data dir
""",
        encoding="utf-8",
    )
    extracted = extract(page)
    assert extracted.title == "Installation"
    assert extracted.text == (
        "# Installation\n\n"
        "Run pip install kbgate as shown in the quickstart and usage.\n\n"
        "Python 3.11 is required.\n\n"
        "## Upgrading\n\n"
        "keep your data dir"
    )
    assert "SECRET" not in extracted.text


# ---- Word and PowerPoint -----------------------------------------------------------------


def test_docx_reads_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    """A .docx gives its paragraphs and table rows in document order (a merged cell once), a
    heading as a Markdown heading, and its properties' title."""
    document = docx.Document()
    document.core_properties.title = "Travel policy"
    document.add_heading("Booking", level=1)
    document.add_paragraph("Book flights through the travel portal.")
    table = document.add_table(rows=2, cols=3)
    for cell, text in zip(table.rows[0].cells, ["Region", "Limit", "Class"], strict=True):
        cell.text = text
    table.cell(1, 0).merge(table.cell(1, 1)).text = "Europe 300 EUR"
    table.cell(1, 2).text = "economy"
    document.add_paragraph("Receipts are kept for seven years.")
    path = tmp_path / "travel.docx"
    document.save(str(path))
    extracted = extract(path)
    assert extracted.title == "Travel policy"
    assert extracted.text == (
        "# Booking\n\nBook flights through the travel portal.\n\n"
        "Region | Limit | Class\n\nEurope 300 EUR | economy\n\n"
        "Receipts are kept for seven years."
    )


def test_docx_title_falls_back_to_the_title_style(tmp_path: Path) -> None:
    """Without a properties title, the first paragraph in the Title style is the title."""
    document = docx.Document()
    document.core_properties.title = ""
    document.add_paragraph("Expense rules", style="Title")
    document.add_paragraph("Claims are filed monthly.")
    path = tmp_path / "expenses.docx"
    document.save(str(path))
    assert extract(path).title == "Expense rules"


def test_pptx_reads_slides_in_reading_order(tmp_path: Path) -> None:
    """A .pptx gives each slide's title, then its shapes top to bottom and left to right
    (tables row by row), then its speaker notes, a blank line and a form feed before each
    slide after the first (its page); the first slide's title is the title."""
    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Quarterly review"
    # Added right before left: reading order comes from position, not creation order.
    right = first.shapes.add_textbox(Inches(5), Inches(6), Inches(2), Inches(1))
    right.text_frame.text = "Costs fell."
    left = first.shapes.add_textbox(Inches(0.5), Inches(6), Inches(2), Inches(1))
    left.text_frame.text = "Revenue grew."
    first.placeholders[1].text_frame.text = "Highlights"
    first.notes_slide.notes_text_frame.text = "Mention the new office."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Headcount"
    grid = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for (row, column), text in {(0, 0): "Team", (0, 1): "People", (1, 0): "Support"}.items():
        grid.cell(row, column).text = text
    grid.cell(1, 1).text = "12"
    path = tmp_path / "review.pptx"
    deck.save(str(path))
    extracted = extract(path)
    assert extracted.title == "Quarterly review"
    assert extracted.text == (
        "Quarterly review\nHighlights\nRevenue grew.\nCosts fell.\nMention the new office."
        "\n\n\fHeadcount\nTeam | People\nSupport | 12"
    )


def test_damaged_office_files_are_refused_with_a_reason(tmp_path: Path) -> None:
    """A .docx that is not a ZIP package, and a .pptx whose package lacks its parts, raise
    ExtractionError naming the problem."""
    not_zip = tmp_path / "old.docx"
    not_zip.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512))
    with pytest.raises(ExtractionError, match="not a ZIP package"):
        extract(not_zip)
    empty_zip = tmp_path / "empty.pptx"
    empty_zip.write_bytes(b"PK\x05\x06" + bytes(18))
    with pytest.raises(ExtractionError, match="not a readable PowerPoint presentation"):
        extract(empty_zip)


def test_unsupported_suffix_is_refused() -> None:
    """A suffix the connector does not read raises ExtractionError naming it."""
    with pytest.raises(ExtractionError, match=r"unsupported file type '\.png'"):
        extract(Path("logo.png"))
