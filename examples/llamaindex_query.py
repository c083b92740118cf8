"""kbgate as a LlamaIndex retriever behind a query engine
(`pip install 'kbgate-client[llamaindex]'`).

    KBGATE_URL=... KBGATE_KEY=... python examples/llamaindex_query.py
"""

from __future__ import annotations

import os

from kbgate_client import Client
from kbgate_client.llamaindex import KbgateRetriever
from llama_index.core.llms import LLM, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine


def engine(retriever: KbgateRetriever, llm: LLM) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(retriever, llm=llm)


def main() -> None:
    with Client(os.environ["KBGATE_URL"], os.environ["KBGATE_KEY"]) as kbgate:
        retriever = KbgateRetriever(kbgate, "support-bot")
        response = engine(retriever, MockLLM()).query("How do I rotate an API key?")  # any LLM
        print(response, [source.node.node_id for source in response.source_nodes])
        print(retriever.check_grounding(str(response)).status)


if __name__ == "__main__":
    main()
