"""Pure rules of PII detection on technical text: SSH's algorithm names, a call's
arguments, headings and blocks of header fields (the texts are from `bench/data/pii-docs`
and `pii-technical`)."""

from __future__ import annotations

import pytest

from gateway.safety.names import in_heading
from gateway.safety.recognizers import openblas_single_threaded
from gateway.safety.technical import (
    follows_an_at_sign,
    names_an_algorithm,
    opens_call_arguments,
    reads_as_prose,
)


@pytest.mark.parametrize(
    "address",
    [
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "chacha20-poly1305@openssh.com",
        "hmac-sha2-256-etm@openssh.com",
        "curve25519-sha256@libssh.org",
    ],
)
def test_ssh_names_of_algorithms_are_recognised(address: str) -> None:
    """Every hyphen-joined part names an algorithm, a key type or a number."""
    assert names_an_algorithm(address)


@pytest.mark.parametrize(
    "address",
    ["deb2001-github@yahoo.de", "d87-mal@nada.kth.se", "djm@openssh.com", "no-reply@docker.com"],
)
def test_mailboxes_are_not_algorithms(address: str) -> None:
    """People's and teams' addresses, hyphens and digits in them too, are mailboxes."""
    assert not names_an_algorithm(address)


def test_only_the_tail_of_a_double_at_follows_an_at_sign() -> None:
    text = "(e.g. a@b@c.com.) or mail b@c.com"
    assert follows_an_at_sign(text, text.index("b@c"))
    assert not follows_an_at_sign(text, text.rindex("b@c"))
    assert not follows_an_at_sign("b@c.com", 0)


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        (">>> ipaddress.IPv4Address(3232235521)", "(3232235521", True),
        (">>> ipaddress.IPv4Address(3232235521)", "3232235521", True),
        ("call +44(0)1632960246 today", "(0)", False),
        ("Call (650) 253-2222 today", "(650)", False),
        ("'(650) 253-2222'", "(650)", False),
    ],
)
def test_a_calls_first_argument(text: str, at: str, expected: bool) -> None:
    """A bracket joined to an identifier opens a call; one after a space, a quote or a
    country code opens an area code."""
    assert opens_call_arguments(text, text.index(at)) is expected


@pytest.mark.parametrize(
    ("text", "word", "expected"),
    [
        ("Minor Improvements and bugfixes\n~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n", "Minor", True),
        ("## A Simple Example\n\ntext", "Simple", True),
        ("  * Running on http://x/ (Press CTRL+C to quit)\n```\n", "Press", False),
        ("Greg Parker wrote the port.\n---\n", "Greg", False),
        ("Greg Parker wrote the Mac OS X port.\n", "Greg", False),
    ],
)
def test_headings_are_underlined_at_full_length_or_marked(
    text: str, word: str, expected: bool
) -> None:
    """An underline at least as long as its line, or Markdown's `#`, makes a heading; a
    code fence or a short rule under a sentence does not."""
    assert in_heading(text, text.index(word)) is expected


def test_a_block_of_header_fields_is_not_prose() -> None:
    """Package metadata reads as fields; the same words in a sentence read as prose."""
    fields = (
        "Classifier: Intended Audience :: Developers\n"
        "Classifier: License :: OSI Approved :: Apache Software License\n"
        "Classifier: Operating System :: OS Independent\n"
    )
    assert not reads_as_prose(fields)
    assert reads_as_prose("The project is released under the Apache Software License.")


def test_the_ner_model_uses_openblas_only_where_it_runs_one_thread() -> None:
    assert openblas_single_threaded({"OPENBLAS_NUM_THREADS": "1"})
    assert not openblas_single_threaded({})
    assert not openblas_single_threaded({"OPENBLAS_NUM_THREADS": "4"})
