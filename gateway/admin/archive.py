"""The workspace archive: one gzip-compressed NDJSON stream, one record a line.

    manifest         format, version, embedding model id, dense dimensions, the payload
                     contract's keys, when and from which org and workspace
    workspace        its creation time and stored settings
    knowledge_base   each KB: id, name, storage, creation time, settings
    agent            each agent: id, its KBs in order, creation time, settings
    golden_set       each KB's golden set, as stored (questions, expected documents)
    passage          each passage: its KB, its payload as indexed (the payload contract:
                     document id and version, passage index, classification, text, title,
                     source, checksum, indexing time, PII spans), its vectors (dense as
                     little-endian float32, BM25 as uint32 indices and float32 weights,
                     each base64; the whole-document BM25 on a document's first passage)
    end              how many records of each kind came before it

The `end` record makes a truncated archive detectable: a reader checks its counts. Keys
and turn records are never in an archive; nothing in it names a key.
"""

from __future__ import annotations

import base64
import gzip
import zlib
from collections.abc import Iterable, Iterator
from typing import IO, Any

import msgspec
import numpy as np

from ingest.index import Passage, SparseVector
from ingest.payload import PassagePayload, PayloadKey

FORMAT = "kbgate-workspace"
VERSION = 1
#: the media type an archive is served and taken as
MEDIA_TYPE = "application/gzip"


class Manifest(msgspec.Struct, kw_only=True, tag="manifest", tag_field="kind"):
    format: str
    version: int
    embedding_model: str
    dense_dim: int
    payload_keys: list[str]
    exported_at: str
    org_id: str
    tenant_id: str


class WorkspaceEntry(msgspec.Struct, kw_only=True, tag="workspace", tag_field="kind"):
    created_at: str
    settings: dict[str, Any]


class KnowledgeBaseEntry(msgspec.Struct, kw_only=True, tag="knowledge_base", tag_field="kind"):
    kb_id: str
    name: str
    storage: str
    created_at: str
    settings: dict[str, Any]


class AgentEntry(msgspec.Struct, kw_only=True, tag="agent", tag_field="kind"):
    agent_id: str
    knowledge_base_ids: list[str]
    created_at: str
    settings: dict[str, Any]


class GoldenSetEntry(msgspec.Struct, kw_only=True, tag="golden_set", tag_field="kind"):
    kb_id: str
    #: the stored golden set without its tenant (its store record's fields)
    golden: dict[str, Any]


class SparseEntry(msgspec.Struct, kw_only=True):
    indices: str
    values: str


class PassageEntry(msgspec.Struct, kw_only=True, tag="passage", tag_field="kind"):
    kb_id: str
    payload: PassagePayload
    dense: str
    sparse: SparseEntry
    document_sparse: SparseEntry | None = None


class End(msgspec.Struct, kw_only=True, tag="end", tag_field="kind"):
    counts: dict[str, int]


Entry = (
    Manifest
    | WorkspaceEntry
    | KnowledgeBaseEntry
    | AgentEntry
    | GoldenSetEntry
    | PassageEntry
    | End
)
#: the kinds `End.counts` counts
COUNTED = ("knowledge_base", "agent", "golden_set", "passage")


class ArchiveError(ValueError):
    """The archive is not one this release can read; the message says where and why."""


def payload_keys() -> list[str]:
    """The payload contract's keys, as a manifest records them."""
    return sorted(key.value for key in PayloadKey)


# ---- vectors ------------------------------------------------------------------------


def _b64(array: np.ndarray[Any, Any]) -> str:
    return base64.b64encode(array.tobytes()).decode("ascii")


def _unb64(text: str, dtype: str) -> tuple[Any, ...]:
    try:
        raw = base64.b64decode(text, validate=True)
        return tuple(np.frombuffer(raw, dtype=dtype).tolist())
    except ValueError as error:
        raise ArchiveError(f"a vector is not base64 of {dtype}: {error}") from None


def _sparse_entry(vector: SparseVector) -> SparseEntry:
    return SparseEntry(
        indices=_b64(np.asarray(vector.indices, dtype="<u4")),
        values=_b64(np.asarray(vector.values, dtype="<f4")),
    )


