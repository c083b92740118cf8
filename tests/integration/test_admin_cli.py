"""Platform-key rotation and the `kbgate orgs|workspaces|keys` commands, against a real
`kbgate serve` process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess
from tests.support.kbgate_cli import kbgate_at

CONFIGURED_KEY = "configured-platform-key-0123456789"
_GENERATED = re.compile(r"^\s+(kbg_\S+)$", re.MULTILINE)


@pytest.mark.ci
def test_a_configured_platform_key_retires_the_generated_one_and_the_cli_manages_keys(
    tmp_path: Path, model_env: dict[str, str]
) -> None:
    """A first start without KBGATE_PLATFORM_KEY generates a platform key; a restart with one
    configured retires it (401) while the configured key works. The CLI then creates an
    org, a workspace and a key (JSON for scripts), lists keys without secrets and revokes
    the key, which is refused from then on; a refused call exits 1 with the problem.
    `workspaces delete` and `orgs delete` refuse to run without `--yes` (exit 2), then
    delete and say what went; deleting a deleted organization exits 1 (404)."""
    data_dir = tmp_path / "data"
    with GatewayProcess(data_dir, env=model_env) as first:
        found = _GENERATED.search(first.log_path.read_text())
        assert found is not None
        generated = found.group(1)
        with first.client() as client:
            ok = client.get("/v1/keys", headers={"Authorization": f"Bearer {generated}"})
            assert ok.status_code == 200

    with GatewayProcess(data_dir, env={**model_env, "KBGATE_PLATFORM_KEY": CONFIGURED_KEY}) as gw:
        with gw.client() as client:
            old = client.get("/v1/keys", headers={"Authorization": f"Bearer {generated}"})
            assert old.status_code == 401
            new = client.get("/v1/keys", headers={"Authorization": f"Bearer {CONFIGURED_KEY}"})
            assert new.status_code == 200

        org = kbgate_at("orgs", "create", "acme", url=gw.url, key=CONFIGURED_KEY)
        assert org.returncode == 0, org.stderr
        assert "acme" in org.stdout
        ws = kbgate_at("workspaces", "create", "acme", "support", url=gw.url, key=CONFIGURED_KEY)
        assert ws.returncode == 0, ws.stderr
        made = kbgate_at(
            "keys", "create", "--org", "acme", "--tenant", "support", "--role", "retrieve",
            "--ttl", "3600", "--json", url=gw.url, key=CONFIGURED_KEY,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        issued = json.loads(made.stdout)
        assert issued["roles"] == ["retrieve"]
        assert issued["expires_at"]

        listed = kbgate_at("keys", "list", "--tenant", "support", url=gw.url, key=CONFIGURED_KEY)
        assert listed.returncode == 0, listed.stderr
        assert issued["key_id"] in listed.stdout
        assert issued["key"] not in listed.stdout

        revoked = kbgate_at("keys", "revoke", issued["key_id"], url=gw.url, key=CONFIGURED_KEY)
        assert revoked.returncode == 0, revoked.stderr
        assert f"revoked {issued['key_id']}" in revoked.stdout
        refused = httpx.post(
            f"{gw.url}/v1/retrieve",
            json={"agent_id": "a", "question": "q"},
            headers={"Authorization": f"Bearer {issued['key']}"},
        )
        assert refused.status_code == 401

        again = kbgate_at("keys", "revoke", issued["key_id"], url=gw.url, key=CONFIGURED_KEY)
        assert again.returncode == 1
        assert "404" in again.stderr
        low = kbgate_at(
            "keys", "create", "--org", "acme", "--tenant", "support", "--role", "ingest",
            "--clearance", "public", url=gw.url, key=CONFIGURED_KEY,
        )  # fmt: skip
        assert low.returncode == 1
        assert "(clearance)" in low.stderr

        _delete_the_workspace_then_the_org(gw.url)


def _delete_the_workspace_then_the_org(url: str) -> None:
    unconfirmed = kbgate_at("workspaces", "delete", "acme", "support", url=url, key=CONFIGURED_KEY)
    assert unconfirmed.returncode == 2
    assert "--yes" in unconfirmed.stderr
    gone = kbgate_at(
        "workspaces", "delete", "acme", "support", "--yes", url=url, key=CONFIGURED_KEY
    )
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.startswith("deleted workspace support in acme: ")
    assert "0 keys" in gone.stdout  # its one key was revoked above
    kbgate_at("workspaces", "create", "acme", "billing", url=url, key=CONFIGURED_KEY)
    org_gone = kbgate_at("orgs", "delete", "acme", "--yes", "--json", url=url, key=CONFIGURED_KEY)
    assert org_gone.returncode == 0, org_gone.stderr
    answer = json.loads(org_gone.stdout)
    assert (answer["workspaces"], answer["collection_dropped"]) == (1, True)
    deleted_again = kbgate_at("orgs", "delete", "acme", "--yes", url=url, key=CONFIGURED_KEY)
    assert deleted_again.returncode == 1
    assert "404" in deleted_again.stderr
