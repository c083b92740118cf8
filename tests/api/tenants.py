"""Provisioning helpers for API tests: orgs, workspaces, keys, KBs, agents, documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.api.conftest import Gateway


@dataclass
class Tenant:
    """One workspace with a key per role (and optional extra keys by name)."""

    gw: Gateway
    org_id: str
    tenant_id: str
    keys: dict[str, str] = field(default_factory=dict)

    def headers(self, key: str = "all") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[key]}"}

    async def issue(self, name: str, roles: list[str], clearance: str | None = None) -> str:
        body: dict[str, Any] = {"org_id": self.org_id, "tenant_id": self.tenant_id, "roles": roles}
        if clearance is not None:
            body["clearance"] = clearance
        response = await self.gw.client.post("/v1/keys", json=body, headers=self.gw.platform)
        assert response.status_code == 201, response.text
        self.keys[name] = response.json()["key"]
        return self.keys[name]

    async def kb(self, kb_id: str, **settings: Any) -> dict[str, Any]:
        response = await self.gw.client.put(
            f"/v1/knowledge-bases/{kb_id}", json=settings, headers=self.headers()
        )
        assert response.status_code in {200, 201}, response.text
        return dict(response.json())

    async def agent(self, agent_id: str, kb_ids: list[str], **settings: Any) -> dict[str, Any]:
        response = await self.gw.client.put(
            f"/v1/agents/{agent_id}",
            json={"knowledge_base_ids": kb_ids, **settings},
            headers=self.headers(),
        )
        assert response.status_code in {200, 201}, response.text
        return dict(response.json())

    async def doc(
        self, kb_id: str, doc_id: str, text: str, classification: str = "internal", title: str = ""
    ) -> dict[str, Any]:
        response = await self.gw.client.put(
            f"/v1/knowledge-bases/{kb_id}/documents/{doc_id}",
            json={"text": text, "classification": classification, "title": title},
            headers=self.headers(),
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def retrieve(self, agent_id: str, question: str, key: str = "all", **extra: Any) -> Any:
        return await self.gw.client.post(
            "/v1/retrieve",
            json={"agent_id": agent_id, "question": question, **extra},
            headers=self.headers(key),
        )

    async def settings(self, **changes: Any) -> dict[str, Any]:
        response = await self.gw.client.patch(
            "/v1/workspace/settings", json=changes, headers=self.headers()
        )
        assert response.status_code == 200, response.text
        return dict(response.json())


async def provision(
    gw: Gateway,
    org_id: str,
    tenant_id: str,
    *,
    created_at: str | None = None,
    clearance: str = "restricted",
) -> Tenant:
    """An org (if new), a workspace, and an all-roles key named "all"."""
    await gw.client.post("/v1/orgs", json={"org_id": org_id}, headers=gw.platform)
    body: dict[str, Any] = {"tenant_id": tenant_id}
    if created_at is not None:
        body["created_at"] = created_at
    response = await gw.client.post(f"/v1/orgs/{org_id}/workspaces", json=body, headers=gw.platform)
    assert response.status_code == 201, response.text
    tenant = Tenant(gw, org_id, tenant_id)
    await tenant.issue("all", ["admin", "ingest", "retrieve"], clearance)
    return tenant


#: One short document that any agent can answer from.
TEA = "Green tea contains catechins and a moderate amount of caffeine."


async def tea_workspace(gw: Gateway, name: str) -> Tenant:
    """A workspace `name` of org acme with KB `kb` holding TEA and agent `bot` over it."""
    tenant = await provision(gw, "acme", name)
    await tenant.kb("kb")
    await tenant.doc("kb", "tea", TEA)
    await tenant.agent("bot", ["kb"])
    return tenant
