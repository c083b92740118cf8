"""A document's structure: its sections, each with its heading path, and the entries within.

Release notes, changelogs and manuals are sequences of short entries under headings (a
version, a date, a section name) that give each entry its meaning: "adds basenc command"
answers "in which version did basenc first show up" only beside its heading
`coreutils (8.32-1) unstable; urgency=low`. `sections` finds

- Markdown headings (`## Title`, and a title underlined by `===` or `---`), reStructuredText
  and AsciiDoc titles (a title under, or between, lines of one repeated punctuation
  character; `== Title`), outside fenced code blocks;
- Debian changelog entries (`source (version) distribution; urgency=...`), each ended by
  its ` -- maintainer  date` line.

Each section keeps the path of headings above it (its own last), and its body as blocks:
a list item (`*`, `-`, `+`, `1.`) with its continuation lines, a paragraph, a fenced code
block or a changelog's signature line, each whitespace-normalised. A document with no
heading has no sections (None): it is chunked as prose (`ingest.chunking.chunk_text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Bump when what `sections` finds changes: documents it finds structure in are then
#: chunked again (`ingest.chunking.chunking_version`).
STRUCTURE_VERSION = 1

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_ASCIIDOC = re.compile(r"^(={1,6})[ \t]+(\S.*?)[ \t]*$")
_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`:.])\1{2,}[ \t]*$")
_DEBIAN_ENTRY = re.compile(r"^[a-z0-9][a-z0-9+.\-]* \([^()\s]+\)(?: [^;]*)?;.*urgency=", re.I)
_DEBIAN_SIGNATURE = re.compile(r"^ -- \S.*<[^>]*>")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_ITEM = re.compile(r"^[ \t]*(?:[*\-+•]|\d{1,3}[.)])[ \t]+\S")
#: a heading line is a line of text, not a paragraph
_LONGEST_HEADING = 150
#: the style of a title standing alone (`_standing_alone`), and its most words
_ALONE = "alone"
_ALONE_WORDS = 8


@dataclass(frozen=True, slots=True)
class Section:
    """A heading's part of a document: the headings above it and its own (empty before
    the first heading), and its body's blocks in order."""

    path: tuple[str, ...]
    blocks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Heading:
    line: int
    #: lines it takes (an underlined title two, an over- and underlined one three)
    span: int
    #: its style: "#2", "=1", "debian", or an underline style such as "-" or "=/="
    style: str
    text: str


def structure_applies(text: str) -> bool:
    """Whether `sections` finds a heading in the text (else it is chunked as prose)."""
    return bool(_headings(text.splitlines()))


def sections(text: str) -> list[Section] | None:
    """The document's sections in order, or None when it has no heading."""
    lines = text.splitlines()
    headings = _headings(lines)
    if not headings:
        return None
    levels = _levels(headings)
    found: list[Section] = []
    preamble = _blocks(lines[: headings[0].line])
    if preamble:
        found.append(Section((), tuple(preamble)))
    path: list[tuple[int, str]] = []
    for number, heading in enumerate(headings):
        level = levels[heading.style]
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, heading.text))
        end = headings[number + 1].line if number + 1 < len(headings) else len(lines)
        body = _blocks(lines[heading.line + heading.span : end])
        found.append(Section(tuple(text for _, text in path), tuple(body)))
    return found


def _headings(lines: list[str]) -> list[_Heading]:
    """Every heading, in order; none inside a fenced code block. Lines standing alone
    as short titles count only in a document with marked headings."""
    found: list[_Heading] = []
    fenced = False
    number = 0
    while number < len(lines):
        line = lines[number]
        if _FENCE.match(line):
            fenced = not fenced
            number += 1
            continue
        heading = None if fenced else _heading_at(lines, number) or _standing_alone(lines, number)
        if heading is None:
            number += 1
            continue
        found.append(heading)
        number = heading.line + heading.span
    if all(heading.style == _ALONE for heading in found):
        return []
    return found


def _standing_alone(lines: list[str], number: int) -> _Heading | None:
    """A short line at the margin between blank lines, starting with a capital or a
    digit and ending in no sentence punctuation, with text after it: "UI, Workflows &
    Features" over a release's list of changes."""
    line = lines[number]
    before = lines[number - 1] if number > 0 else ""
    after = lines[number + 1] if number + 1 < len(lines) else "x"
    if before.strip() or after.strip() or not (line[:1].isupper() or line[:1].isdigit()):
        return None
    stripped = line.strip()
    if len(stripped.split()) > _ALONE_WORDS or stripped[-1] in ".,;!?" or _ITEM.match(line):
        return None
    if not any(rest.strip() for rest in lines[number + 1 : number + 3]):
        return None
    return _Heading(number, 1, _ALONE, _clean(line))


def _heading_at(lines: list[str], number: int) -> _Heading | None:
    line = lines[number]
    if _DEBIAN_ENTRY.match(line):
        return _Heading(number, 1, "debian", _clean(line))
    if match := _ATX.match(line):
        return _Heading(number, 1, f"#{len(match.group(1))}", _clean(match.group(2)))
    if match := _ASCIIDOC.match(line):
        return _Heading(number, 1, f"={len(match.group(1))}", _clean(match.group(2)))
    over = _UNDERLINE.match(line)
    if over and number + 2 < len(lines):
        title, under = lines[number + 1], lines[number + 2]
        if _is_title(title) and under.strip() == line.strip():
            return _Heading(number, 3, f"{line.strip()[0]}/{line.strip()[0]}", _clean(title))
    if number + 1 < len(lines) and _is_title(line) and not _ITEM.match(line):
        under_match = _UNDERLINE.match(lines[number + 1])
        if under_match and len(lines[number + 1].strip()) * 2 >= len(line.strip()):
            return _Heading(number, 2, under_match.group(1), _clean(line))
    return None


def _is_title(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and len(stripped) <= _LONGEST_HEADING and not _UNDERLINE.match(line)


def _levels(headings: list[_Heading]) -> dict[str, int]:
    """Each style's level: `#n` and `=n` are level n; underline styles and changelog
    entries rank in the order they first appear (reStructuredText's rule), below none of
    the numbered ones they share a document with."""
    levels: dict[str, int] = {}
    ranked: list[str] = []
    for heading in headings:
        style = heading.style
        if style[0] in "#=" and style[1:].isdigit():
            levels[style] = int(style[1:])
        elif style not in ranked and style != _ALONE:
            ranked.append(style)
    levels.update({style: number for number, style in enumerate(ranked, start=1)})
    levels[_ALONE] = max(levels.values(), default=0) + 1
    return levels


def _blocks(lines: list[str]) -> list[str]:
    """A body's blocks: list items, paragraphs, fenced code and signature lines."""
    blocks: list[str] = []
    current: list[str] = []
    fenced = False

    def close() -> None:
        text = _clean(" ".join(current))
        if text:
            blocks.append(text)
        current.clear()

    for line in lines:
        if _FENCE.match(line):
            if fenced:
                current.append(line)
                close()
                fenced = False
                continue
            close()
            fenced = True
        if fenced:
            current.append(line)
            continue
        if not line.strip():
            close()
        elif _DEBIAN_SIGNATURE.match(line):
            close()
            current.append(line)
            close()
        elif _ITEM.match(line):
            close()
            current.append(line)
        else:
            current.append(line)
    close()
    return blocks


def _clean(text: str) -> str:
    return " ".join(text.split())
