"""A golden set file (JSON lines or CSV) as the body of `PUT .../golden-set`.

JSON lines: one object per line, `{"question": ..., "document_ids": [...], "grades": [...]}`;
a line without document ids (absent or empty) is an off-topic question. CSV: a header
row naming `question`, `document_ids` and optionally `grades`; ids and grades are
separated by `;` or spaces (a document id never holds either), and a row without
document ids is an off-topic question. The result is checked by the same schema as the
JSON API's body. Standard library only: the console and `kbgate eval --url` use it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

_SEPARATORS = re.compile(r"[;\s]+")


class GoldenFileError(ValueError):
    """The file cannot be read as a golden set; the message names the line."""


def golden_set_body(text: str) -> dict[str, Any]:
    """`{questions, off_topic}` from a JSON lines or CSV golden set (which, by its first
    non-blank character: `{` starts JSON lines)."""
    stripped = text.lstrip("\ufeff").lstrip()
    if not stripped:
        raise GoldenFileError("the file is empty")
    rows = _json_lines(stripped) if stripped.startswith("{") else _csv_rows(stripped)
    questions: list[dict[str, Any]] = []
    off_topic: list[Any] = []
    for row in rows:
        if row.get("document_ids"):
            questions.append(row)
        else:
            off_topic.append(row.get("question"))
    return {"questions": questions, "off_topic": off_topic}


def _json_lines(text: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise GoldenFileError(f"line {number}: not JSON") from None
        if not isinstance(row, dict):
            raise GoldenFileError(f"line {number}: expected an object with a question")
        rows.append(row)
    return rows


def _csv_rows(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    names = {name.strip().lower() for name in reader.fieldnames or []}
    if not {"question", "document_ids"} <= names:
        raise GoldenFileError("the CSV header must name question and document_ids")
    rows: list[dict[str, Any]] = []
    for number, raw in enumerate(reader, start=2):
        fields = {(key or "").strip().lower(): (value or "") for key, value in raw.items()}
        row: dict[str, Any] = {"question": fields.get("question", "")}
        ids = _split(fields.get("document_ids", ""))
        if ids:
            row["document_ids"] = ids
            grades = _split(fields.get("grades", ""))
            if grades:
                row["grades"] = [_grade(value, number) for value in grades]
        rows.append(row)
    return rows


def _split(value: str) -> list[str]:
    return [part for part in _SEPARATORS.split(value.strip()) if part]


def _grade(value: str, line: int) -> int:
    try:
        return int(value)
    except ValueError:
        raise GoldenFileError(f"line {line}: grades must be whole numbers") from None
