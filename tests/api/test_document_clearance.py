"""Clearance and document management over HTTP: only a key cleared for every label may
list, count, write or delete documents, and a refusal says nothing about documents."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.access.auth import hash_key, new_key_id, new_secret
from settings.records import ApiKey
from tests.api.conftest import Gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

RESTRICTED_TEXT = "The merger with Globex closes on the ninth of March at forty dollars a share."


async def _stored_key(gw: Gateway, tenant_id: str, roles: list[str], clearance: str) -> str:
    """A key as an earlier release could issue it (below `restricted` with ingest/admin)."""
    secret = new_secret()
    await gw.services.store.create_api_key(
        ApiKey(
            key_id=new_key_id(),
            key_hash=hash_key(secret),
            org_id="acme",
            tenant_id=tenant_id,
            roles=roles,
            clearance=clearance,
            created_at=datetime.now(UTC).isoformat(),
        )
    )
    return secret


async def test_admin_and_ingest_keys_below_restricted_cannot_be_issued(gateway: Gateway) -> None:
    """Issuing an admin or ingest key with a clearance below `restricted` is a 422 naming
    `clearance`; retrieve-only keys keep any clearance."""
    await provision(gateway, "acme", "alpha")
    for roles in (["ingest"], ["admin"], ["admin", "retrieve"]):
        refused = await gateway.client.post(
            "/v1/keys",
            json={"org_id": "acme", "tenant_id": "alpha", "roles": roles, "clearance": "public"},
            headers=gateway.platform,
        )
        assert refused.status_code == 422
        assert refused.json()["field"] == "clearance"
    reader = await gateway.client.post(
        "/v1/keys",
        json={"org_id": "acme", "tenant_id": "alpha", "roles": ["retrieve"], "clearance": "public"},
        headers=gateway.platform,
    )
    assert reader.status_code == 201


async def test_a_key_below_restricted_manages_no_document_and_learns_nothing(
    gateway: Gateway,
) -> None:
    """A public-clearance ingest/admin key (issued by an earlier release) gets the same 403
    on listing, stats, PUT and DELETE whether or not a restricted document exists, cannot
    confirm a guessed text or delete the document, and the console's document view
    refuses it too."""
    alpha = await provision(gateway, "acme", "alpha")
    await alpha.kb("kb")
    await alpha.kb("empty")
    await alpha.doc("kb", "secret", RESTRICTED_TEXT, classification="restricted")
    low = {"Authorization": f"Bearer {await _stored_key(gateway, 'alpha', ['ingest'], 'public')}"}

    answers = {}
    for kb_id in ("kb", "empty"):
        base = f"/v1/knowledge-bases/{kb_id}"
        answers[kb_id] = [
            await gateway.client.get(f"{base}/documents", headers=low),
            await gateway.client.get(f"{base}/stats", headers=low),
            await gateway.client.put(
                f"{base}/documents/secret",
                json={"text": RESTRICTED_TEXT, "classification": "restricted"},
                headers=low,
            ),
            await gateway.client.delete(f"{base}/documents/secret", headers=low),
        ]
    for here, there in zip(answers["kb"], answers["empty"], strict=True):
        assert here.status_code == there.status_code == 403
        assert here.json() == there.json()
        assert "secret" not in here.text

    still = await gateway.client.get("/v1/knowledge-bases/kb/documents", headers=alpha.headers())
    assert [doc["document_id"] for doc in still.json()["documents"]] == ["secret"]

    admin_secret = await _stored_key(gateway, "alpha", ["admin"], "internal")
    gateway.client.cookies.clear()
    signed = await gateway.client.post(
        "/console/login", data={"key": admin_secret}, follow_redirects=False
    )
    assert signed.status_code == 303
    page = await gateway.client.get("/console/knowledge-bases")
    assert page.status_code == 403
    assert "secret" not in page.text
