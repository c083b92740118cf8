"""PII detection and redaction in two steps: analyse once, apply a workspace's policy often.

1. Analysis (`Redactor.analyze`, `Redactor.analyze_texts`): presidio's recognizers
   (`gateway.safety.recognizers`) find every entity of every type they know, as spans
   (`ingest.payload.PiiSpan`). Passages are analysed when they are written and the spans
   stored with them (`ingest.sync.DocumentWriter`); `/v1/redact` analyses at call time.
2. Policy (`RedactionPolicy.apply`): the spans of the types the workspace redacts
   (`pii_entities`) whose value its allow-list (`pii_allow_list`) does not keep are made
   disjoint (`resolve_overlaps`) and each is replaced by its type's operator
   (`pii_operators`: `<ENTITY_TYPE>`, a mask or a pseudonym; presidio-anonymizer,
   `gateway.safety.operators`). No recognizer runs here: a turn applies the policy to
   stored spans in microseconds, and a policy change applies to the next turn with
   nothing re-indexed.

Whether to redact at all is the two-gate rule (`settings.resolve.resolve_redaction`).
Analysis is CPU-bound: the gateway runs it off the event loop (call-time redaction on the
expensive-work pool, `gateway.access.expensive`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.safety.names import (
    Gazetteer,
    truecased,
)
from gateway.safety.operators import Anonymizer, Operators
from gateway.safety.people import READ_BY_MODEL, named_entities, not_people, same_names
from gateway.safety.recognizers import (
    CONTEXT_NAME_RECOGNIZERS,
    LANGUAGE,
    NER_ENTITIES,
    NER_MODELS,
    PHONE,
    PHONE_BLANKED,
    PHONE_REGIONS,
    SCORE_FLOOR,
    analyzer_version,
    build_analyzer,
    fewest_phone_digits,
    installed_ner_model,
    may_hold_phone_number,
    no_nlp_engine,
)
from gateway.safety.spans import Detection, Span, overlaps_any, recognizer_of
from gateway.safety.technical import opens_call_arguments, technical_spans
from gateway.telemetry import Telemetry
from ingest.payload import PiiSpan
from settings.pii_allow_list import NO_ALLOW_LIST, AllowList
from settings.resolve import KNOWN_PII_ENTITIES

__all__ = [
    "NER_MODELS",
    "PHONE_REGIONS",
    "SCORE_FLOOR",
    "Detection",
    "Redaction",
    "RedactionPolicy",
    "Redactor",
    "count_redactions",
    "may_hold_phone_number",
    "resolve_overlaps",
]

#: Deeper JSON than this is refused rather than walked.
MAX_JSON_DEPTH = 64
#: Texts per NER batch when passages are analysed together.
NER_BATCH = 16
#: The most characters the recognizers read at once (spaCy refuses a text past a million;
#: passages are far shorter, `ingest.chunking.MAX_PASSAGE_CHARS`, but one stored before
#: passages had a character bound may not be). A longer text is read in slices cut at
#: whitespace, its spans shifted back: a long text is never a failure.
MAX_ANALYSIS_CHARS = 100_000
# One sample of each kind, analysed once at build time so lazy state (compiled
# patterns, phone metadata, the suffix list, the NER model) is loaded before requests share it.
_WARM_UP = (
    "Jane Doe of Acme Corporation in Berlin: mail a.b@example.com, call +1 415 555 0132 or "
    "020 7946 0958, card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32, ip "
    "192.168.0.1 and 2001:db8::1, ssn 219-09-9999, itin 912-70-1234, mac 00:1a:2b:3c:4d:5e, "
    "nhs 943 476 5919, wallet 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa, "
    "https://u:p@db.example.com/x, www.example.org"
)


@dataclass(frozen=True, slots=True)
class Redaction:
    """The redacted text and how many spans of each entity type were replaced."""

    text: str
    counts: dict[str, int]

    @property
    def redacted(self) -> bool:
        return bool(self.counts)


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """What a workspace redacts: these entity types, except values its allow-list keeps;
    and how (`operators`)."""

    entities: frozenset[str]
    allow: AllowList = NO_ALLOW_LIST
    operators: Operators = field(kw_only=True)

    def select(self, text: str, spans: Iterable[Span]) -> list[Detection]:
        """The disjoint spans of `text` to replace, in text order.

        Pattern recognizers (which check what they find) win over the NER model where
        they overlap: a name, place or organisation keeps only what lies outside them.
        """
        kept = [
            span
            for span in spans
            if span.entity_type in self.entities
            and not (self.allow and self.allow.allows(text[span.start : span.end]))
        ]
        if not kept:
            return []
        patterns = resolve_overlaps(text, [s for s in kept if s.entity_type not in NER_ENTITIES])
        taken = [(d.start, d.end) for d in patterns]
        names = [
            Detection(start, end, d.entity_type, d.score)
            for d in resolve_overlaps(text, [s for s in kept if s.entity_type in NER_ENTITIES])
            for start, end in _uncovered(d.start, d.end, taken)
            if any(ch.isalnum() for ch in text[start:end])
        ]
        return sorted([*patterns, *names], key=lambda d: d.start)

    def apply(self, text: str, spans: Iterable[Span]) -> Redaction:
        """`text` with each selected span replaced by its type's operator (presidio-
        anonymizer); a text with nothing selected is returned as it is, unanonymized."""
        detections = self.select(text, spans)
        if not detections:
            return Redaction(text, {})
        counts = Counter(detection.entity_type for detection in detections)
        return Redaction(self.operators.replace(text, detections), dict(sorted(counts.items())))


class Redactor:
    """Finds PII (`analyze*`) and redacts it at call time (`redact*`); built once per process."""

    def __init__(
        self,
        analyzer: Any,
        *,
        ner_model: str | None,
        phone_regions: Sequence[str] = PHONE_REGIONS,
        phone_digits: int = 0,
        gazetteer: Gazetteer | None = None,
        anonymizer: Anonymizer | None = None,
    ) -> None:
        """`phone_digits`: the fewest digits a phone number the analyzer recognises can
        have; a text without that many in one stretch skips the phone pass (0: never).
        `anonymizer`: the process's (a new one when None)."""
        self._analyzer = analyzer
        self.anonymizer = anonymizer if anonymizer is not None else Anonymizer()
        self._no_nlp = no_nlp_engine()
        self._phone_digits = phone_digits
        self._gazetteer = gazetteer or Gazetteer(frozenset(), frozenset())
        self.ner_model = ner_model
        self.supported_entities: frozenset[str] = (
            frozenset(analyzer.get_supported_entities(LANGUAGE)) & KNOWN_PII_ENTITIES
        )
        #: Names the recognizers and their versions: spans stored by another are stale.
        self.analyzer_version = analyzer_version(ner_model, phone_regions)

    @classmethod
    def build(
        cls,
        *,
        ner_models: Sequence[str] = NER_MODELS,
        phone_regions: Sequence[str] = PHONE_REGIONS,
        phone_prefilter: bool = True,
        anonymizer: Anonymizer | None = None,
    ) -> Redactor:
        """Assemble the analyzer offline; names, places and organisations only if one of
        `ner_models` is installed (`ner_models=()`: pattern recognizers only).

        `phone_regions` decides which national formats (numbers without a +country
        prefix) are recognised; each region is one more pass over the text.
        `phone_prefilter=False` runs the phone pass on every text, even one without
        enough digits for any number (`may_hold_phone_number`): the same answers, slower.
        """
        ner_model = installed_ner_model(ner_models)
        gazetteer = Gazetteer.from_faker() if ner_model else None
        analyzer = build_analyzer(ner_model, tuple(phone_regions), gazetteer)
        phone_digits = fewest_phone_digits(tuple(phone_regions)) if phone_prefilter else 0
        redactor = cls(
            analyzer,
            ner_model=ner_model,
            phone_regions=phone_regions,
            phone_digits=phone_digits,
            gazetteer=gazetteer,
            anonymizer=anonymizer,
        )
        redactor.analyze_texts([_WARM_UP])
        return redactor

    # ---- analysis -------------------------------------------------------------------

    def analyze(self, text: str, entities: Iterable[str] | None = None) -> tuple[PiiSpan, ...]:
        """The entities in `text` of `entities` (every supported type when None).

        A type's spans do not depend on which other types were asked for: the NER pipeline
        runs only when a type it finds is wanted, and the pattern types are always looked
        for together (the phone pass skips what they found).
        """
        wanted = self._wanted(entities)
        if not wanted or not text.strip():
            return ()
        if len(text) > MAX_ANALYSIS_CHARS:
            return tuple(
                _shifted(span, offset)
                for offset, piece in analysis_slices(text)
                for span in self.analyze(piece, wanted)
            )
        return self._spans(text, self._artifacts(text, wanted), wanted)

    def analyze_texts(
        self, texts: Sequence[str], entities: Iterable[str] | None = None
    ) -> list[tuple[PiiSpan, ...]]:
        """The entities in each text of `entities` (every supported type when None), as
        `analyze` finds them; the NER pipeline takes the texts in batches. A text longer
        than `MAX_ANALYSIS_CHARS` is read in slices."""
        wanted = self._wanted(entities)
        if not wanted:
            return [() for _ in texts]
        if all(len(text) <= MAX_ANALYSIS_CHARS for text in texts):
            return self._analyze_texts(texts, wanted)
        sliced = [analysis_slices(text) for text in texts]
        pieces = [piece for slices in sliced for _, piece in slices]
        found = iter(self._analyze_texts(pieces, wanted))
        return [
            tuple(_shifted(span, offset) for offset, _ in slices for span in next(found))
            for slices in sliced
        ]

    def _analyze_texts(
        self, texts: Sequence[str], wanted: frozenset[str]
    ) -> list[tuple[PiiSpan, ...]]:
        if wanted & NER_ENTITIES:
            batches = self._analyzer.nlp_engine.process_batch(
                [truecased(text) for text in texts], LANGUAGE, batch_size=NER_BATCH
            )
            artifacts = [found for _, found in batches]
        else:
            artifacts = [self._no_nlp.process_text(text, LANGUAGE) for text in texts]
        return [
            self._spans(text, found, wanted) if text.strip() else ()
            for text, found in zip(texts, artifacts, strict=True)
        ]

    def _wanted(self, entities: Iterable[str] | None) -> frozenset[str]:
        if entities is None:
            return self.supported_entities
        return self.supported_entities.intersection(entities)

    def explain(
        self, text: str, entities: Iterable[str], allow: AllowList = NO_ALLOW_LIST
    ) -> list[Detection]:
        """The spans `redact` replaces, each with the recognizer that found it and its
        score: why a span was hidden."""
        return self.redact_explained(text, entities, allow)[1]

    def redact_explained(
        self,
        text: str,
        entities: Iterable[str],
        allow: AllowList = NO_ALLOW_LIST,
        operators: Operators | None = None,
    ) -> tuple[Redaction, list[Detection]]:
        """`redact` and `explain` of one analysis of `text`."""
        operators = operators if operators is not None else self.anonymizer.replace_all
        policy = RedactionPolicy(frozenset(entities), allow, operators=operators)
        wanted = self._wanted(policy.entities)
        if not wanted or not text.strip():
            return Redaction(text, {}), []
        found = self._found(text, self._artifacts(text, wanted), wanted)
        spans = spans_of(found)
        explained = [
            Detection(d.start, d.end, d.entity_type, d.score, _finder(found, d))
            for d in policy.select(text, spans)
        ]
        return policy.apply(text, spans), explained

    def _artifacts(self, text: str, wanted: frozenset[str]) -> Any:
        if wanted & NER_ENTITIES:
            return self._analyzer.nlp_engine.process_text(truecased(text), LANGUAGE)
        return self._no_nlp.process_text(text, LANGUAGE)

    def _spans(self, text: str, artifacts: Any, wanted: frozenset[str]) -> tuple[PiiSpan, ...]:
        return spans_of(self._found(text, artifacts, wanted))

    def _found(self, text: str, artifacts: Any, wanted: frozenset[str]) -> list[Any]:
        # Phone matching parses every digit run once per region, and card numbers or
        # IBANs next to a phone make it costly. So the other pattern types are found
        # first and those of PHONE_BLANKED blanked out (same length: offsets hold) before
        # the phone pass: what it finds never depends on which other types were asked for.
        patterns = (self.supported_entities if PHONE in wanted else wanted) - NER_ENTITIES
        found = self._analyze(text, sorted(patterns - {PHONE}), artifacts)
        if PHONE in wanted:
            blanked = [(s.start, s.end) for s in found if s.entity_type in PHONE_BLANKED]
            rest = _blank(text, blanked)
            if may_hold_phone_number(rest, self._phone_digits):
                rest = _blank(rest, technical_spans(text))
            if may_hold_phone_number(rest, self._phone_digits):
                phones = self._analyze(rest, [PHONE], artifacts)
                found += [
                    r
                    for r in phones
                    if _digits(text[r.start : r.end]) >= MIN_PHONE_DIGITS
                    and not opens_call_arguments(text, r.start)
                ]
        if wanted & NER_ENTITIES:  # all of them: the rules move spans between types
            names = self._analyze(text, sorted(self.supported_entities & NER_ENTITIES), artifacts)
            by_model = [r for r in names if recognizer_of(r) not in CONTEXT_NAME_RECOGNIZERS]
            places = not_people(artifacts)
            found += [
                r
                for r in names
                if recognizer_of(r) in CONTEXT_NAME_RECOGNIZERS
                and not (recognizer_of(r) in READ_BY_MODEL and overlaps_any(r, places))
            ]
            found += named_entities(text, by_model, self._gazetteer)
            found += same_names(
                text, [r for r in found if r.entity_type == "PERSON"], self._gazetteer
            )
        return [span for span in found if span.entity_type in wanted]

    def _analyze(self, text: str, entities: list[str], artifacts: Any) -> list[Any]:
        if not entities:
            return []
        return list(
            self._analyzer.analyze(
                text=text,
                language=LANGUAGE,
                entities=entities,
                score_threshold=SCORE_FLOOR,
                nlp_artifacts=artifacts,
            )
        )

    # ---- call-time redaction ----------------------------------------------------------

    def detect(
        self, text: str, entities: Iterable[str], allow: AllowList = NO_ALLOW_LIST
    ) -> list[Detection]:
        """The non-overlapping spans that `redact` replaces, in text order.

        Only `entities` this redactor supports are looked for; the others are ignored.
        """
        policy = RedactionPolicy(frozenset(entities), allow, operators=self.anonymizer.replace_all)
        return policy.select(text, self.analyze(text, policy.entities))

    def redact(
        self,
        text: str,
        entities: Iterable[str],
        allow: AllowList = NO_ALLOW_LIST,
        operators: Operators | None = None,
    ) -> Redaction:
        """`text` with every detected entity of `entities` replaced by its type's operator
        (None: `<ENTITY_TYPE>` for all), except values `allow` keeps."""
        operators = operators if operators is not None else self.anonymizer.replace_all
        policy = RedactionPolicy(frozenset(entities), allow, operators=operators)
        return policy.apply(text, self.analyze(text, policy.entities))

    def redact_json(
        self,
        value: Any,
        entities: Iterable[str],
        checkpoint: Callable[[], None] | None = None,
        allow: AllowList = NO_ALLOW_LIST,
        operators: Operators | None = None,
    ) -> tuple[Any, dict[str, int]]:
        """Redact every string inside a JSON value; structure and object keys are kept.

        Each distinct string is analysed once, and the strings go to the analyzer in
        batches (`json_batches`: the NER pipeline's per-call cost is paid once a batch).
        Raises ValueError when the value nests deeper than MAX_JSON_DEPTH. `checkpoint`
        is called before each batch is analysed; whatever it raises stops the work.
        Counts are per occurrence: a string found twice counts twice.
        """
        operators = operators if operators is not None else self.anonymizer.replace_all
        policy = RedactionPolicy(frozenset(entities), allow, operators=operators)
        distinct: dict[str, None] = {}
        _collect_strings(value, distinct)
        spans: dict[str, tuple[PiiSpan, ...]] = {}
        for batch in json_batches(list(distinct)):
            if checkpoint is not None:
                checkpoint()
            spans.update(zip(batch, self.analyze_texts(batch, policy.entities), strict=True))
        redactions = {text: policy.apply(text, found) for text, found in spans.items()}
        counts: Counter[str] = Counter()

        def rebuild(node: Any) -> Any:
            if isinstance(node, str):
                redaction = redactions[node]
                counts.update(redaction.counts)
                return redaction.text
            if isinstance(node, dict):
                return {key: rebuild(item) for key, item in node.items()}
            if isinstance(node, list | tuple):
                return [rebuild(item) for item in node]
            return node

        redacted = rebuild(value)
        return redacted, dict(sorted(counts.items()))


