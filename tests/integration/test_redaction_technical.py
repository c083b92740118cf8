"""The Redactor on real technical text: versions, offsets, commands and ids stay; the people
in signatures, headers, credits and lists of contributors do not."""

from __future__ import annotations

import pytest

from gateway.safety.redaction import Redactor
from settings.resolve import DEFAULT_PII_ENTITIES
from tests.support.redactor import shared_redactor


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    """The project's NER pipeline and every recognizer, as a gateway runs them."""
    return shared_redactor()


def redact(redactor: Redactor, text: str) -> str:
    return redactor.redact(text, DEFAULT_PII_ENTITIES).text


@pytest.mark.parametrize(
    "text",
    [
        "djvulibre (3.5.27.1-15) unstable; urgency=medium",
        "  * Bump Standards-Version to 4.6.0.0, no changes needed.",
        "  - Patch1: djvulibre-3.5.25.3-cflags.patch",
        "libxcomposite (1:0.2.2.2-3) unstable; urgency=medium",
        "Upgrade to release 1.2.5.1 before the end of the month.",
    ],
)
def test_a_dotted_quad_written_as_a_version_is_not_an_ip_address(
    redactor: Redactor, text: str
) -> None:
    """A four-part version joined to a package name, an epoch or a revision, or named as a
    version, is left as it is."""
    assert redact(redactor, text) == text


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("The printer answers on 192.168.1.20 after a restart.", "192.168.1.20"),
        ("Run django-admin runserver 1.2.3.4:8000 to listen there.", "1.2.3.4"),
        ("Bind it to 10.0.0.7/24 on the second interface.", "10.0.0.7"),
    ],
)
def test_an_ip_address_is_still_an_ip_address(redactor: Redactor, text: str, address: str) -> None:
    """Addresses written as addresses (with a port, a prefix length or in prose) are hidden."""
    redacted = redact(redactor, text)
    assert address not in redacted
    assert "<IP_ADDRESS>" in redacted


@pytest.mark.parametrize(
    "text",
    [
        " -- Upload  Fri, 01 Sep 2017 13:15:04 -0400",
        "Deployed 2024-03-01T10:00:00-0400 and again at 11:30 +0200.",
        "abseil (0~20200225.2-4) unstable; urgency=medium",
        "libedit (3.1-20210522-1~exp1) experimental; urgency=medium",
        "Fixed in CVE-2023-50387 and LP: #1945810 (Closes: #1022001).",
    ],
)
def test_timezone_offsets_versions_and_ids_are_not_phone_numbers(
    redactor: Redactor, text: str
) -> None:
    """Date-times with their offsets, Debian versions, CVE ids and bug numbers stay."""
    assert redact(redactor, text) == text


def test_a_real_phone_number_is_still_found_beside_a_date(redactor: Redactor) -> None:
    """The phone pass skips only the date's digits: a number after it is still hidden."""
    text = "Fri, 01 Sep 2017 13:15:04 -0400: call +1 415 555 0132 for the release."
    assert redact(redactor, text) == (
        "Fri, 01 Sep 2017 13:15:04 -0400: call <PHONE_NUMBER> for the release."
    )


@pytest.mark.parametrize(
    "text",
    [
        "Run `git gc --prune=now` in bash and zsh to reclaim the space.",
        "Merge branch 'topic/retry' (3f9a2c1d) into main.",
        "Merge commit 4415550132 from the stable series.",
        "Set core.untrackedCache = true and read ~/.gitconfig again.",
        "  * Mark package as autopkgtest-able.\n  * Add Breaks on cryptsetup-bin.",
        "  * Declare compliance with Debian Policy 4.6.1.",
        "  * Change maintainer to Debian X Strike Force.",
    ],
)
def test_commands_options_merge_ids_and_changelog_items_survive(
    redactor: Redactor, text: str
) -> None:
    """Commands and options, merge ids, config keys and the imperative items of a changelog
    hold no personal data and come back whole."""
    assert redact(redactor, text) == text


def test_a_maintainers_signature_line_loses_its_name_and_email(redactor: Redactor) -> None:
    """A changelog's signature: the name before the address goes with the address."""
    text = (
        "  * New upstream release.\n\n"
        " -- Marco d'Itri <md@linux.it>  Sun, 30 Oct 2022 14:56:36 -0400\n"
    )
    assert redact(redactor, text) == (
        "  * New upstream release.\n\n"
        " -- <PERSON> <<EMAIL_ADDRESS>>  Sun, 30 Oct 2022 14:56:36 -0400\n"
    )


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("  [ Ondřej Nový ]\n  * d/control: Update Maintainers.", ["Ondřej Nový"]),
        ("  * Fix the build. Thanks to Helmut Grohne (Closes: #675909)", ["Helmut Grohne"]),
        ("    - includes patch from lemonsqueeze to improve fakeroot", ["lemonsqueeze"]),
        ("  * Remove David Nusinow and Andres Salomon from Uploaders.", ["David", "Andres"]),
        ("  * Thanks for the upload, Mattias.", ["Mattias"]),
        ("* Docs: Add SECURITY.md by @akx in :gh:`1229`", ["akx"]),
        ("Co-authored-by: Priya Raghunathan <priya@example.org>", ["Priya Raghunathan"]),
    ],
)
def test_names_in_headers_credits_and_rosters_are_hidden(
    redactor: Redactor, text: str, names: list[str]
) -> None:
    """Attribution headers, credits, handles and roster changes name people."""
    redacted = redact(redactor, text)
    assert "<PERSON>" in redacted
    for name in names:
        assert name not in redacted


