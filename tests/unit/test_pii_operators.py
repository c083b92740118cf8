"""The replacement operators (`gateway.safety.operators`) on presidio's real anonymizer
engine, and `RedactionPolicy.apply` through them."""

from __future__ import annotations

import functools
import hashlib
import hmac
import re

import pytest

from gateway.safety.operators import Anonymizer, Operators, pseudonym
from gateway.safety.policy import RedactionPolicy
from ingest.payload import PiiSpan

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
TEXT = "Ann Lee wrote to ann.lee@example.com; ANN   lee called from 10.0.0.7."
SPANS = (
    PiiSpan(0, 7, "PERSON", 0.85),
    PiiSpan(17, 36, "EMAIL_ADDRESS", 1.0),
    PiiSpan(38, 47, "PERSON", 0.85),
    PiiSpan(60, 68, "IP_ADDRESS", 0.6),
)
ALL = frozenset({"PERSON", "EMAIL_ADDRESS", "IP_ADDRESS"})


@functools.cache
def _anonymizer() -> Anonymizer:
    return Anonymizer()


def _apply(chosen: dict[str, str], key: bytes | None = KEY, text: str = TEXT) -> str:
    operators = Operators(_anonymizer(), chosen, key)
    return RedactionPolicy(ALL, operators=operators).apply(text, SPANS).text


def test_replace_is_the_default_and_names_the_type() -> None:
    """With no operators chosen each value becomes `<ENTITY_TYPE>`; counts stay per type."""
    redaction = RedactionPolicy(ALL, operators=_anonymizer().replace_all).apply(TEXT, SPANS)
    assert redaction.text == (
        "<PERSON> wrote to <EMAIL_ADDRESS>; <PERSON> called from <IP_ADDRESS>."
    )
    assert redaction.counts == {"EMAIL_ADDRESS": 1, "IP_ADDRESS": 1, "PERSON": 2}
    assert _apply({"PERSON": "replace"}) == redaction.text


def test_mask_replaces_every_character_of_the_value_with_a_star() -> None:
    """`mask` keeps the value's length and nothing else: every character, spaces and
    punctuation included, is `*`; other types keep `replace`."""
    assert _apply({"EMAIL_ADDRESS": "mask", "PERSON": "mask"}) == (
        "******* wrote to *******************; ********* called from <IP_ADDRESS>."
    )


def test_a_pseudonym_is_the_keyed_hash_of_the_type_and_normalised_value() -> None:
    """`<TYPE_xxxxxx>`: the first 6 hex digits of HMAC-SHA256(key, TYPE NUL value), the value
    case-folded with its whitespace runs made one space, so `Ann Lee` and `ANN   lee` get
    one token; another type or another key gives another."""
    expected = hmac.new(KEY, b"PERSON\0ann lee", hashlib.sha256).hexdigest()[:6]
    text = _apply({"PERSON": "pseudonym"})
    assert text == (
        f"<PERSON_{expected}> wrote to <EMAIL_ADDRESS>; <PERSON_{expected}> called from "
        "<IP_ADDRESS>."
    )
    assert pseudonym(KEY, "PERSON", " ann\tLEE ") == f"<PERSON_{expected}>"
    assert pseudonym(KEY, "ORGANIZATION", "Ann Lee") != f"<ORGANIZATION_{expected}>"
    assert pseudonym(OTHER_KEY, "PERSON", "Ann Lee") != f"<PERSON_{expected}>"
    assert re.fullmatch(r"<PERSON_[0-9a-f]{6}>", pseudonym(OTHER_KEY, "PERSON", "Ann Lee"))


def test_two_people_get_two_pseudonyms_even_side_by_side() -> None:
    """Two names of one type separated by a space stay two values with two tokens (presidio's
    merging of neighbours is off): a reader can still tell the people apart."""
    text = "Ann Lee Bob Stone"
    spans = (PiiSpan(0, 7, "PERSON", 0.85), PiiSpan(8, 17, "PERSON", 0.85))
    operators = Operators(_anonymizer(), {"PERSON": "pseudonym"}, KEY)
    redaction = RedactionPolicy(frozenset({"PERSON"}), operators=operators).apply(text, spans)
    assert (
        redaction.text
        == f"{pseudonym(KEY, 'PERSON', 'Ann Lee')} {pseudonym(KEY, 'PERSON', 'Bob Stone')}"
    )
    assert redaction.counts == {"PERSON": 2}


def test_pseudonyms_differ_between_workspace_keys() -> None:
    """The same text under two workspaces' keys gives two different tokens for a name."""
    assert _apply({"PERSON": "pseudonym"}, KEY) != _apply({"PERSON": "pseudonym"}, OTHER_KEY)


def test_a_pseudonym_without_a_key_is_replaced() -> None:
    """When the workspace's key could not be read, pseudonymised types get `<TYPE>`: a
    value is never shown for want of a key."""
    assert _apply({"PERSON": "pseudonym", "EMAIL_ADDRESS": "mask"}, key=None) == (
        "<PERSON> wrote to *******************; <PERSON> called from <IP_ADDRESS>."
    )


def test_nothing_selected_returns_the_text_as_it_is() -> None:
    """A text with no span of the policy's types is returned unchanged, with no counts."""
    operators = Operators(_anonymizer(), {"URL": "mask"}, KEY)
    redaction = RedactionPolicy(frozenset({"URL"}), operators=operators).apply(TEXT, SPANS)
    assert redaction.text is TEXT
    assert redaction.counts == {}


@pytest.mark.parametrize(
    "chosen", [{"PERSON": "pseudonym"}, {"PERSON": "pseudonym", "URL": "mask"}]
)
def test_the_key_is_in_no_repr(chosen: dict[str, str]) -> None:
    """What may be logged (the operators, the policy, presidio's configs) never holds the key."""
    operators = Operators(_anonymizer(), chosen, KEY)
    policy = RedactionPolicy(ALL, operators=operators)
    configs = _anonymizer().configs(operators.chosen, KEY)
    for shown in (repr(operators), repr(policy), repr(configs), str(configs)):
        assert KEY.hex() not in shown
        assert repr(KEY) not in shown
