"""Setting up the probe world on the gateway (orgs, workspaces, keys, KBs, agents,
documents) and the changes between phases."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from gateway.tools.probe.base import CampaignBase
from gateway.tools.probe.client import (
    Reply,
)
from gateway.tools.probe.report import (
    Issue,
    Probe,
    SetupError,
    _all,
    _obj,
)
from gateway.tools.probe.world import (
    AGENT_EXTRA,
    AGENT_GROUND,
    AGENT_MAIN,
    CLASSIFICATIONS,
    KB_COMMON,
    KB_EXTRA,
    KB_GROUND,
    KB_MAIN,
    KB_SETTINGS,
    ORGS,
    PRINCIPAL_ROLES,
    SCRATCH,
    SHARED_KBS,
    STORAGE,
    WORKSPACES_PER_ORG,
    Doc,
    Kind,
    LegacyDocument,
    ProbeKey,
    Viewer,
    Workspace,
)

#: the model the `migrating` phase moves KBs to: bundled, so every deployment loads it
MIGRATION_MODEL = "kbgate/all-MiniLM-L6-v2-int8-questions"
_MIGRATION_POLLS = 600
_MIGRATION_POLL_S = 0.5


class Provisioning(CampaignBase):
    """Create the world over the API, and change it between phases."""

    # -- provisioning

    async def provision(self) -> None:
        world = self.world
        for org in ORGS:
            org_id = f"{self.run}-{org}"
            await self.setup_call(
                self._probe("POST /v1/orgs", self.platform, "/v1/orgs", {"org_id": org_id}, 201)
            )
            world.orgs.append(org_id)
            world.add_marker(org_id, "org", None)
            for number in range(1, WORKSPACES_PER_ORG + 1):
                await self._provision_workspace(org, org_id, number)
        await _all(self._provision_content(ws) for ws in world.workspaces)
        self.redact_deployed = await self._route_exists_redact()
        self.metrics_exposed = await self._metrics_exposed()

    async def _provision_workspace(self, org: str, org_id: str, number: int) -> None:
        label = f"{org}-w{number}"
        tenant_id = f"{self.run}-{label}"
        path = f"/v1/orgs/{org_id}/workspaces"
        await self.setup_call(
            self._probe(
                "POST /v1/orgs/{org_id}/workspaces",
                self.platform,
                path,
                {"tenant_id": tenant_id},
                201,
                also=[org_id],
            )
        )
        owner = ProbeKey(f"{label}/owner", label, frozenset({"admin", "ingest", "retrieve"}))
        ws = Workspace(label, org_id, tenant_id, len(self.world.workspaces), owner)
        self.world.workspaces.append(ws)
        self.world.add_marker(tenant_id, "tenant id", ws)
        await self._issue(ws, owner, "restricted")
        for name, roles, clearance in PRINCIPAL_ROLES:
            key = ProbeKey(f"{label}/{name}", label, frozenset(roles), clearance)
            await self._issue(ws, key, clearance)
            ws.principals.append(key)

    async def _issue(self, ws: Workspace, key: ProbeKey, clearance: str) -> None:
        body = {
            "org_id": ws.org_id,
            "tenant_id": ws.tenant_id,
            "roles": sorted(key.roles),
            "clearance": clearance,
        }
        answer = _obj(
            await self.setup_call(
                self._probe(
                    "POST /v1/keys", self.platform, "/v1/keys", body, 201, viewer=Viewer(ws.label)
                )
            )
        )
        key.secret = str(answer.get("key", ""))
        key.key_id = str(answer.get("key_id", ""))
        key.clearance = str(answer.get("clearance", clearance))
        if not key.secret or not key.key_id:
            raise SetupError("POST /v1/keys answered without a key or key id")
        self.world.add_marker(key.secret, "key", ws)
        self.world.add_marker(key.key_id, "key id", ws)

    async def _provision_content(self, ws: Workspace) -> None:
        await self.patch_settings(
            ws, {"strict_rag_isolation": True, "max_knowledge_bases_per_agent": 3}
        )
        self.world.add_marker(self.world.only_kb(ws), "knowledge base id", ws)
        self.world.add_marker(self.world.only_agent(ws), "agent id", ws)
        for kb_id in (*SHARED_KBS, self.world.only_kb(ws)):
            storage = STORAGE.get(kb_id, "org")
            answer = _obj(
                await self.setup_call(
                    self._probe(
                        "PUT /v1/knowledge-bases/{kb_id}",
                        ws.owner,
                        f"/v1/knowledge-bases/{kb_id}",
                        {"storage": storage, **KB_SETTINGS},
                        201,
                    )
                )
            )
            top_k = _obj(_obj(answer.get("effective")).get("top_k")).get("value")
            ws.top_k = min(ws.top_k, int(top_k)) if isinstance(top_k, int) else ws.top_k
            ws.kbs.append(kb_id)
            ws.changes += 1
        await self._plant_documents(ws)
        agents = {
            AGENT_MAIN: [KB_MAIN, KB_COMMON],
            AGENT_EXTRA: [KB_EXTRA],
            AGENT_GROUND: [KB_GROUND],
            self.world.only_agent(ws): [self.world.only_kb(ws)],
        }
        for agent_id, kb_ids in agents.items():
            await self.put_agent(ws, agent_id, kb_ids, expect=201)

    async def _plant_documents(self, ws: Workspace) -> None:
        world = self.world
        docs = [world.new_doc(ws, KB_MAIN, f"doc-{label}", label) for label in CLASSIFICATIONS]
        docs.append(world.new_doc(ws, KB_MAIN, SCRATCH, "internal"))
        docs += [world.new_doc(ws, KB_COMMON, f"doc-{label}", label) for label in CLASSIFICATIONS]
        docs.append(world.new_doc(ws, KB_EXTRA, "doc-extra", "internal"))
        # a different number of documents per workspace, so no two workspaces' counts agree
        docs += [
            world.new_doc(ws, KB_EXTRA, f"doc-filler-{n}", CLASSIFICATIONS[n % 4])
            for n in range(ws.index)
        ]
        docs.append(world.new_doc(ws, KB_GROUND, "doc-ground-public", "public"))
        docs.append(world.new_doc(ws, KB_GROUND, "doc-ground-restricted", "restricted"))
        await _all(self.put_document(ws, doc) for doc in docs)
        held = [world.new_doc(ws, KB_MAIN, f"doc-held-{n}", None) for n in range(ws.index + 1)]
        for doc in held:
            await self.put_document(ws, doc)
        if self.legacy_writer is not None:
            for kb_id in (KB_MAIN, KB_COMMON):
                await self._plant_legacy(
                    ws, world.new_doc(ws, kb_id, "doc-legacy", "internal", legacy=True)
                )

    async def _plant_legacy(self, ws: Workspace, doc: Doc) -> None:
        assert self.legacy_writer is not None  # noqa: S101 — checked by the caller; for mypy
        doc.passages = await self.legacy_writer(
            LegacyDocument(
                org_id=ws.org_id,
                tenant_id=ws.tenant_id,
                kb_id=doc.kb_id,
                storage=STORAGE[doc.kb_id],
                document_id=doc.doc_id,
                title=doc.title,
                text=doc.text,
                classification=str(doc.classification),
            )
        )
        doc.live = doc.passages > 0

    async def put_document(self, ws: Workspace, doc: Doc, key: ProbeKey | None = None) -> None:
        """Index (or hold back) one document with the workspace's own key; must succeed."""
        held = doc.classification is None
        answer = _obj(
            await self.setup_call(
                self._probe(
                    "PUT /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                    key or ws.owner,
                    f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
                    doc.body(),
                    200,
                    viewer=Viewer(ws.label),
                )
            )
        )
        status = answer.get("status")
        if status != ("held_back" if held else "indexed"):
            raise SetupError(f"document {doc.describe()} answered status {status!r}")
        if held:
            ws.held_back[doc.kb_id] += 1
            return
        doc.passages = int(answer.get("passages", 0))
        doc.live = doc.passages > 0

    async def put_agent(
        self, ws: Workspace, agent_id: str, kb_ids: list[str], *, expect: int = 200
    ) -> None:
        await self.setup_call(
            self._probe(
                "PUT /v1/agents/{agent_id}",
                ws.owner,
                f"/v1/agents/{agent_id}",
                {"knowledge_base_ids": kb_ids},
                expect,
                viewer=Viewer(ws.label),
            )
        )
        if ws.agents.get(agent_id) != list(kb_ids):
            ws.changes += 1
        ws.agents[agent_id] = list(kb_ids)

    async def patch_settings(self, ws: Workspace, changes: Mapping[str, Any]) -> None:
        answer = _obj(
            await self.setup_call(
                self._probe(
                    "PATCH /v1/workspace/settings",
                    ws.owner,
                    "/v1/workspace/settings",
                    dict(changes),
                    200,
                    viewer=Viewer(ws.label),
                )
            )
        )
        for name, value in changes.items():
            if ws.settings.get(name) != value:
                ws.history += 1
            ws.settings[name] = value
        effective = _obj(answer.get("effective"))
        ws.strict = bool(_obj(effective.get("strict_rag_isolation")).get("value"))
        cap = _obj(effective.get("max_knowledge_bases_per_agent")).get("value")
        ws.kb_cap = cap if isinstance(cap, int) else ws.kb_cap
        if "strict_rag_isolation" in changes and ws.strict != changes["strict_rag_isolation"]:
            raise SetupError(f"{ws.label}: strict isolation did not change as asked")

    async def set_strict(self, wanted: Mapping[str, bool]) -> None:
        await _all(
            self.patch_settings(self.world.workspace(label), {"strict_rag_isolation": on})
            for label, on in wanted.items()
        )

    async def _route_exists_redact(self) -> bool:
        ws = self.world.workspaces[0]
        body = {"agent_id": AGENT_MAIN, "text": "nothing to see"}
        reply = await self.transport.request("POST", "/v1/redact", key=ws.owner.secret, body=body)
        if reply.status == 404:
            self.report.notes.append(
                "POST /v1/redact answered 404 for the caller's own agent: the route is not "
                "deployed here, so its probes were skipped"
            )
            return False
        return True

    async def _metrics_exposed(self) -> bool:
        """Whether /metrics can be scanned: without credentials, or else with the platform
        key (the gateway keeps it behind a credential); `metrics_reader` is who reads it."""
        statuses = []
        for reader in (self.anonymous, self.platform):
            reply = await self.transport.request("GET", "/metrics", key=reader.secret, body=None)
            if reply.status == 200:
                self.metrics_reader = reader
                return True
            statuses.append(str(reply.status))
        self.report.notes.append(
            f"GET /metrics answered {' and '.join(statuses)} without credentials and with the "
            "platform key: not exposed here, so it was not scanned"
        )
        return False

    # -- phase changes

    async def move_knowledge_bases(self) -> None:
        """kb-main leaves agent-main and joins agent-extra, in every workspace."""
        await _all(
            step
            for ws in self.world.workspaces
            for step in (
                self.put_agent(ws, AGENT_MAIN, [KB_COMMON]),
                self.put_agent(ws, AGENT_EXTRA, [KB_EXTRA, KB_MAIN]),
            )
        )

    async def migrate_knowledge_bases(self) -> None:
        """`kb-main` of the first workspace of each org gets a second vector set (the
        bundled re-quantized model's) beside its own; in the first org it then answers from
        it (switched with the override: there is no golden set). The phase's probes then
        meet KBs mid-migration, both sets in the org's collection: the new vectors must
        widen no Scope."""
        writers = [ws for ws in self.world.workspaces if ws.index % WORKSPACES_PER_ORG == 0]
        path = f"/v1/knowledge-bases/{KB_MAIN}/model-migration"
        endpoint = "/v1/knowledge-bases/{kb_id}/model-migration"
        for ws in writers:
            body = {"model": MIGRATION_MODEL}
            started = self._probe(f"POST {endpoint}", ws.owner, path, body, 202)
            await self.setup_call(started)
            ws.changes += 1
        for ws in writers:
            for _ in range(_MIGRATION_POLLS):
                shown = _obj(await self.setup_call(self._probe(f"GET {endpoint}", ws.owner, path)))
                if shown.get("status") == "built":
                    break
                if shown.get("status") != "building":
                    raise SetupError(f"{ws.label}: the migration is {shown.get('status')!r}")
                await asyncio.sleep(_MIGRATION_POLL_S)
            else:
                raise SetupError(f"{ws.label}: the migration was not built in time")
        switch = self._probe(
            f"POST {endpoint}/switch", writers[0].owner, f"{path}/switch", {"override": True}
        )
        await self.setup_call(switch)
        writers[0].changes += 1

    async def write_and_delete(self) -> None:
        """Rewrite and delete documents whose ids every workspace shares.

        The first workspace of each org rewrites `kb-main/doc-scratch` (a new canary) and
        then deletes it; every workspace deletes `kb-common/doc-public`. The other
        workspaces' documents with the same ids must not change (their stats, lists and
        retrievals are checked right after).
        """
        writers = [ws for ws in self.world.workspaces if ws.index % WORKSPACES_PER_ORG == 0]
        for ws in writers:
            old = self._doc(ws, KB_MAIN, SCRATCH)
            new = self.world.new_doc(ws, KB_MAIN, SCRATCH, "internal")
            await self.put_document(ws, new, key=self._key(ws, "ingest"))
            old.live = False
        deletions = [(ws, self._doc(ws, KB_MAIN, SCRATCH)) for ws in writers]
        deletions += [(ws, self._doc(ws, KB_COMMON, "doc-public")) for ws in self.world.workspaces]
        await self.run_all(self._delete_probe(ws, doc) for ws, doc in deletions)
        for _, doc in deletions:
            doc.live = False
        # deleting again: the document is gone here, though others still hold that id
        await self.run_all(
            self._probe(
                "DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                self._key(ws, "ingest"),
                f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
                None,
                404,
                mode="again",
                viewer=Viewer(ws.label),
            )
            for ws, doc in deletions
        )

    def _delete_probe(self, ws: Workspace, doc: Doc) -> Probe:
        def check(reply: Reply) -> list[Issue]:
            deleted = _obj(reply.json()).get("deleted_passages")
            if deleted == doc.passages:
                return []
            kind: Kind = (
                "leak" if isinstance(deleted, int) and deleted > doc.passages else "failure"
            )
            return [Issue(kind, f"deleted {deleted} passages; this workspace had {doc.passages}")]

        return self._probe(
            "DELETE /v1/knowledge-bases/{kb_id}/documents/{document_id}",
            self._key(ws, "ingest"),
            f"/v1/knowledge-bases/{doc.kb_id}/documents/{doc.doc_id}",
            None,
            200,
            mode="shared-id",
            viewer=Viewer(ws.label),
            check=check,
        )
