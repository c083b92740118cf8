"""The served OpenAPI document is a contract a generated client can rely on.

A client is generated with openapi-python-client from `/schema/openapi.json` as the
gateway serves it, then drives the real gateway (real model, Qdrant Edge, SQLite): every
route answers a valid call, and a few answer errors, and each response must parse into the
generated model of the status it came with (an undeclared status raises).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from ingest.embedder.embedding import Embedder
from settings.config import load_config
from tests.api.conftest import Gateway, start_gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

PACKAGE = "kbgate_generated_client"
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
METHODS = ("get", "put", "post", "patch", "delete")
PUBLIC_OPERATIONS = {"live", "ready"}


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def test_every_operation_is_named_and_every_keyed_one_needs_the_bearer_scheme() -> None:
    """Each operation has an explicit camelCase operationId (no generated path-derived
    name), the document declares a bearer scheme, and every operation but liveness and
    readiness requires it and declares its 401."""
    document = create_app(load_config({}, platform_key="k" * 30)).openapi_schema.to_schema()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (or the platform key) as `Authorization: Bearer <key>`",
    }
    names = []
    for method, path, operation in _operations(document):
        name = operation.get("operationId", "")
        names.append(name)
        assert name[:1].islower(), f"{method} {path}: {name!r}"
        assert name.isalnum(), f"{method} {path}: {name!r}"
        if name in PUBLIC_OPERATIONS:
            assert "security" not in operation, f"{method} {path}"
            continue
        assert operation.get("security") == [{"bearer": []}], f"{method} {path}"
        assert "401" in operation["responses"], f"{method} {path}"
    assert len(names) == len(set(names)) == 48


@pytest.fixture
async def generated(tmp_path: Path, gateway: Gateway) -> AsyncIterator[ModuleType]:
    """The client package generated from the document the gateway serves, importable."""
    async with _generated_client(tmp_path, gateway) as package:
        yield package


@pytest.fixture
async def limited(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Gateway]:
    """A gateway allowing each key a burst of 5 calls, refilled at one call per 100 s."""
    services, logs, config = await start_gateway(
        tmp_path, embedder, rate_limit_per_s=0.01, rate_limit_burst=5
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config)
    finally:
        await services.close()


@asynccontextmanager
async def _generated_client(tmp_path: Path, gateway: Gateway) -> AsyncIterator[ModuleType]:
    served = await gateway.client.get("/schema/openapi.json")
    assert served.status_code == 200
    spec = tmp_path / "openapi.json"
    spec.write_bytes(served.content)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "post_hooks": [],
                "package_name_override": PACKAGE,
                # a workspace archive is bytes to a client (the generator knows no gzip type)
                # and so is a bulk write's NDJSON, each line parsed with the line's model
                "content_type_overrides": {
                    "application/gzip": "application/octet-stream",
                    "application/x-ndjson": "application/octet-stream",
                },
            }
        )
    )
    command = [str(GENERATOR), "generate", "--path", str(spec), "--config", str(config)]
    command += ["--meta", "none", "--output-path", str(tmp_path / PACKAGE), "--fail-on-warning"]
    with anyio.fail_after(120):
        await anyio.run_process(command)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]
        sys.path.remove(str(tmp_path))


class Caller:
    """Calls operations of the generated client on the running gateway, checking each parse."""

    def __init__(self, client_package: ModuleType, gateway: Gateway) -> None:
        self.package = client_package
        self.models = importlib.import_module(f"{PACKAGE}.models")
        self.gateway = gateway

    def client(self, key: str) -> Any:
        transport = httpx.ASGITransport(app=self.gateway.client.app)
        http = httpx.AsyncClient(
            transport=transport,
            base_url="http://gateway",
            headers={"Authorization": f"Bearer {key}"},
        )
        generated = self.package.AuthenticatedClient(
            base_url="http://gateway", token=key, raise_on_unexpected_status=True
        )
        return generated.set_async_httpx_client(http)

    async def call(
        self, tag: str, operation: str, status: int, model: str, *args: Any, **kwargs: Any
    ) -> Any:
        """Call `operation`; the answer must have `status` and parse into `model`."""
        module = importlib.import_module(f"{PACKAGE}.api.{tag}.{operation}")
        response = await module.asyncio_detailed(*args, **kwargs)
        assert response.status_code == status, (operation, response.content)
        parsed = response.parsed
        expected = str if model == "str" else getattr(self.models, model)
        assert isinstance(parsed, expected), (operation, status, type(parsed))
        # Every field the gateway sent is one the document declares.
        assert getattr(parsed, "additional_properties", {}) == {}, (operation, parsed)
        return parsed


async def test_a_generated_client_parses_every_route_answer(
    generated: ModuleType, gateway: Gateway
) -> None:
    """Every route, called through the generated client, answers a status its operation
    declares with a body that parses into that status's model; so do 401, 403, 404, 409
    and 422 answers (problem details). Deletions come last: they remove what the rest used."""
    caller = Caller(generated, gateway)
    platform = caller.client(gateway.platform["Authorization"].removeprefix("Bearer "))
    issued, spare = await _platform_routes(caller, platform)
    admin = caller.client(issued.key)
    await _knowledge_routes(caller, admin)
    await _calibration_routes(caller, admin)
    await _migration_routes(caller, admin)
    await _turn_and_settings_routes(caller, admin)
    await caller.call("keys", "revoke_key", 200, "RevokedOut", spare.key_id, client=platform)
    await caller.call("keys", "revoke_key", 404, "ProblemDetails", spare.key_id, client=platform)
    await _deletion_routes(caller, admin, platform)


async def test_a_generated_client_parses_429_and_503_answers(
    tmp_path: Path, limited: Gateway
) -> None:
    """A key over its budget gets 429 and a call the store cannot serve gets 503, each with
    a body that parses into the problem-details model its operation declares."""
    tenant = await provision(limited, "acme", "ws")
    spare = await tenant.issue("spare", ["admin"])
    (tmp_path / "client").mkdir()
    async with _generated_client(tmp_path / "client", limited) as package:
        caller = Caller(package, limited)
        admin = caller.client(tenant.keys["all"])
        lookup = importlib.import_module(f"{PACKAGE}.api.knowledge_bases.get_knowledge_base")
        statuses = [
            (await lookup.asyncio_detailed("none", client=admin)).status_code for _ in range(6)
        ]
        assert statuses[0] == 404, statuses
        assert 429 in statuses, statuses
        refused = await caller.call(
            "knowledge_bases", "get_knowledge_base", 429, "ProblemDetails", "none", client=admin
        )
        assert refused.status == 429
        await limited.services.store.close()
        unavailable = await caller.call(
            "knowledge_bases",
            "put_knowledge_base",
            503,
            "ProblemDetails",
            "kb",
            client=caller.client(spare),
            body=caller.models.PutKnowledgeBase(name="Lights"),
        )
        assert unavailable.status == 503


async def _platform_routes(caller: Caller, platform: Any) -> tuple[Any, Any]:
    """Operations, provisioning and keys; returns two issued keys (all roles, retrieve)."""
    m = caller.models
    nobody = caller.client("not-a-key")

    await caller.call("operations", "live", 200, "Live", client=platform)
    await caller.call("operations", "ready", 200, "Ready", client=platform)
    await caller.call("operations", "metrics", 200, "str", client=platform)
    await caller.call("operations", "metrics", 401, "ProblemDetails", client=nobody)

    org = m.CreateOrg(org_id="acme")
    await caller.call("provisioning", "create_org", 201, "OrgOut", client=platform, body=org)
    await caller.call(
        "provisioning", "create_org", 409, "ProblemDetails", client=platform, body=org
    )
    workspace = m.CreateWorkspace(tenant_id="ws")
    await caller.call(
        "provisioning",
        "create_workspace",
        201,
        "WorkspaceOut",
        "acme",
        client=platform,
        body=workspace,
    )
    await caller.call(
        "provisioning",
        "create_workspace",
        404,
        "ProblemDetails",
        "nope",
        client=platform,
        body=workspace,
    )
    roles = ["admin", "ingest", "retrieve"]
    issued = await caller.call(
        "keys",
        "create_key",
        201,
        "KeyOut",
        client=platform,
        body=m.CreateKey(org_id="acme", tenant_id="ws", roles=roles),
    )
    spare = await caller.call(
        "keys",
        "create_key",
        201,
        "KeyOut",
        client=platform,
        body=m.CreateKey(org_id="acme", tenant_id="ws", roles=["retrieve"]),
    )
    await caller.call("keys", "list_keys", 200, "KeyList", client=platform)
    await caller.call("keys", "list_keys", 401, "ProblemDetails", client=nobody)
    await caller.call("keys", "get_key_history", 200, "KeyHistoryOut", client=platform)
    admin = caller.client(issued.key)
    await caller.call("provisioning", "create_org", 403, "ProblemDetails", client=admin, body=org)
    return issued, spare


async def _migration_routes(caller: Caller, admin: Any) -> None:
    """A KB's model migration: none yet, started, polled until built, validated, switched,
    rolled back and the new set retired; refused steps answer problem details."""
    m, tag = caller.models, "model_migration"
    await caller.call(tag, "get_model_migration", 404, "ProblemDetails", "kb", client=admin)
    target = "kbgate/all-MiniLM-L6-v2-int8-questions"
    await caller.call(
        tag, "start_model_migration", 422, "ProblemDetails", "kb", client=admin,
        body=m.StartMigration(model="no/such-model"),
    )  # fmt: skip
    await caller.call(
        tag, "start_model_migration", 202, "MigrationOut", "kb", client=admin,
        body=m.StartMigration(model=target),
    )  # fmt: skip
    found = await _migration_until(caller, admin, lambda shown: shown.status != "building")
    assert found.status == "built", found
    await caller.call(tag, "validate_model_migration", 202, "MigrationOut", "kb", client=admin)
    found = await _migration_until(
        caller, admin, lambda shown: shown.validation.status != "running"
    )
    assert found.validation.status == "done", found
    await caller.call(
        tag, "switch_model_migration", 200, "MigrationOut", "kb", client=admin,
        body=m.SwitchMigration(),
    )  # fmt: skip
    await caller.call(tag, "roll_back_model_migration", 200, "MigrationOut", "kb", client=admin)
    await caller.call(tag, "roll_back_model_migration", 409, "ProblemDetails", "kb", client=admin)
    await caller.call(tag, "retire_model_migration", 200, "MigrationOut", "kb", client=admin)
    await caller.call(tag, "cancel_model_migration", 409, "ProblemDetails", "kb", client=admin)


async def _migration_until(caller: Caller, admin: Any, done: Any) -> Any:
    found = None
    for _ in range(1200):
        found = await caller.call(
            "model_migration", "get_model_migration", 200, "MigrationOut", "kb", client=admin
        )
        if done(found):
            return found
        await anyio.sleep(0.1)
    raise AssertionError(f"the migration never got there: {found}")


async def _calibration_routes(caller: Caller, admin: Any) -> None:
    """A golden set stored and read, an evaluation started, polled until done, listed and
    applied; a second start while none runs, and unknown ids."""
    m = caller.models
    await caller.call("calibration", "start_evaluation", 409, "ProblemDetails", "kb", client=admin)
    golden = m.PutGoldenSet(
        questions=[
            m.GoldenQuestionIn(
                question="What guides ships past the reef?", document_ids=["doc"], grades=[2]
            )
        ]
    )
    await caller.call(
        "calibration", "put_golden_set", 200, "GoldenSetOut", "kb", client=admin, body=golden
    )
    await caller.call(
        "calibration", "put_golden_set", 422, "ProblemDetails", "kb", client=admin,
        body=m.PutGoldenSet(questions=[]),
    )  # fmt: skip
    await caller.call("calibration", "get_golden_set", 200, "GoldenSetOut", "kb", client=admin)
    await caller.call("calibration", "get_golden_set", 404, "ProblemDetails", "none", client=admin)
    started = await caller.call(
        "calibration", "start_evaluation", 202, "EvaluationOut", "kb", client=admin
    )
    found = started
    for _ in range(600):
        found = await caller.call(
            "calibration", "get_evaluation", 200, "EvaluationOut", "kb", started.evaluation_id,
            client=admin,
        )  # fmt: skip
        if found.status != "running":
            break
        await anyio.sleep(0.1)
    assert found.status == "done", found
    await caller.call("calibration", "list_evaluations", 200, "EvaluationList", "kb", client=admin)
    await caller.call(
        "calibration", "apply_evaluation", 200, "AppliedOut", "kb", started.evaluation_id,
        client=admin,
    )  # fmt: skip
    await caller.call(
        "calibration", "get_evaluation", 404, "ProblemDetails", "kb", "eval_none", client=admin
    )
    await caller.call(
        "calibration", "apply_evaluation", 404, "ProblemDetails", "kb", "eval_none", client=admin
    )


async def _knowledge_routes(caller: Caller, admin: Any) -> None:
    """A KB (created then replaced), documents, an agent (created then replaced)."""
    m = caller.models
    kb = m.PutKnowledgeBase(name="Lights")
    for status in (201, 200):
        await caller.call(
            "knowledge_bases",
            "put_knowledge_base",
            status,
            "KnowledgeBaseOut",
            "kb",
            client=admin,
            body=kb,
        )
    await caller.call(
        "knowledge_bases",
        "put_knowledge_base",
        422,
        "ProblemDetails",
        "kb",
        client=admin,
        body=m.PutKnowledgeBase(top_k=0),
    )
    await caller.call(
        "knowledge_bases", "get_knowledge_base", 200, "KnowledgeBaseOut", "kb", client=admin
    )
    await caller.call(
        "knowledge_bases", "get_knowledge_base", 404, "ProblemDetails", "none", client=admin
    )
    document = m.PutDocument(
        text="Lighthouses guide ships past the reef at night.", classification="public"
    )
    await caller.call(
        "knowledge_bases",
        "put_document",
        200,
        "DocumentOut",
        "kb",
        "doc",
        client=admin,
        body=document,
    )
    held = await caller.call(
        "knowledge_bases",
        "put_document",
        200,
        "DocumentOut",
        "kb",
        "unlabelled",
        client=admin,
        body=m.PutDocument(text="No label on this one."),
    )
    assert held.reason == "missing_classification"
    await _bulk_write(caller, admin)
    await caller.call("knowledge_bases", "list_documents", 200, "DocumentList", "kb", client=admin)
    await caller.call(
        "knowledge_bases", "get_knowledge_base_stats", 200, "StatsOut", "kb", client=admin
    )
    agent = m.PutAgent(knowledge_base_ids=["kb"])
    for status in (201, 200):
        await caller.call(
            "agents", "put_agent", status, "AgentOut", "bot", client=admin, body=agent
        )
    await caller.call("agents", "get_agent", 200, "AgentOut", "bot", client=admin)
    kbs = await caller.call(
        "knowledge_bases", "list_knowledge_bases", 200, "KnowledgeBaseList", client=admin
    )
    assert [kb.kb_id for kb in kbs.knowledge_bases] == ["kb"]
    agents = await caller.call("agents", "list_agents", 200, "AgentList", client=admin)
    assert [listed.agent_id for listed in agents.agents] == ["bot"]


async def _bulk_write(caller: Caller, admin: Any) -> None:
    """A bulk write's NDJSON answer: every line parses into the declared line model."""
    lines = [
        {
            "document_id": "bulk-1",
            "text": "Beacons mark the harbour mouth.",
            "classification": "public",
        },
        {"document_id": "bulk-2", "text": "An unlabelled note."},
        {"document_id": 5},
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    types = importlib.import_module(f"{PACKAGE}.types")
    module = importlib.import_module(f"{PACKAGE}.api.knowledge_bases.put_documents")
    # The generated request (the bytes themselves: an async client cannot send a synchronous
    # file object), sent as is: the generator reads an NDJSON answer as one document, so the
    # lines are parsed here, each with the generated line model.
    request = module._get_kwargs("kb", body=types.File(payload=body))
    answer = await admin.get_async_httpx_client().request(**request)
    assert answer.status_code == 200, answer.content
    results = [
        caller.models.BulkDocumentResult.from_dict(json.loads(line))
        for line in answer.content.splitlines()
    ]
    assert [result.status.value for result in results] == ["indexed", "held_back", "failed"]
    assert results[2].problem.status == 422
    for result in results:
        assert result.additional_properties == {}, result


async def _turn_and_settings_routes(caller: Caller, admin: Any) -> None:
    """A turn, its citations, redaction, grounding, workspace settings, document removal."""
    m = caller.models
    turn = await caller.call(
        "retrieval",
        "retrieve",
        200,
        "RetrieveOut",
        client=admin,
        body=m.RetrieveIn(agent_id="bot", question="What guides ships past the reef?"),
    )
    await caller.call(
        "retrieval",
        "retrieve",
        404,
        "ProblemDetails",
        client=admin,
        body=m.RetrieveIn(agent_id="ghost", question="Anyone there?"),
    )
    cited = [m.CitationIn(passage_id=p.passage_id) for p in turn.passages[:1]]
    cited.append(m.CitationIn(passage_id="never-returned"))
    verdicts = await caller.call(
        "retrieval",
        "verify_citations",
        200,
        "VerifyOut",
        client=admin,
        body=m.VerifyIn(turn_id=turn.turn_id, citations=cited),
    )
    assert [v.reason for v in verdicts.invalid] == ["not_returned_in_turn"]
    for body in (
        m.RedactIn(agent_id="bot", text="Mail jane.doe@example.com please."),
        m.RedactIn(agent_id="bot", value={"to": "jane.doe@example.com"}),
    ):
        await caller.call("redaction", "redact", 200, "RedactOut", client=admin, body=body)
    await caller.call(
        "grounding",
        "check_grounding",
        200,
        "GroundingOut",
        client=admin,
        body=m.GroundingIn(
            agent_id="bot", answer="Lighthouses guide ships.", mode=m.GroundingInMode.SENTENCES
        ),
    )

    await caller.call(
        "workspace", "get_workspace_settings", 200, "WorkspaceSettingsOut", client=admin
    )
    await caller.call(
        "workspace",
        "patch_workspace_settings",
        200,
        "WorkspaceSettingsOut",
        client=admin,
        body=m.PatchWorkspaceSettings(max_knowledge_bases_per_agent=3),
    )
    await caller.call(
        "workspace", "get_workspace_settings_history", 200, "HistoryOut", client=admin
    )
    changes = await caller.call(
        "workspace", "get_workspace_changes", 200, "AdminChangesOut", client=admin
    )
    assert changes.changes, "the KB and agent created above are recorded"
    await caller.call(
        "knowledge_bases", "delete_document", 200, "DeletedOut", "kb", "doc", client=admin
    )
    await caller.call(
        "knowledge_bases", "delete_document", 404, "ProblemDetails", "kb", "doc", client=admin
    )


async def _deletion_routes(caller: Caller, admin: Any, platform: Any) -> None:
    """An agent, a KB, the workspace, then the org, each deleted and then unknown (404)."""
    for tag, operation, model, *ids in (
        ("agents", "delete_agent", "AgentDeletedOut", "bot"),
        ("knowledge_bases", "delete_knowledge_base", "KnowledgeBaseDeletedOut", "kb"),
    ):
        await caller.call(tag, operation, 200, model, *ids, client=admin)
        await caller.call(tag, operation, 404, "ProblemDetails", *ids, client=admin)
    for operation, model, *ids in (
        ("delete_workspace", "WorkspaceDeletedOut", "acme", "ws"),
        ("delete_org", "OrgDeletedOut", "acme"),
    ):
        await caller.call("provisioning", operation, 200, model, *ids, client=platform)
        await caller.call("provisioning", operation, 404, "ProblemDetails", *ids, client=platform)
