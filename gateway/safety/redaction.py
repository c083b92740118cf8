"""PII detection and redaction in two steps: analyse once, apply a workspace's policy often.

1. Analysis (`Redactor.analyze`, `Redactor.analyze_texts`): presidio's recognizers
   (`gateway.safety.recognizers`) find every entity of every type they know, as spans
   (`ingest.payload.PiiSpan`). Passages are analysed when they are written and the spans
   stored with them (`ingest.sync.DocumentWriter`); `/v1/redact` analyses at call time.
2. Policy (`gateway.safety.policy`, `RedactionPolicy.apply`): the spans of the types
   the workspace redacts (`pii_entities`) whose value its allow-list (`pii_allow_list`)
   does not keep are made disjoint (`resolve_overlaps`) and each is replaced by its
   type's operator (`pii_operators`: `<ENTITY_TYPE>`, a mask or a pseudonym;
   presidio-anonymizer, `gateway.safety.operators`). No recognizer runs here: a turn
   applies the policy to stored spans in microseconds, and a policy change applies to
   the next turn with nothing re-indexed.

Whether to redact at all is the two-gate rule (`settings.resolve.resolve_redaction`).
Analysis is CPU-bound: the gateway runs it off the event loop (call-time redaction on the
expensive-work pool, `gateway.access.expensive`). A long text or a JSON value is
analysed in pieces (`gateway.safety.slicing`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.safety.names import (
    Gazetteer,
    truecased,
)
from gateway.safety.operators import Anonymizer, Operators
from gateway.safety.people import READ_BY_MODEL, named_entities, not_people, same_names
from gateway.safety.policy import Redaction, RedactionPolicy, spans_of
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
from gateway.safety.slicing import (
    MAX_ANALYSIS_CHARS,
    TEXT_SLICE_CHARS,
    analysis_slices,
    collect_strings,
    json_batches,
    shifted,
    shifted_result,
    text_slices,
)
from gateway.safety.spans import Detection, overlaps_any, recognizer_of
from gateway.safety.technical import opens_call_arguments, technical_spans
from ingest.payload import PiiSpan
from settings.pii_allow_list import NO_ALLOW_LIST, AllowList
from settings.resolve import KNOWN_PII_ENTITIES

__all__ = [
    "NER_MODELS",
    "PHONE_REGIONS",
    "SCORE_FLOOR",
    "Detection",
    "Redactor",
    "may_hold_phone_number",
]

#: Texts per NER batch when passages are analysed together.
NER_BATCH = 16
# One sample of each kind, analysed once at build time so lazy state (compiled
# patterns, phone metadata, the suffix list, the NER model) is loaded before requests share it.
_WARM_UP = (
    "Jane Doe of Acme Corporation in Berlin: mail a.b@example.com, call +1 415 555 0132 or "
    "020 7946 0958, card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32, ip "
    "192.168.0.1 and 2001:db8::1, ssn 219-09-9999, itin 912-70-1234, mac 00:1a:2b:3c:4d:5e, "
    "nhs 943 476 5919, wallet 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa, "
    "https://u:p@db.example.com/x, www.example.org"
)


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
                shifted(span, offset)
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
            tuple(shifted(span, offset) for offset, _ in slices for span in next(found))
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
        checkpoint: Callable[[], None] | None = None,
    ) -> tuple[Redaction, list[Detection]]:
        """`redact` and `explain` of one analysis of `text`."""
        operators = operators if operators is not None else self.anonymizer.replace_all
        policy = RedactionPolicy(frozenset(entities), allow, operators=operators)
        wanted = self._wanted(policy.entities)
        if not wanted or not text.strip():
            return Redaction(text, {}), []
        found = self._found_in_slices(text, wanted, checkpoint)
        spans = spans_of(found)
        explained = [
            Detection(d.start, d.end, d.entity_type, d.score, _finder(found, d))
            for d in policy.select(text, spans)
        ]
        return policy.apply(text, spans), explained

    def _found_in_slices(
        self, text: str, wanted: frozenset[str], checkpoint: Callable[[], None] | None
    ) -> list[Any]:
        """`_found` of `text`, read in widened slices of `TEXT_SLICE_CHARS` (`text_slices`)
        with `checkpoint` called before each; the people found are then named again across
        the whole text. Whatever `checkpoint` raises stops the work."""
        if len(text) <= TEXT_SLICE_CHARS:
            return self._found(text, self._artifacts(text, wanted), wanted)
        found: list[Any] = []
        for offset, piece in text_slices(text):
            if checkpoint is not None:
                checkpoint()
            if piece.strip():
                found += [
                    shifted_result(result, offset)
                    for result in self._found(piece, self._artifacts(piece, wanted), wanted)
                ]
        if "PERSON" in wanted:
            people = [r for r in found if r.entity_type == "PERSON"]
            found += same_names(text, people, self._gazetteer)
        return found

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
        checkpoint: Callable[[], None] | None = None,
    ) -> Redaction:
        """`text` with every detected entity of `entities` replaced by its type's operator
        (None: `<ENTITY_TYPE>` for all), except values `allow` keeps. A text longer than
        `TEXT_SLICE_CHARS` is read in slices, `checkpoint` called before each (whatever it
        raises stops the work)."""
        operators = operators if operators is not None else self.anonymizer.replace_all
        policy = RedactionPolicy(frozenset(entities), allow, operators=operators)
        if len(text) <= TEXT_SLICE_CHARS:
            return policy.apply(text, self.analyze(text, policy.entities))
        wanted = self._wanted(policy.entities)
        if not wanted or not text.strip():
            return Redaction(text, {})
        return policy.apply(text, spans_of(self._found_in_slices(text, wanted, checkpoint)))

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
        collect_strings(value, distinct)
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
