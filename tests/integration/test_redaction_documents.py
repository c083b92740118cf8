"""The Redactor on real documentation: products and their acronyms, headings, header fields,
SSH's algorithm names and code stay; the people beside them do not.

Every text is a passage, or lines of one, of `bench/data/pii-docs` (READMEs, manuals,
changelogs and credits of registry packages; the package and file are named beside it).
"""

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


# flask 3.1.3, README.md (a whole passage: the model reads it with its context)
FLASK_README = (
    "[Jinja]: https://jinja.palletsprojects.com/\n\n## A Simple Example\n\n```python\n"
    "# save this as app.py\nfrom flask import Flask\n\napp = Flask(__name__)\n\n"
    '@app.route("/")\ndef hello():\n    return "Hello, World!"\n```\n\n```\n$ flask run\n'
    "  * Running on http://127.0.0.1:5000/ (Press CTRL+C to quit)\n```\n\n## Donate\n\n"
    "The Pallets organization develops and supports Flask and the libraries\nit uses. In "
    "order to grow the community of contributors and users, and\nallow the maintainers to "
    "devote more time to the projects, [please\ndonate today].\n\n"
    "[please donate today]: https://palletsprojects.com/donate"
)


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (  # valgrind, AUTHORS
            "Greg Parker wrote the Mac OS X port.\n\n"
            "Dirk Mueller contributed the malloc/free mismatch checking\n",
            "<PERSON> wrote the Mac OS X port.\n\n"
            "<PERSON> contributed the malloc/free mismatch checking\n",
        ),
        (  # docutils 0.23.1, THANKS.rst
            "Wing IDE <http://wingide.com/>`__\n* Jason Diamond\n* William Dode\n",
            "Wing IDE <http://wingide.com/>`__\n* <PERSON>\n* <PERSON>\n",
        ),
        (  # uvicorn 0.54.0, README
            '<p align="center">\n<em>An ASGI web server, for Python.</em>\n</p>\n',
            None,
        ),
        (  # gettext, ChangeLog
            "2018-07-03  Bruno Haible  <bruno@clisp.org>\n\n"
            "\tEnable the format_arg attribute also on clang on Mac OS X.\n"
            "\tReported by Tom Tromey <tom@tromey.com>\n",
            "2018-07-03  <PERSON>  <<EMAIL_ADDRESS>>\n\n"
            "\tEnable the format_arg attribute also on clang on Mac OS X.\n"
            "\tReported by <PERSON> <<EMAIL_ADDRESS>>\n",
        ),
        (
            FLASK_README,
            FLASK_README.replace("127.0.0.1", "<IP_ADDRESS>"),
        ),
    ],
)
def test_an_acronym_after_a_given_name_is_a_product_not_a_surname(
    redactor: Redactor, text: str, redacted: str | None
) -> None:
    """Two to four capitals no surname list knows (`OS`, `IDE`, `CTRL`, `ASGI`) end a name
    that a given name (`Mac`, `Wing`, `Press`, `An`) would start, and in technical text the
    model's name holding one is no person's; the people on the next lines still are."""
    assert redact(redactor, text) == (redacted or text)


def test_a_name_does_not_wrap_over_a_line_that_holds_nothing_before_it(
    redactor: Redactor,
) -> None:
    """A man page's section heading (`AUTHOR`) and the first word of the next line are no
    name; the people credited after them are. (wget, `wget.1`)"""
    text = (
        "AUTHOR\n       Originally written by Hrvoje Nikšić <hniksic@xemacs.org>.  Currently\n"
        "       maintained by Darshit Shah <darnir@gnu.org>.\n"
    )
    assert redact(redactor, text) == (
        "AUTHOR\n       Originally written by <PERSON> <<EMAIL_ADDRESS>>.  Currently\n"
        "       maintained by <PERSON> <<EMAIL_ADDRESS>>.\n"
    )


