"""The material an evaluation brings when the golden set does not: off-topic questions
(cooking, sport, travel, gardening, ...) and statements from those domains, shipped in
`gateway/calibration/data/` and read when an evaluation needs them, never at import."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

OFF_TOPIC_FILE = "offtopic_questions.jsonl"
OTHER_DOMAIN_FILE = "other_domain_statements.jsonl"


@cache
def _texts(name: str) -> tuple[str, ...]:
    raw = (resources.files("gateway.calibration") / "data" / name).read_text("utf-8")
    return tuple(str(json.loads(line)["text"]) for line in raw.splitlines() if line.strip())


def off_topic_questions() -> tuple[str, ...]:
    """The built-in off-topic questions (50)."""
    return _texts(OFF_TOPIC_FILE)


def other_domain_statements() -> tuple[str, ...]:
    """Statements no knowledge base about anything else supports (40): the material of
    the unsupported answers a grounding floor is calibrated against."""
    return _texts(OTHER_DOMAIN_FILE)
