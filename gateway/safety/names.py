"""People's names where technical text puts them, and names a given-name list confirms.

A small NER model reads running prose well and technical text badly: it misses most names
on signature lines and in credits, and calls commands, products and imperative bullets
(`Remove Testsuite`, `Debian Policy`) people. Technical text, though, puts people's names in
a few places that say so themselves:

- before an address in angle brackets, as mail and changelogs sign (`Jane Doe <jd@x.org>`,
  ` -- Jane Doe <jd@x.org>  Fri, …`, `Signed-off-by: Jane Doe <…>`);
- in attribution headers of their own line (`[ Jane Doe ]`);
- after a credit (`Thanks to Jane Doe`, `patch from jdoe`, `reported by Jane Doe`,
  `Courtesy of …`, `Co-authored-by: …`) and in changes of who maintains something
  (`Remove Jane Doe and Max Roe from Uploaders`, `Update Jane's name and email`).

Each finder returns [start, end) spans of names. `Gazetteer` holds given names and
surnames of many languages (Faker's person lists, 86 locales): it confirms a name that no
context introduces (`Priya Raghunathan approves refunds`) and tells a person from an
organisation the model mislabelled. Team and bot names (`Debian Janitor`, `LTS Team`) are
never people.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass

from gateway.safety.technical import holds_no_name, is_code_like

#: One word of a name: letters of any script, maybe joined by an apostrophe, a hyphen or a
#: dot (`d'Itri`, `El-Mahmoudy`, `F.`); never a digit or an underscore.
_WORD = r"[^\W\d_](?:[\w'\u2019.-]*[^\W\d_])?\.?"
_WORD_RE = re.compile(_WORD)
#: Between two words of a name: spaces, or a line wrapped inside the name.
_GAP = r"(?:[ \t]+|[ \t]*\n[ \t]+)"
#: Words that never start or continue a name where a context introduces one.
STOP_WORDS = frozenset(
    """a about again all also an and any anyone as at author authors be been being both but by
    cc changes co contact credit credits e-mail each email everybody everyone for from go goes
    guys he help her him his i in is it its lot many maintainer maintainers me mail my myself
    no not of on or other others our patch patches please reported send she so some that the
    their them they this those to too upload uploaders us via was we were who with you your
    upstream downstream unreleased janitor bot ci release security translations l10n i18n
    docs documentation build packaging""".split()
)
#: A word that makes a name a team's, a bot's, an organisation's or a place's.
TEAM_WORDS = frozenset(
    """team teams janitor bot bots robot project group groups force maintainers developers
    packagers list lists admin admins administrators support security release committee
    community foundation contributors authors infrastructure builders daemon noreply
    no-reply inc ltd llc gmbh corp corporation company university college institute school
    academy street avenue road lane hall building tower island islands river mountain
    mountains lake bay sea ocean coast party church revolution war age empire kingdom
    republic monument park museum library bank front movement council union federation
    court ministry department agency army navy brotherhood alliance league treaty sons
    brothers partners associates plc ltd limited sa s.a sas s.a.s sarl s.a.r.l gmbh gbr ag
    bv nv kg oy ab spa srl stichting koninklijke""".split()
)
#: Words before a name that say the name is credited for something.
_CREDIT = re.compile(
    r"""(?xi)
    (?:
      (?P<thanks>\bthanks?(?:\s+(?:a\s+lot|again|also|go(?:es)?|you))?(?:\s+to)?,?
        | \bthx(?:\s+to)?
        | \b(?:patch(?:es)?|fix(?:es)?|work|help|contributions?|suggestions?|ideas?|input|
              hints?|pointers?)\s+(?:from|by))
    | \b(?:reports?|review)\s+(?:from|by)
    | \b(?:reported|suggested|contributed|proposed|noticed|found|spotted|
          diagnosed|debugged|investigated|fixed|reviewed|tested|requested|translated|
          packaged|uploaded|originally|based\s+on\s+(?:work|a\s+patch))\s+by
    | (?P<made>\b(?:written|authored|provided|prepared|sponsored|implemented|created|
          started|maintained)\s+by)
    | \bcourtesy\s+of | \bcredits?\s+(?:go(?:es)?\s+)?to
    | \b(?:co-authored|signed-off|reviewed|tested|reported|acked|suggested|helped|
          requested)-by:
    | \b(?:author|maintainer|uploader|reporter|contributor|contact)s?:
    )[ \t]*\n?[ \t]*@?
    """
)
#: The first words of `_CREDIT`'s phrases: it is tried only where one of them starts.
_CREDIT_HEADS = frozenset(
    """thank thanks thx patch patches fix fixes work help contribution contributions
    suggestion suggestions idea ideas input hint hints pointer pointers report reports review
    reported suggested contributed written authored proposed noticed found spotted diagnosed
    debugged investigated fixed reviewed tested requested provided prepared sponsored
    implemented created started maintained translated packaged uploaded originally based
    courtesy credit credits co-authored-by signed-off-by reviewed-by tested-by reported-by
    acked-by suggested-by helped-by requested-by author authors maintainer maintainers
    uploader uploaders reporter reporters contributor contributors contact contacts""".split()
)
_WORD_START = re.compile(r"(?<![\w-])[A-Za-z][\w-]*")
_ROSTER_HEADS = frozenset(
    "remove removing removed drop dropping dropped add adding added welcome".split()
)
#: `Remove Jane Doe and Max Roe from Uploaders`, `Add Jane as maintainer`.
_ROSTER = re.compile(
    r"""(?xi)
    \b(?:remove|removing|removed|drop|dropping|dropped|add|adding|added|welcome)[ \t]+
    (?P<names>[^\n]{1,120}?)
    [ \t]+(?:from|to|as)[ \t]+(?:the[ \t]+)?(?:list[ \t]+of[ \t]+)?(?:an?[ \t]+)?
    (?:uploaders?|maintainers?|co-?maintainers?|authors|contributors|committers|owners)\b
    """
)
_RENAMED = re.compile(
    rf"(?i)\bupdate[ \t]+(?P<name>{_WORD}(?:{_GAP}{_WORD}){{0,3}})['\u2019]s[ \t]+"
    r"(?:name|e-?mail|address|contact)"
)
_MAILBOX = re.compile(r"<[^<>\s@]{1,64}@[^<>\s@]{1,255}\.[^<>\s@]{2,63}>")
_HEADER = re.compile(r"^[ \t]*\[[ \t]*(?P<inside>[^\[\]\n]{1,80}?)[ \t]*\][ \t]*$", re.MULTILINE)
_PARENTHESIS = re.compile(r"\(([^()\n]{1,60})\)")
_THANKS_SENTENCE = re.compile(r"(?i)\bthanks?\b[^\n.!?]{0,60}?,[ \t]*(?=[^\W\d_])")
#: Between the words of a name in running text: spaces, or a line wrapped (a tab separates
#: a script's speaker from the speech).
_NAME_GAP = r"(?:[ ]+|[ \t]*\n[ \t]+)"
_CAPITALISED = re.compile(
    rf"(?<![\w'\u2019.-])[^\W\d_a-z][\w'\u2019-]*(?:{_NAME_GAP}[^\W\d_a-z][\w'\u2019-]*)+"
)
#: Lower-case words that may stand inside a name: `Ludwig van Beethoven`, `Marco d'Itri`.
PARTICLES = frozenset(
    "al bin ben bint da das de del della der di do dos du el ibn la le m san st ten ter van "
    "von y zu".split()
)


@dataclass(frozen=True, slots=True)
class Gazetteer:
    """Given names and surnames, compared case-folded (`OBOTE` is `Obote`)."""

    given: frozenset[str]
    family: frozenset[str]

    @classmethod
    def from_faker(cls) -> Gazetteer:
        """Every locale's person lists shipped with Faker (read from its modules)."""
        from faker.providers import person

        given: set[str] = set()
        family: set[str] = set()
        for module in pkgutil.iter_modules(person.__path__):
            provider = importlib.import_module(f"{person.__name__}.{module.name}").Provider
            for attribute, into in _FAKER_LISTS:
                names = getattr(provider, attribute, None)
                if isinstance(names, list | tuple | dict):
                    into_set = given if into == "given" else family
                    into_set.update(name for name in names if isinstance(name, str))
        return cls(frozenset(_single_words(given)), frozenset(_single_words(family)))

    def is_given(self, word: str) -> bool:
        return word.casefold() in self.given

    def is_name(self, word: str) -> bool:
        folded = word.casefold()
        return folded in self.given or folded in self.family

    def is_surname(self, word: str) -> bool:
        return word.casefold() in self.family


