"""Documents uploaded through the console: read by the readers `kbgate ingest` uses, then
written by the same core function as `PUT /v1/knowledge-bases/{kb_id}/documents/{id}`.

An uploaded file is written to a private temporary folder under its own base name, so
`ingest.extract` picks the reader by its suffix and takes the title from its name when the
file has none (any text encoding, HTML, reStructuredText, PDF, Word, PowerPoint). Its
document id is that name with every run of characters an id may not hold replaced by
`-`; its source is the name as sent. Each file gets an outcome: `indexed`, `unchanged`,
`held_back` (the reason) or `failed` (why), never an exception. Its fields are those
`kbgate ingest` gives a file, but `modified_at` (an upload has no file of its own):
Markdown front matter, then the document properties that fit the KB's schema
(`ingest.properties`).
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePath

from gateway.access.auth import Principal
from gateway.admin import knowledge
from gateway.admin.knowledge import Documents
from gateway.errors import GatewayError
from ingest.extract import Extracted, ExtractionError, extract
from ingest.index import IndexUnavailableError
from ingest.metadata import schema_of
from ingest.payload import is_valid_id
from ingest.properties import declared_fields, merged_fields, property_fields
from settings.records import Role
from settings.store import StoreUnavailableError

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9._:@-]+")
_LEADING = re.compile(r"^[^A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class UploadOutcome:
    """What became of one uploaded file."""

    file: str
    document_id: str
    status: str  # "indexed", "unchanged", "held_back" or "failed"
    passages: int = 0
    reason: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "document_id": self.document_id,
            "status": self.status,
            "passages": self.passages,
            "reason": self.reason,
        }


def base_name(file_name: str) -> str:
    """The file's own name, without any folder a browser may send ("" when none)."""
    name = PurePath(file_name.replace("\\", "/").replace("\0", "")).name
    return "" if name in {".", ".."} else name


def document_id_for(file_name: str) -> str:
    """The document id of an uploaded file: its base name, with what an id may not hold
    replaced by `-` ("Leave policy.pdf" -> "Leave-policy.pdf"); "" when nothing is left."""
    return _LEADING.sub("", _NOT_IN_ID.sub("-", base_name(file_name)))[:256]


async def upload_document(
    documents: Documents,
    principal: Principal,
    kb_id: str,
    *,
    file_name: str,
    content: bytes,
    classification: str,
) -> UploadOutcome:
    """Read one uploaded file and write it to the KB as the signed-in key."""
    document_id = document_id_for(file_name)
    try:
        extracted = await _readable(principal, file_name, document_id, content)
        kb = await knowledge.knowledge_base_of(documents.store, principal, kb_id)
        fields = merged_fields(
            declared_fields(extracted.fields),
            property_fields(extracted.properties, schema_of(kb.settings)),
        )
        status, passages, reason = await knowledge.put_document(
            documents,
            principal,
            kb_id,
            document_id,
            text=extracted.text,
            classification=classification,
            title=extracted.title,
            source=file_name,
            metadata=fields or None,
        )
    except ExtractionError as error:
        return UploadOutcome(file_name, document_id, "failed", reason=str(error))
    except GatewayError as error:
        return UploadOutcome(file_name, document_id, "failed", reason=error.message)
    except (StoreUnavailableError, IndexUnavailableError):
        reason = "a dependency is unavailable; nothing was written, retry later"
        return UploadOutcome(file_name, document_id, "failed", reason=reason)
    return UploadOutcome(file_name, document_id, status, passages, reason)


async def _readable(
    principal: Principal, file_name: str, document_id: str, content: bytes
) -> Extracted:
    """The file's text and title; ExtractionError saying why it cannot be a document."""
    if Role.INGEST not in principal.roles:
        raise ExtractionError("this key has no ingest role: sign in with a key that has it")
    if not is_valid_id(document_id):
        raise ExtractionError(
            "the file name gives no usable document id (letters, digits and ._:@-)"
        )
    extracted = await asyncio.to_thread(_read, base_name(file_name), content)
    if not extracted.text.strip():
        raise ExtractionError("no text to index (empty, or only images or markup)")
    return extracted


def _read(name: str, content: bytes) -> Extracted:
    """The file's text and title, read from a private temporary copy named `name` (its
    suffix picks the reader; its stem is the title of a file that names none)."""
    with tempfile.TemporaryDirectory(prefix="kbgate-upload-") as folder:
        path = Path(folder) / name
        try:
            path.write_bytes(content)
        except OSError as error:  # a name the file system refuses, a full disk
            raise ExtractionError(f"cannot read the file: {error.strerror or error}") from None
        return extract(path)
