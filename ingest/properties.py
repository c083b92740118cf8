"""A file's own document properties as a document's fields, and a file's fields merged.

The readers (`ingest.extract`, `ingest.office`) hand over what a file says of itself:
a PDF's document information and its catalog's `/Lang` (pypdf), a Word or PowerPoint
file's core properties (python-docx, python-pptx). They become these fields:

    author            string
    subject           string
    keywords          list of strings (the property split at `,` and `;`)
    created           datetime (RFC 3339, UTC; a time without a zone is read as UTC)
    modified          datetime
    content_language  string (`language` is the built-in field of detected languages)

The title is not a field: a file's title property is already the document's title
when the caller gives none. A file is untrusted: whitespace runs (line breaks too)
become one space; a string over `MAX_PROPERTY_CHARS`, one still holding a control
character, a value of another type, and a value the KB's schema or the field rules
refuse (`ingest.metadata.check_metadata`, the document API's own check) are dropped;
keywords keep at most `MAX_KEYWORDS` items. A property never fails an ingest, and never
overrides a field the file or its caller gives (front matter, `modified_at`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ingest.metadata import (
    MAX_DOCUMENT_FIELDS,
    MetadataError,
    Schema,
    check_field_name,
    check_metadata,
)

#: The fields properties may give, in the order they are added.
PROPERTY_FIELDS = ("author", "subject", "keywords", "created", "modified", "content_language")
#: The longest string property kept, and the longest keyword.
MAX_PROPERTY_CHARS = 512
MAX_KEYWORD_CHARS = 128
#: Keywords kept of one file (the first ones).
MAX_KEYWORDS = 32

_KEYWORD_SEPARATORS = re.compile(r"[,;]")
_DATETIMES = ("created", "modified")


def property_fields(found: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The usable fields among a file's raw properties (`PROPERTY_FIELDS` as the readers
    name them), each cleaned and checked on its own against the KB's `schema`."""
    fields: dict[str, Any] = {}
    for name in PROPERTY_FIELDS:
        value = _cleaned(name, found.get(name))
        if value is None:
            continue
        try:
            fields[name] = check_metadata({name: value}, schema)[name]
        except MetadataError:
            continue
    return fields


def merged_fields(given: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """`given` (checked already) with each property it does not name added while the whole
    still passes the field rules (count and size)."""
    merged = dict(given)
    for name, value in properties.items():
        if name in merged or len(merged) >= MAX_DOCUMENT_FIELDS:
            continue
        try:
            check_metadata({**merged, name: value}, {})
        except MetadataError:
            continue
        merged[name] = value
    return merged


def declared_fields(found: Mapping[str, Any]) -> dict[str, Any]:
    """The entries a file declares (front matter) that may name a field, each value of a
    kind a field holds (others left out, never refused)."""
    fields: dict[str, Any] = {}
    for name, value in found.items():
        try:
            check_field_name(name, "metadata")
            check_metadata({name: value}, {})
        except MetadataError:
            continue
        fields[name] = value
    return fields


def read_properties(getters: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each property a reader's getter gives (None and failures left out): a damaged
    property never fails the file."""
    found: dict[str, Any] = {}
    for name, getter in getters.items():
        try:
            value = getter()
        # Parsers fail on odd properties in ways of their own (a malformed date, an
        # unexpected object): the property is left out, the file still read.
        except Exception:  # noqa: S112 — any failure drops only this property
            continue
        if value is not None:
            found[name] = value
    return found


def _cleaned(name: str, value: Any) -> Any:
    if name in _DATETIMES:
        return _moment(value)
    if name == "keywords":
        return _keywords(value)
    return _string(value, MAX_PROPERTY_CHARS)


def _string(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or len(value) > 4 * limit:
        return None
    text = " ".join(value.split())
    if not text or len(text) > limit or any(unicodedata.category(ch) == "Cc" for ch in text):
        return None
    return text


def _keywords(value: Any) -> list[str] | None:
    if isinstance(value, str):
        if len(value) > 4 * MAX_KEYWORDS * MAX_KEYWORD_CHARS:
            return None
        value = _KEYWORD_SEPARATORS.split(value)
    if not isinstance(value, list | tuple):
        return None
    kept: dict[str, None] = {}
    for item in value:
        keyword = _string(item, MAX_KEYWORD_CHARS)
        if keyword is not None:
            kept[keyword] = None
        if len(kept) >= MAX_KEYWORDS:
            break
    return list(kept) or None


def _moment(value: Any) -> str | None:
    if not isinstance(value, datetime):
        return None
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):  # a moment past the calendar's ends in UTC
        return None
    return utc.replace(microsecond=0).isoformat().replace("+00:00", "Z")