_FAKER_LISTS = (
    ("first_names", "given"),
    ("first_names_male", "given"),
    ("first_names_female", "given"),
    ("first_names_nonbinary", "given"),
    ("first_romanized_names", "given"),
    ("last_names", "family"),
    ("last_names_male", "family"),
    ("last_names_female", "family"),
    ("last_romanized_names", "family"),
)


def _single_words(names: set[str]) -> Iterator[str]:
    for name in names:
        yield from (word.casefold() for word in name.split() if len(word) > 1)


def truecased(text: str) -> str:
    """`text` with words written in capitals (`Francisco MACIAS NGUEMA`, `EL-SISI`) written
    capitalised instead, where most of its words are not: what the NER model was trained
    on. Lengths are kept, so offsets hold. A text mostly in capitals is left as it is."""
    words = _UPPER_WORD.findall(text)
    if not words or len(words) * 4 > len(_ANY_WORD.findall(text)):
        return text
    return _UPPER_WORD.sub(_capitalise, text)


_UPPER_WORD = re.compile(
    r"(?<![\w'\u2019])[^\W\d_a-z]{2,}(?:[-'\u2019][^\W\d_a-z]+)*(?![\w'\u2019])"
)
_ANY_WORD = re.compile(r"[^\W\d_]{2,}")


