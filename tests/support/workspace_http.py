"""Provisioning a workspace over the HTTP API of a running gateway (tests and benches)."""

from __future__ import annotations

import httpx

ALL_ROLES = ("admin", "ingest", "retrieve")


def workspace_headers(
    client: httpx.Client,
    platform_key: str,
    org_id: str,
    tenant_id: str,
    roles: tuple[str, ...] = ALL_ROLES,
    *,
    created_at: str | None = None,
) -> dict[str, str]:
    """The org (kept when it exists), a new workspace and a key with `roles`: the key's
    Authorization header."""
    platform = {"Authorization": f"Bearer {platform_key}"}
    org = client.post("/v1/orgs", json={"org_id": org_id}, headers=platform)
    assert org.status_code in {201, 409}, org.text
    body = {"tenant_id": tenant_id}
    if created_at is not None:
        body["created_at"] = created_at
    workspace = client.post(f"/v1/orgs/{org_id}/workspaces", json=body, headers=platform)
    assert workspace.status_code == 201, workspace.text
    key = client.post(
        "/v1/keys",
        json={"org_id": org_id, "tenant_id": tenant_id, "roles": list(roles)},
        headers=platform,
    )
    assert key.status_code == 201, key.text
    return {"Authorization": f"Bearer {key.json()['key']}"}
