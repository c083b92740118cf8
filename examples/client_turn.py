"""A chat backend's turn with kbgate_client: evidence for the question, the model's
answer (your LLM call), then its citations and grounding checked.

    KBGATE_URL=http://localhost:8080 KBGATE_KEY=... python examples/client_turn.py
"""

from __future__ import annotations

import os

from kbgate_client import Client, NotFoundError
from kbgate_client.models import CitationIn


def answer_with(context: str, question: str) -> tuple[str, list[str]]:
    """Your model: an answer from the fenced context, and the passage ids it cites."""
    return f"(an answer to {question!r} from {len(context)} characters of evidence)", []


def main() -> None:
    with Client(os.environ["KBGATE_URL"], os.environ["KBGATE_KEY"]) as kbgate:
        try:
            turn = kbgate.retrieve("support-bot", "How do I rotate an API key?")
        except NotFoundError as missing:
            print(f"no such agent: {missing.problem.detail}")
            return
        if turn.abstained:
            print(f"nothing relevant ({turn.reason}): say so instead of guessing")
            return
        answer, cited = answer_with(turn.context, "How do I rotate an API key?")
        verdicts = kbgate.verify_citations(turn.turn_id, [CitationIn(passage_id=p) for p in cited])
        grounding = kbgate.check_grounding("support-bot", answer)
        print(answer, [v.passage_id for v in verdicts.invalid], grounding.status)


if __name__ == "__main__":
    main()
