"""A chat backend's ways into kbgate, each against a real `kbgate serve` process (real
model, Qdrant Edge, SQLite) with one workspace's retrieve key:

- the sync client: a turn, citations and grounding, typed;
- LangChain (langchain-core): `KbgateRetriever.invoke`/`ainvoke` give one Document per
  passage (fenced text, kbgate's ids and scores, the turn id), an off-topic question none
  (or AbstainedError), the documents' citations verify, and a chain
  (retriever | prompt | a fake LLM) carries the fenced evidence into the model's prompt;
- LlamaIndex (llama-index-core): `KbgateRetriever.retrieve`/`aretrieve` give scored nodes,
  and a `RetrieverQueryEngine` (mock LLM) answers with kbgate's passages as its sources;
- MCP (the official SDK's client): `kbgate mcp` over stdio and over streamable HTTP lists
  the three tools; `retrieve` returns the fenced context and passage ids, `verify_citations`
  and `check_grounding` answer, and a refusal (unknown agent) is a tool error without the key.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kbgate_client import AsyncClient, Client
from kbgate_client.evidence import AbstainedError
from kbgate_client.models import BulkDocument, CitationIn, CreateKey, PutAgent, PutKnowledgeBase

from tests.support.gateway_process import GatewayProcess
from tests.support.redis_server import free_port

PLATFORM_KEY = "chat-backends-platform-key-0001"
QUESTION = "What guides ships past the reef at night?"
OFF_TOPIC = "Which sourdough starter ferments fastest in a cold kitchen?"
DOCUMENTS = [
    BulkDocument(
        document_id="lights/beacon",
        title="Beacon",
        text="The lighthouse beacon guides ships past the reef at night. Its lamp turns "
        "every ten seconds and can be seen twenty miles out.",
        classification="internal",
    ),
    BulkDocument(
        document_id="lights/keeper",
        title="Keeper",
        text="The keeper climbs the tower at dusk to light the lamp and winds the clockwork "
        "that turns the lens until dawn.",
        classification="internal",
    ),
]


@dataclass(frozen=True)
class Workspace:
    url: str
    key: str  # retrieve role only
    agent: str = "bot"


@pytest.fixture(scope="module")
def workspace(
    tmp_path_factory: pytest.TempPathFactory, model_dir: Path, embedder: Any
) -> Iterator[Workspace]:
    """A gateway process with one workspace: a KB of two documents, an agent, a retrieve key."""
    assert embedder.dense_dim > 0  # the model folder is assembled before the process starts
    env = {
        "KBGATE_EMBEDDING_THREADS": "1",
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
    }
    data = tmp_path_factory.mktemp("chat-backends") / "data"
    with GatewayProcess(data, env=env) as gateway, Client(gateway.url, PLATFORM_KEY) as platform:
        platform.create_org("acme")
        platform.create_workspace("acme", "ws")
        roles = ["admin", "ingest"]
        admin = platform.with_key(
            platform.create_key(CreateKey(org_id="acme", tenant_id="ws", roles=roles)).key
        )
        admin.put_knowledge_base("lights", PutKnowledgeBase(name="Lights"))
        assert {r.status for r in admin.put_documents("lights", DOCUMENTS)} == {"indexed"}
        admin.put_agent("bot", PutAgent(knowledge_base_ids=["lights"]))
        reader = CreateKey(org_id="acme", tenant_id="ws", roles=["retrieve"])
        yield Workspace(gateway.url, platform.create_key(reader).key)


def test_the_sync_client_answers_a_turn_its_citations_and_grounding(workspace: Workspace) -> None:
    """A turn over real HTTP: the beacon passage first, fenced in `context`; its citation
    (with a quote of it) valid; the grounding check answers with the KB's floor."""
    with Client(workspace.url, workspace.key) as kbgate:
        turn = kbgate.retrieve(workspace.agent, QUESTION)
        assert turn.passages[0].document_id == "lights/beacon"
        assert f'<evidence id="{turn.passages[0].passage_id}"' in turn.context
        quoted = CitationIn(passage_id=turn.passages[0].passage_id, quote="guides ships")
        assert [v.passage_id for v in kbgate.verify_citations(turn.turn_id, [quoted]).valid] == [
            turn.passages[0].passage_id
        ]
        grounded = kbgate.check_grounding(workspace.agent, "A beacon guides ships past reefs.")
        assert grounded.status in {"supported", "flagged"}


