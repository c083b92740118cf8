"""Key lifecycle over HTTP: listing, revocation, expiry, the key history, platform-key
overlap, and console sessions ending with their key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from ingest.embedder.embedding import Embedder
from tests.api.conftest import PLATFORM_KEY, Gateway, start_gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

PREVIOUS_PLATFORM_KEY = "previous-platform-key-0123456789"


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_keys_are_listed_as_metadata_only_and_per_workspace(gateway: Gateway) -> None:
    """The platform lists every workspace's keys (filterable); a workspace admin lists only
    its own; no listing carries a secret or a hash; last use is recorded."""
    alpha = await provision(gateway, "acme", "alpha")
    beta = await provision(gateway, "acme", "beta")
    await alpha.issue("reader", ["retrieve"])
    used = await gateway.client.get("/v1/workspace/settings", headers=alpha.headers())
    assert used.status_code == 200
    await asyncio.sleep(0.2)  # the last-use write runs beside the request

    everything = await gateway.client.get("/v1/keys", headers=gateway.platform)
    assert everything.status_code == 200
    tenants = {key["tenant_id"] for key in everything.json()["keys"]}
    assert {"alpha", "beta"} <= tenants
    only_beta = await gateway.client.get(
        "/v1/keys", params={"tenant_id": "beta"}, headers=gateway.platform
    )
    assert {key["tenant_id"] for key in only_beta.json()["keys"]} == {"beta"}

    own = await gateway.client.get("/v1/keys", headers=alpha.headers())
    assert own.status_code == 200
    rows = own.json()["keys"]
    assert {row["tenant_id"] for row in rows} == {"alpha"}
    assert len(rows) == 2
    assert set(rows[0]) == {
        "key_id",
        "org_id",
        "tenant_id",
        "roles",
        "clearance",
        "created_at",
        "expires_at",
        "last_used_at",
    }
    assert any(row["last_used_at"] for row in rows if "admin" in row["roles"])
    for secret in (*alpha.keys.values(), *beta.keys.values()):
        assert secret not in everything.text
        assert secret not in own.text
    stored = await gateway.services.store.list_api_keys()
    for record in stored:
        assert record.key_hash not in everything.text

    reader = await gateway.client.get("/v1/keys", headers=alpha.headers("reader"))
    assert reader.status_code == 403


async def test_a_revoked_key_is_refused_at_once_and_foreign_ids_read_as_unknown(
    gateway: Gateway,
) -> None:
    """An admin revokes its workspace's key: the key answers 401 on the next call. Another
    workspace's admin gets the same 404 for that key id as for an id that never existed,
    and the platform may revoke any workspace key."""
    alpha = await provision(gateway, "acme", "alpha")
    beta = await provision(gateway, "acme", "beta")
    secret = await alpha.issue("reader", ["retrieve"])
    listed = (await gateway.client.get("/v1/keys", headers=alpha.headers())).json()["keys"]
    reader_id = next(row["key_id"] for row in listed if row["roles"] == ["retrieve"])
    assert (await gateway.client.get("/v1/agents/none", headers=_bearer(secret))).status_code in {
        403,
        404,
    }

    foreign = await gateway.client.delete(f"/v1/keys/{reader_id}", headers=beta.headers())
    unknown = await gateway.client.delete("/v1/keys/key_0000000000000000", headers=beta.headers())
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json()
    assert (await gateway.client.delete("/v1/keys/platform", headers=beta.headers())).json() == (
        unknown.json()
    )

    revoked = await gateway.client.delete(f"/v1/keys/{reader_id}", headers=alpha.headers())
    assert revoked.status_code == 200, revoked.text
    assert revoked.json() == {"key_id": reader_id, "revoked": True}
    refused = await gateway.client.post(
        "/v1/retrieve", json={"agent_id": "a", "question": "q"}, headers=_bearer(secret)
    )
    assert refused.status_code == 401
    again = await gateway.client.delete(f"/v1/keys/{reader_id}", headers=alpha.headers())
    assert again.status_code == 404

    beta_reader = await beta.issue("reader", ["retrieve"])
    beta_rows = (await gateway.client.get("/v1/keys", headers=beta.headers())).json()["keys"]
    beta_reader_id = next(row["key_id"] for row in beta_rows if row["roles"] == ["retrieve"])
    by_platform = await gateway.client.delete(
        f"/v1/keys/{beta_reader_id}", headers=gateway.platform
    )
    assert by_platform.status_code == 200
    assert (await gateway.client.get("/v1/keys", headers=_bearer(beta_reader))).status_code == 401


async def test_expiry_is_set_at_creation_and_an_expired_key_answers_401(gateway: Gateway) -> None:
    """A key created with `ttl_s` works until then and answers 401 after; an expiry in the
    past, or both an expiry and a TTL, is a 422 naming the field."""
    await provision(gateway, "acme", "alpha")
    body = {"org_id": "acme", "tenant_id": "alpha", "roles": ["retrieve"]}
    made = await gateway.client.post(
        "/v1/keys", json={**body, "ttl_s": 1}, headers=gateway.platform
    )
    assert made.status_code == 201, made.text
    assert made.json()["expires_at"]
    secret = made.json()["key"]
    probe = {"agent_id": "none", "question": "q"}
    fresh = await gateway.client.post("/v1/retrieve", json=probe, headers=_bearer(secret))
    assert fresh.status_code == 404
    await asyncio.sleep(1.2)
    expired = await gateway.client.post("/v1/retrieve", json=probe, headers=_bearer(secret))
    assert expired.status_code == 401

    past = await gateway.client.post(
        "/v1/keys", json={**body, "expires_at": "2001-01-01T00:00:00Z"}, headers=gateway.platform
    )
    assert past.status_code == 422
    assert past.json()["field"] == "expires_at"
    both = await gateway.client.post(
        "/v1/keys",
        json={**body, "expires_at": "2999-01-01T00:00:00Z", "ttl_s": 60},
        headers=gateway.platform,
    )
    assert both.status_code == 422


async def test_key_history_records_creations_and_revocations_without_secrets(
    gateway: Gateway,
) -> None:
    """Creating and revoking keys leaves events (ids, roles, actor key id, time) that the
    platform reads for all workspaces and an admin for its own only; no secret appears."""
    alpha = await provision(gateway, "acme", "alpha")
    beta = await provision(gateway, "acme", "beta")
    secret = await alpha.issue("reader", ["retrieve"])
    rows = (await gateway.client.get("/v1/keys", headers=alpha.headers())).json()["keys"]
    reader_id = next(row["key_id"] for row in rows if row["roles"] == ["retrieve"])
    admin_id = next(row["key_id"] for row in rows if "admin" in row["roles"])
    assert (
        await gateway.client.delete(f"/v1/keys/{reader_id}", headers=alpha.headers())
    ).status_code == 200

    own = await gateway.client.get("/v1/keys/history", headers=alpha.headers())
    assert own.status_code == 200
    events = own.json()["events"]
    assert {event["tenant_id"] for event in events} == {"alpha"}
    reader_events = [(e["action"], e["actor_key_id"]) for e in events if e["key_id"] == reader_id]
    assert reader_events == [("created", "platform"), ("revoked", admin_id)]
    assert all(event["at"] and event["roles"] for event in events)

    everything = await gateway.client.get(
        "/v1/keys/history", params={"org_id": "acme"}, headers=gateway.platform
    )
    assert {event["tenant_id"] for event in everything.json()["events"]} == {"alpha", "beta"}
    for text in (own.text, everything.text):
        for key in (secret, *alpha.keys.values(), *beta.keys.values()):
            assert key not in text


@pytest.fixture
async def rotating(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway whose platform key is being rotated: a new one and the previous one."""
    services, logs, config = await start_gateway(
        tmp_path, embedder, platform_key_previous=PREVIOUS_PLATFORM_KEY
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


async def test_the_previous_platform_key_works_while_rotating(rotating: Gateway) -> None:
    """With KBGATE_PLATFORM_KEY_PREVIOUS set, both platform keys work; any other is 401."""
    for key in (PLATFORM_KEY, PREVIOUS_PLATFORM_KEY):
        answer = await rotating.client.get("/v1/keys", headers=_bearer(key))
        assert answer.status_code == 200
    wrong = await rotating.client.get("/v1/keys", headers=_bearer("other-platform-key-01234"))
    assert wrong.status_code == 401


async def test_revoking_a_key_ends_its_console_sessions(gateway: Gateway) -> None:
    """A console session opened with an admin key ends at its next page once the key is
    revoked (sent back to sign-in), and the key can no longer sign in."""
    alpha = await provision(gateway, "acme", "alpha")
    secret = await alpha.issue("console", ["admin"])
    gateway.client.cookies.clear()
    signed = await gateway.client.post(
        "/console/login", data={"key": secret}, follow_redirects=False
    )
    assert signed.status_code == 303
    assert (await gateway.client.get("/console/settings")).status_code == 200
    rows = (await gateway.client.get("/v1/keys", headers=alpha.headers())).json()["keys"]
    console_id = next(row["key_id"] for row in rows if row["roles"] == ["admin"])
    revoked = await gateway.client.delete(f"/v1/keys/{console_id}", headers=gateway.platform)
    assert revoked.status_code == 200
    after = await gateway.client.get("/console/settings", follow_redirects=False)
    assert after.status_code == 303
    assert after.headers["location"] == "/console/login"
    gateway.client.cookies.clear()
    again = await gateway.client.post(
        "/console/login", data={"key": secret}, follow_redirects=False
    )
    assert again.status_code == 401
