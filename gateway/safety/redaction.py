"""PII detection and redaction: presidio, no model download, no network.

Detection is presidio-analyzer's recognizers on a no-op NLP engine: regular
expressions with checksums where the format has one (credit cards: Luhn; IBAN:
mod 97; crypto wallets: base58check/bech32; UK NHS: mod 11), phone numbers through
`phonenumbers`, plus kbgate's recognizer for URLs that carry `user:password@`.
Without an NLP engine there are no tokens, so context words ("ssn", "card", ...)
cannot raise a score: a bare 9-digit number is never taken for an SSN.
Person names need a named-entity model: when a spaCy English pipeline
(`en_core_web_lg`, `_md` or `_sm`) is installed it is used for PERSON, otherwise
PERSON is not detected. Nothing is downloaded.

presidio-analyzer's email recognizer validates the domain with `tldextract`,
whose module-level extractor fetches the public-suffix list over HTTP on first
use. The email recognizer here owns an extractor built with no URLs to fetch
and no cache directory: it reads the snapshot bundled with tldextract.

Whether to redact is the two-gate rule (`settings.resolve.resolve_redaction`);
which entity types is the workspace's `pii_entities` (`resolve_pii_entities`).
Every method here is CPU-bound: the gateway calls them off the event loop (call-time
redaction on the expensive-work pool, `gateway.access.expensive`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.runtime.telemetry import Telemetry
from ingest.lru import LruCache
from settings.resolve import KNOWN_PII_ENTITIES

LANGUAGE = "en"
#: Results scoring below this are dropped. Without an NLP engine no context word
#: raises a score, so presidio's "very weak" patterns (0.05: bare 9-digit SSNs,
#: bank account numbers) never pass; checksummed matches score 1.0, phones 0.4.
SCORE_FLOOR = 0.35
#: spaCy pipelines tried for PERSON, best first; absent ones are skipped, never fetched.
NER_MODELS = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm")
#: presidio's default phone regions without CA: Canadian numbers share the NANP
#: format and are already found (and validated) from US. Each region is one pass.
PHONE_REGIONS = ("US", "GB", "DE", "FR", "IL", "IN", "BR")
#: Deeper JSON than this is refused rather than walked.
MAX_JSON_DEPTH = 64
CREDENTIALS_URL = "URL_WITH_CREDENTIALS"
PHONE = "PHONE_NUMBER"

# scheme://user:password@host[...] — the user may be empty (redis://:secret@host);
# the URL ends at whitespace, a quote or a bracket, and trailing punctuation is left out.
_CREDENTIALS_URL_REGEX = (
    r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://"
    r"[^\s:/?#@\"'<>]*:[^\s/?#@\"'<>]+@"
    r"[^\s/?#\"'<>]+"
    r"(?:[/?#][^\s\"'<>]*)?"
    r"(?<![.,;:!?)\]}])"
)
# Mastercard's 2-series (2221-2720), which presidio's pattern predates; Luhn still applies.
_MASTERCARD_2_SERIES = r"\b(2[2-7]\d{2})[- ]?(\d{4})[- ]?(\d{4})[- ]?(\d{4})\b"
# One sample of each kind, analysed once at build time so lazy state (compiled
# patterns, phone metadata, the suffix list) is loaded before requests share it.
_WARM_UP = (
    "mail a.b@example.com, call +1 415 555 0132 or 020 7946 0958, card 4111 1111 1111 1111, "
    "IBAN GB82 WEST 1234 5698 7654 32, ip 192.168.0.1 and 2001:db8::1, ssn 219-09-9999, "
    "itin 912-70-1234, mac 00:1a:2b:3c:4d:5e, nhs 943 476 5919, "
    "wallet 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa, https://u:p@db.example.com/x, www.example.org"
)


@dataclass(frozen=True, slots=True)
class Detection:
    """One span to replace: [start, end) of the input text."""

    start: int
    end: int
    entity_type: str
    score: float


@dataclass(frozen=True, slots=True)
class Redaction:
    """The redacted text and how many spans of each entity type were replaced."""

    text: str
    counts: dict[str, int]

    @property
    def redacted(self) -> bool:
        return bool(self.counts)


class _Span(Protocol):
    start: int
    end: int
    entity_type: str
    score: float


class Redactor:
    """Detects and replaces PII with `<ENTITY_TYPE>` placeholders; built once per process."""

    def __init__(
        self, analyzer: Any, anonymizer: Any, *, ner_model: str | None, phone_digits: int = 0
    ) -> None:
        """`phone_digits`: the fewest digits a phone number the analyzer recognises can
        have; a text without that many in one stretch skips the phone pass (0: never)."""
        self._analyzer = analyzer
        self._anonymizer = anonymizer
        self._phone_digits = phone_digits
        self.ner_model = ner_model
        self.supported_entities: frozenset[str] = (
            frozenset(analyzer.get_supported_entities(LANGUAGE)) & KNOWN_PII_ENTITIES
        )

    @classmethod
    def build(
        cls,
        *,
        ner_models: Sequence[str] = NER_MODELS,
        phone_regions: Sequence[str] = PHONE_REGIONS,
        phone_prefilter: bool = True,
    ) -> Redactor:
        """Assemble the analyzer offline; PERSON only if one of `ner_models` is installed.

        Pass `ner_models=()` for pattern recognizers only, whatever is installed.
        `phone_regions` decides which national formats (numbers without a +country
        prefix) are recognised; each region is one more pass over the text.
        `phone_prefilter=False` runs the phone pass on every text, even one without
        enough digits for any number (`may_hold_phone_number`): the same answers, slower.
        """
        from presidio_anonymizer import AnonymizerEngine

        ner_model = _installed_ner_model(ner_models)
        anonymizer = AnonymizerEngine()  # type: ignore[no-untyped-call]  # presidio leaves __init__ unannotated
        analyzer = _build_analyzer(ner_model, tuple(phone_regions))
        phone_digits = fewest_phone_digits(tuple(phone_regions)) if phone_prefilter else 0
        redactor = cls(analyzer, anonymizer, ner_model=ner_model, phone_digits=phone_digits)
        redactor.detect(_WARM_UP, sorted(redactor.supported_entities))
        return redactor

    def detect(self, text: str, entities: Iterable[str]) -> list[Detection]:
        """The non-overlapping spans that `redact` replaces, in text order.

        Only `entities` this redactor supports are looked for; the others are ignored.
        """
        wanted = sorted(self.supported_entities.intersection(entities))
        if not wanted or not text.strip():
            return []
        # Phone matching parses every digit run once per region, and card numbers or
        # IBANs next to a phone make it costly. So the other types are found first and
        # blanked out (same length: offsets hold) before the phone pass; one NLP pass
        # serves both. A span already found is redacted whatever the phone pass says.
        artifacts = self._analyzer.nlp_engine.process_text(text, LANGUAGE)
        others = [name for name in wanted if name != PHONE]
        found = self._analyze(text, others, artifacts) if others else []
        if PHONE in wanted:
            rest = _blank(text, found)
            if may_hold_phone_number(rest, self._phone_digits):
                found += self._analyze(rest, [PHONE], artifacts)
        return resolve_overlaps(text, found)

    def _analyze(self, text: str, entities: list[str], artifacts: Any) -> list[Any]:
        return list(
            self._analyzer.analyze(
                text=text,
                language=LANGUAGE,
                entities=entities,
                score_threshold=SCORE_FLOOR,
                nlp_artifacts=artifacts,
            )
        )

    def redact(self, text: str, entities: Iterable[str]) -> Redaction:
        """`text` with every detected entity of `entities` replaced by `<ENTITY_TYPE>`."""
        detections = self.detect(text, entities)
        if not detections:
            return Redaction(text, {})
        from presidio_anonymizer.entities import OperatorConfig, RecognizerResult

        result = self._anonymizer.anonymize(
            text=text,
            analyzer_results=[
                RecognizerResult(d.entity_type, d.start, d.end, d.score) for d in detections
            ],
            operators={"DEFAULT": OperatorConfig("replace")},
        )
        counts = Counter(str(item.entity_type) for item in result.items)
        return Redaction(str(result.text), dict(sorted(counts.items())))

    def redact_texts(
        self, texts: Mapping[str, str], entities: Iterable[str]
    ) -> tuple[dict[str, str], dict[str, int]]:
        """Redact each value of `texts` (keys kept); counts summed over all of them."""
        wanted = tuple(entities)
        counts: Counter[str] = Counter()
        redacted: dict[str, str] = {}
        for key, text in texts.items():
            redaction = self.redact(text, wanted)
            redacted[key] = redaction.text
            counts.update(redaction.counts)
        return redacted, dict(sorted(counts.items()))

    def redact_json(
        self,
        value: Any,
        entities: Iterable[str],
        checkpoint: Callable[[], None] | None = None,
    ) -> tuple[Any, dict[str, int]]:
        """Redact every string inside a JSON value; structure and object keys are kept.

        Raises ValueError when the value nests deeper than MAX_JSON_DEPTH. `checkpoint`
        is called before each string is redacted; whatever it raises stops the walk.
        """
        wanted = tuple(entities)
        counts: Counter[str] = Counter()

        def walk(node: Any, depth: int) -> Any:
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(node, str):
                if checkpoint is not None:
                    checkpoint()
                redaction = self.redact(node, wanted)
                counts.update(redaction.counts)
                return redaction.text
            if isinstance(node, Mapping):
                return {key: walk(item, depth + 1) for key, item in node.items()}
            if isinstance(node, list | tuple):
                return [walk(item, depth + 1) for item in node]
            return node

        redacted = walk(value, 0)
        return redacted, dict(sorted(counts.items()))


#: (tenant id, entity types, the text itself) -> its redaction
RedactionKey = tuple[str, tuple[str, ...], str]
RedactionCache = LruCache[RedactionKey, Redaction]


class TextRedactor(Protocol):
    """What `redact_texts_cached` needs of a `Redactor`."""

    def redact(self, text: str, entities: Iterable[str]) -> Redaction: ...


def redact_texts_cached(
    redactor: TextRedactor,
    cache: RedactionCache,
    tenant_id: str,
    texts: Mapping[str, str],
    entities: Iterable[str],
) -> tuple[dict[str, str], dict[str, int]]:
    """As `Redactor.redact_texts`, for one tenant's texts, through a bounded cache.

    Passages recur across turns, and redacting one costs milliseconds (mostly the
    phone-number pass). An entry is keyed by the tenant, the entity types asked for
    and the whole text: the lookup compares the text itself, so a text is only ever
    given its own redaction, and one tenant's entries are never served to another
    (nor can another tenant tell by timing what was redacted for it). Only successful
    redactions are stored; a failure propagates, so callers still fail closed. Entity
    counts are summed over cached and fresh redactions alike.
    """
    wanted = tuple(sorted(set(entities)))
    counts: Counter[str] = Counter()
    redacted: dict[str, str] = {}
    for key, text in texts.items():
        cache_key = (tenant_id, wanted, text)
        redaction = cache.get(cache_key)
        if redaction is None:
            redaction = redactor.redact(text, wanted)
            cache.put(cache_key, redaction)
        redacted[key] = redaction.text
        counts.update(redaction.counts)
    return redacted, dict(sorted(counts.items()))


def may_hold_phone_number(text: str, fewest_digits: int) -> bool:
    """Whether some stretch of `text` free of letters holds `fewest_digits` digits.

    phonenumbers' matcher only takes digits, punctuation, spaces, brackets, plus signs and
    an `x` as a number's candidate (no letters: it finds no vanity numbers), so every
    number it can return lies inside one such stretch, extensions aside. Most prose has
    no stretch of four digits; scientific prose has many short ones ("1.2-3.4", "n = 12").
    """
    if fewest_digits <= 1:
        return True
    return _digits_in_one_stretch(fewest_digits).search(text) is not None


@functools.cache
def _digits_in_one_stretch(digits: int) -> re.Pattern[str]:
    # Between two digits only non-word characters or an x: no letter, no underscore.
    return re.compile(rf"\d(?:[\WxX]*\d){{{digits - 1}}}")


def fewest_phone_digits(regions: Sequence[str]) -> int:
    """The fewest digits a valid number can have, written nationally in one of `regions`
    or internationally (country code included) anywhere: from phonenumbers' metadata, so
    the bound follows the library's. 0 (never skip) where the metadata gives no bound."""
    import phonenumbers
    from phonenumbers import PhoneMetadata
    from phonenumbers.phonenumberutil import COUNTRY_CODES_FOR_NON_GEO_REGIONS

    def shortest(metadata: Any, prefix: str = "") -> int | None:
        lengths = [n for n in metadata.general_desc.possible_length if n > 0] if metadata else []
        return len(prefix) + min(lengths) if lengths else None

    national = [shortest(PhoneMetadata.metadata_for_region(region)) for region in regions]
    international = [
        shortest(metadata, str(metadata.country_code))
        for metadata in (
            *(PhoneMetadata.metadata_for_region(r) for r in phonenumbers.SUPPORTED_REGIONS),
            *(
                PhoneMetadata.metadata_for_nongeo_region(c)
                for c in COUNTRY_CODES_FOR_NON_GEO_REGIONS
            ),
        )
        if metadata is not None
    ]
    if None in national or None in international:
        return 0
    return min(n for n in (*national, *international) if n is not None)