# ---- LangChain -------------------------------------------------------------------------


def test_langchain_retriever_gives_fenced_documents_with_kbgate_ids(workspace: Workspace) -> None:
    """`invoke`: one Document per passage, its id the passage id, its content the fenced
    block, its metadata ids, scores and the turn; the citations of the documents verify and
    the grounding helper answers. An off-topic question gives no document, or raises
    AbstainedError when asked to."""
    from kbgate_client.langchain import KbgateRetriever

    with Client(workspace.url, workspace.key) as kbgate:
        retriever = KbgateRetriever(client=kbgate, agent_id=workspace.agent)
        documents = retriever.invoke(QUESTION)
        first = documents[0]
        assert first.metadata["document_id"] == "lights/beacon"
        assert first.id == first.metadata["passage_id"]
        assert first.page_content.startswith(f'<evidence id="{first.id}"')
        assert "guides ships past the reef" in first.page_content
        assert first.metadata["score"] > 0
        assert first.metadata["knowledge_base_id"] == "lights"
        verdicts = retriever.verify_citations(documents)
        assert {v.passage_id for v in verdicts.valid} == {d.id for d in documents}
        assert retriever.check_grounding("The beacon guides ships.").floor > 0
        assert retriever.invoke(OFF_TOPIC) == []
        strict = KbgateRetriever(client=kbgate, agent_id=workspace.agent, on_abstain="raise")
        with pytest.raises(AbstainedError) as abstained:
            strict.invoke(OFF_TOPIC)
        assert abstained.value.reason == "nothing_above_floors"


@pytest.mark.anyio
async def test_langchain_retriever_answers_async_and_feeds_a_chain(workspace: Workspace) -> None:
    """`ainvoke` over the async client gives the same documents; in a chain
    (retriever | prompt | fake LLM) the model's prompt holds the fenced evidence."""
    from kbgate_client.langchain import KbgateRetriever
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    prompts: list[str] = []

    def record(prompt: Any) -> Any:
        prompts.append(prompt.to_string())
        return prompt

    with Client(workspace.url, workspace.key) as kbgate:
        async with AsyncClient(workspace.url, workspace.key) as asynchronous:
            retriever = KbgateRetriever(
                client=kbgate, async_client=asynchronous, agent_id=workspace.agent
            )
            documents = await retriever.ainvoke(QUESTION)
            assert documents[0].metadata["document_id"] == "lights/beacon"
            chain = (
                {
                    "evidence": retriever | RunnableLambda(_joined),
                    "question": RunnablePassthrough(),
                }
                | PromptTemplate.from_template("{evidence}\n\nQuestion: {question}")
                | RunnableLambda(record)
                | FakeListLLM(responses=["The beacon."])
            )
            assert await chain.ainvoke(QUESTION) == "The beacon."
    assert '<evidence id="' in prompts[0]
    assert "Question: " + QUESTION in prompts[0]


def _joined(documents: list[Any]) -> str:
    return "\n\n".join(document.page_content for document in documents)


# ---- LlamaIndex ------------------------------------------------------------------------


def test_llamaindex_retriever_gives_scored_nodes_to_a_query_engine(workspace: Workspace) -> None:
    """`retrieve`: one node per passage, its id the passage id, its score kbgate's; a
    RetrieverQueryEngine (mock LLM) answers with them as its source nodes; the nodes'
    citations verify; an off-topic question gives no node."""
    from kbgate_client.llamaindex import KbgateRetriever
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    with Client(workspace.url, workspace.key) as kbgate:
        retriever = KbgateRetriever(kbgate, workspace.agent)
        nodes = retriever.retrieve(QUESTION)
        assert nodes[0].node.metadata["document_id"] == "lights/beacon"
        assert nodes[0].node.node_id == nodes[0].node.metadata["passage_id"]
        assert nodes[0].score == pytest.approx(nodes[0].node.metadata["score"])
        assert nodes[0].node.get_content().startswith("<evidence id=")
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
        response = engine.query(QUESTION)
        assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in nodes]
        assert {v.passage_id for v in retriever.verify_citations(nodes).valid} == {
            n.node.node_id for n in nodes
        }
        assert retriever.retrieve(OFF_TOPIC) == []


