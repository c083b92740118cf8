"""The workspace archive: one gzip-compressed NDJSON stream, one record a line.

    manifest         format, version, embedding model id, dense dimensions, the payload
                     contract's keys, when and from which org and workspace, and each
                     other dense vector set's model and dimensions (a KB's migration)
    workspace        its creation time and stored settings
    knowledge_base   each KB: id, name, storage, creation time, settings, the model it
                     answers from ("": the deployment's)
    agent            each agent: id, its KBs in order, creation time, settings
    golden_set       each KB's golden set, as stored (questions, expected documents)
    passage          each passage: its KB, its payload as indexed (the payload contract:
                     document id and version, passage index, classification, text, title,
                     source, checksum, indexing time, PII spans, page, heading path, ...),
                     its vectors (dense as
                     little-endian float32, BM25 as uint32 indices and float32 weights,
                     each base64; the whole-document BM25 on a document's first passage;
                     the other dense vector sets' vectors by name, `dense` empty where
                     the passage has none)
    end              how many records of each kind came before it

The `end` record makes a truncated archive detectable: a reader checks its counts. Keys
and turn records are never in an archive; nothing in it names a key.

An archive is untrusted input. Reading streams it (never the whole in memory) within
`Limits`: expanded bytes, expansion ratio and one line's length, refused with
`ArchiveTooLargeError` as soon as one is passed. A deployment with an archive key
(KBGATE_ARCHIVE_KEY) signs what it exports: the `end` record carries an HMAC-SHA256 over
every line before it, exactly as written; a reader given that key says whether the
archive was signed with it (`Reader.verified`). Only then may its stored PII analyses be
trusted (`gateway.admin.transfer`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import msgspec
import numpy as np

from ingest.index import Passage, SparseVector
from ingest.payload import PassagePayload, PayloadKey

FORMAT = "kbgate-workspace"
VERSION = 1
#: the media type an archive is served and taken as
MEDIA_TYPE = "application/gzip"


class VectorSetEntry(msgspec.Struct, kw_only=True):
    model: str
    dense_dim: int


class Manifest(msgspec.Struct, kw_only=True, tag="manifest", tag_field="kind"):
    format: str
    version: int
    embedding_model: str
    dense_dim: int
    payload_keys: list[str]
    exported_at: str
    org_id: str
    tenant_id: str
    #: each dense vector set besides `dense` the passages carry: name -> its model
    vector_sets: dict[str, VectorSetEntry] = msgspec.field(default_factory=dict)


class WorkspaceEntry(msgspec.Struct, kw_only=True, tag="workspace", tag_field="kind"):
    created_at: str
    settings: dict[str, Any]


class KnowledgeBaseEntry(msgspec.Struct, kw_only=True, tag="knowledge_base", tag_field="kind"):
    kb_id: str
    name: str
    storage: str
    created_at: str
    settings: dict[str, Any]
    embedding_model: str = ""


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
    dense_sets: dict[str, str] = msgspec.field(default_factory=dict)


class End(msgspec.Struct, kw_only=True, tag="end", tag_field="kind", omit_defaults=True):
    counts: dict[str, int]
    #: `hmac-sha256:<hex>` over every line before this one, with the exporting
    #: deployment's archive key; absent when it has none
    signature: str | None = None


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


class ArchiveTooLargeError(ArchiveError):
    """The archive expands past a bound of `Limits` (a decompression bomb, or a record
    longer than any kbgate writes)."""


#: Expanded bytes read from the archive between two checks of the bounds.
_STEP = 1024 * 1024
#: Compressed bytes read from the archive file at once.
_READ = 64 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """How far an archive may expand while it is read.

    `max_expanded_bytes`: the whole NDJSON stream; `max_ratio`: expanded bytes per
    compressed byte read so far, checked once `ratio_from_bytes` have expanded (kbgate's
    own archives expand about 1.6 times: vectors hardly compress); `max_line_bytes`: one
    record (the largest kbgate writes is a passage of a document at the size limit with
    its whole-document BM25 vector, or a golden set at its limits: a few MB).
    """

    max_expanded_bytes: int
    max_ratio: int = 40
    max_line_bytes: int = 32 * 1024 * 1024
    ratio_from_bytes: int = 8 * 1024 * 1024


# ---- signing --------------------------------------------------------------------------

_SIGNATURE_PREFIX = "hmac-sha256:"
_KEY_LABEL = b"kbgate archive signature v1"


def signing_key(secret: str) -> bytes:
    """The HMAC key derived from a deployment's archive secret (a label of its own, so the
    secret signs nothing else by accident)."""
    return hmac.new(secret.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()


class _Macs:
    """Running HMAC-SHA256s over the lines, one per key."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        self._macs = [hmac.new(key, digestmod=hashlib.sha256) for key in keys]

    def update(self, line: bytes) -> None:
        for mac in self._macs:
            mac.update(line)

    def signature(self) -> str | None:
        """The first key's signature (the one a writer signs with)."""
        return _SIGNATURE_PREFIX + self._macs[0].hexdigest() if self._macs else None

    def matches(self, signature: str | None) -> bool:
        if signature is None or not signature.startswith(_SIGNATURE_PREFIX):
            return False
        given = signature[len(_SIGNATURE_PREFIX) :].encode("ascii", "replace")
        return any(hmac.compare_digest(mac.hexdigest().encode(), given) for mac in self._macs)


