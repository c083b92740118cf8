"""A LlamaIndex retriever over kbgate (the `llamaindex` extra).

    retriever = KbgateRetriever(Client(url, key), agent_id="support-bot")
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

Each node is one passage: its text the passage as the gateway fenced it (`<evidence …>`
block; `fenced=False` for the plain text), its id the passage id, its score kbgate's fused
score, its metadata kbgate's ids, scores and the turn id. An abstaining turn gives no
nodes, or raises `AbstainedError` with `on_abstain="raise"`. `verify_citations` and
`check_grounding` check an answer built on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from kbgate_client._async_client import AsyncClient
from kbgate_client._sync_client import Client
from kbgate_client.evidence import AbstainedError, cited, passage_content, passage_metadata
from kbgate_client.models import GroundingOut, RetrieveOut, VerifyOut

__all__ = ["AbstainedError", "KbgateRetriever"]

#: metadata a model's prompt need not see (it is in the fenced text, or only for citing)
_HIDDEN_FROM_MODEL = ["turn_id", "passage_id", "dense_score", "keyword_score", "score"]


class KbgateRetriever(BaseRetriever):
    """kbgate's evidence for a question, as LlamaIndex nodes (see the module docstring).
    `async_client`, when given, serves `aretrieve`; otherwise it calls `client`."""

    def __init__(
        self,
        client: Client,
        agent_id: str,
        *,
        async_client: AsyncClient | None = None,
        fenced: bool = True,
        on_abstain: Literal["empty", "raise"] = "empty",
    ) -> None:
        super().__init__()
        self.client = client
        self.async_client = async_client
        self.agent_id = agent_id
        self.fenced = fenced
        self.on_abstain = on_abstain

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self.client.retrieve(self.agent_id, query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.async_client is None:
            return self._retrieve(query_bundle)
        turn = await self.async_client.retrieve(self.agent_id, query_bundle.query_str)
        return self._nodes(turn)

    def _nodes(self, turn: RetrieveOut) -> list[NodeWithScore]:
        if turn.abstained and self.on_abstain == "raise":
            raise AbstainedError(turn)
        return [
            NodeWithScore(
                node=TextNode(
                    id_=passage.passage_id,
                    text=passage_content(turn, passage, fenced=self.fenced),
                    metadata=passage_metadata(turn, passage),
                    excluded_llm_metadata_keys=list(_HIDDEN_FROM_MODEL),
                    excluded_embed_metadata_keys=list(_HIDDEN_FROM_MODEL),
                ),
                score=passage.score,
            )
            for passage in turn.passages
        ]

    def verify_citations(self, nodes: Sequence[NodeWithScore]) -> VerifyOut:
        """Whether each node cited is one the turn returned (nodes of one turn)."""
        turn_id, citations = cited([node.node.metadata for node in nodes])
        return self.client.verify_citations(turn_id, citations)

    def check_grounding(
        self, answer: str, *, mode: Literal["whole", "sentences"] = "whole"
    ) -> GroundingOut:
        """Whether an answer is supported by the agent's knowledge bases."""
        return self.client.check_grounding(self.agent_id, answer, mode=mode)
