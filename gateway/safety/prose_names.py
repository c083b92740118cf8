"""People's names in running prose, where its own structure names them: speakers beside
a verb of speech or reporting, a script's or a transcript's speaker headings, names after a
title or a role, and surnames in capitals in prose that writes them so. The names technical
text puts in signatures, headers, credits and lists are `gateway.safety.names`'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gateway.safety.names import PARTICLES, ROLES, STOP_WORDS, Gazetteer, personal
from gateway.safety.technical import is_code_like, reads_as_prose

#: Verbs that say a person spoke or wrote: a name stands beside one (`LYNCH said`, `said
#: Alice`, `Mylonas next observed`).
SPEECH_VERBS = (
    "said says asked asks replied replies answered observed argued argues agreed agrees "
    "concluded concludes contended responded responds remarked told tells thought cried "
    "insisted conceded opined hoped summarized summarised likened informed wrote"
)
_SPEAKER = r"(?P<name>[^\W\d_a-z][\w\u2019'-]*(?:[ \t]+[^\W\d_a-z][\w\u2019'-]*){0,2})"
_SPOKE = "|".join(SPEECH_VERBS.split())
_SPEECH_AFTER = re.compile(rf"\b(?:{_SPOKE})[ \t]+{_SPEAKER}")
_SPEECH_BEFORE = re.compile(rf"{_SPEAKER}[ \t]+(?:(?:next|then|also|later)[ \t]+)?(?:{_SPOKE})\b")
_ACCORDING = re.compile(rf"\b[Aa]ccording[ \t]+to[ \t]+{_SPEAKER}")
#: Verbs of reporting that things do too (`Support added`, `Problem reported`): a speaker
#: beside one needs a known name or a name in capitals.
REPORTING_VERBS = (
    "noted notes added adds reported described stressed inquired expressed endorsed "
    "illustrated characterized suggested explained stated demonstrated emphasized "
    "emphasised pointed warned announced acknowledged recalled"
)
_REPORTED = "|".join(REPORTING_VERBS.split())
_REPORTING_AFTER = re.compile(rf"\b(?:{_REPORTED})[ \t]+{_SPEAKER}")
_REPORTING_BEFORE = re.compile(
    rf"{_SPEAKER}[ \t]+(?:(?:next|then|also|later)[ \t]+)?(?:{_REPORTED})\b"
)
#: A script's or a transcript's speaker heading: a name in capitals opening a line,
#: then a tab (`ORLANDO\tNot so`), or a known name then a colon (`Priya: I checked`).
_HEADING_TAB = re.compile(r"^(?P<name>[^\W\d_a-z]{2,}(?: [^\W\d_a-z]{2,}){0,2})\t", re.M)
_HEADING_COLON = re.compile(rf"^[ \t]*{_SPEAKER}:[ \t]", re.M)
#: Words that stand where a speaker's name would and are none.
_NOT_SPEAKERS = frozenset(
    """i he she it we they you one this that these those there here who which what the a an
    his her their its my our your some someone somebody everyone nobody all each both
    mr mrs ms dr sir madam scene act chapter part section book volume""".split()
)


def speakers(text: str, gazetteer: Gazetteer) -> Iterator[tuple[int, int]]:
    """Names of people who speak or are quoted: beside a verb of speech, after
    `according to`; beside a verb of reporting (`noted`, `stressed`) when the name is a
    known one or written in capitals, a surname's house style (`KENNEY stressed`)."""
    for pattern in (_SPEECH_AFTER, _SPEECH_BEFORE, _ACCORDING):
        for match in pattern.finditer(text):
            if _a_speaker(text, match.start("name"), match.group("name").split()):
                yield match.start("name"), match.end("name")
    for pattern in (_REPORTING_AFTER, _REPORTING_BEFORE):
        for match in pattern.finditer(text):
            words = match.group("name").split()
            named = all(w.isupper() and len(w) > 2 for w in words) or gazetteer.is_name(words[0])
            if named and _a_speaker(text, match.start("name"), words):
                yield match.start("name"), match.end("name")


