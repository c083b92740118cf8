"""The NER model's people read with the text's structure, and people named again.

The small English pipeline finds names in running prose and misreads technical text
(`gateway.safety.names` finds people where technical text puts them). `named_entities` keeps
what the model found where the text's structure, the words themselves and the given-name
gazetteer agree it is a name; `same_names` finds a person's surname again wherever the text
repeats it; `not_people` says where the model read a place, a nationality or a work, which
overrules the recognizers that guess from words alone (`READ_BY_MODEL`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.safety.names import (
    PARTICLES,
    TEAM_WORDS,
    Gazetteer,
    common_given,
    is_acronym,
    opens_item,
)
from gateway.safety.prose_names import SPEECH_VERBS
from gateway.safety.recognizers import CONTEXT_NAME_RECOGNIZERS, names_a_person
from gateway.safety.spans import Detection, Span, overlaps_any, recognizer_of
from gateway.safety.technical import is_code_like, reads_as_prose


def named_entities(
    text: str, found: Iterable[Span], gazetteer: Gazetteer | None = None
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
    prose = functools.cache(lambda: reads_as_prose(text))
    ends = [(span, _structure_end(text, span.start, span.end)) for span in found]
    # a list item's verb is no part of a name, nor is it a surname found after a given name
    spans = [(span, _after_item_verb(text, span.start, end, names), end) for span, end in ends]
    surnames = {
        word.casefold()
        for span, start, end in spans
        if span.entity_type == "PERSON"
        and len(words := text[start:end].split()) > 1
        and _a_persons(words, names, set(), prose=prose)
        for word in words[1:]
    } | _spoken_of(text, spans)
    kept: list[Detection] = []
    for span, start, end in spans:
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
        kept.append(Detection(start, end, entity_type, float(span.score), recognizer_of(span)))
    return kept


def _after_item_verb(text: str, start: int, end: int, names: Gazetteer) -> int:
    """Where a span that opens a list item or a field starts once its first word is left
    out: items open with a verb (`* Mark package as …`, `* Add Breaks on …`), so the
    model's name there starts after it (`end` when nothing is left). A given name that is
    no everyday word opens a list of people's item (`- Niklas Hambüchen`) and stays. A
    sentence that opens with a verb in the past tense no name list knows (`Contributed
    Windows …`, `Refactored …`) has no name in that verb either."""
    first = re.match(r"\S+\s*", text[start:end])
    if first is None:
        return end
    word = first.group().strip()
    if opens_item(text, start):
        return start if _opens_with_a_name(word, names) else start + first.end()
    if _PAST_TENSE.fullmatch(word) and _opens_sentence(text, start) and not names.is_name(word):
        return start + first.end()  # `Contributed Windows and MS-DOS improvements`
    return start


def _opens_with_a_name(word: str, names: Gazetteer) -> bool:
    """Whether a list item's first word is a given name that is no everyday word: a list of
    people, whose items open with names (`- Niklas Hambüchen`), not with verbs."""
    return names.is_given(word) and not common_given(word)


#: A verb in the past tense, as changelogs and credits open their sentences with one.
_PAST_TENSE = re.compile(r"[A-Z][a-z]+ed")


def _opens_sentence(text: str, start: int) -> bool:
    """Whether `start` opens a line or follows a sentence's end."""
    before = text[max(0, start - 3) : start]
    return not text[:start].strip() or bool(re.search(r"(?:[.!?][ \t]+|\n[ \t]*)$", before))


def _a_persons(
    words: list[str], names: Gazetteer, surnames: set[str], *, prose: Callable[[], bool]
) -> bool:
    """Whether words the model calls a person's name read as one: capitalised, and one word
    only when it is a given name or a surname the text also writes after a full name;
    several words when one of them is a known name or, in running prose, when each is a
    capitalised word (`Gotabaya Rajapaksa`), as the model read them."""
    bare = [word.strip(".,;:!?'\u2019") for word in words]
    if len(bare) == 1 and bare[0].casefold() in surnames:
        return bare[0][:1].isupper()
    if len(bare) == 1 and bare[0].isupper() and len(bare[0]) > 4 and bare[0].isalpha():
        # a surname in capitals, the house style of some prose (`OBOTE regained …`), that
        # the model read as a person once capitalised; acronyms are shorter or have fewer
        # vowels (`EPRDF`, `SGML`)
        vowels = sum(ch in "AEIOUY" for ch in bare[0])
        return vowels >= 2 and bare[0].casefold() not in TEAM_WORDS and prose()
    if not _capitalised_name(bare, names, prose):
        return False
    if len(bare) == 1:
        return names.is_given(bare[0])
    if all(word[:1].isupper() and word.isalpha() for word in bare) and prose():
        return True
    return any(names.is_name(word) for word in bare)