def _capitalise(match: re.Match[str]) -> str:
    word = match.group()
    if not any(ch.isupper() for ch in word):
        return word
    parts = re.split(r"([-'\u2019])", word)
    return "".join(part[:1] + part[1:].lower() if len(part) > 1 else part for part in parts)


# ---- finders --------------------------------------------------------------------------


def mailbox_names(text: str) -> Iterator[tuple[int, int]]:
    """The display name before each `<address>` on its line."""
    for match in _MAILBOX.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        prefix = text[line_start : match.start()]
        second_script = _PARENTHESIS.search(prefix.rstrip())
        if second_script and prefix.rstrip().endswith(")"):
            prefix = prefix[: second_script.start()]
        span = _trailing_name(prefix)
        if span is not None:
            yield line_start + span[0], line_start + span[1]


def header_names(text: str) -> Iterator[tuple[int, int]]:
    """Names in attribution headers that stand on a line of their own: `[ Jane Doe ]`,
    with a name in a second script in brackets after it (`[ Chen Wei (陳偉) ]`)."""
    for match in _HEADER.finditer(text):
        inside, offset = match.group("inside"), match.start("inside")
        parts = [(0, len(inside))]
        second = _PARENTHESIS.search(inside)
        if second is not None:
            parts = [(0, second.start()), (second.start(1), second.end(1))]
        for start, end in parts:
            piece = inside[start:end]
            words = piece.split()
            if words and all(_is_name_word(word) for word in words) and personal(words):
                lead = len(piece) - len(piece.lstrip())
                yield offset + start + lead, offset + start + len(piece.rstrip())


