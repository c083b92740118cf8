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

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.runtime.telemetry import Telemetry
from gateway.safety.names import (
    PARTICLES,
    SPEECH_VERBS,
    TEAM_WORDS,
    Gazetteer,
    opens_item,
    truecased,
)
from gateway.safety.operators import Anonymizer, Operators
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
    names_a_person,
    no_nlp_engine,
)
from gateway.safety.technical import is_code_like, reads_as_prose, technical_spans
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
class Detection:
    """One span to replace: [start, end) of the input text, and the recognizer that found
    it (where known)."""

    start: int
    end: int
    entity_type: str
    score: float
    recognizer: str = ""


@dataclass(frozen=True, slots=True)
class Redaction:
    """The redacted text and how many spans of each entity type were replaced."""

    text: str
    counts: dict[str, int]

    @property
    def redacted(self) -> bool:
        return bool(self.counts)


class _Span(Protocol):
    """A found entity, as presidio's results and stored spans both read."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def entity_type(self) -> str: ...

    @property
    def score(self) -> float: ...


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    """What a workspace redacts: these entity types, except values its allow-list keeps;
    and how (`operators`)."""

    entities: frozenset[str]
    allow: AllowList = NO_ALLOW_LIST
    operators: Operators = field(kw_only=True)

    def select(self, text: str, spans: Iterable[_Span]) -> list[Detection]:
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

    def apply(self, text: str, spans: Iterable[_Span]) -> Redaction:
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
        return self._spans(text, self._artifacts(text, wanted), wanted)

    def analyze_texts(
        self, texts: Sequence[str], entities: Iterable[str] | None = None
    ) -> list[tuple[PiiSpan, ...]]:
        """The entities in each text of `entities` (every supported type when None), as
        `analyze` finds them; the NER pipeline takes the texts in batches."""
        wanted = self._wanted(entities)
        if not wanted:
            return [() for _ in texts]
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
        policy = RedactionPolicy(frozenset(entities), allow, operators=self.anonymizer.replace_all)
        wanted = self._wanted(policy.entities)
        if not wanted or not text.strip():
            return []
        found = self._found(text, self._artifacts(text, wanted), wanted)
        return [
            Detection(d.start, d.end, d.entity_type, d.score, _finder(found, d))
            for d in policy.select(text, spans_of(found))
        ]

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
            rest = _blank(text, [*blanked, *technical_spans(text)])
            if may_hold_phone_number(rest, self._phone_digits):
                phones = self._analyze(rest, [PHONE], artifacts)
                found += [r for r in phones if _digits(text[r.start : r.end]) >= MIN_PHONE_DIGITS]
        if wanted & NER_ENTITIES:  # all of them: the rules move spans between types
            names = self._analyze(text, sorted(self.supported_entities & NER_ENTITIES), artifacts)
            by_model = [r for r in names if _recognizer(r) not in CONTEXT_NAME_RECOGNIZERS]
            not_people = _not_people(artifacts)
            found += [
                r
                for r in names
                if _recognizer(r) in CONTEXT_NAME_RECOGNIZERS
                and not (_recognizer(r) in READ_BY_MODEL and _overlaps_any(r, not_people))
            ]
            found += named_entities(text, by_model, self._gazetteer)
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


def named_entities(
    text: str, found: Iterable[_Span], gazetteer: Gazetteer | None = None
) -> list[Detection]:
    """The NER model's names, places and organisations, with rules on its output.

    - A span ends where the text's structure does: at a line break that starts a bullet or
      a new field rather than wrapping a name, and at brackets, commas and colons.
    - A span holding a digit or a word written as an identifier (`libbrotli-dev`,
      `--prune=now`, `WINESERVER`) is dropped: names, places and organisations hold none.
    - A one-word PERSON is kept only after a form of address (`Hi Laure`, `Mr Castro`) or
      when it is a known given name or surname: a lone capitalised word is far more often
      a product, a project or a command.
    - A span of another type that starts with, or follows, a form of address is a PERSON.
    - A span of several words the model calls an organisation is a PERSON when it starts
      with a known given name and probablepeople reads it as a person's name.
    """
    names = gazetteer or Gazetteer(frozenset(), frozenset())
    prose = reads_as_prose(text)
    spans = [(span, span.start, _structure_end(text, span.start, span.end)) for span in found]
    surnames = {
        word.casefold()
        for span, start, end in spans
        if span.entity_type == "PERSON"
        and len(words := text[start:end].split()) > 1
        and _a_persons(words, names, set(), prose=prose)
        for word in words[1:]
    } | _spoken_of(text, spans)
    kept: list[Detection] = []
    for span, found_start, end in spans:
        start = _after_item_verb(text, found_start, end)
        value = text[start:end]
        words = value.split()
        if not words or any(is_code_like(word) for word in words):
            continue
        addressed = _addressed(text, start) or _word(words[0]) in FORMS_OF_ADDRESS
        entity_type = "PERSON" if addressed else span.entity_type
        if (
            entity_type == "PERSON"
            and not addressed
            and (_determined(text, start) or not _a_persons(words, names, surnames, prose=prose))
        ):
            continue
        if (
            entity_type == "ORGANIZATION"
            and len(words) > 1
            and names.is_given(words[0])
            and names_a_person(value)
        ):
            entity_type = "PERSON"
        kept.append(Detection(start, end, entity_type, float(span.score), _recognizer(span)))
    return kept


def _after_item_verb(text: str, start: int, end: int) -> int:
    """Where a span that opens a list item or a field starts once its first word is left
    out: items open with a verb (`* Mark package as …`, `* Add Breaks on …`), so the
    model's name there starts after it (`end` when nothing is left)."""
    if not opens_item(text, start):
        return start
    first = re.match(r"\S+\s*", text[start:end])
    return start + first.end() if first else end