def _sparse_vector(entry: SparseEntry) -> SparseVector:
    indices, values = _unb64(entry.indices, "<u4"), _unb64(entry.values, "<f4")
    if len(indices) != len(values):
        raise ArchiveError("a sparse vector has more indices than weights, or fewer")
    return SparseVector(indices=tuple(map(int, indices)), values=tuple(map(float, values)))


def passage_entry(kb_id: str, passage: Passage) -> PassageEntry:
    """A stored passage as an archive line (its point id is not kept: it is derived)."""
    return PassageEntry(
        kb_id=kb_id,
        payload=passage.payload,
        dense=_b64(np.asarray(passage.dense, dtype="<f4")),
        sparse=_sparse_entry(passage.sparse),
        document_sparse=(
            None if passage.document_sparse is None else _sparse_entry(passage.document_sparse)
        ),
    )


def vectors_of(
    entry: PassageEntry,
) -> tuple[tuple[float, ...], SparseVector, SparseVector | None]:
    """The dense, BM25 and whole-document BM25 vectors of an archive line."""
    dense = tuple(map(float, _unb64(entry.dense, "<f4")))
    document = None if entry.document_sparse is None else _sparse_vector(entry.document_sparse)
    return dense, _sparse_vector(entry.sparse), document


# ---- writing and reading --------------------------------------------------------------


class Writer:
    """Encodes entries into gzip bytes, chunk by chunk, counting what it wrote."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        # level 1: vectors hardly compress, and level 6 took three times as long
        self._zip = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip member
        self.counts: dict[str, int] = dict.fromkeys(COUNTED, 0)

    def add(self, entries: Iterable[Entry]) -> bytes:
        lines = bytearray()
        for entry in entries:
            kind = entry.__struct_config__.tag
            if isinstance(kind, str) and kind in self.counts:
                self.counts[kind] += 1
            lines += self._encoder.encode(entry) + b"\n"
        return self._zip.compress(bytes(lines))

    def finish(self) -> bytes:
        """The `end` record and the end of the gzip stream."""
        return self.add([End(counts=dict(self.counts))]) + self._zip.flush()


def read_entries(stream: IO[bytes]) -> Iterator[Entry]:
    """Every entry of an archive (a binary file), checked line by line: the manifest
    first, this format and version, `end` last with the counts of what came before."""
    counts = dict.fromkeys(COUNTED, 0)
    ended = False
    decoder = msgspec.json.Decoder(Entry)
    try:
        with gzip.open(stream, "rb") as lines:
            for number, line in enumerate(lines, start=1):
                if ended:
                    raise ArchiveError(f"line {number}: records after the end record")
                entry = _decode(decoder, line, number)
                if number == 1:
                    _check_manifest(entry)
                elif isinstance(entry, Manifest):
                    raise ArchiveError(f"line {number}: a second manifest")
                if isinstance(entry, End):
                    _check_counts(entry, counts)
                    ended = True
                else:
                    kind = entry.__struct_config__.tag
                    if isinstance(kind, str) and kind in counts:
                        counts[kind] += 1
                yield entry
    except (OSError, EOFError, zlib.error) as error:
        raise ArchiveError(f"not a complete gzip stream: {error}") from None
    if not ended:
        raise ArchiveError("the archive ends before its end record (truncated?)")


def _decode(decoder: msgspec.json.Decoder[Entry], line: bytes, number: int) -> Entry:
    try:
        entry: Entry = decoder.decode(line)
    except msgspec.DecodeError as error:
        raise ArchiveError(f"line {number}: {error}") from None
    return entry


def _check_manifest(entry: Entry) -> None:
    if not isinstance(entry, Manifest):
        raise ArchiveError("line 1: the archive does not start with its manifest")
    if entry.format != FORMAT or entry.version != VERSION:
        raise ArchiveError(
            f"line 1: format {entry.format!r} version {entry.version}; this release reads "
            f"{FORMAT!r} version {VERSION}"
        )


def _check_counts(end: End, counts: dict[str, int]) -> None:
    if {kind: end.counts.get(kind, 0) for kind in COUNTED} != counts:
        raise ArchiveError(f"the end record counts {end.counts}, the archive holds {counts}")
