"""Provisioning and credentials over HTTP: orgs, workspaces, keys; 401/403/404/409/422."""

from __future__ import annotations

import pytest

from gateway.access.auth import hash_key
from tests.api.conftest import PLATFORM_KEY, Gateway

pytestmark = pytest.mark.anyio


async def _provision(gw: Gateway, org: str, tenant: str, roles: list[str]) -> str:
    assert (
        await gw.client.post("/v1/orgs", json={"org_id": org}, headers=gw.platform)
    ).status_code in {201, 409}
    response = await gw.client.post(
        f"/v1/orgs/{org}/workspaces", json={"tenant_id": tenant}, headers=gw.platform
    )
    assert response.status_code in {201, 409}
    response = await gw.client.post(
        "/v1/keys", json={"org_id": org, "tenant_id": tenant, "roles": roles}, headers=gw.platform
    )
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


async def test_provisioning_walkthrough(gateway: Gateway) -> None:
    """Org, then workspace, then a key: each answers 201 with what was created."""
    org = await gateway.client.post("/v1/orgs", json={"org_id": "acme"}, headers=gateway.platform)
    assert org.status_code == 201
    assert org.json()["collection"] == "kb_org_acme"
    ws = await gateway.client.post(
        "/v1/orgs/acme/workspaces",
        json={"tenant_id": "acme-support", "created_at": "2026-01-02T03:04:05Z"},
        headers=gateway.platform,
    )
    assert ws.status_code == 201
    assert ws.json() == {
        "tenant_id": "acme-support",
        "org_id": "acme",
        "created_at": "2026-01-02T03:04:05+00:00",
    }
    key = await gateway.client.post(
        "/v1/keys",
        json={"org_id": "acme", "tenant_id": "acme-support", "roles": ["admin", "retrieve"]},
        headers=gateway.platform,
    )
    assert key.status_code == 201
    body = key.json()
    assert body["key"].startswith("kbg_")
    assert body["roles"] == ["admin", "retrieve"]
    assert body["clearance"] == "restricted"  # an admin key's only clearance
    reader = await gateway.client.post(
        "/v1/keys",
        json={"org_id": "acme", "tenant_id": "acme-support", "roles": ["retrieve"]},
        headers=gateway.platform,
    )
    assert reader.json()["clearance"] == "internal"


