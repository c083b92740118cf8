"""A LangChain retriever over kbgate (the `langchain` extra).

    retriever = KbgateRetriever(client=Client(url, key), agent_id="support-bot")
    documents = retriever.invoke("How do I rotate a key?")

Each document is one passage: its `page_content` the passage as the gateway fenced it
(`<evidence …>` block, text escaped; `fenced=False` for the plain text), its `id` the
passage id, its metadata kbgate's ids, scores and the turn id. An abstaining turn gives no
documents, or raises `AbstainedError` with `on_abstain="raise"`. `verify_citations` and
`check_grounding` check an answer built on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from kbgate_client._async_client import AsyncClient
from kbgate_client._sync_client import Client
from kbgate_client.evidence import AbstainedError, cited, passage_content, passage_metadata
from kbgate_client.models import GroundingOut, RetrieveOut, VerifyOut

__all__ = ["AbstainedError", "KbgateRetriever"]


class KbgateRetriever(BaseRetriever):
    """kbgate's evidence for a question, as LangChain documents (see the module docstring).
    `async_client`, when given, serves `ainvoke`; otherwise it runs `client` in a thread."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client
    agent_id: str
    async_client: AsyncClient | None = None
    fenced: bool = True
    on_abstain: Literal["empty", "raise"] = "empty"

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(self.client.retrieve(self.agent_id, query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        return self._documents(await self.async_client.retrieve(self.agent_id, query))

    def _documents(self, turn: RetrieveOut) -> list[Document]:
        if turn.abstained and self.on_abstain == "raise":
            raise AbstainedError(turn)
        return [
            Document(
                id=passage.passage_id,
                page_content=passage_content(turn, passage, fenced=self.fenced),
                metadata=passage_metadata(turn, passage),
            )
            for passage in turn.passages
        ]

    def verify_citations(self, documents: Sequence[Document]) -> VerifyOut:
        """Whether each document cited is one the turn returned (citations of one turn)."""
        turn_id, citations = cited([document.metadata for document in documents])
        return self.client.verify_citations(turn_id, citations)

    def check_grounding(
        self, answer: str, *, mode: Literal["whole", "sentences"] = "whole"
    ) -> GroundingOut:
        """Whether an answer is supported by the agent's knowledge bases."""
        return self.client.check_grounding(self.agent_id, answer, mode=mode)