def analysis_slices(text: str, bound: int = MAX_ANALYSIS_CHARS) -> list[tuple[int, str]]:
    """`text` in consecutive slices of at most `bound` characters, each with its offset;
    a slice ends at the last whitespace of its second half where there is one."""
    slices: list[tuple[int, str]] = []
    start = 0
    while start < len(text):
        end = min(start + bound, len(text))
        if end < len(text):
            cut = max(text.rfind(space, start + bound // 2, end) for space in " \n\t")
            if cut > start:
                end = cut + 1
        slices.append((start, text[start:end]))
        start = end
    return slices


#: Strings of a JSON value analysed in one call, and the characters one call takes
#: (a longer string goes alone): one unit of work between two checkpoints.
JSON_BATCH_STRINGS = 16
JSON_BATCH_CHARS = 4_000


def json_batches(texts: Sequence[str]) -> list[list[str]]:
    """`texts` in order, cut into batches of at most JSON_BATCH_STRINGS strings and
    JSON_BATCH_CHARS characters (a longer string is a batch of its own)."""
    batches: list[list[str]] = []
    batch: list[str] = []
    chars = 0
    for text in texts:
        if batch and (len(batch) >= JSON_BATCH_STRINGS or chars + len(text) > JSON_BATCH_CHARS):
            batches.append(batch)
            batch, chars = [], 0
        batch.append(text)
        chars += len(text)
    if batch:
        batches.append(batch)
    return batches


def _collect_strings(value: Any, into: dict[str, None]) -> None:
    """Every string of a JSON value into `into` (distinct, in first-seen order); ValueError
    past MAX_JSON_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(node, str):
            into[node] = None
        elif isinstance(node, dict):
            stack.extend((item, depth + 1) for item in reversed(node.values()))
        elif isinstance(node, list | tuple):
            stack.extend((item, depth + 1) for item in reversed(node))


def _shifted(span: PiiSpan, offset: int) -> PiiSpan:
    if not offset:
        return span
    return PiiSpan(span.start + offset, span.end + offset, span.entity_type, span.score)


def spans_of(found: Iterable[Span]) -> tuple[PiiSpan, ...]:
    """Analyzer results as stored spans: overlapping results of one type merged into their
    union, sorted by position; results of different types may overlap (the policy settles
    them once it knows which types it redacts)."""
    merged = _merge_same_type(
        [Detection(r.start, r.end, r.entity_type, round(float(r.score), 2)) for r in found]
    )
    return tuple(
        PiiSpan(d.start, d.end, d.entity_type, d.score)
        for d in sorted(merged, key=lambda d: (d.start, d.end, d.entity_type))
    )


def _blank(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each [start, end) replaced by spaces (length kept)."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


#: Fewer digits than this are a year, a count or an extension, not a number to call.
MIN_PHONE_DIGITS = 7


def _digits(value: str) -> int:
    return sum(ch.isdigit() for ch in value)


def _finder(found: Sequence[Any], detection: Detection) -> str:
    """The recognizer whose finding of the same type covers most of `detection`."""
    same = [
        r
        for r in found
        if r.entity_type == detection.entity_type
        and r.start < detection.end
        and detection.start < r.end
    ]
    best = max(
        same,
        key=lambda r: (min(r.end, detection.end) - max(r.start, detection.start), r.score),
        default=None,
    )
    return recognizer_of(best) if best is not None else ""


def count_redactions(telemetry: Telemetry, counts: dict[str, int]) -> None:
    """Telemetry gets how many of each entity type were replaced, never what."""
    for entity_type, amount in counts.items():
        telemetry.count(f"redacted_{entity_type}", amount)


def resolve_overlaps(text: str, found: Iterable[Span]) -> list[Detection]:
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