async def test_keys_are_stored_hashed(gateway: Gateway) -> None:
    """The store holds the key's sha256, which finds the record; the secret is kept nowhere."""
    secret = await _provision(gateway, "acme", "ws1", ["retrieve"])
    record = await gateway.services.store.get_api_key_by_hash(hash_key(secret))
    assert record is not None
    assert record.tenant_id == "ws1"
    assert secret not in repr(record)
    db = (gateway.config.data_dir / "kbgate.sqlite3").read_bytes()
    assert secret.encode() not in db


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer nope-not-a-key"}, {"Authorization": "Basic abc"}],
)
async def test_missing_or_bad_key_is_401(gateway: Gateway, headers: dict[str, str]) -> None:
    """No key, an unknown key, or another scheme: 401 problem details with a Bearer challenge."""
    response = await gateway.client.post("/v1/orgs", json={"org_id": "x"}, headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["status"] == 401


async def test_workspace_key_cannot_provision(gateway: Gateway) -> None:
    """A workspace admin key is authenticated but lacks the platform role: 403."""
    secret = await _provision(gateway, "acme", "ws1", ["admin", "ingest", "retrieve"])
    response = await gateway.client.post(
        "/v1/orgs", json={"org_id": "evil"}, headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 403
    assert response.json()["title"] == "Forbidden"


async def test_unknown_and_foreign_ids_are_404_alike(gateway: Gateway) -> None:
    """A workspace that does not exist, or exists in another org: 404 with the same body."""
    await _provision(gateway, "acme", "ws1", ["retrieve"])
    await _provision(gateway, "globex", "ws2", ["retrieve"])
    unknown = await gateway.client.post(
        "/v1/keys",
        json={"org_id": "acme", "tenant_id": "nope", "roles": ["retrieve"]},
        headers=gateway.platform,
    )
    foreign = await gateway.client.post(
        "/v1/keys",
        json={"org_id": "acme", "tenant_id": "ws2", "roles": ["retrieve"]},
        headers=gateway.platform,
    )
    assert unknown.status_code == foreign.status_code == 404
    assert unknown.json() == foreign.json()
    missing_org = await gateway.client.post(
        "/v1/orgs/nope/workspaces", json={"tenant_id": "ws9"}, headers=gateway.platform
    )
    assert missing_org.status_code == 404


async def test_tenant_ids_are_unique_across_orgs(gateway: Gateway) -> None:
    """A second workspace with a taken tenant id answers 409, in any org; the first is unchanged."""
    await _provision(gateway, "acme", "shared-name", ["retrieve"])
    await gateway.client.post("/v1/orgs", json={"org_id": "globex"}, headers=gateway.platform)
    again = await gateway.client.post(
        "/v1/orgs/globex/workspaces", json={"tenant_id": "shared-name"}, headers=gateway.platform
    )
    assert again.status_code == 409
    workspace = await gateway.services.store.get_workspace("shared-name")
    assert workspace is not None
    assert workspace.org_id == "acme"
    dup_org = await gateway.client.post(
        "/v1/orgs", json={"org_id": "acme"}, headers=gateway.platform
    )
    assert dup_org.status_code == 409


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/orgs", {"org_id": "Bad Org!"}, "org_id"),
        ("/v1/orgs", {"org_id": "acme", "extra": 1}, "extra"),
        ("/v1/orgs", {"org_id": 42}, "org_id"),
        ("/v1/orgs/acme/workspaces", {"tenant_id": "has space"}, "tenant_id"),
        ("/v1/orgs/acme/workspaces", {"tenant_id": "ok", "created_at": "yesterday"}, "created_at"),
        ("/v1/keys", {"org_id": "acme", "tenant_id": "ws1", "roles": ["platform"]}, "roles"),
        ("/v1/keys", {"org_id": "acme", "tenant_id": "ws1", "roles": []}, "roles"),
        (
            "/v1/keys",
            {"org_id": "acme", "tenant_id": "ws1", "roles": ["admin"], "clearance": "x"},
            "clearance",
        ),
    ],
)
async def test_bad_input_is_422_naming_the_field(
    gateway: Gateway, path: str, body: dict[str, object], field: str
) -> None:
    """Schema and rule violations: 422 problem details naming the field; nothing created."""
    await _provision(gateway, "acme", "ws1", ["retrieve"])
    response = await gateway.client.post(path, json=body, headers=gateway.platform)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert field in str(problem.get("field", "")) + str(problem.get("detail", ""))
    assert await gateway.services.store.get_org("Bad Org!") is None
    assert await gateway.services.store.get_workspace("has space") is None


async def test_malformed_json_is_400(gateway: Gateway) -> None:
    """A body that is not JSON is a 400 problem, not a 500."""
    response = await gateway.client.post(
        "/v1/orgs",
        content=b'{"org_id": ',
        headers={**gateway.platform, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_oversized_body_is_413(gateway: Gateway) -> None:
    """A body above KBGATE_MAX_BODY_BYTES is refused before it is read whole."""
    big = b'{"org_id": "' + b"a" * (gateway.config.max_body_bytes + 10) + b'"}'
    response = await gateway.client.post(
        "/v1/orgs", content=big, headers={**gateway.platform, "Content-Type": "application/json"}
    )
    assert response.status_code == 413


async def test_logs_and_metrics_carry_no_key_material(gateway: Gateway) -> None:
    """After keys are issued and used (good and bad), no secret or hash is in logs or /metrics."""
    secret = await _provision(gateway, "acme", "ws1", ["admin"])
    await gateway.client.post(
        "/v1/orgs", json={"org_id": "z"}, headers={"Authorization": f"Bearer {secret}"}
    )
    await gateway.client.post(
        "/v1/orgs", json={"org_id": "z"}, headers={"Authorization": "Bearer kbg_guess"}
    )
    metrics = (await gateway.client.get("/metrics", headers=gateway.platform)).text
    logs = gateway.logs.getvalue()
    assert "kbgate_http_requests_total" in metrics
    assert '"event": "request"' in logs
    for material in (secret, hash_key(secret), PLATFORM_KEY, "kbg_guess", "acme", "ws1"):
        assert material not in logs
        assert material not in metrics


async def test_options_is_authenticated_too(gateway: Gateway) -> None:
    """OPTIONS on a v1 path needs a key like any other method (a 500 found by schemathesis)."""
    response = await gateway.client.request("OPTIONS", "/v1/keys")
    assert response.status_code == 401
    assert (await gateway.client.head("/v1/keys")).status_code == 405