def _blank(text: str, spans: Iterable[_Span]) -> str:
    """`text` with each span's characters replaced by spaces (length kept)."""
    chars = list(text)
    for span in spans:
        chars[span.start : span.end] = " " * (span.end - span.start)
    return "".join(chars)


def count_redactions(telemetry: Telemetry, counts: Mapping[str, int]) -> None:
    """Telemetry gets how many of each entity type were replaced, never what."""
    for entity_type, amount in counts.items():
        telemetry.count(f"redacted_{entity_type}", amount)


def resolve_overlaps(text: str, found: Iterable[_Span]) -> list[Detection]:
    """Make analyzer results disjoint so every character is replaced at most once.

    Overlapping results of one type merge into their union; a result inside another
    is dropped (the outer one covers it); where two results still overlap, the higher
    score keeps the overlap and the other keeps what is left of it, if that holds a
    letter or digit. The union of what was detected is always covered.
    """
    merged = _merge_same_type(
        [Detection(r.start, r.end, r.entity_type, float(r.score)) for r in found]
    )
    outermost = [
        d
        for d in merged
        if not any(_contains(other, d) and _outranks(other, d) for other in merged if other != d)
    ]
    taken: list[tuple[int, int]] = []
    kept: list[Detection] = []
    for d in sorted(outermost, key=lambda d: (-d.score, d.start - d.end, d.start, d.entity_type)):
        for start, end in _uncovered(d.start, d.end, taken):
            if any(ch.isalnum() for ch in text[start:end]):
                kept.append(Detection(start, end, d.entity_type, d.score))
        taken.append((d.start, d.end))
    return sorted(kept, key=lambda d: d.start)


