"""Screening: a document is indexed only with a known access classification.

A document without one, or with an unknown label, is held back: not indexed,
counted per knowledge base, and answered `held_back` — never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.payload import Classification


@dataclass(frozen=True, slots=True)
class Screened:
    """The verdict on one document: its label, or why it was held back."""

    classification: Classification | None
    reason: str | None = None

    @property
    def held_back(self) -> bool:
        return self.classification is None


def screen(label: object) -> Screened:
    """Accept exactly one of the four labels (case and surrounding space ignored)."""
    if label is None:
        return Screened(None, "missing_classification")
    if not isinstance(label, str):
        return Screened(None, "unknown_classification")
    try:
        return Screened(Classification(label.strip().lower()))
    except ValueError:
        return Screened(None, "unknown_classification")
