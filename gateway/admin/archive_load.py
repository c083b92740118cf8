"""An archive's checked contents written into the workspace an import created
(`gateway.admin.transfer`): its records into the store, its passages into the index
under their new owner, analysed for PII here unless the archive's analyses are trusted.
"""

from __future__ import annotations

import dataclasses
from typing import IO, TYPE_CHECKING

import msgspec

from gateway.access.expensive import Stop, stop_point
from gateway.admin import archive, provisioning
from gateway.admin.archive_check import Contents
from gateway.admin.knowledge import target_of
from ingest.engines.blocking import BlockingIndex
from ingest.index import Passage
from ingest.payload import PiiSpan, analysed_strings, analysis_of, text_checksum
from ingest.sync import Target, point_id
from settings.golden import GoldenSet
from settings.records import Agent, KnowledgeBase
from settings.store import SettingsStore

if TYPE_CHECKING:
    from gateway.safety.redaction import Redactor

#: passages written to the index per call: each write is made durable (Qdrant Edge flushes
#: to disk), so larger batches import faster
_WRITE_BATCH = 2048
#: Strings analysed for PII between two stop points (about 0.1 s of CPU)
_ANALYSIS_SLICE = 8


async def put_records(
    store: SettingsStore, org_id: str, tenant_id: str, contents: Contents
) -> dict[str, Target]:
    """The KBs, agents and golden sets under the new workspace; each KB's write target."""
    targets: dict[str, Target] = {}
    for kb_id, entry in contents.kbs.items():
        kb = KnowledgeBase(
            kb_id=kb_id,
            tenant_id=tenant_id,
            org_id=org_id,
            storage=entry.storage,
            name=entry.name,
            created_at=entry.created_at,
            settings=entry.settings,
            embedding_model=entry.embedding_model,
        )
        await store.put_knowledge_base(kb)
        targets[kb.kb_id] = target_of(kb)
    for agent in contents.agents.values():
        await store.put_agent(
            Agent(
                agent_id=agent.agent_id,
                tenant_id=tenant_id,
                knowledge_base_ids=agent.knowledge_base_ids,
                created_at=agent.created_at,
                settings=agent.settings,
            )
        )
    for golden in contents.goldens:
        await store.put_golden_set(
            GoldenSet(
                tenant_id=tenant_id,
                kb_id=golden.kb_id,
                questions=golden.questions,
                off_topic=golden.off_topic,
                updated_at=golden.updated_at,
                updated_by=provisioning.PLATFORM.key_id,
            )
        )
    return targets


def write_passages(
    index: BlockingIndex,
    spooled: IO[bytes],
    targets: dict[str, Target],
    redactor: Redactor | None,
    bounds: archive.Limits,
    *,
    stop: Stop,
) -> tuple[int, int]:
    """Every passage of the archive, under its new owner, in batches, each analysed for
    PII by `redactor` first (None: the archive's analyses kept); returns how many were
    written and how many analysed. On the expensive pool: `stop` is checked between
    slices of the analysis and before each write."""
    written = analysed = 0
    batch: dict[str, list[Passage]] = {}

    def flush(collection: str, passages: list[Passage]) -> None:
        nonlocal written, analysed
        if redactor is not None:
            passages = _analysed(redactor, passages, stop)
            analysed += len(passages)
        stop_point(stop)
        index.ensure_collection(collection)
        for name in sorted({name for p in passages for name, _ in p.dense_sets}):
            index.add_dense_vector(collection, name, _dim_of(passages, name))
        index.upsert(collection, passages)
        written += len(passages)

    for entry in archive.Reader(spooled, bounds):
        if not isinstance(entry, archive.PassageEntry):
            continue
        target = targets[entry.kb_id]
        batch.setdefault(target.collection, []).append(
            _rehomed(entry, target, keep_pii=redactor is None)
        )
        if len(batch[target.collection]) >= _WRITE_BATCH:
            flush(target.collection, batch.pop(target.collection))
    for collection, passages in batch.items():
        flush(collection, passages)
    return written, analysed


def _dim_of(passages: list[Passage], name: str) -> int:
    """The dimensions of the dense vector set `name`, as the first passage holding it has."""
    return next(len(values) for p in passages for found, values in p.dense_sets if found == name)


def _analysed(redactor: Redactor, passages: list[Passage], stop: Stop) -> list[Passage]:
    """The passages with their PII analysed by this deployment's analyzer (each distinct
    text, title and heading once, `_ANALYSIS_SLICE` at a time), as a document write
    analyses them."""
    strings = list(dict.fromkeys(s for p in passages for s in analysed_strings(p.payload)))
    found: dict[str, tuple[PiiSpan, ...]] = {}
    for start in range(0, len(strings), _ANALYSIS_SLICE):
        stop_point(stop)
        piece = strings[start : start + _ANALYSIS_SLICE]
        found.update(zip(piece, redactor.analyze_texts(piece), strict=True))
    return [
        dataclasses.replace(
            passage,
            payload=msgspec.structs.replace(
                passage.payload,
                pii=analysis_of(redactor.analyzer_version, passage.payload, found),
            ),
        )
        for passage in passages
    ]


def _rehomed(entry: archive.PassageEntry, target: Target, *, keep_pii: bool) -> Passage:
    """The archived passage as a point of the target workspace (its vectors as they are,
    its checksum computed again, its PII analysis kept only when `keep_pii`)."""
    payload = msgspec.structs.replace(
        entry.payload,
        tenant_id=target.tenant_id,
        org_id=target.org_id,
        checksum=text_checksum(entry.payload.text),
        pii=entry.payload.pii if keep_pii else None,
    )
    dense, sparse, document = archive.vectors_of(entry)
    return Passage(
        point_id=point_id(
            target, payload.document_id, payload.document_version, payload.passage_index
        ),
        dense=dense,
        sparse=sparse,
        payload=payload,
        document_sparse=document,
        dense_sets=archive.dense_sets_of(entry),
    )
