"""How a redacted value is replaced: presidio-anonymizer, with one operator per entity type.

A workspace's `pii_operators` (`settings.resolve.resolve_pii_operators`) picks, per type:

- `replace` (every type it does not name): `<PERSON>`.
- `mask`: presidio's `mask` operator over the whole value, every character by `*`
  (`jane@example.com` -> `****************`): the length stays visible, nothing else.
- `pseudonym`: `<PERSON_7f3a12>`, the first 6 hex digits of HMAC-SHA256 under the
  workspace's pseudonym key of `TYPE "\\0" value`, the value case-folded and its runs of
  whitespace made one space. The same value gives the same token everywhere in one
  workspace (a title and its passages, every turn) and a different one in another;
  without the key the token cannot be traced back to the value. A chat model can still
  tell two people apart. Six hex digits are 2^24 tokens: two values of one type in a
  workspace share one with a chance of about n^2 / 2^25.

`Anonymizer` wraps presidio's `AnonymizerEngine`, built once per process by the
composition root (`gateway.runtime.services.build_services`). `Operators` is one
workspace's choice with its key, made per turn; it holds the engine's operator configs.
The spans given to it are already disjoint and sorted (`RedactionPolicy.select`), so the
engine's conflict rules change nothing, and entities of one type separated by spaces are
not merged.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.safety.spans import Span
from settings.resolve import DEFAULT_PII_OPERATOR

__all__ = ["MASK_CHAR", "PSEUDONYM_HEX_DIGITS", "Anonymizer", "Operators", "pseudonym"]

MASK_CHAR = "*"
PSEUDONYM_HEX_DIGITS = 6
#: `chars_to_mask` of presidio's mask operator: more than any value has, so all of it
_WHOLE_VALUE = 2**31 - 1


def normalised(value: str) -> str:
    """A value as its pseudonym reads it: case-folded, runs of whitespace one space."""
    return " ".join(value.casefold().split())


def pseudonym(key: bytes, entity_type: str, value: str) -> str:
    """`<TYPE_xxxxxx>`: the first 6 hex digits of HMAC-SHA256(key, TYPE "\\0" value),
    the value `normalised`."""
    message = f"{entity_type}\0{normalised(value)}".encode()
    digest = hmac.new(key, message, hashlib.sha256).hexdigest()
    return f"<{entity_type}_{digest[:PSEUDONYM_HEX_DIGITS]}>"


class _Pseudonymise:
    """presidio's `custom` operator function for one type under one workspace's key (its
    repr names the type only: configs may be logged, the key never)."""

    __slots__ = ("_entity_type", "_key")

    def __init__(self, key: bytes, entity_type: str) -> None:
        self._key = key
        self._entity_type = entity_type

    def __call__(self, value: str) -> str:
        return pseudonym(self._key, self._entity_type, value)

    def __repr__(self) -> str:
        return f"pseudonym({self._entity_type})"


class Anonymizer:
    """presidio-anonymizer's engine; build one per process (it holds no workspace's data)."""

    def __init__(self) -> None:
        from presidio_anonymizer import AnonymizerEngine
        from presidio_anonymizer.entities import OperatorConfig, RecognizerResult

        self._engine = AnonymizerEngine()  # type: ignore[no-untyped-call]  # unannotated __init__
        self._config = OperatorConfig
        self._result = RecognizerResult
        #: every type replaced by `<TYPE>` (presidio's `replace` without a new value)
        self.replace_all = Operators(self)

    def configs(self, chosen: Mapping[str, str], key: bytes | None) -> dict[str, Any]:
        """presidio operator configs for `chosen` (type -> operator name), `DEFAULT` for the
        rest. A `pseudonym` without a key (it could not be read) is `replace`d."""
        configs: dict[str, Any] = {"DEFAULT": self._config("replace")}
        for entity_type, operator in chosen.items():
            if operator == "mask":
                configs[entity_type] = self._config(
                    "mask",
                    {"masking_char": MASK_CHAR, "chars_to_mask": _WHOLE_VALUE, "from_end": False},
                )
            elif operator == "pseudonym" and key:
                configs[entity_type] = self._config(
                    "custom", {"lambda": _Pseudonymise(key, entity_type)}
                )
        return configs

    def anonymize(self, text: str, spans: Sequence[Span], configs: Mapping[str, Any]) -> str:
        """`text` with each of the disjoint, sorted `spans` replaced by its type's operator."""
        results = [self._result(s.entity_type, s.start, s.end, s.score) for s in spans]
        # A copy: the engine adds a DEFAULT entry to the dict it is given when none is there.
        found = self._engine.anonymize(
            text, results, dict(configs), merge_entities_with_spaces=False
        )
        return str(found.text)


class Operators:
    """One workspace's operator per type (`replace` where none is chosen) and its
    pseudonym key, as presidio operator configs made once."""

    __slots__ = ("_configs", "anonymizer", "chosen")

    def __init__(
        self,
        anonymizer: Anonymizer,
        chosen: Mapping[str, str] | None = None,
        key: bytes | None = None,
    ) -> None:
        """`key`: the workspace's pseudonym key; None when it could not be read (its
        `pseudonym` types are then `replace`d, never shown)."""
        self.anonymizer = anonymizer
        self.chosen = {
            entity_type: operator
            for entity_type, operator in sorted((chosen or {}).items())
            if operator != DEFAULT_PII_OPERATOR
        }
        self._configs = anonymizer.configs(self.chosen, key)

    def replace(self, text: str, spans: Sequence[Span]) -> str:
        """`text` with each of the disjoint, sorted `spans` replaced."""
        return self.anonymizer.anonymize(text, spans, self._configs)

    def __repr__(self) -> str:
        return f"Operators({self.chosen!r})"