def script_speakers(text: str, gazetteer: Gazetteer) -> Iterator[tuple[int, int]]:
    """Names heading the lines of a script or a transcript: in capitals before a tab
    (`ORLANDO\tNot so`), or a known given name before a colon (`Priya: I checked`)."""
    for match in _HEADING_TAB.finditer(text):
        if _a_speaker(text, match.start("name"), match.group("name").split()):
            yield match.start("name"), match.end("name")
    for match in _HEADING_COLON.finditer(text):
        words = match.group("name").split()
        if gazetteer.is_given(words[0]) and _a_speaker(text, match.start("name"), words):
            yield match.start("name"), match.end("name")


def _a_speaker(text: str, start: int, words: list[str]) -> bool:
    before = text[max(0, start - 12) : start].split()
    if before and before[-1].casefold() in {"the", "a", "an", "this", "that", "my", "our"}:
        return False  # `the Queen said`: a title or a role, not a name
    folded = [word.casefold().strip("'\u2019") for word in words]
    return (
        folded[0] not in _NOT_SPEAKERS
        and folded[0] not in ROLES  # `General Motors announced`
        and personal(words)
        and not any(is_code_like(word) for word in words)
    )


_PARTICLE_WORDS = "|".join(sorted(PARTICLES))
_TITLED = re.compile(
    r"(?i:\b(?:prime[ \t]+)?(?P<role>[a-z-]+))[ \t]+"
    r"(?P<name>[^\W\d_a-z][\w\u2019'-]*"
    rf"(?:[ \t]+(?:[^\W\d_a-z][\w\u2019'-]*|(?:{_PARTICLE_WORDS})\b)){{0,4}})"
)


def titled_names(text: str, gazetteer: Gazetteer) -> Iterator[tuple[int, int]]:
    """Names after a title or a role, when a word of them is a known name or is written in
    capitals (a surname's house style): `King HUSSEIN`, not `General Motors`."""
    for match in _TITLED.finditer(text):
        if match.group("role").casefold() not in ROLES:
            continue
        words = match.group("name").split()
        while words and (words[-1] in PARTICLES or words[-1].casefold() in ROLES):
            words.pop()
        start = match.start("name")
        while words and words[0].casefold() in ROLES:  # `Prime Minister Sheikh HASINA`
            start = text.index(words[0], start) + len(words.pop(0))
        known = any(gazetteer.is_name(w) or (w.isupper() and len(w) > 2) for w in words)
        if words and known and personal(words) and not any(is_code_like(w) for w in words):
            start = text.index(words[0], start)
            yield start, _end_of(text, start, words)


def _end_of(text: str, start: int, words: list[str]) -> int:
    """Where the last of `words` ends in `text`, reading from `start`."""
    at = start
    for word in words:
        at = text.index(word, at) + len(word)
    return at


#: A name in a house style of prose that writes surnames in capitals: capitalised given
#: names, then a surname of four or more capitals (`Navin RAMGOOLAM`, `Jean-Bedel BOKASSA`).
_CAPITALS_SURNAME = re.compile(
    r"(?<![\w'\u2019-])(?:[^\W\d_a-z][^\W\d_A-Z][\w'\u2019-]*[ \t]+){1,3}"
    r"[^\W\d_a-z]{4,}(?:-[^\W\d_a-z]+)?(?![\w'\u2019-])"
)


def capitals_surnames(text: str) -> Iterator[tuple[int, int]]:
    """Given names followed by a surname in capitals, in running prose that writes its
    surnames so (`Navin RAMGOOLAM`); not a product and its acronym in technical text."""
    if not reads_as_prose(text):
        return
    for match in _CAPITALS_SURNAME.finditer(text):
        words = match.group().split()
        if words[0].casefold() in _NOT_SPEAKERS | STOP_WORDS | _SENTENCE_OPENERS:
            continue  # `The NRPC`, `No SGML`: a word opening a sentence, then an acronym
        vowels = sum(ch in "AEIOUY" for ch in words[-1])
        if vowels >= 2 and personal(words) and not any(w.casefold() in ROLES for w in words):
            yield match.start(), match.end()


#: Words that open sentences and are no names.
_SENTENCE_OPENERS = frozenset(
    "how why when where what which there there's here if yes however also only no".split()
)
