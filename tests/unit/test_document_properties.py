"""A file's document properties as fields (`ingest.properties`): read from real PDF, Word
and PowerPoint files, cleaned, checked against the KB's schema, never given precedence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from ingest.extract import extract
from ingest.metadata import MAX_METADATA_BYTES, FieldType, check_metadata
from ingest.properties import (
    MAX_KEYWORDS,
    MAX_PROPERTY_CHARS,
    merged_fields,
    property_fields,
)
from tests.support.property_files import (
    docx_with,
    hostile_docx,
    hostile_pdf,
    moment,
    pdf_with,
    pptx_with,
)

TEXT = "Each pump in the pump room is inspected every month by the crew."


def test_word_properties_become_fields(tmp_path: Path) -> None:
    """A Word file's author, subject, keywords, dates and language become fields; its
    title property stays the document's title."""
    path = docx_with(
        tmp_path / "guide.docx",
        [TEXT],
        title="Pump guide",
        author="Jane Roe",
        subject="Pump maintenance",
        keywords="pumps, maintenance; safety,pumps",
        created=moment("2023-05-01T08:00:00"),
        modified=moment("2024-02-03T04:05:06"),
        language="en-GB",
    )
    extracted = extract(path)
    assert extracted.title == "Pump guide"
    assert property_fields(extracted.properties, {}) == {
        "author": "Jane Roe",
        "subject": "Pump maintenance",
        "keywords": ["pumps", "maintenance", "safety"],
        "created": "2023-05-01T08:00:00Z",
        "modified": "2024-02-03T04:05:06Z",
        "content_language": "en-GB",
    }


def test_powerpoint_and_pdf_properties_become_fields(tmp_path: Path) -> None:
    """A presentation's core properties and a PDF's document information (and its
    catalog's language) are read the same way; a PDF date's offset is taken to UTC."""
    deck = pptx_with(tmp_path / "deck.pptx", "Valves", TEXT, author="Bob Stone", keywords="valves")
    fields = property_fields(extract(deck).properties, {})
    assert fields["author"] == "Bob Stone"
    assert fields["keywords"] == ["valves"]
    manual = tmp_path / "manual.pdf"
    manual.write_bytes(
        pdf_with(
            "Pumps are inspected monthly.",
            {
                "/Title": "Manual",
                "/Author": "Ann Lee",
                "/Keywords": "pumps;valves",
                "/CreationDate": "D:20230102030405+01'00'",
            },
            lang="de",
        )
    )
    extracted = extract(manual)
    assert extracted.title == "Manual"
    assert property_fields(extracted.properties, {}) == {
        "author": "Ann Lee",
        "keywords": ["pumps", "valves"],
        "created": "2023-01-02T02:04:05Z",
        "content_language": "de",
    }


def test_hostile_properties_are_dropped_and_the_file_still_reads(tmp_path: Path) -> None:
    """Wrong types, control characters, huge values and bad dates are left out; a list is
    cut to its bound; line breaks fold into spaces; the text is read as ever."""
    pdf = tmp_path / "hostile.pdf"
    pdf.write_bytes(hostile_pdf("Pumps are inspected monthly."))
    extracted = extract(pdf)
    assert "Pumps" in extracted.text
    assert extracted.title == "Hostile manual"
    assert property_fields(extracted.properties, {}) == {"modified": "2024-03-01T12:00:00Z"}
    word = extract(hostile_docx(tmp_path / "hostile.docx", [TEXT]))
    assert TEXT in word.text
    fields = property_fields(word.properties, {})
    assert fields["subject"] == "line one line two"
    assert fields["keywords"] == [f"k{number}" for number in range(MAX_KEYWORDS)]
    assert set(fields) == {"subject", "keywords"}


def test_properties_that_do_not_fit_the_schema_are_dropped() -> None:
    """A declared field's type decides: a mismatch drops the property alone, a declared
    datetime is stored normalized."""
    found = {
        "author": "Jane Roe",
        "subject": "Pumps",
        "keywords": "a, b",
        "created": datetime(2023, 5, 1, 10, 0, tzinfo=timezone(timedelta(hours=2))),
    }
    schema = {
        "subject": FieldType.NUMBER,
        "keywords": FieldType.STRING,
        "created": FieldType.DATETIME,
    }
    assert property_fields(found, schema) == {
        "author": "Jane Roe",
        "created": "2023-05-01T08:00:00Z",
    }


def test_strings_are_bounded_and_cleaned() -> None:
    """Over `MAX_PROPERTY_CHARS`, blank, or holding a control character: dropped."""
    assert property_fields({"author": "x" * (MAX_PROPERTY_CHARS + 1)}, {}) == {}
    assert property_fields({"author": "x" * MAX_PROPERTY_CHARS}, {}) != {}
    assert property_fields({"author": " \n\t "}, {}) == {}
    assert property_fields({"author": "Eve\x07"}, {}) == {}
    assert property_fields({"author": ["Eve"], "keywords": 7, "created": "2024"}, {}) == {}
    assert property_fields({"subject": "a\r\n\u2028b"}, {}) == {"subject": "a b"}
    naive = datetime(2024, 1, 1, 12, 0)  # a file's time without a zone
    assert property_fields({"modified": naive}, {}) == {"modified": "2024-01-01T12:00:00Z"}
    assert property_fields({"modified": datetime(1, 1, 1, tzinfo=UTC)}, {}) == {
        "modified": "0001-01-01T00:00:00Z"
    }


def test_given_fields_win_and_the_whole_stays_within_bounds() -> None:
    """A property never overrides a given field, and is added only while the document's
    fields stay within the count and byte bounds."""
    given = {"author": "From front matter", "modified_at": "2024-01-01T00:00:00Z"}
    assert merged_fields(given, {"author": "Jane Roe", "subject": "Pumps"}) == {
        **given,
        "subject": "Pumps",
    }
    big = {f"f{number}": "x" * 1020 for number in range(15)}
    merged = merged_fields(big, {"subject": "y" * 500, "author": "z" * 500})
    check_metadata(merged, {})
    assert len(repr(merged).encode()) <= MAX_METADATA_BYTES
    assert "subject" in merged
    assert "author" not in merged
