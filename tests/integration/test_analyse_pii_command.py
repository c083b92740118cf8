"""`kbgate analyse-pii`: passages stored without a current PII analysis get one, and a run
picks up only what is left."""

from __future__ import annotations

import asyncio
import json
import os
from io import StringIO
from pathlib import Path

import pytest

from gateway.access.auth import Principal
from gateway.admin import knowledge, provisioning
from gateway.cli import main
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import FastEmbedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.payload import Classification, PiiAnalysis, Scope
from ingest.sync import Document, DocumentWriter, Target
from settings.config import load_config
from settings.records import Role
from tests.support.redactor import shared_redactor

ORG = "acme"
NOTES = {
    "alpha": "Refunds for the Aurora plan are approved by Margaret Thompson in Leeds.",
    "beta": "Escalations go to Daniel Okafor; the replica listens on 203.0.113.9.",
}


async def _provision(data_dir: Path, embedder: FastEmbedder) -> None:
    """An org with two workspaces, each with one KB, through the gateway's core."""
    config = load_config({}, data_dir=data_dir, platform_key="test-platform-key-0123456789")
    services = await build_services(
        config,
        Telemetry(build_logger("WARNING", StringIO())),
        embedder=embedder,
        redactor=shared_redactor(),
    )
    try:
        await provisioning.create_org(services.store, services.index, ORG)
        for tenant in NOTES:
            await provisioning.create_workspace(services.store, ORG, tenant, None)
            admin = Principal(
                key_id="test", roles=frozenset({Role.ADMIN}), org_id=ORG, tenant_id=tenant
            )
            await knowledge.put_knowledge_base(
                services.knowledge, admin, "kb", name="Notes", storage="org", settings={}
            )
    finally:
        await services.close()


def _analyses(data_dir: Path, tenant: str) -> list[PiiAnalysis | None]:
    target = Target(org_id=ORG, tenant_id=tenant, kb_id="kb", storage="org")
    index = BlockingIndex(EdgeIndex(data_dir))
    try:
        stored = index.scroll_document(target.collection, target.write_scope(), tenant)
    finally:
        index.close()
    return [passage.payload.pii for passage in stored]


@pytest.mark.slow
def test_analyse_pii_writes_current_analyses_and_resumes_with_what_is_left(
    tmp_path: Path,
    embedder: FastEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Passages written without analysis get the current analyzer's spans; a run for one
    workspace, then one for the whole org, analyses each passage once (the second run finds
    only the other workspace's), and a run with nothing left analyses 0."""
    for name in list(os.environ):
        if name.startswith("KBGATE_"):
            monkeypatch.delenv(name)
    data_dir = tmp_path / "data"
    asyncio.run(_provision(data_dir, embedder))
    index = BlockingIndex(EdgeIndex(data_dir))
    try:
        unanalysed = DocumentWriter(index, embedder)
        for tenant, text in NOTES.items():
            target = Target(org_id=ORG, tenant_id=tenant, kb_id="kb", storage="org")
            unanalysed.put(target, Document(tenant, text, Classification.INTERNAL))
    finally:
        index.close()
    assert _analyses(data_dir, "alpha") == [None]

    argv = ["analyse-pii", "--org", ORG, "--data-dir", str(data_dir), "--json"]
    assert main([*argv, "--tenant", "alpha"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["analysed"], first["workspaces"]) == (1, 1)
    assert first["analyzer"] == shared_redactor().analyzer_version
    (alpha,) = _analyses(data_dir, "alpha")
    assert alpha is not None
    assert alpha.analyzer == shared_redactor().analyzer_version
    assert {span.entity_type for span in alpha.text} >= {"PERSON", "LOCATION"}
    assert _analyses(data_dir, "beta") == [None]

    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["analysed"] == 1
    (beta,) = _analyses(data_dir, "beta")
    assert beta is not None
    assert {"PERSON", "IP_ADDRESS"} <= {span.entity_type for span in beta.text}
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["analysed"] == 0

    assert main(["analyse-pii", "--org", ORG, "--tenant", "nobody", "--data-dir", str(data_dir)])
    assert "no workspace 'nobody'" in capsys.readouterr().err
    strict = Scope.of(org_id=ORG, tenant_id="alpha", kb_ids=["kb"], clearance="restricted")
    index = BlockingIndex(EdgeIndex(data_dir))
    try:
        assert index.count(Target(ORG, "alpha", "kb", "org").collection, strict) == 1
    finally:
        index.close()