def credited_names(text: str, gazetteer: Gazetteer) -> Iterator[tuple[int, int]]:
    """Names after a credit (`Thanks to`, `patch from`, `reported by`, …), in a roster
    change (`Remove … from Uploaders`, `Update …'s name`), and at the end of a sentence of
    thanks (`Thanks for the upload, Mattias.`)."""
    for word in _WORD_START.finditer(text):
        head, at = word.group().casefold(), word.start()
        if head in _CREDIT_HEADS and (match := _CREDIT.match(text, at)):
            names = _names_at(text, match.end(), handles=match.group("thanks") is not None)
            if match.group("made") is None:
                yield from names
            else:  # companies make and maintain things too: `created by Facebook`
                yield from (n for n in names if _known_or_full(text[n[0] : n[1]], gazetteer))
        if head in _ROSTER_HEADS and (match := _ROSTER.match(text, at)):
            yield from _names_at(text, match.start("names"), handles=False, end=match.end("names"))
        renamed = _RENAMED.match(text, at) if head == "update" else None
        if renamed is not None and personal(renamed.group("name").split()):
            yield renamed.start("name"), renamed.end("name")
        if head in {"thank", "thanks"} and (match := _THANKS_SENTENCE.match(text, at)):
            found = _name_at(text, match.end(), handles=False)
            if found is not None and gazetteer.is_given(
                text[found[0] : found[1]].split(maxsplit=1)[0]
            ):
                yield found


def _known_or_full(name: str, gazetteer: Gazetteer) -> bool:
    """Whether a name credited with making something is a person's: several words, or one
    the gazetteer knows; a lone unknown word (`Facebook`, `Canonical`) is a company's."""
    words = name.split()
    return len(words) > 1 or gazetteer.is_name(words[0])


#: What opens an item of a list or a field: a bullet, a number, a `key:`.
_ITEM_START = re.compile(r"(?:^|\n)[ \t]*(?:(?:[*+\-•]|\d{1,3}[.)]|[\w./-]{1,40}:)[ \t]+)+$")


def opens_item(text: str, start: int) -> bool:
    """Whether `start` is the first word of a list item or a field's value: where technical
    text puts a verb (`* Add …`, `* Mark package as …`, `metadata: Add …`)."""
    return _ITEM_START.search(text[max(0, start - 60) : start]) is not None


def handles(text: str) -> Iterator[tuple[int, int]]:
    """Account names credited as people: `by @jdoe`, `(@jdoe)`, `[@jdoe](…)`, `:user:`jdoe``,
    and a profile link `[jdoe](https://github.com/jdoe)`; the name without its `@`.
    Decorators, scoped packages and addresses (`@app.route`, `@babel/core`, `a@b.c`) are
    not handles."""
    for match in _HANDLE_CREDIT.finditer(text):
        if not re.search(r"(?i)bot$|\[bot\]", match.group("handle")):
            yield match.start("handle"), match.end("handle")
    for match in _PROFILE_LINK.finditer(text):
        yield match.start("handle"), match.end("handle")


_HANDLE_CREDIT = re.compile(
    r"""(?x)
    (?:[(\[*,]|\b(?:by|from|thanks|to|cc|and)\s|,\s)
    (?:@|:user:`)(?P<handle>[A-Za-z0-9](?:[A-Za-z0-9_-]{0,38}))
    (?![\w@/]|\.\w)
    """
)
_PROFILE_LINK = re.compile(
    r"\[@?(?P<handle>[A-Za-z0-9][A-Za-z0-9_-]{0,38})\]\(https?://(?:www\.)?"
    r"(?:github\.com|gitlab\.com|codeberg\.org)/(?P=handle)/?\)"
)
#: A line of a list of people: a name (up to five words or one handle), maybe bulleted,
#: maybe followed by an address, a handle or a role.
_LISTED = re.compile(
    rf"^[ \t]*(?:[*+\-•][ \t]+)?(?P<name>{_WORD}(?:[ \t]+{_WORD}){{0,4}})"
    r"(?:[ \t]*(?:<[^<>\n]*>|\([^()\n]*\)|(?:--|—|\u2013|:|,)[^\n]*|[ \t]{2,}\S[^\n]*))?[ \t]*$",
    re.MULTILINE,
)