def payload_keys() -> list[str]:
    """The payload contract's keys, as a manifest records them."""
    return sorted(key.value for key in PayloadKey)


# ---- vectors ------------------------------------------------------------------------


def _b64(array: np.ndarray[Any, Any]) -> str:
    return base64.b64encode(array.tobytes()).decode("ascii")


def _unb64(text: str, dtype: str) -> np.ndarray[Any, Any]:
    try:
        raw = base64.b64decode(text, validate=True)
        return np.frombuffer(raw, dtype=dtype)
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
    if not np.isfinite(values).all():
        raise ArchiveError("a sparse vector has a weight that is not a finite number")
    if len(np.unique(indices)) != len(indices):
        raise ArchiveError("a sparse vector names an index twice")
    return SparseVector(indices=tuple(indices.tolist()), values=tuple(values.tolist()))


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
        dense_sets={
            name: _b64(np.asarray(values, dtype="<f4")) for name, values in passage.dense_sets
        },
    )


def vectors_of(
    entry: PassageEntry,
) -> tuple[tuple[float, ...], SparseVector, SparseVector | None]:
    """The dense, BM25 and whole-document BM25 vectors of an archive line; ArchiveError
    for one that is not a usable vector (a weight NaN or infinite, a dense vector of zeros,
    a sparse index twice). `dense` is empty where the passage carries only other dense
    vector sets (`dense_sets_of`)."""
    dense = _dense(entry.dense, "the dense vector") if entry.dense or not entry.dense_sets else ()
    document = None if entry.document_sparse is None else _sparse_vector(entry.document_sparse)
    return dense, _sparse_vector(entry.sparse), document


def dense_sets_of(entry: PassageEntry) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """The other dense vector sets' vectors of an archive line, by name; ArchiveError as
    `vectors_of`."""
    return tuple(
        (name, _dense(text, f"the {name[:100]!r} vector"))
        for name, text in sorted(entry.dense_sets.items())
    )


def _dense(text: str, what: str) -> tuple[float, ...]:
    dense = _unb64(text, "<f4")
    if not np.isfinite(dense).all():
        raise ArchiveError(f"{what} has a value that is not a finite number")
    if not dense.any():
        raise ArchiveError(f"{what} is all zeros")
    return tuple(dense.tolist())


# ---- writing and reading --------------------------------------------------------------


class Writer:
    """Encodes entries into gzip bytes, chunk by chunk, counting what it wrote."""

    def __init__(self, key: bytes | None = None) -> None:
        """`key`: sign the archive with it (`signing_key`); None: unsigned."""
        self._encoder = msgspec.json.Encoder()
        # level 1: vectors hardly compress, and level 6 took three times as long
        self._zip = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip member
        self._macs = _Macs([key] if key is not None else [])
        self.counts: dict[str, int] = dict.fromkeys(COUNTED, 0)

    def add(self, entries: Iterable[Entry]) -> bytes:
        lines = bytearray()
        for entry in entries:
            kind = entry.__struct_config__.tag
            if isinstance(kind, str) and kind in self.counts:
                self.counts[kind] += 1
            line = self._encoder.encode(entry) + b"\n"
            self._macs.update(line)
            lines += line
        return self._zip.compress(bytes(lines))

    def finish(self) -> bytes:
        """The `end` record (signed when the writer has a key) and the end of the gzip
        stream."""
        end = End(counts=dict(self.counts), signature=self._macs.signature())
        return self.add([end]) + self._zip.flush()