def _capitalised_name(bare: list[str], names: Gazetteer, prose: Callable[[], bool]) -> bool:
    """Capitalised, no team word, lower-case words only particles (`Edited by`, `Port to
    VMS by` are none), and not acronyms or a heading in capitals (`SVG`, `Press CTRL`)
    unless a given name stands in it; in technical text, no acronym beside a word (`Mac OS
    X`: a product and its acronym; prose may write a surname so)."""
    if not bare[0][:1].isupper() or any(word.casefold() in TEAM_WORDS for word in bare):
        return False
    if any(word[:1].islower() and word not in PARTICLES for word in bare):
        return False
    if len(bare) > 1 and any(is_acronym(word, names) for word in bare) and not prose():
        return False
    capitals = [word for word in bare if word.isupper() and len(word) > 1]
    acronyms = len(capitals) == len(bare) or any(len(word) <= 4 for word in capitals)
    return not (capitals and acronyms) or any(names.is_given(word) for word in bare)


def _structure_end(text: str, start: int, end: int) -> int:
    """Where a found span ends once the text's structure is read: before a bracket, a comma,
    a colon or a dash between spaces (`James Strachan -- Kotlin lexer`), and before a line
    break that a name does not wrap over (the next line starts with a bullet, a quote mark
    or nothing but space)."""
    for at in range(start, end):
        char = text[at]
        if char in '*<>()[],:;|"\t' or _SPACED_DASH.match(text, at):
            end = at
            break
        if char == "\n" and not _wraps(text, at, end):
            end = at
            break
    while end > start and (text[end - 1].isspace() or text[end - 1] in ".-'\u2019"):
        end -= 1
    return end


#: A dash with space on both sides: it separates a name from what follows, where a
#: hyphen inside a name (`Jean-Pierre`, `St-Louis`) has none.
_SPACED_DASH = re.compile(r"[ \t][-\u2013\u2014]+[ \t]")


def _wraps(text: str, newline: int, end: int) -> bool:
    rest = text[newline + 1 : end]
    stripped = rest.lstrip(" \t")
    return bool(stripped) and stripped[0].isalpha() and rest != stripped


#: Words that say a name follows: titles and greetings (compared case-folded, without dots).
FORMS_OF_ADDRESS = frozenset(
    {"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "madam", "dear", "hi", "hello", "hey"}
)


def _spoken_of(text: str, spans: Sequence[tuple[Span, int, int]]) -> set[str]:
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


#: Recognizers whose names the model may overrule: where it reads the same words as a
#: place, a nationality, a building, an event or a work (`Sierra Leone`, `Moscow
#: responded`, `French Polynesia`), they are not a person's.
READ_BY_MODEL = frozenset(
    {"GivenNameRecognizer", "SpeakerRecognizer", "TitledNameRecognizer"}
    | {"CapitalsSurnameRecognizer"}
)
#: The NER model's labels (OntoNotes, and presidio's for the mapped ones) that no person
#: carries. Organisations are not among them: the model calls many people one.
NOT_PEOPLE_LABELS = frozenset(
    {"LOCATION", "GPE", "LOC", "NORP", "FAC", "EVENT", "LAW", "LANGUAGE", "PRODUCT"}
    | {"WORK_OF_ART"}
)


GIVEN_NAMES = "GivenNameRecognizer"
#: Where a surname found once is found again (`Yoweri MUSEVENI … MUSEVENI said`).
SAME_NAME = "SameNameRecognizer"


#: Recognizers whose one-word names are strong enough to find again (a script's speaker
#: heading, an attribution header, a mailbox, a credit).
NAMED_ALONE = frozenset(
    {"ScriptSpeakerRecognizer", "HeaderNameRecognizer", "MailboxNameRecognizer"}
    | {"CreditNameRecognizer"}
)


def same_names(text: str, people: Sequence[Any], gazetteer: Gazetteer) -> list[Detection]:
    """Each other whole-word mention, capitalised, of a person found in `text`: the surname
    (the last word) of a name of several words found by a context recognizer or starting
    with a known given name, or a name a script's heading or a credit gives alone
    (`ORLANDO⇥…` then `Orlando`): the same person, named again."""
    surnames = {
        words[-1].casefold()
        for span in people
        if (words := text[span.start : span.end].split())
        and (
            (
                len(words) > 1
                and (
                    recognizer_of(span) in CONTEXT_NAME_RECOGNIZERS.keys() - {GIVEN_NAMES}
                    or (gazetteer.is_given(words[0]) and not common_given(words[0]))
                )
            )
            or (len(words) == 1 and recognizer_of(span) in NAMED_ALONE)
        )
        and len(words[-1]) > 2
        and words[-1][:1].isupper()
        and words[-1].casefold() not in TEAM_WORDS
    }
    if not surnames:
        return []
    taken = [(span.start, span.end) for span in people]
    pattern = re.compile(
        r"(?i)(?<![\w'\u2019-])(?:" + "|".join(map(re.escape, sorted(surnames))) + r")(?![\w-])"
    )
    return [
        Detection(m.start(), m.end(), "PERSON", 0.85, SAME_NAME)
        for m in pattern.finditer(text)
        if m.group()[:1].isupper()
        and not overlaps_any(Detection(m.start(), m.end(), "PERSON", 0), taken)
    ]


def not_people(artifacts: Any) -> list[tuple[int, int]]:
    """Where the NER model read a place, a nationality, a building, an event or a work."""
    doc = getattr(artifacts, "tokens", None)
    if doc is None:
        return []
    return [(e.start_char, e.end_char) for e in doc.ents if e.label_ in NOT_PEOPLE_LABELS]
