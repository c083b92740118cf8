"""Redacting what a turn returns, from the PII analyses stored with its passages.

Every passage written by a writer with an analyzer carries the spans the recognizers found
in its text, title and headings (`ingest.payload.PiiAnalysis`). A turn applies the
workspace's policy (`RedactionPolicy`: its entity types in force, its allow-list, its
operator per type) to those spans: no recognizer runs. A passage whose analysis is
missing (written before analysis at ingest), another analyzer's (the recognizers changed
since) or does not fit its strings is analysed here, in a worker thread, and the analysis
written back to it so the next turn finds it; it is never returned unredacted.
`kbgate analyse-pii` does the same for a whole workspace ahead of time.

A document's fields (`metadata`) carry no stored analysis: their strings, and the strings
of their lists, are analysed when they first leave (each distinct string once per
workspace, then found in the same per-tenant cache) and the same policy applied. Filters
never see this: they run in the engine on the stored values.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.errors import DependencyUnavailableError
from gateway.safety.operators import Operators
from gateway.safety.policy import RedactionPolicy, count_redactions
from gateway.safety.redaction import Redactor
from gateway.telemetry import Telemetry
from ingest.index import Index, IndexUnavailableError
from ingest.lru import LruCache
from ingest.payload import (
    PassagePayload,
    PiiAnalysis,
    PiiSpan,
    Scope,
    analysed_strings,
    analysis_of,
)
from settings.effective import entities_in_force
from settings.pii_allow_list import AllowList, parse_allow_list
from settings.resolve import resolve_pii_allow_list, resolve_pii_entities, resolve_pii_operators
from settings.store import StoreUnavailableError

#: (tenant id, a text) -> the spans found in it, for passages analysed in a turn
AnalysisCache = LruCache[tuple[str, str], tuple[PiiSpan, ...]]
#: an allow-list's entries -> the parsed list
AllowListCache = LruCache[tuple[str, ...], AllowList]


class PseudonymKeys(Protocol):
    """Where a workspace's pseudonym key is read (`settings.cache.CachedSettings`)."""

    async def pseudonym_key(self, tenant_id: str) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class RedactionPolicies:
    """What a workspace's redaction policy is made of: the recognizers this process loaded
    and their anonymizer, its pseudonym key (read through the settings cache) and its
    allow-lists (parsed once per list of entries)."""

    redactor: Redactor
    keys: PseudonymKeys
    telemetry: Telemetry
    allow_lists: AllowListCache = field(default_factory=lambda: LruCache(256))


@dataclass(frozen=True, slots=True)
class PassageRedaction:
    """What redacting a turn's passages uses: the policies, the analyses of passages
    analysed in a turn (partitioned by tenant), and the index their analyses are written
    back to."""

    policies: RedactionPolicies
    analyses: AnalysisCache
    index: Index
    telemetry: Telemetry


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A passage about to leave, and where it lives (for writing its analysis back)."""

    point_id: str
    payload: PassagePayload
    collection: str
    scope: Scope


@dataclass(frozen=True, slots=True)
class Redacted:
    texts: dict[str, str]
    titles: dict[str, str]
    counts: dict[str, int]
    #: each passage's heading path, redacted (a passage without one is absent)
    headings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: each passage's document fields (of a passage that has some), strings redacted
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)


async def redaction_policy(
    policies: RedactionPolicies, tenant_id: str, workspace_settings: Mapping[str, object] | None
) -> RedactionPolicy:
    """The workspace's entity types in force, its allow-list (parsed once per list) and its
    operators, with its pseudonym key when one of those types is pseudonymised."""
    entities = entities_in_force(
        resolve_pii_entities(workspace_settings).value, policies.redactor.supported_entities
    )
    entries = resolve_pii_allow_list(workspace_settings).value
    allow = policies.allow_lists.get(entries) if entries else None
    if allow is None:
        allow = parse_allow_list(entries)
        if entries:
            policies.allow_lists.put(entries, allow)
    chosen = {
        entity_type: operator
        for entity_type, operator in resolve_pii_operators(workspace_settings).value.items()
        if entity_type in entities
    }
    anonymizer = policies.redactor.anonymizer
    if not any(operator != "replace" for operator in chosen.values()):
        operators = anonymizer.replace_all
    else:
        key = await _pseudonym_key(policies, tenant_id) if "pseudonym" in chosen.values() else None
        operators = Operators(anonymizer, chosen, key)
    return RedactionPolicy(frozenset(entities), allow, operators=operators)


async def _pseudonym_key(policies: RedactionPolicies, tenant_id: str) -> bytes | None:
    """The workspace's pseudonym key through the settings cache (a store call at most once
    per staleness period); None when it cannot be read, counted: its types are then
    replaced by `<ENTITY_TYPE>`, never shown."""
    try:
        key = await policies.keys.pseudonym_key(tenant_id)
    except StoreUnavailableError:
        key = None
    if key is None:
        policies.telemetry.count("pseudonym_key_unavailable")
    return key


async def redact_outgoing(
    redaction: PassageRedaction,
    tenant_id: str,
    workspace_settings: Mapping[str, object] | None,
    passages: Sequence[Outgoing],
) -> Redacted:
    """Each passage's text, title, headings and document fields with the workspace's
    policy applied: to the text's, title's and headings' stored analysis, and to the
    fields' strings (and lists' strings) as analysed now (`_field_analyses`).

    Fails closed: any failure is DependencyUnavailableError("redactor"), never raw text.
    """
    try:
        policy = await redaction_policy(redaction.policies, tenant_id, workspace_settings)
        analyses = await _analyses(redaction, tenant_id, passages)
        in_fields = await _field_analyses(redaction, tenant_id, passages)
        texts: dict[str, str] = {}
        titles: dict[str, str] = {}
        headings: dict[str, tuple[str, ...]] = {}
        fields: dict[str, dict[str, Any]] = {}
        counts: Counter[str] = Counter()
        for passage in passages:
            analysis = analyses[passage.point_id]
            text = policy.apply(passage.payload.text, analysis.text)
            title = policy.apply(passage.payload.title, analysis.title)
            texts[passage.point_id], titles[passage.point_id] = text.text, title.text
            counts.update(text.counts)
            counts.update(title.counts)
            if passage.payload.headings:
                path = [
                    policy.apply(heading, spans)
                    for heading, spans in zip(
                        passage.payload.headings, analysis.headings, strict=True
                    )
                ]
                headings[passage.point_id] = tuple(heading.text for heading in path)
                for heading in path:
                    counts.update(heading.counts)
            if passage.payload.metadata:
                fields[passage.point_id] = _redacted_fields(
                    policy, passage.payload.metadata, in_fields, counts
                )
    except Exception as error:
        # Fail closed: text that could not be redacted is never returned.
        raise DependencyUnavailableError("redactor") from error
    found = dict(sorted(counts.items()))
    count_redactions(redaction.telemetry, found)
    return Redacted(texts, titles, found, headings, fields)


def field_strings(metadata: Mapping[str, Any] | None) -> set[str]:
    """The strings a document's fields hold: string values and the items of lists."""
    found: set[str] = set()
    for value in (metadata or {}).values():
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, list):
            found.update(item for item in value if isinstance(item, str))
    return found


