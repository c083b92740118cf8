"""Many tenants retrieving, grounding and ingesting at once, with zero cross-tenant results.

Eight workspaces in two organizations share KB ids and document ids, in the org
collections and in `kb_shared`. For a bounded time (`KBGATE_ISOLATION_CONCURRENCY_S`,
default 12 s) every workspace runs a retriever (foreign and own canaries, as the question
and as variations; grounding checks with foreign text; stats) and an ingester (rewriting
and deleting documents whose ids every workspace uses, each version with a fresh canary),
while strict isolation is toggled on random workspaces. Every canary is registered before
its document is sent, so at the end every response can be checked against every canary
that ever existed.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.safety.redaction import Redactor
from gateway.tools.probe.client import ClientTransport, Reply
from gateway.tools.probe.probe_topics import TOPICS
from gateway.tools.probe.world import KB_SETTINGS, new_token
from ingest.embedder.embedding import Embedder
from tests.isolation.conftest import PLATFORM_KEY, SUMMARIES, live_gateway, probe_transport

pytestmark = pytest.mark.anyio

DURATION_S = float(os.environ.get("KBGATE_ISOLATION_CONCURRENCY_S", "12"))
WORKSPACES = 8
KBS = {"kb": "org", "kb-s": "shared"}
CHURN_IDS = ("churn-0", "churn-1", "churn-2")


@dataclass
class Tenant:
    index: int
    org_id: str
    tenant_id: str
    key: str = ""
    written: dict[str, set[str]] = field(default_factory=lambda: {kb: set() for kb in KBS})


@dataclass
class Ledger:
    """Every canary ever planted (token -> tenant index) and every answer received."""

    owner: dict[str, int] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    answers: list[tuple[int, str, Reply]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def plant(self, tenant: Tenant, rng: random.Random) -> tuple[str, str]:
        token = new_token()
        statement, _ = TOPICS[rng.randrange(len(TOPICS))]
        canary = f"canary-{tenant.tenant_id}-{token}"
        self.owner[token] = tenant.index
        self.texts[token] = f"{statement} The reference code {canary} marks this note."
        return canary, self.texts[token]

    def foreign(self, tenant: Tenant, rng: random.Random) -> str:
        tokens = [t for t, owner in self.owner.items() if owner != tenant.index]
        return rng.choice(tokens)


async def _provision(client: ClientTransport, run: str) -> list[Tenant]:
    platform = PLATFORM_KEY
    tenants = []
    for org in range(2):
        org_id = f"{run}-o{org}"
        assert (
            await client.request("POST", "/v1/orgs", key=platform, body={"org_id": org_id})
        ).status == 201
    for index in range(WORKSPACES):
        tenant = Tenant(index, f"{run}-o{index % 2}", f"{run}-t{index}")
        path = f"/v1/orgs/{tenant.org_id}/workspaces"
        created = await client.request(
            "POST", path, key=platform, body={"tenant_id": tenant.tenant_id}
        )
        assert created.status == 201, created.text
        body = {
            "org_id": tenant.org_id,
            "tenant_id": tenant.tenant_id,
            "roles": ["admin", "ingest", "retrieve"],
            "clearance": "restricted",
        }
        issued = await client.request("POST", "/v1/keys", key=platform, body=body)
        tenant.key = str(issued.json()["key"])
        for kb, storage in KBS.items():
            put = await client.request(
                "PUT",
                f"/v1/knowledge-bases/{kb}",
                key=tenant.key,
                body={"storage": storage, **KB_SETTINGS},
            )
            assert put.status == 201, put.text
        agent = await client.request(
            "PUT", "/v1/agents/bot", key=tenant.key, body={"knowledge_base_ids": list(KBS)}
        )
        assert agent.status == 201, agent.text
        tenants.append(tenant)
    return tenants


async def _put(
    client: ClientTransport,
    ledger: Ledger,
    tenant: Tenant,
    rng: random.Random,
    *,
    kb: str,
    doc: str,
) -> None:
    canary, text = ledger.plant(tenant, rng)
    tenant.written[kb].add(doc)
    body = {"title": canary, "text": text, "classification": rng.choice(("public", "internal"))}
    reply = await client.request(
        "PUT", f"/v1/knowledge-bases/{kb}/documents/{doc}", key=tenant.key, body=body
    )
    ledger.answers.append((tenant.index, "PUT document", reply))
    if reply.status != 200:
        ledger.problems.append(
            f"{tenant.tenant_id} PUT {kb}/{doc}: {reply.status} {reply.text[:120]}"
        )


async def _ingester(
    client: ClientTransport, ledger: Ledger, tenant: Tenant, deadline: float
) -> None:
    rng = random.Random(1000 + tenant.index)
    while time.monotonic() < deadline:
        kb, doc = rng.choice(list(KBS)), rng.choice(CHURN_IDS)
        if rng.random() < 0.25:
            path = f"/v1/knowledge-bases/{kb}/documents/{doc}"
            reply = await client.request("DELETE", path, key=tenant.key, body=None)
            ledger.answers.append((tenant.index, "DELETE document", reply))
            if reply.status not in {200, 404}:
                ledger.problems.append(f"{tenant.tenant_id} DELETE: {reply.status}")
        else:
            await _put(client, ledger, tenant, rng, kb=kb, doc=doc)


async def _retriever(
    client: ClientTransport, ledger: Ledger, tenant: Tenant, deadline: float
) -> None:
    rng = random.Random(2000 + tenant.index)
    turn = 0
    while time.monotonic() < deadline:
        turn += 1
        foreign = f"canary-{ledger.foreign(tenant, rng)}"
        own = [t for t, owner in ledger.owner.items() if owner == tenant.index]
        if turn % 4 == 0:
            text = ledger.texts[ledger.foreign(tenant, rng)]
            request: tuple[str, str, Any] = (
                "POST",
                "/v1/grounding/check",
                {"agent_id": "bot", "answer": text},
            )
        elif turn % 4 == 1:
            request = ("GET", f"/v1/knowledge-bases/{rng.choice(list(KBS))}/stats", None)
        else:
            body = {
                "agent_id": "bot",
                "question": foreign,
                "variations": [rng.choice(own), foreign],
            }
            request = ("POST", "/v1/retrieve", body)
        method, path, body = request
        reply = await client.request(method, path, key=tenant.key, body=body)
        ledger.answers.append((tenant.index, f"{method} {path.split('/')[2]}", reply))
        if reply.status != 200:
            ledger.problems.append(
                f"{tenant.tenant_id} {method} {path}: {reply.status} {reply.text[:120]}"
            )
        elif path.endswith("/stats"):
            kb = path.split("/")[3]
            if int(reply.json()["documents"]) > len(tenant.written[kb]):
                ledger.problems.append(
                    f"{tenant.tenant_id} {kb} counts more documents than it wrote"
                )


async def _toggler(client: ClientTransport, tenants: list[Tenant], deadline: float) -> int:
    rng = random.Random(7)
    flips = 0
    while time.monotonic() < deadline:
        tenant = rng.choice(tenants)
        body = {"strict_rag_isolation": rng.random() < 0.5}
        reply = await client.request("PATCH", "/v1/workspace/settings", key=tenant.key, body=body)
        assert reply.status == 200, reply.text
        flips += 1
        await asyncio.sleep(0.3)
    return flips


async def test_many_tenants_at_once_never_see_each_others_documents(
    embedder: Embedder, redactor: Redactor, fast_root: Path
) -> None:
    """Eight workspaces retrieve, check grounding, read stats and rewrite/delete documents
    with shared ids concurrently while strict isolation flips: no response carries another
    workspace's canary, no stats count more than the workspace wrote, nothing errors."""
    data_dir = Path(tempfile.mkdtemp(prefix="concurrency-", dir=fast_root))
    run = f"conc-{new_token()[:6]}"
    async with live_gateway("edge", data_dir, embedder, redactor) as gw:
        client = probe_transport(gw.client)
        tenants = await _provision(client, run)
        ledger = Ledger()
        setup_rng = random.Random(1)
        for tenant in tenants:
            for kb in KBS:
                await _put(client, ledger, tenant, setup_rng, kb=kb, doc="doc-a")
        started = time.monotonic()
        deadline = started + DURATION_S
        workers = [
            *(_ingester(client, ledger, tenant, deadline) for tenant in tenants),
            *(_retriever(client, ledger, tenant, deadline) for tenant in tenants),
        ]
        *_, flips = await asyncio.gather(*workers, _toggler(client, tenants, deadline))
        elapsed = time.monotonic() - started

    pattern = re.compile("|".join(map(re.escape, ledger.owner)))
    crossed = [
        f"{tenants[index].tenant_id} got {ledger.owner[token]}'s canary via {what}"
        for index, what, reply in ledger.answers
        for token in set(pattern.findall(reply.text))
        if ledger.owner[token] != index
    ]
    kinds = Counter(what for _, what, _ in ledger.answers)
    SUMMARIES.append(
        {
            "suite": "concurrency",
            "line": (
                f"{len(ledger.answers)} responses from {WORKSPACES} workspaces in {elapsed:.1f} s "
                f"({dict(kinds)}), {flips} strict-isolation flips, {len(ledger.owner)} canaries, "
                f"{len(crossed)} cross-tenant results"
            ),
        }
    )
    assert not crossed, "\n".join(crossed[:20])
    assert not ledger.problems, "\n".join(ledger.problems[:20])
    assert kinds["POST retrieve"] >= 2 * WORKSPACES
    assert kinds["PUT document"] >= 2 * WORKSPACES