def listed_names(text: str, gazetteer: Gazetteer) -> Iterator[tuple[int, int]]:
    """Names in lists of people (AUTHORS, ACKS, THANKS, credits): three or more lines in a
    row that each hold one name, at least half of them with a known given name or
    surname; every name of such a list is a person's."""
    run: list[tuple[int, int]] = []
    known = 0
    last_end = -1
    for match in _LISTED.finditer(text):
        start, end = match.start("name"), match.end("name")
        words = match.group("name").split()
        if last_end >= 0 and text[last_end : match.start()].count("\n") > 1:
            yield from _a_list(run, known)
            run, known = [], 0
        if _COMPANY_TAIL.match(text, end):
            last_end = match.end()
            continue  # `SynaptiCAD, Inc.`: a company in the list, not a person
        if not _listed_name(words):
            yield from _a_list(run, known)
            run, known, last_end = [], 0, -1
            continue
        run.append((start, end))
        known += len(words) > 1 and gazetteer.is_given(words[0])
        last_end = match.end()
    yield from _a_list(run, known)


#: A company's legal form after its name: `, Inc.`, ` GmbH`, `, Ltd`.
_COMPANY_TAIL = re.compile(
    r"[ \t]*,?[ \t]*(?:inc|ltd|llc|gmbh|corp|corporation|plc|limited|ag|sa|bv|nv|oy|ab|srl|sarl)"
    r"\b\.?",
    re.IGNORECASE,
)


def _listed_name(words: list[str]) -> bool:
    """Whether a line's words can be a person's name in a list: name words, capitalised
    but for particles (or one handle), not a team's, not a sentence."""
    if not all(_is_name_word(word) for word in words) or not personal(words):
        return False
    if len(words) == 1:
        return not words[0].endswith(".")
    if words[0].casefold() in {"the", "a", "an"}:
        return False
    capitalised = all(not word[0].islower() or word in PARTICLES for word in words)
    return capitalised and not words[-1].endswith(".")


def _a_list(run: list[tuple[int, int]], known: int) -> list[tuple[int, int]]:
    return run if len(run) >= 3 and known * 2 >= len(run) else []


#: Titles and roles that stand before a person's name (`President Emomali RAHMON`,
#: `explorer Ferdinand MAGELLAN`, `CEO Priya Raghunathan`).
ROLES = frozenset(
    """president vice-president king queen prince princess emperor empress sultan emir sheikh
    shah tsar czar pope bishop archbishop cardinal general colonel captain admiral sergeant
    lieutenant governor senator minister premier chancellor mayor judge justice ambassador
    chairman chairwoman chair ceo cfo cto coo director professor explorer leader founder
    dictator commander chief navigator""".split()
)


def given_names(text: str, gazetteer: Gazetteer) -> Iterator[tuple[int, int]]:
    """Runs of capitalised words that start with a given name and go on with a surname:
    `Priya Raghunathan`, `Grace Hopper`; not `Mark Done` (no surname follows a given name
    that is also a common word, nor in a heading, where every word is capitalised), nor
    words written as identifiers. A run ends at an acronym (`Mac OS X`, `Wing IDE`) and at
    the end of a line that holds nothing before it (`AUTHOR` heading a man page's section)."""
    for match in _CAPITALISED.finditer(text):
        words = [(m.start(), m.end()) for m in re.finditer(r"\S+", match.group())]
        after = 0  # the words of a run already read start no other
        for i in range(len(words) - 1):
            if i < after:
                continue
            first = match.group()[words[i][0] : words[i][1]]
            at = match.start() + words[i][0]
            if not gazetteer.is_given(first) or first.casefold() in ROLES:
                continue  # `General Motors`: a title, not a given name
            if opens_item(text, at):
                continue
            run = [words[i]]
            for start, end in words[i + 1 : i + 4]:
                word = match.group()[start:end]
                if is_code_like(word) or word.casefold() in TEAM_WORDS:
                    run = []
                    break
                if is_acronym(word, gazetteer) or _unwrapped(text, at, match.start() + start):
                    break
                run.append((start, end))
            if len(run) < 2:
                continue
            surnames = [match.group()[s:e] for s, e in run[1:]]
            known = any(gazetteer.is_name(word) for word in surnames)
            if known or not (common_given(first) or in_heading(text, at)):
                yield match.start() + run[0][0], match.start() + run[-1][1]
            after = i + len(run)