def test_a_headings_capitals_say_nothing_of_a_name(redactor: Redactor) -> None:
    """In a heading underlined by the next line every word is capitalised: a given name
    there (`Minor`) needs a known surname after it. (babel 2.19.0, CHANGES.rst)"""
    text = (
        "* Support PyInstaller (:gh:`500`, :gh:`505`) (@wodo)\n\n"
        "Minor Improvements and bugfixes\n~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
    )
    assert redact(redactor, text) == text.replace("@wodo", "@<PERSON>")


def test_a_block_of_header_fields_is_not_prose(redactor: Redactor) -> None:
    """Package metadata is a block of `Field: value` lines, not running prose: a name the
    model finds there needs a known name in it. (docker 7.2.0, METADATA)"""
    text = (
        'Maintainer-email: "Docker Inc." <no-reply@docker.com>\nLicense-Expression: Apache-2.0\n'
        "License-File: LICENSE\nClassifier: Intended Audience :: Developers\n"
        "Classifier: License :: OSI Approved :: Apache Software License\n"
        "Classifier: Operating System :: OS Independent\n"
        "Classifier: Programming Language :: Python\n"
    )
    assert redact(redactor, text) == text.replace("no-reply@docker.com", "<EMAIL_ADDRESS>")


def test_a_lone_unknown_word_credited_with_making_something_is_a_company(
    redactor: Redactor,
) -> None:
    """`created by`, `maintained by`, `sponsored by`: companies make things too, so one word
    no name list knows after them is no person. (urllib3 2.8.0, docs/advanced-usage.rst)"""
    text = (
        "`Zstandard <https://datatracker.ietf.org/doc/html/rfc8878>`_\n"
        "is a compression algorithm created by Facebook with better compression\n"
        "than brotli, gzip and deflate.\n"
    )
    assert redact(redactor, text) == text


def test_a_verb_in_the_past_tense_opening_a_sentence_is_no_name(redactor: Redactor) -> None:
    """`Contributed Windows and MS-DOS improvements`: the model's name there starts with a
    verb and is none; the contributors before it are people. (wget, AUTHORS)"""
    text = (
        "Gisle Vanem.  Contributed Windows and MS-DOS improvements, including a\n"
        "port of run_with_timeout to Windows, additions to Makefiles, and many\n"
        "bug reports and fixes.\n"
    )
    assert redact(redactor, text) == text.replace("Gisle Vanem", "<PERSON>")


def test_a_company_in_a_list_of_people_is_not_one_of_them(redactor: Redactor) -> None:
    """A line of an AUTHORS list whose name goes on with a legal form (`, Inc.`) is a
    company's; the people around it are still hidden. (perl, AUTHORS)"""
    text = (
        "Sven Strickroth                <sven.strickroth@tu-clausthal.de>\n"
        "Sven Verdoolaege               <skimo@breughel.ufsia.ac.be>\n"
        "Svyatoslav                     <razmyslov@viva64.com>\n"
        "syber                          <syber@crazypanda.ru>\n"
        "SynaptiCAD, Inc.               <sales@syncad.com>\n"
        "Sébastien Aperghis-Tramoni     <sebastien@aperghis.net>\n"
    )
    redacted = redact(redactor, text)
    assert "SynaptiCAD, Inc." in redacted
    for name in ("Sven Strickroth", "Svyatoslav", "syber", "Sébastien Aperghis-Tramoni"):
        assert name not in redacted


def test_a_list_item_opened_by_a_given_name_is_a_person(redactor: Redactor) -> None:
    """A list of people's items open with names, not verbs: `- Niklas Hambüchen` is kept
    whole and hidden. (babel 2.19.0, AUTHORS)"""
    text = (
        "- sudheesh001\n- 陈志谦\n- Vineeth Sai Varikuntla\n- Denys\n- Harshit Gupta\n"
        "- xmo-odoo\n- Jean Abou Samra\n- Niklas Hambüchen\n- Changaco\n- Xavier Fernandez\n"
        "- KO. Mattsson\n- Sébastien Diemer"
    )
    redacted = redact(redactor, text)
    for word in ("Niklas", "Hambüchen", "Xavier", "Fernandez"):
        assert word not in redacted