def test_a_list_of_contributors_is_a_list_of_people(redactor: Redactor) -> None:
    """Three or more lines that each hold a name, at least half of them with a known given
    name: every name of the list is hidden, the unfamiliar ones too."""
    text = "Thanks to:\n\nAmmar Askar\nNed Batchelder\nDaniil Galiev\nHugo van Kemenade\n"
    redacted = redact(redactor, text)
    assert redacted == "Thanks to:\n\n<PERSON>\n<PERSON>\n<PERSON>\n<PERSON>\n"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "Priya Raghunathan approves refunds above 500 euros.",
            "<PERSON> approves refunds above 500 euros.",
        ),
        (
            "The results, ERWAY concluded, were mixed. LYNCH said it was enough.",
            "The results, <PERSON> concluded, were mixed. <PERSON> said it was enough.",
        ),
        (
            "In 2019, Gotabaya RAJAPAKSA won the presidential election.",
            "In 2019, <PERSON> won the presidential election.",
        ),
    ],
)
def test_names_of_every_origin_in_prose(redactor: Redactor, text: str, redacted: str) -> None:
    """A given name and a surname, a speaker beside a verb of speech, and a surname written
    in capitals are found in running prose."""
    assert redact(redactor, text) == redacted


def test_a_version_title_stays_a_version(redactor: Redactor) -> None:
    """A title is analysed like a text: a four-part version in it is not an address."""
    assert redact(redactor, "libwmf 0.2.8.4-17") == "libwmf 0.2.8.4-17"


def test_explain_names_the_recognizer_of_each_hidden_span(redactor: Redactor) -> None:
    """Each span redact would hide comes with its type, recognizer and score."""
    text = " -- Jane Doe <jane@example.org>  Fri, 01 Sep 2017 13:15:04 -0400"
    spans = redactor.explain(text, DEFAULT_PII_ENTITIES)
    found = {(text[s.start : s.end], s.entity_type, s.recognizer) for s in spans}
    assert found == {
        ("Jane Doe", "PERSON", "MailboxNameRecognizer"),
        ("jane@example.org", "EMAIL_ADDRESS", "OfflineEmailRecognizer"),
    }
    assert all(0 < s.score <= 1 for s in spans)


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Andreas Haumer      andreas at xss.co.at", "<PERSON>      <EMAIL_ADDRESS>"),
        ("write to davefx [at] gmail.com", "write to <EMAIL_ADDRESS>"),
        ("Docs are at readthedocs.io and we meet at noon.", None),
    ],
)
def test_addresses_spelled_out_against_harvesters(
    redactor: Redactor, text: str, redacted: str | None
) -> None:
    """`name [at] domain` anywhere and `name at domain` in a list are addresses; prose that
    says where something is (`at readthedocs.io`) is not."""
    assert redact(redactor, text) == (redacted or text)


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "In 1982 President Emomali RAHMON came to power; RAHMON was reelected in 2020.",
            "In 1982 President <PERSON> came to power; <PERSON> was reelected in 2020.",
        ),
        (
            "ORLANDO\tNot so; but I answer you.\nROSALIND\tWhy, Orlando, where have you been?",
            "<PERSON>\tNot so; but I answer you.\n<PERSON>\tWhy, <PERSON>, where have you been?",
        ),
        (
            "His son Navin RAMGOOLAM took office in 1995 and served until 2000.",
            "His son <PERSON> took office in 1995 and served until 2000.",
        ),
        (
            "KENNEY stressed that the costs of scanning were falling every year.",
            "<PERSON> stressed that the costs of scanning were falling every year.",
        ),
    ],
)
def test_names_in_the_house_style_of_prose(redactor: Redactor, text: str, redacted: str) -> None:
    """A name after a title, a script's speaker heading and the same name found again, a
    surname in capitals after given names, and one beside a verb of reporting."""
    assert redact(redactor, text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "The EPRDF became an ethnic coalition. No SGML markup remains in the files.",
        "General Motors announced a recall. Support added for the new format.",
    ],
)
def test_acronyms_and_organisations_in_prose_are_no_people(redactor: Redactor, text: str) -> None:
    """Acronyms in capitals, an organisation after a role word and a thing that `added`
    something are left as they are."""
    assert redact(redactor, text) == text