_ROMAN = re.compile(r"[IVX]+")


def is_acronym(word: str, gazetteer: Gazetteer) -> bool:
    """Whether `word` is an acronym rather than a surname: two to four capitals (`OS`,
    `IDE`, `CTRL`, `ASGI`) that no surname list knows and no regnal number (`III`) is."""
    bare = word.strip(".,;:!?'\u2019")
    return (
        2 <= len(bare) <= 4
        and bare.isalpha()
        and bare.isupper()
        and not gazetteer.is_surname(bare)
        and _ROMAN.fullmatch(bare) is None
    )


def _unwrapped(text: str, first: int, word: int) -> bool:
    """Whether a line ends between a name's first word (at `first`) and a later word (at
    `word`) on a line that holds nothing before the name: a heading or a list's line,
    which a name does not wrap over (`Thanks to Jane\n  Doe` wraps; `AUTHOR\n  Written`
    does not)."""
    line_start = text.rfind("\n", 0, first) + 1
    return "\n" in text[first:word] and not text[line_start:first].strip(" \t*+-\u2022")


#: A line that underlines the heading above it (reStructuredText, Markdown's setext); not
#: a code fence (```).
_UNDERLINE = re.compile(r"[ \t]*(?P<rule>([=\-~^\"'*+#:._])\2{2,})[ \t]*(?:\n|$)")
_MARKDOWN_HEADING = re.compile(r"[ \t]*#{1,6}[ \t]")


def in_heading(text: str, at: int) -> bool:
    """Whether `at` stands in a heading: a line underlined by the next, at least as long
    as it (`Minor Improvements` over `~~~~~~`), or a Markdown heading (`## A Simple
    Example`), where every word is capitalised and a capital says nothing of a name."""
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    if _MARKDOWN_HEADING.match(text, line_start):
        return True
    underline = _UNDERLINE.match(text, line_end + 1) if line_end >= 0 else None
    return underline is not None and len(underline["rule"]) >= len(
        text[line_start:line_end].strip()
    )


#: Given names that are also everyday English words: they start a name only when a known
#: surname follows (`Will Thompson`, not `Will Update`).
_COMMON_GIVEN = frozenset(
    """Add Link Love Will May Mark Grant Bill Rich Pat Max Drew Guy Art Jack Rose Page Chase
    Hope Faith
    Summer Dash Ruby Julia Ada Jordan Lane Case Lee Long Young White Black Brown Green
    Gray Grey Park Hall Wood Stone Field Read Reed Frank Earnest Sunny Joy Happy Angel
    Star Sky River Dawn Autumn Rain Storm April June August Sterling Mason Hunter Carter
    Cash Price Bishop Major King Prince Duke Lord Baron Sir Miles Ray Gene Eve Van Don
    Will Nick Rob Sue Dean Jean Victor Vladimir Jan Bob Gil Sol Luna Nova Neo Forest""".split()
)


def common_given(first: str) -> bool:
    """Whether a given name is also an everyday English word (`Will`, `Mark`, `Add`)."""
    return first in _COMMON_GIVEN


# ---- words ----------------------------------------------------------------------------


def _is_name_word(word: str) -> bool:
    """A word where a context says a name stands: letters (any script, any case), no digit
    and none of code's punctuation (`ChangZhuo`, `McVittie`, `IOhannes` are names here)."""
    return _WORD_RE.fullmatch(word) is not None and not holds_no_name(word)