class Reader:
    """Every entry of an archive (a binary file), checked line by line as it streams in:
    the manifest first, this format and version, `end` last with the counts of what came
    before, within `limits`. Once read through, `verified` says whether the `end` record
    carries a signature made with one of `keys`."""

    def __init__(self, stream: IO[bytes], limits: Limits, keys: Sequence[bytes] = ()) -> None:
        self._stream = stream
        self._limits = limits
        self._keys = tuple(keys)
        self.verified = False
        #: bytes expanded and compressed bytes read, once read through
        self.expanded_bytes = 0
        self.compressed_bytes = 0

    def __iter__(self) -> Iterator[Entry]:
        counts = dict.fromkeys(COUNTED, 0)
        ended = False
        macs = _Macs(self._keys)
        decoder = msgspec.json.Decoder(Entry)
        for number, line in enumerate(self._lines(), start=1):
            if ended:
                raise ArchiveError(f"line {number}: records after the end record")
            entry = _decode(decoder, line, number)
            if number == 1:
                _check_manifest(entry)
            elif isinstance(entry, Manifest):
                raise ArchiveError(f"line {number}: a second manifest")
            if isinstance(entry, End):
                _check_counts(entry, counts)
                self.verified = macs.matches(entry.signature)
                ended = True
            else:
                macs.update(line)
                kind = entry.__struct_config__.tag
                if isinstance(kind, str) and kind in counts:
                    counts[kind] += 1
            yield entry
        if not ended:
            raise ArchiveError("the archive ends before its end record (truncated?)")

    def _lines(self) -> Iterator[bytes]:
        """The expanded stream's lines (each with its newline), within the limits."""
        pending = bytearray()
        for piece in self._expanded():
            pending += piece
            while (cut := pending.find(b"\n")) >= 0:
                if cut + 1 > self._limits.max_line_bytes:
                    raise self._line_too_long()
                yield bytes(pending[: cut + 1])
                del pending[: cut + 1]
            if len(pending) > self._limits.max_line_bytes:
                raise self._line_too_long()
        if pending:
            yield bytes(pending)

    def _line_too_long(self) -> ArchiveTooLargeError:
        return ArchiveTooLargeError(
            f"a record is longer than {self._limits.max_line_bytes} bytes expanded"
        )

    def _expanded(self) -> Iterator[bytes]:
        """The gzip stream expanded piece by piece (at most `_STEP` bytes each), its
        members one after another, checking the bounds after each piece."""
        zipped = zlib.decompressobj(31)  # 31: gzip
        try:
            while chunk := self._stream.read(_READ):
                self.compressed_bytes += len(chunk)
                data = chunk
                while data:
                    piece = zipped.decompress(data, _STEP)
                    data = zipped.unconsumed_tail
                    if zipped.eof and (zipped.unused_data or data):
                        # another gzip member follows
                        data, zipped = zipped.unused_data + data, zlib.decompressobj(31)
                    self._count(len(piece))
                    if piece:
                        yield piece
        except zlib.error as error:
            raise ArchiveError(f"not a complete gzip stream: {error}") from None
        if not zipped.eof:
            raise ArchiveError("not a complete gzip stream: it ends before its last member")

    def _count(self, expanded: int) -> None:
        self.expanded_bytes += expanded
        limits = self._limits
        if self.expanded_bytes > limits.max_expanded_bytes:
            raise ArchiveTooLargeError(
                f"the archive expands past {limits.max_expanded_bytes} bytes"
            )
        if (
            self.expanded_bytes > limits.ratio_from_bytes
            and self.expanded_bytes > limits.max_ratio * self.compressed_bytes
        ):
            raise ArchiveTooLargeError(
                f"the archive expands more than {limits.max_ratio} times (a kbgate archive "
                "expands about 1.6 times)"
            )


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