def _a_persons(
    words: list[str], names: Gazetteer, surnames: set[str], *, prose: bool = False
) -> bool:
    """Whether words the model calls a person's name read as one: capitalised, and one word
    only when it is a given name or a surname the text also writes after a full name;
    several words when one of them is a known name or, in running prose, when each is a
    capitalised word (`Gotabaya Rajapaksa`), as the model read them."""
    bare = [word.strip(".,;:!?'\u2019") for word in words]
    if not bare[0][:1].isupper() or any(word.casefold() in TEAM_WORDS for word in bare):
        return False
    if any(word[:1].islower() and word not in PARTICLES for word in bare):
        return False  # `Edited by`, `Port to VMS by`: a name's lower-case words are particles
    if len(bare) == 1 and bare[0].casefold() in surnames:
        return True
    capitals = [word for word in bare if word.isupper() and len(word) > 1]
    acronyms = len(capitals) == len(bare) or any(len(word) <= 4 for word in capitals)
    if capitals and acronyms and not any(names.is_given(word) for word in bare):
        return False  # acronyms (`SVG`, `Press CTRL`) or a heading in capitals
    if len(bare) == 1:
        return names.is_given(bare[0]) or bare[0].casefold() in surnames
    if prose and all(word[:1].isupper() and word.isalpha() for word in bare):
        return True
    return any(names.is_name(word) for word in bare)


def _structure_end(text: str, start: int, end: int) -> int:
    """Where a found span ends once the text's structure is read: before a bracket, a comma
    or a colon, and before a line break that a name does not wrap over (the next line
    starts with a bullet, a quote mark or nothing but space)."""
    for at in range(start, end):
        char = text[at]
        if char in '*<>()[],:;|"\t':
            end = at
            break
        if char == "\n" and not _wraps(text, at, end):
            end = at
            break
    while end > start and (text[end - 1].isspace() or text[end - 1] in ".-'\u2019"):
        end -= 1
    return end


def _wraps(text: str, newline: int, end: int) -> bool:
    rest = text[newline + 1 : end]
    stripped = rest.lstrip(" \t")
    return bool(stripped) and stripped[0].isalpha() and rest != stripped


#: Words that say a name follows: titles and greetings (compared case-folded, without dots).
FORMS_OF_ADDRESS = frozenset(
    {"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "madam", "dear", "hi", "hello", "hey"}
)


def _spoken_of(text: str, spans: Sequence[tuple[_Span, int, int]]) -> set[str]:
    """The one-word names the model found that stand beside a verb of speech."""
    spoken: set[str] = set()
    for span, start, end in spans:
        value = text[start:end]
        if span.entity_type != "PERSON" or len(value.split()) != 1:
            continue
        before, after = text[max(0, start - 30) : start].split(), text[end : end + 30].split()
        beside = [*before[-1:], *after[:1]]
        if any(_word(word) in SPEECH_VERBS.split() for word in beside):
            spoken.add(value.strip(".,;:!?'\u2019").casefold())
    return spoken


def _determined(text: str, start: int) -> bool:
    """Whether an article stands before `start` (`the Queen`, `a Mark`): a title or a
    common noun, not a name."""
    before = text[:start].split()
    return bool(before) and before[-1].casefold() in {"the", "a", "an"}


def _addressed(text: str, start: int) -> bool:
    before = text[:start].split()
    return bool(before) and _word(before[-1]) in FORMS_OF_ADDRESS


def _word(token: str) -> str:
    return token.strip(".,;:!?()\"'").casefold()


def spans_of(found: Iterable[_Span]) -> tuple[PiiSpan, ...]:
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


#: Recognizers whose names the model may overrule: where it reads the same words as a
#: place, a nationality, a building, an event or a work (`Sierra Leone`, `Moscow
#: responded`, `French Polynesia`), they are not a person's.
READ_BY_MODEL = frozenset({"GivenNameRecognizer", "SpeakerRecognizer"})
#: The NER model's labels (OntoNotes, and presidio's for the mapped ones) that no person
#: carries. Organisations are not among them: the model calls many people one.
NOT_PEOPLE_LABELS = frozenset(
    {"LOCATION", "GPE", "LOC", "NORP", "FAC", "EVENT", "LAW", "LANGUAGE", "PRODUCT"}
    | {"WORK_OF_ART"}
)


def _not_people(artifacts: Any) -> list[tuple[int, int]]:
    """Where the NER model read a place, a nationality, a building, an event or a work."""
    doc = getattr(artifacts, "tokens", None)
    if doc is None:
        return []
    return [(e.start_char, e.end_char) for e in doc.ents if e.label_ in NOT_PEOPLE_LABELS]


def _overlaps_any(span: _Span, others: Iterable[tuple[int, int]]) -> bool:
    return any(span.start < end and start < span.end for start, end in others)


def _recognizer(result: Any) -> str:
    """The name of the recognizer that found `result` (a presidio result or a Detection)."""
    if isinstance(result, Detection):
        return result.recognizer
    return str((result.recognition_metadata or {}).get("recognizer_name", ""))


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
    return _recognizer(best) if best is not None else ""


def count_redactions(telemetry: Telemetry, counts: dict[str, int]) -> None:
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
