"""Redacting what a turn returns, from the PII analyses stored with its passages.

Every passage written by a writer with an analyzer carries the spans the recognizers found
in its text and title (`ingest.payload.PiiAnalysis`). A turn applies the workspace's policy
(`RedactionPolicy`: its entity types in force, its allow-list, its operator per type) to
those spans: no recognizer runs. A passage whose analysis is missing (written before
analysis at ingest), another analyzer's (the recognizers changed since) or does not fit
its text is analysed here, in a worker thread, and the analysis written back to it so the
next turn finds it; it is never returned unredacted. `kbgate analyse-pii` does the same
for a whole workspace ahead of time.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.errors import DependencyUnavailableError
from gateway.runtime.services import Services
from gateway.safety.operators import Operators
from gateway.safety.redaction import RedactionPolicy, Redactor, count_redactions
from ingest.index import IndexUnavailableError
from ingest.lru import LruCache
from ingest.payload import PassagePayload, PiiAnalysis, PiiSpan, Scope
from settings.pii_allow_list import AllowList, parse_allow_list
from settings.resolve import resolve_pii_allow_list, resolve_pii_entities, resolve_pii_operators
from settings.store import StoreUnavailableError

#: (tenant id, a text) -> the spans found in it, for passages analysed in a turn
AnalysisCache = LruCache[tuple[str, str], tuple[PiiSpan, ...]]
#: an allow-list's entries -> the parsed list
AllowListCache = LruCache[tuple[str, ...], AllowList]


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


def in_force(redactor: Redactor, entities: Sequence[str]) -> tuple[str, ...]:
    """The configured entity types for which a recognizer is loaded."""
    return tuple(name for name in entities if name in redactor.supported_entities)


async def redaction_policy(
    services: Services, tenant_id: str, workspace_settings: Mapping[str, object] | None
) -> RedactionPolicy:
    """The workspace's entity types in force, its allow-list (parsed once per list) and its
    operators, with its pseudonym key when one of those types is pseudonymised."""
    entities = in_force(services.redactor, resolve_pii_entities(workspace_settings).value)
    entries = resolve_pii_allow_list(workspace_settings).value
    allow = services.allow_lists.get(entries) if entries else None
    if allow is None:
        allow = parse_allow_list(entries)
        if entries:
            services.allow_lists.put(entries, allow)
    chosen = {
        entity_type: operator
        for entity_type, operator in resolve_pii_operators(workspace_settings).value.items()
        if entity_type in entities
    }
    anonymizer = services.redactor.anonymizer
    if not any(operator != "replace" for operator in chosen.values()):
        operators = anonymizer.replace_all
    else:
        key = await _pseudonym_key(services, tenant_id) if "pseudonym" in chosen.values() else None
        operators = Operators(anonymizer, chosen, key)
    return RedactionPolicy(frozenset(entities), allow, operators=operators)


async def _pseudonym_key(services: Services, tenant_id: str) -> bytes | None:
    """The workspace's pseudonym key through the settings cache (a store call at most once
    per staleness period); None when it cannot be read, counted: its types are then
    replaced by `<ENTITY_TYPE>`, never shown."""
    try:
        key = await services.settings.pseudonym_key(tenant_id)
    except StoreUnavailableError:
        key = None
    if key is None:
        services.telemetry.count("pseudonym_key_unavailable")
    return key


async def redact_outgoing(
    services: Services,
    tenant_id: str,
    workspace_settings: Mapping[str, object] | None,
    passages: Sequence[Outgoing],
) -> Redacted:
    """Each passage's text and title with the workspace's policy applied to its stored
    analysis.

    Fails closed: any failure is DependencyUnavailableError("redactor"), never raw text.
    """
    try:
        policy = await redaction_policy(services, tenant_id, workspace_settings)
        analyses = await _analyses(services, tenant_id, passages)
        texts: dict[str, str] = {}
        titles: dict[str, str] = {}
        counts: Counter[str] = Counter()
        for passage in passages:
            analysis = analyses[passage.point_id]
            text = policy.apply(passage.payload.text, analysis.text)
            title = policy.apply(passage.payload.title, analysis.title)
            texts[passage.point_id], titles[passage.point_id] = text.text, title.text
            counts.update(text.counts)
            counts.update(title.counts)
    except Exception as error:
        # Fail closed: text that could not be redacted is never returned.
        raise DependencyUnavailableError("redactor") from error
    found = dict(sorted(counts.items()))
    count_redactions(services.telemetry, found)
    return Redacted(texts, titles, found)


async def _analyses(
    services: Services, tenant_id: str, passages: Sequence[Outgoing]
) -> dict[str, PiiAnalysis]:
    """Each passage's usable stored analysis; the others analysed in a worker thread."""
    usable: dict[str, PiiAnalysis] = {}
    stale: list[Outgoing] = []
    for passage in passages:
        analysis = _usable(services.redactor, passage.payload)
        if analysis is None:
            stale.append(passage)
        else:
            usable[passage.point_id] = analysis
    if stale:
        services.telemetry.count("pii_analysed_in_turn", len(stale))
        analysed = await asyncio.to_thread(_analyse, services, tenant_id, stale)
        await _write_back(services, stale, analysed)
        usable.update(analysed)
    return usable


def _usable(redactor: Redactor, payload: PassagePayload) -> PiiAnalysis | None:
    """The stored analysis, if this redactor's analyzer made it and it fits the strings."""
    pii = payload.pii
    if pii is None or pii.analyzer != redactor.analyzer_version:
        return None
    return pii if pii.fits(payload.text, payload.title) else None


def _analyse(
    services: Services, tenant_id: str, passages: Sequence[Outgoing]
) -> dict[str, PiiAnalysis]:
    """Analyse passages without a usable analysis (through the per-tenant cache)."""
    redactor, cache = services.redactor, services.analysis_cache
    strings = {s for p in passages for s in (p.payload.text, p.payload.title)}
    found = {s: cache.get((tenant_id, s)) for s in strings}
    missing = [s for s, spans in found.items() if spans is None]
    for text, spans in zip(missing, redactor.analyze_texts(missing), strict=True):
        found[text] = spans
        cache.put((tenant_id, text), spans)
    return {
        p.point_id: PiiAnalysis(
            analyzer=redactor.analyzer_version,
            text=found[p.payload.text] or (),
            title=found[p.payload.title] or (),
        )
        for p in passages
    }


async def _write_back(
    services: Services, passages: Sequence[Outgoing], analyses: Mapping[str, PiiAnalysis]
) -> None:
    """Store the analyses on their passages; a failed write-back is counted and the turn
    goes on."""
    places: dict[tuple[str, Scope], dict[str, PiiAnalysis]] = defaultdict(dict)
    for passage in passages:
        places[passage.collection, passage.scope][passage.point_id] = analyses[passage.point_id]
    for (collection, scope), batch in places.items():
        try:
            await services.index.set_pii(collection, scope, batch)
        except (IndexUnavailableError, ValueError):
            services.telemetry.count("pii_write_back_failed")
