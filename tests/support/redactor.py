"""One Redactor (presidio and the NER pipeline, loaded offline) per test process: gateways
started by tests share it, as every request of one gateway does."""

from __future__ import annotations

import functools

from gateway.safety.redaction import Redactor
from ingest.language import LanguageDetector


@functools.cache
def shared_redactor() -> Redactor:
    """Built on first use; loading the NER pipeline is the slow part."""
    return Redactor.build()


@functools.cache
def shared_languages() -> LanguageDetector:
    """The language detector, its model read once for the test session."""
    return LanguageDetector.loaded()
