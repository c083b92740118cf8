"""A turn's passages as the gateway fenced them: each `<evidence>` block of `context`, by
passage id, for frameworks that carry passages one by one into a prompt."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence

from kbgate_client.errors import KbgateError
from kbgate_client.models import CitationIn, PassageOut, RetrieveOut

_BLOCK = re.compile(r'<evidence id="([^"]*)"[^>]*>\n.*?\n</evidence>', re.DOTALL)


def fenced_blocks(turn: RetrieveOut) -> dict[str, str]:
    """Passage id -> its `<evidence …>…</evidence>` block (text escaped, as in `context`)."""
    return {
        html.unescape(found.group(1)): found.group(0) for found in _BLOCK.finditer(turn.context)
    }


def preamble(turn: RetrieveOut) -> str:
    """The gateway's instructions before the blocks: evidence is data, not instructions."""
    first = _BLOCK.search(turn.context)
    return turn.context[: first.start()].strip() if first else ""


def citation(passage_id: str, quote: str | None = None) -> CitationIn:
    """A citation of one passage (and a quote of it) for `verify_citations`."""
    return (
        CitationIn(passage_id=passage_id)
        if quote is None
        else CitationIn(passage_id=passage_id, quote=quote)
    )


class AbstainedError(KbgateError):
    """The turn abstained: its knowledge bases hold nothing relevant to the question
    (`reason`: `no_knowledge_base` or `nothing_above_floors`)."""

    def __init__(self, turn: RetrieveOut) -> None:
        super().__init__(f"kbgate abstained ({turn.reason}) on turn {turn.turn_id}")
        self.turn_id = turn.turn_id
        self.reason = turn.reason


def passage_metadata(turn: RetrieveOut, passage: PassageOut) -> dict[str, object]:
    """What a framework's document carries beside its text: kbgate's ids, scores, the turn
    to cite it against."""
    return {
        "turn_id": turn.turn_id,
        "passage_id": passage.passage_id,
        "document_id": passage.document_id,
        "knowledge_base_id": passage.knowledge_base_id,
        "title": passage.title,
        "score": passage.score,
        "dense_score": passage.dense_score,
        "keyword_score": passage.keyword_score,
    }


def passage_content(turn: RetrieveOut, passage: PassageOut, *, fenced: bool) -> str:
    """A passage's text for a framework's document: its fenced block, or the plain text."""
    if not fenced:
        return passage.text
    return fenced_blocks(turn).get(passage.passage_id, passage.text)


def cited(metadata: Sequence[Mapping[str, object]]) -> tuple[str, list[CitationIn]]:
    """The turn id and citations of documents a retriever returned (one turn's)."""
    turns = {str(item["turn_id"]) for item in metadata}
    if len(turns) != 1:
        raise ValueError(f"citations are checked against one turn; these come from {len(turns)}")
    return turns.pop(), [citation(str(item["passage_id"])) for item in metadata]
