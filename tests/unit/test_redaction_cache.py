"""The per-tenant cache of redaction results, with a fake redactor."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

from gateway.safety.redaction import Redaction, RedactionCache, RedactionKey, redact_texts_cached
from ingest.lru import LruCache


class DigitRedactor:
    """Replaces digit runs with <NUMBER> (only when NUMBER is asked for); counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail = False

    def redact(self, text: str, entities: Iterable[str]) -> Redaction:
        self.calls.append(text)
        if self.fail:
            raise RuntimeError("detector down")
        if "NUMBER" not in set(entities):
            return Redaction(text, {})
        found = re.findall(r"\d+", text)
        return Redaction(re.sub(r"\d+", "<NUMBER>", text), {"NUMBER": len(found)} if found else {})


class CollidingText(str):
    """A string whose hash equals every other CollidingText's: a forced hash collision."""

    __slots__ = ()

    def __hash__(self) -> int:
        return 1


class Cached:
    """`redact_texts_cached` over one redactor and one cache, as the turn calls it."""

    def __init__(self, redactor: DigitRedactor, size: int = 64) -> None:
        self.redactor = redactor
        self.cache: RedactionCache = LruCache[RedactionKey, Redaction](size)

    def redact_texts(
        self, tenant_id: str, texts: dict[str, str], entities: list[str]
    ) -> tuple[dict[str, str], dict[str, int]]:
        return redact_texts_cached(self.redactor, self.cache, tenant_id, texts, entities)


def _cached(redactor: DigitRedactor) -> Cached:
    return Cached(redactor)


def test_a_repeated_text_is_redacted_once_and_counted_every_time() -> None:
    """The second turn with the same passage gets the cached redaction, and its entity
    counts are reported again (telemetry per turn is unchanged by the cache)."""
    redactor = DigitRedactor()
    cached = _cached(redactor)
    first = cached.redact_texts("t1", {"p1": "call 555 1234"}, ["NUMBER"])
    second = cached.redact_texts("t1", {"p9": "call 555 1234"}, ["NUMBER"])
    assert first == ({"p1": "call <NUMBER> <NUMBER>"}, {"NUMBER": 2})
    assert second == ({"p9": "call <NUMBER> <NUMBER>"}, {"NUMBER": 2})
    assert redactor.calls == ["call 555 1234"]


def test_entries_are_never_served_to_another_tenant() -> None:
    """The same text in another tenant's turn is redacted afresh."""
    redactor = DigitRedactor()
    cached = _cached(redactor)
    cached.redact_texts("t1", {"p": "room 12"}, ["NUMBER"])
    cached.redact_texts("t2", {"p": "room 12"}, ["NUMBER"])
    assert redactor.calls == ["room 12", "room 12"]


def test_a_text_only_ever_gets_its_own_redaction_even_when_hashes_collide() -> None:
    """Two different texts with equal hashes each get their own redaction."""
    redactor = DigitRedactor()
    cached = _cached(redactor)
    one, two = CollidingText("card 4111"), CollidingText("pin 99")
    assert hash(one) == hash(two)
    assert cached.redact_texts("t", {"a": one}, ["NUMBER"])[0] == {"a": "card <NUMBER>"}
    assert cached.redact_texts("t", {"b": two}, ["NUMBER"])[0] == {"b": "pin <NUMBER>"}
    assert cached.redact_texts("t", {"a": one}, ["NUMBER"])[0] == {"a": "card <NUMBER>"}


def test_the_entity_policy_is_part_of_the_key() -> None:
    """A changed entity list redacts again; the order the types are listed in does not matter."""
    redactor = DigitRedactor()
    cached = _cached(redactor)
    assert cached.redact_texts("t", {"p": "id 7"}, ["EMAIL"])[0] == {"p": "id 7"}
    assert cached.redact_texts("t", {"p": "id 7"}, ["NUMBER", "EMAIL"])[0] == {"p": "id <NUMBER>"}
    assert cached.redact_texts("t", {"p": "id 7"}, ["EMAIL", "NUMBER"])[0] == {"p": "id <NUMBER>"}
    assert len(redactor.calls) == 2


def test_a_failure_propagates_and_nothing_is_cached() -> None:
    """A redactor error reaches the caller (who fails closed) and is not remembered."""
    redactor = DigitRedactor()
    cached = _cached(redactor)
    redactor.fail = True
    with pytest.raises(RuntimeError, match="detector down"):
        cached.redact_texts("t", {"p": "ssn 123"}, ["NUMBER"])
    redactor.fail = False
    assert cached.redact_texts("t", {"p": "ssn 123"}, ["NUMBER"])[0] == {"p": "ssn <NUMBER>"}
    assert len(cached.cache) == 1
