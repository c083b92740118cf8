"""Passages that follow a document's structure and carry their heading path."""

from __future__ import annotations

from ingest.chunking import ChunkingParams, chunk_document, chunk_text
from ingest.structure import sections, structure_applies

CHANGELOG = """\
coreutils (8.32-2) unstable; urgency=low

  * undo "remove LC_TIME symlinks" as this causes problems with date display
    in some circumstances (Closes: #963513)

 -- Michael Stone <mstone@debian.org>  Tue, 23 Jun 2020 08:24:55 -0400

coreutils (8.32-1) unstable; urgency=low

  * New upstream version (Closes: #959995)
    - adds basenc command
  * Update to dh 12

 -- Michael Stone <mstone@debian.org>  Mon, 22 Jun 2020 14:39:28 -0400
"""

RELEASE_NOTES = """\
Tool 2.23 Release Notes
=======================

Updates since v2.22
-------------------

Backward compatibility note

 * The "--base" option of "format-patch" computed the patch-ids in an
   unstable way.

UI, Workflows & Features

 * Two new commands "tool switch" and "tool restore" are introduced.

 * "tool merge" learned "--quit" option.
"""


def test_changelog_entries_are_sections_with_their_items() -> None:
    """Each upload is a section under its header line; items and the signature are
    blocks of it, continuation lines joined."""
    found = sections(CHANGELOG)
    assert found is not None
    assert [section.path for section in found] == [
        ("coreutils (8.32-2) unstable; urgency=low",),
        ("coreutils (8.32-1) unstable; urgency=low",),
    ]
    assert found[1].blocks == (
        "* New upstream version (Closes: #959995)",
        "- adds basenc command",
        "* Update to dh 12",
        "-- Michael Stone <mstone@debian.org> Mon, 22 Jun 2020 14:39:28 -0400",
    )


def test_underlined_and_standing_titles_nest() -> None:
    """`===` over `---` over a short title standing alone: a path of three headings."""
    found = sections(RELEASE_NOTES)
    assert found is not None
    assert [section.path for section in found if section.blocks] == [
        ("Tool 2.23 Release Notes", "Updates since v2.22", "Backward compatibility note"),
        ("Tool 2.23 Release Notes", "Updates since v2.22", "UI, Workflows & Features"),
    ]


def test_markdown_headings_nest_and_code_is_not_a_heading() -> None:
    """`#` levels make the path; a `#` line inside a fenced block is code."""
    text = (
        "# Guide\n\n## Install\n\n```sh\n# not a heading\npip install x\n```\n\n## Use\n\nRun it."
    )
    found = sections(text)
    assert found is not None
    assert [section.path for section in found] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Use"),
    ]
    assert found[1].blocks == ("```sh # not a heading pip install x ```",)


def test_prose_has_no_structure() -> None:
    """A paragraph, or short lines standing alone with no marked heading, is prose."""
    assert sections("Obesity is rising. It is a problem.") is None
    letter = "Dear Sir\n\nI write about the invoice.\n\nKind regards"
    assert not structure_applies(letter)
    assert chunk_document(letter) == chunk_text(letter)


def test_every_passage_starts_with_its_heading_path() -> None:
    """No passage holds two entries; each says which upload it belongs to."""
    passages = chunk_document(CHANGELOG)
    assert passages == [
        "coreutils (8.32-2) unstable; urgency=low\n"
        '* undo "remove LC_TIME symlinks" as this causes problems with date display in some'
        " circumstances (Closes: #963513)\n"
        "-- Michael Stone <mstone@debian.org> Tue, 23 Jun 2020 08:24:55 -0400",
        "coreutils (8.32-1) unstable; urgency=low\n"
        "* New upstream version (Closes: #959995)\n- adds basenc command\n* Update to dh 12\n"
        "-- Michael Stone <mstone@debian.org> Mon, 22 Jun 2020 14:39:28 -0400",
    ]
    notes = chunk_document(RELEASE_NOTES)
    assert notes[1].startswith(
        "Tool 2.23 Release Notes > Updates since v2.22 > UI, Workflows & Features\n"
    )
    assert "tool switch" in notes[1]


def test_a_long_section_repeats_its_heading_in_every_window() -> None:
    """The later windows of a long entry still carry the entry's header, within the
    passage's word bound."""
    items = "\n".join(f"  * change number {n} to the frobnicator module" for n in range(60))
    text = f"pkg (1.0-1) unstable; urgency=low\n\n{items}\n\n -- A B <a@b.c>  Mon, 1 Jan 2024\n"
    params = ChunkingParams(max_words=60, overlap_words=15)
    passages = chunk_document(text, params)
    assert len(passages) > 3
    assert all(p.startswith("pkg (1.0-1) unstable; urgency=low\n") for p in passages)
    assert all(len(p.split()) <= params.max_words for p in passages)
    for n in range(60):
        assert any(f"change number {n} to" in p for p in passages), n


def test_each_passage_keeps_its_sections_heading_path() -> None:
    """`chunk_sections` gives each passage the heading path of its section (the texts are
    `chunk_document`'s); a preamble and prose have none."""
    from ingest.chunking import chunk_sections

    text = "Intro line.\n\n# Manual\n\n## Install\n\nBolt it down.\n\n## Care\n\nOil it."
    chunks = chunk_sections(text)
    assert [chunk.text for chunk in chunks] == chunk_document(text)
    assert [chunk.path for chunk in chunks] == [(), ("Manual", "Install"), ("Manual", "Care")]
    assert [chunk.path for chunk in chunk_sections("Just prose. Nothing else.")] == [()]