async def _field_analyses(
    redaction: PassageRedaction, tenant_id: str, passages: Sequence[Outgoing]
) -> dict[str, tuple[PiiSpan, ...]]:
    """The spans in each string of the passages' fields. Fields carry no stored analysis
    (a document's fields are short, and shared by its passages): each distinct string is
    analysed once, in a worker thread, then found in the per-tenant cache."""
    strings = set().union(*(field_strings(p.payload.metadata) for p in passages))
    found = {s: redaction.analyses.get((tenant_id, s)) for s in strings}
    missing = sorted(s for s, spans in found.items() if spans is None)
    if missing:
        redactor = redaction.policies.redactor
        analysed = await asyncio.to_thread(redactor.analyze_texts, missing)
        for string, spans in zip(missing, analysed, strict=True):
            found[string] = spans
            redaction.analyses.put((tenant_id, string), spans)
    return {s: spans or () for s, spans in found.items()}


def _redacted_fields(
    policy: RedactionPolicy,
    metadata: Mapping[str, Any],
    analyses: Mapping[str, tuple[PiiSpan, ...]],
    counts: Counter[str],
) -> dict[str, Any]:
    """A document's fields with the policy applied to every string (numbers, booleans
    and datetimes are returned as they are)."""

    def redacted(value: str) -> str:
        applied = policy.apply(value, analyses[value])
        counts.update(applied.counts)
        return applied.text

    return {
        name: redacted(value)
        if isinstance(value, str)
        else [redacted(item) if isinstance(item, str) else item for item in value]
        if isinstance(value, list)
        else value
        for name, value in metadata.items()
    }


async def _analyses(
    redaction: PassageRedaction, tenant_id: str, passages: Sequence[Outgoing]
) -> dict[str, PiiAnalysis]:
    """Each passage's usable stored analysis; the others analysed in a worker thread."""
    usable: dict[str, PiiAnalysis] = {}
    stale: list[Outgoing] = []
    for passage in passages:
        analysis = _usable(redaction.policies.redactor, passage.payload)
        if analysis is None:
            stale.append(passage)
        else:
            usable[passage.point_id] = analysis
    if stale:
        redaction.telemetry.count("pii_analysed_in_turn", len(stale))
        analysed = await asyncio.to_thread(_analyse, redaction, tenant_id, stale)
        await _write_back(redaction.index, redaction.telemetry, stale, analysed)
        usable.update(analysed)
    return usable


def _usable(redactor: Redactor, payload: PassagePayload) -> PiiAnalysis | None:
    """The stored analysis, if this redactor's analyzer made it and it fits the strings."""
    pii = payload.pii
    if pii is None or pii.analyzer != redactor.analyzer_version:
        return None
    return pii if pii.fits(payload.text, payload.title, payload.headings or ()) else None


def _analyse(
    redaction: PassageRedaction, tenant_id: str, passages: Sequence[Outgoing]
) -> dict[str, PiiAnalysis]:
    """Analyse passages without a usable analysis (through the per-tenant cache)."""
    redactor, cache = redaction.policies.redactor, redaction.analyses
    strings = {s for p in passages for s in analysed_strings(p.payload)}
    found = {s: cache.get((tenant_id, s)) for s in strings}
    missing = [s for s, spans in found.items() if spans is None]
    for text, spans in zip(missing, redactor.analyze_texts(missing), strict=True):
        found[text] = spans
        cache.put((tenant_id, text), spans)
    known = {string: spans or () for string, spans in found.items()}
    return {p.point_id: analysis_of(redactor.analyzer_version, p.payload, known) for p in passages}


async def _write_back(
    index: Index,
    telemetry: Telemetry,
    passages: Sequence[Outgoing],
    analyses: Mapping[str, PiiAnalysis],
) -> None:
    """Store the analyses on their passages; a failed write-back is counted and the turn
    goes on."""
    places: dict[tuple[str, Scope], dict[str, PiiAnalysis]] = defaultdict(dict)
    for passage in passages:
        places[passage.collection, passage.scope][passage.point_id] = analyses[passage.point_id]
    for (collection, scope), batch in places.items():
        try:
            await index.set_pii(collection, scope, batch)
        except (IndexUnavailableError, ValueError):
            telemetry.count("pii_write_back_failed")
