"""A turn's context budget: the chosen passages, best first, while they fit.

A passage's size is its text and title as returned (redacted), in characters or in
tokens by a fixed offline estimate (`estimated_tokens`: one token per 4 characters,
rounded up; no tokenizer is loaded, so the figure is the same for every model and
release). Passages are taken in rank order; one that no longer fits is left out and the
next smaller ones may still fit. What was sent and left out is reported as counts only.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

Item = TypeVar("Item")

#: characters per token of the offline estimate
CHARS_PER_TOKEN = 4


class BudgetUnit(enum.StrEnum):
    TOKENS = "tokens"
    CHARACTERS = "characters"


def estimated_tokens(text: str) -> int:
    """The offline token estimate: `ceil(len(text) / 4)`."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class ContextBudget:
    unit: BudgetUnit
    limit: int

    def size(self, text: str) -> int:
        return estimated_tokens(text) if self.unit is BudgetUnit.TOKENS else len(text)


@dataclass(frozen=True, slots=True)
class Filled:
    """What a budget kept, and counts of what it sent and left out (in its unit)."""

    sent: int
    left_out: int
    passages_left_out: int


def fill(
    budget: ContextBudget, items: Sequence[Item], text_of: Callable[[Item], str]
) -> tuple[list[Item], Filled]:
    """The items that fit, best first (the order given), and the counts."""
    kept: list[Item] = []
    used = left = dropped = 0
    for item in items:
        size = budget.size(text_of(item))
        if used + size <= budget.limit:
            kept.append(item)
            used += size
        else:
            left += size
            dropped += 1
    return kept, Filled(sent=used, left_out=left, passages_left_out=dropped)