def _merge_same_type(spans: list[Detection]) -> list[Detection]:
    merged: list[Detection] = []
    for d in sorted(spans, key=lambda d: (d.entity_type, d.start, d.end)):
        last = merged[-1] if merged else None
        if last is not None and last.entity_type == d.entity_type and d.start < last.end:
            merged[-1] = Detection(
                last.start, max(last.end, d.end), d.entity_type, max(last.score, d.score)
            )
        else:
            merged.append(d)
    return merged


def _contains(outer: Detection, inner: Detection) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def _outranks(outer: Detection, inner: Detection) -> bool:
    """Strictly longer wins; the same span goes to the higher score, then the type name."""
    if (outer.start, outer.end) != (inner.start, inner.end):
        return True
    return (outer.score, inner.entity_type) > (inner.score, outer.entity_type)


def _uncovered(start: int, end: int, taken: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    pieces = [(start, end)]
    for t_start, t_end in taken:
        next_pieces: list[tuple[int, int]] = []
        for p_start, p_end in pieces:
            if t_end <= p_start or p_end <= t_start:
                next_pieces.append((p_start, p_end))
                continue
            if p_start < t_start:
                next_pieces.append((p_start, t_start))
            if t_end < p_end:
                next_pieces.append((t_end, p_end))
        pieces = next_pieces
    return pieces


def _installed_ner_model(candidates: Sequence[str]) -> str | None:
    """The first installed spaCy pipeline of `candidates`, without importing spaCy for none."""
    if not candidates:
        return None
    import spacy.util

    return next((name for name in candidates if spacy.util.is_package(name)), None)


def _build_analyzer(ner_model: str | None, phone_regions: tuple[str, ...]) -> Any:
    """A presidio AnalyzerEngine that needs no download and makes no network call."""
    import tldextract
    from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer, RecognizerRegistry
    from presidio_analyzer.context_aware_enhancers import (
        ContextAwareEnhancer,
        LemmaContextAwareEnhancer,
    )
    from presidio_analyzer.nlp_engine import NlpEngine, NoOpNlpEngine, SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        CryptoRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        MacAddressRecognizer,
        NhsRecognizer,
        PhoneRecognizer,
        UrlRecognizer,
        UsItinRecognizer,
        UsSsnRecognizer,
    )

    class OfflineEmailRecognizer(EmailRecognizer):
        """presidio's email recognizer, validating domains against the bundled suffix list."""

        def __init__(self, extractor: tldextract.TLDExtract) -> None:
            super().__init__()
            self._extractor = extractor

        def validate_result(self, pattern_text: str) -> bool:
            return bool(self._extractor(pattern_text).fqdn)

    # No URLs: never fetch. No cache dir: never read or write ~/.cache. The bundled
    # snapshot of the public-suffix list is then the only source.
    extractor = tldextract.TLDExtract(
        cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True
    )
    registry = RecognizerRegistry(supported_languages=[LANGUAGE])
    for recognizer in (
        CreditCardRecognizer(
            patterns=[
                *CreditCardRecognizer.PATTERNS,
                Pattern("Mastercard 2-series (weak)", _MASTERCARD_2_SERIES, 0.3),
            ]
        ),
        CryptoRecognizer(),
        OfflineEmailRecognizer(extractor),
        IbanRecognizer(),
        IpRecognizer(),
        MacAddressRecognizer(),
        NhsRecognizer(),
        PhoneRecognizer(supported_regions=phone_regions),
        UrlRecognizer(),
        UsItinRecognizer(),
        UsSsnRecognizer(),
        PatternRecognizer(
            supported_entity=CREDENTIALS_URL,
            name="CredentialsUrlRecognizer",
            patterns=[Pattern("URL with user:password@", _CREDENTIALS_URL_REGEX, 0.9)],
        ),
    ):
        registry.add_recognizer(recognizer)

    class NoContext(ContextAwareEnhancer):
        """Context words need tokens; the no-op engine has none, so skip the (costly) pass."""

        def __init__(self) -> None:
            super().__init__(
                context_similarity_factor=0,
                min_score_with_context_similarity=0,
                context_prefix_count=0,
                context_suffix_count=0,
            )

        def enhance_using_context(
            self,
            text: str,
            raw_results: list[Any],
            nlp_artifacts: Any,
            recognizers: list[Any],
            context: list[str] | None = None,
        ) -> list[Any]:
            return raw_results

    nlp_engine: NlpEngine
    enhancer: ContextAwareEnhancer
    if ner_model is None:
        nlp_engine = NoOpNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": "no_op"}])
        enhancer = NoContext()
    else:
        nlp_engine = SpacyNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": ner_model}])
        nlp_engine.load()
        registry.add_nlp_recognizer(nlp_engine=nlp_engine)
        enhancer = LemmaContextAwareEnhancer()
    return AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp_engine,
        supported_languages=[LANGUAGE],
        context_aware_enhancer=enhancer,
    )