def personal(words: list[str]) -> bool:
    """Not a team's, a bot's or an organisation's name, nor a word that stands for none."""
    folded = [word.casefold().strip(".") for word in words]
    if any(word in TEAM_WORDS for word in folded):
        return False
    return not (len(words) == 1 and folded[0] in STOP_WORDS)


def _trailing_name(prefix: str) -> tuple[int, int] | None:
    """The run of name words that ends `prefix` (at most six), stopping at a stop word."""
    tokens = list(re.finditer(r"\S+", prefix))
    run: list[re.Match[str]] = []
    for token in reversed(tokens):
        word = token.group()
        if len(run) == 6 or not _is_name_word(word) or word in STOP_WORDS:
            break
        run.insert(0, token)
    words = [token.group() for token in run]
    if not run or not personal(words):
        return None
    return run[0].start(), run[-1].end()


def _names_at(
    text: str, start: int, *, handles: bool, end: int | None = None
) -> Iterator[tuple[int, int]]:
    """The names listed from `start`: `Jane Doe`, `Jane Doe and Max Roe`, `A, B and C`."""
    limit = len(text) if end is None else end
    at = start
    while at < limit:
        found = _name_at(text[:limit], at, handles=handles and at == start)
        if found is None or text[found[1] : found[1] + 1] == ":":
            return  # a field's name (`Closes:`), not a person's
        yield found
        joiner = re.compile(r"[ \t]*(?:,[ \t]*(?:and[ \t]+)?|[ \t]+(?:and|&)[ \t]+)")
        follow = joiner.match(text, found[1], limit)
        if follow is None:
            return
        at = follow.end()


_HONORIFIC = re.compile(r"(?i)(?:mr|mrs|ms|miss|mx|dr|prof|sir|madam|dame|lady|lord)\.?[ \t]+")


def _name_at(text: str, start: int, *, handles: bool) -> tuple[int, int] | None:
    """The name that begins at `start`: capitalised words (with particles), up to five,
    a line wrap allowed between them; or, where `handles`, a single lower-case handle
    (`zigo`, `lemonsqueeze`) that a stop word or punctuation ends. A title before the
    name (`Mr`, `Dr.`) is left out of it."""
    title = _HONORIFIC.match(text, start)
    if title is not None:
        start = title.end()
    words = list(re.finditer(rf"{_WORD}", text[start : start + 160]))
    run: list[re.Match[str]] = []
    expected = 0
    for word in words:
        gap = text[start + expected : start + word.start()]
        if (run and not re.fullmatch(_GAP, gap)) or (not run and gap):
            break
        value = word.group()
        capitalised = not value[0].islower()
        if len(run) == 5 or value.casefold() in STOP_WORDS:
            break
        if holds_no_name(value) or not (capitalised or (run and value in PARTICLES)):
            break
        run.append(word)
        expected = word.end()
    while run and run[-1].group() in PARTICLES:
        run.pop()
    if len(run) == 1 and run[0].group().isupper() and len(run[0].group()) > 2:
        return None  # an acronym: a product's or a tool's name, not a person's
    if run:
        if not personal([w.group() for w in run]):
            return None
        end = start + run[-1].end()
        if run[-1].group().endswith(".") and len(run[-1].group()) > 2:
            end -= 1  # a sentence's full stop, not an initial
        return start + run[0].start(), end
    if not handles:
        return None
    handle = _HANDLE.match(text, start)
    if handle is None or handle.group().casefold() in STOP_WORDS or is_code_like(handle.group()):
        return None
    return handle.start(), handle.end()


#: A handle credited in place of a name, ended by punctuation or a stop word.
_HANDLE = re.compile(
    r"[a-z][a-z0-9_-]{2,31}(?=[ \t]*(?:[.,;:!?)]|$|\n|[ \t]+(?:for|to|in|on|who|and)\b))"
)