@pytest.mark.anyio
async def test_llamaindex_retriever_answers_async(workspace: Workspace) -> None:
    """`aretrieve` over the async client gives the same passages as `retrieve`."""
    from kbgate_client.llamaindex import KbgateRetriever

    with Client(workspace.url, workspace.key) as kbgate:
        async with AsyncClient(workspace.url, workspace.key) as asynchronous:
            retriever = KbgateRetriever(kbgate, workspace.agent, async_client=asynchronous)
            nodes = await retriever.aretrieve(QUESTION)
    assert nodes[0].node.metadata["document_id"] == "lights/beacon"


# ---- MCP ------------------------------------------------------------------------------


def _mcp_env(workspace: Workspace) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
        "KBGATE_URL": workspace.url,
        "KBGATE_KEY": workspace.key,
        "KBGATE_AGENT": workspace.agent,
    }


async def _exercise_mcp(client: Any, workspace: Workspace) -> None:
    """The three tools through an MCP client session, and a refusal."""
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools == {"retrieve", "verify_citations", "check_grounding"}
    turn = (await client.call_tool("retrieve", {"question": QUESTION})).structured_content
    assert turn["abstained"] is False
    assert turn["passages"][0]["document_id"] == "lights/beacon"
    assert turn["context"].count("<evidence id=") == len(turn["passages"])
    cited = [{"passage_id": turn["passages"][0]["passage_id"], "quote": "guides ships"}]
    verdicts = await client.call_tool(
        "verify_citations", {"turn_id": turn["turn_id"], "citations": cited}
    )
    assert [v["passage_id"] for v in verdicts.structured_content["valid"]] == [
        cited[0]["passage_id"]
    ]
    grounded = await client.call_tool("check_grounding", {"answer": "The beacon guides ships."})
    assert grounded.structured_content["status"] in {"supported", "flagged"}
    off_topic = await client.call_tool("retrieve", {"question": OFF_TOPIC})
    assert off_topic.structured_content["abstained"] is True
    assert off_topic.structured_content["reason"] == "nothing_above_floors"
    refused = await client.call_tool("retrieve", {"question": QUESTION, "agent_id": "ghost"})
    assert refused.is_error
    text = " ".join(getattr(part, "text", "") for part in refused.content)
    assert "404" in text
    assert workspace.key not in text


@pytest.mark.anyio
async def test_mcp_server_over_stdio(workspace: Workspace) -> None:
    """`kbgate mcp` as a subprocess of the SDK's stdio client."""
    from mcp import Client as McpClient
    from mcp import StdioServerParameters

    kbgate = str(Path(sys.executable).with_name("kbgate"))
    server = StdioServerParameters(command=kbgate, args=["mcp"], env=_mcp_env(workspace))
    async with McpClient(server) as client:
        await _exercise_mcp(client, workspace)


@pytest.fixture
def mcp_http_url(workspace: Workspace) -> Iterator[str]:
    """`kbgate mcp --transport streamable-http` on a loopback port: its endpoint."""
    port = free_port()
    kbgate = str(Path(sys.executable).with_name("kbgate"))
    command = [kbgate, "mcp", "--transport", "streamable-http", "--port", str(port)]
    server = subprocess.Popen(  # noqa: S603 — our own console script, fixed arguments
        command, env=_mcp_env(workspace), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        _wait_for_port(port, server)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(timeout=15)


@pytest.mark.anyio
async def test_mcp_server_over_streamable_http(workspace: Workspace, mcp_http_url: str) -> None:
    """`kbgate mcp --transport streamable-http` through the SDK's streamable HTTP client."""
    from mcp import Client as McpClient

    async with McpClient(mcp_http_url) as client:
        await _exercise_mcp(client, workspace)


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kbgate mcp exited: {process.stderr and process.stderr.read()!r}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("kbgate mcp did not listen in time")