def test_the_verb_of_a_list_item_is_no_surname(redactor: Redactor) -> None:
    """`* XML: Mark SVG files as XML`: the item's verb (`Mark`, a given name that is also
    a word) is left out of the model's name, and what is left (`SVG`) is no surname found
    after a given name. (pygments 2.21.0, CHANGES)"""
    text = (
        "    - Small improvements to the VimScript lexer (#3173)\n  * YAML: Add ``yml`` alias "
        "(#3169), recognize non-breaking spaces as valid\n    scalar content (#2827)\n"
        "  * WebAssembly: Recognize sign-extension operators (#2991, #3160)\n"
        "  * XML: Mark SVG files as XML (#3093)\n\n- New styles:\n\n  * Night Owl (#3132)\n\n"
        "- Fix catastrophic backtracking in ``looks_like_xml`` (#2931, #3112)\n"
        "- Improve monokai theme colors (#3100)\n- Improve handling of non-string types in "
        "``html_escape`` to fix broken clients (#3090, #3086)\n- LaTeX formatter: honor the "
        "wrapped lexer's ``stripnl`` and other input\n  options when ``escapeinside`` is set, "
        "so blank lines are no longer stripped\n  under ``stripnl=false`` (#2975)\n"
        "- RawTokenFormatter: fix a crash when ``error_color`` is set (#3215)"
    )
    assert redact(redactor, text) == text


def test_a_dash_between_spaces_ends_a_name(redactor: Redactor) -> None:
    """`James Strachan -- Kotlin lexer`: what follows the dash is what the person did, not
    more of the name. (pygments 2.21.0, AUTHORS)"""
    text = (
        "* Camil Staps -- Clean and NuSMV lexers; Solarized style\n"
        "* James Strachan -- Kotlin lexer\n* Tom Stuart -- Treetop lexer\n"
    )
    assert redact(redactor, text) == (
        "* <PERSON> -- Clean and NuSMV lexers; Solarized style\n"
        "* <PERSON> -- Kotlin lexer\n* <PERSON> -- Treetop lexer\n"
    )


def test_ssh_algorithm_names_are_not_addresses(redactor: Redactor) -> None:
    """SSH names its algorithms `name@domain` (RFC 4251 §6); they are no mailboxes.
    (twisted 26.10.0, NEWS.rst)"""
    text = (
        "- twisted.conch.ssh.keys.Key can now load public blob keys of type "
        "sk-ssh-ed25519@openssh.com and sk-ecdsa-sha2-nistp256@openssh.com. (#12211)\n"
    )
    assert redact(redactor, text) == text


def test_the_tail_of_a_string_with_two_at_signs_is_no_address(redactor: Redactor) -> None:
    """`a@b@c.com` is the invalid address a changelog describes. (CPython 3.11, NEWS)"""
    text = (
        "- bpo-34155: Fix parsing of invalid email addresses with more than one ``@``\n"
        "  (e.g. a@b@c.com.) to not return the part before 2nd ``@`` as valid email\n"
    )
    assert redact(redactor, text) == text


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (  # CPython 3.11, library/ipaddress.rst
            "   >>> ipaddress.IPv4Address(3232235521)\n   IPv4Address('192.168.0.1')\n",
            "   >>> ipaddress.IPv4Address(3232235521)\n   IPv4Address('<IP_ADDRESS>')\n",
        ),
        (  # phonenumbers, README: a number in a string is still a number
            '>>> text = "Call me at 510-748-8230 if it\'s before 9:30, or on 703-4800500."\n',
            '>>> text = "Call me at <PHONE_NUMBER> if it\'s before 9:30, or on <PHONE_NUMBER>."\n',
        ),
    ],
)
def test_a_calls_argument_is_not_a_phone_number(
    redactor: Redactor, text: str, redacted: str
) -> None:
    """Digits that open the arguments of a call (`IPv4Address(3232235521)`) are a number in
    code; phone numbers written in the text of an example are still found."""
    assert redact(redactor, text) == redacted
