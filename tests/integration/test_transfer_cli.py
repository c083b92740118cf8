"""`kbgate export` and `kbgate import` against a real `kbgate serve` process."""

from __future__ import annotations

import gzip
from pathlib import Path

from tests.support.gateway_process import GatewayProcess
from tests.support.kbgate_cli import kbgate_at
from tests.support.workspace_http import workspace_headers

PLATFORM_KEY = "transfer-cli-platform-key-0001"


def test_the_cli_exports_a_workspace_and_imports_it_under_another_org(
    tmp_path: Path, model_env: dict[str, str]
) -> None:
    """`kbgate export` writes the archive (a gzip file starting with its manifest) with
    the workspace's admin key; `kbgate import` creates the workspace from it under another
    org and prints what it wrote; the copy lists the same documents. A refused import (the
    tenant id is now taken) exits 1 with the problem; a missing file exits 2."""
    archive = tmp_path / "alpha.kbgate.ndjson.gz"
    env = {**model_env, "KBGATE_PLATFORM_KEY": PLATFORM_KEY}
    with GatewayProcess(tmp_path / "data", env=env) as gw, gw.client() as client:
        admin = workspace_headers(client, PLATFORM_KEY, "acme", "alpha")
        client.put("/v1/knowledge-bases/kb", json={}, headers=admin)
        written = client.put(
            "/v1/knowledge-bases/kb/documents/beacon",
            json={
                "text": "The lighthouse beacon guides ships past the reef.",
                "classification": "internal",
            },
            headers=admin,
        )
        assert written.json()["status"] == "indexed"
        client.post("/v1/orgs", json={"org_id": "beta"}, headers=_platform())
        admin_key = admin["Authorization"].removeprefix("Bearer ")

        exported = kbgate_at(
            "export", "acme", "alpha", "-o", str(archive), url=gw.url, key=admin_key
        )
        imported = kbgate_at("import", "beta", "alpha2", str(archive), url=gw.url, key=PLATFORM_KEY)
        again = kbgate_at("import", "beta", "alpha2", str(archive), url=gw.url, key=PLATFORM_KEY)
        missing = kbgate_at(
            "import", "beta", "x", str(tmp_path / "none.gz"), url=gw.url, key=PLATFORM_KEY
        )
        key = client.post(
            "/v1/keys",
            json={"org_id": "beta", "tenant_id": "alpha2", "roles": ["admin"]},
            headers=_platform(),
        ).json()["key"]
        listed = client.get(
            "/v1/knowledge-bases/kb/documents", headers={"Authorization": f"Bearer {key}"}
        )

    assert exported.returncode == 0, exported.stderr
    assert gzip.decompress(archive.read_bytes()).startswith(b'{"kind":"manifest"')
    assert imported.returncode == 0, imported.stderr
    assert "imported alpha2 into beta: 1 knowledge bases, 0 agents" in imported.stdout
    assert listed.json() == {"documents": [{"document_id": "beacon"}]}
    assert again.returncode == 1
    assert "refused, 409" in again.stderr
    assert missing.returncode == 2


def _platform() -> dict[str, str]:
    return {"Authorization": f"Bearer {PLATFORM_KEY}"}
