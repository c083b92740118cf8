"""How the administration commands reach a gateway: a running one over its HTTP API, or the
embedded data dir in this process, with no gateway serving it.

Both answer with the HTTP API's JSON and refuse with its problem details (`Refused`), so a
command prints the same whichever way it went. Over HTTP the key decides who is calling.
In this process the caller holds the data dir: platform operations act as the platform,
workspace operations as a workspace admin of `--tenant` (roles admin, ingest and retrieve,
clearance `restricted`; recorded as key id `cli`), through the same core functions, request
rules and response Structs as the API.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

if TYPE_CHECKING:
    from gateway.access.auth import Principal
    from gateway.admin.knowledge import Knowledge
    from gateway.admin.lifecycle import Deletions
    from gateway.admin.migration import Migrations
    from gateway.admin.workspace import WorkspaceSettings
    from gateway.retrieval.plan import Planning
    from gateway.retrieval.turn import Retrieval

S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")
_TIMEOUT_S = 60.0
#: the key id an embedded workspace operation is recorded with
CLI_KEY_ID = "cli"


class Refused(Exception):
    """The gateway refused: its status and problem details."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body

    def render(self) -> str:
        detail = self.body.get("detail") or self.body.get("title") or ""
        field = self.body.get("field")
        return f"refused, {self.status}: {detail}" + (f" ({field})" if field else "")


class Unreachable(Exception):
    """No gateway to talk to (nothing answers at the URL, or the data dir is in use)."""


class Gateway(Protocol):
    """The API operations the commands use; answers are the API's JSON."""

    async def create_org(self, org_id: str) -> dict[str, Any]: ...
    async def create_workspace(
        self, org_id: str, tenant_id: str, created_at: str | None
    ) -> dict[str, Any]: ...
    async def delete_workspace(self, org_id: str, tenant_id: str) -> dict[str, Any]: ...
    async def delete_org(self, org_id: str) -> dict[str, Any]: ...
    async def create_key(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def list_keys(self, org_id: str | None, tenant_id: str | None) -> dict[str, Any]: ...
    async def revoke_key(self, key_id: str) -> dict[str, Any]: ...
    async def list_knowledge_bases(self) -> dict[str, Any]: ...
    async def get_knowledge_base(self, kb_id: str) -> dict[str, Any]: ...
    async def knowledge_base_stats(self, kb_id: str) -> dict[str, Any]: ...
    async def put_knowledge_base(self, kb_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def delete_knowledge_base(self, kb_id: str) -> dict[str, Any]: ...
    async def list_agents(self) -> dict[str, Any]: ...
    async def get_agent(self, agent_id: str) -> dict[str, Any]: ...
    async def put_agent(self, agent_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def delete_agent(self, agent_id: str) -> dict[str, Any]: ...
    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def workspace_settings(self) -> dict[str, Any]: ...
    async def change_workspace_settings(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def settings_history(self) -> dict[str, Any]: ...
    async def workspace_changes(self, kind: str, object_id: str | None) -> dict[str, Any]: ...
    async def model_migration(
        self, kb_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...


#: a model migration's actions (`kbgate kbs migration <kb> <action>`)
MIGRATION_ACTIONS = ("show", "start", "validate", "switch", "rollback", "retire", "cancel")


class HttpGateway:
    """A running gateway, through kbgate_client (typed calls; answers as the API's JSON).
    Use it as an async context manager: it holds the connections."""

    def __init__(self, url: str, key: str) -> None:
        from kbgate_client import AsyncClient

        self._client = AsyncClient(url, key, timeout_s=_TIMEOUT_S)

    async def __aenter__(self) -> HttpGateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._client.aclose()

    async def create_org(self, org_id: str) -> dict[str, Any]:
        return await _http(self._client.create_org(org_id))

    async def create_workspace(
        self, org_id: str, tenant_id: str, created_at: str | None
    ) -> dict[str, Any]:
        return await _http(self._client.create_workspace(org_id, tenant_id, created_at=created_at))

    async def delete_workspace(self, org_id: str, tenant_id: str) -> dict[str, Any]:
        return await _http(self._client.delete_workspace(org_id, tenant_id))

    async def delete_org(self, org_id: str) -> dict[str, Any]:
        return await _http(self._client.delete_org(org_id))

    async def create_key(self, body: dict[str, Any]) -> dict[str, Any]:
        from kbgate_client.models import CreateKey

        return await _http(self._client.create_key(_body(CreateKey, body)))

    async def list_keys(self, org_id: str | None, tenant_id: str | None) -> dict[str, Any]:
        return await _http(self._client.list_keys(org_id=org_id, tenant_id=tenant_id))

    async def revoke_key(self, key_id: str) -> dict[str, Any]:
        return await _http(self._client.revoke_key(key_id))

    async def list_knowledge_bases(self) -> dict[str, Any]:
        return await _http(self._client.list_knowledge_bases())

    async def get_knowledge_base(self, kb_id: str) -> dict[str, Any]:
        return await _http(self._client.get_knowledge_base(kb_id))

    async def knowledge_base_stats(self, kb_id: str) -> dict[str, Any]:
        return await _http(self._client.get_knowledge_base_stats(kb_id))

    async def put_knowledge_base(self, kb_id: str, body: dict[str, Any]) -> dict[str, Any]:
        from kbgate_client.models import PutKnowledgeBase

        return await _http(self._client.put_knowledge_base(kb_id, _body(PutKnowledgeBase, body)))

    async def delete_knowledge_base(self, kb_id: str) -> dict[str, Any]:
        return await _http(self._client.delete_knowledge_base(kb_id))

    async def list_agents(self) -> dict[str, Any]:
        return await _http(self._client.list_agents())

    async def get_agent(self, agent_id: str) -> dict[str, Any]:
        return await _http(self._client.get_agent(agent_id))

    async def put_agent(self, agent_id: str, body: dict[str, Any]) -> dict[str, Any]:
        from kbgate_client.models import PutAgent

        return await _http(self._client.put_agent(agent_id, _body(PutAgent, body)))

    async def delete_agent(self, agent_id: str) -> dict[str, Any]:
        return await _http(self._client.delete_agent(agent_id))

    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        from kbgate_client.models import RetrieveIn
        from kbgate_client.operations import retrieve

        return await _http(self._client.call(retrieve, _body(RetrieveIn, body)))

    async def workspace_settings(self) -> dict[str, Any]:
        return await _http(self._client.get_workspace_settings())

    async def change_workspace_settings(self, body: dict[str, Any]) -> dict[str, Any]:
        from kbgate_client.models import PatchWorkspaceSettings

        return await _http(
            self._client.patch_workspace_settings(_body(PatchWorkspaceSettings, body))
        )

    async def settings_history(self) -> dict[str, Any]:
        return await _http(self._client.get_workspace_settings_history())

    async def workspace_changes(self, kind: str, object_id: str | None) -> dict[str, Any]:
        return await _http(self._client.get_workspace_changes(kind=kind, object_id=object_id))

    async def model_migration(
        self, kb_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        from kbgate_client.models import StartMigration, SwitchMigration

        client = self._client
        if action == "start":
            started = _body(StartMigration, body or {})
            return await _http(client.start_model_migration(kb_id, started))
        if action == "switch":
            switched = _body(SwitchMigration, body or {})
            return await _http(client.switch_model_migration(kb_id, switched))
        step = {
            "show": client.get_model_migration,
            "validate": client.validate_model_migration,
            "rollback": client.roll_back_model_migration,
            "retire": client.retire_model_migration,
            "cancel": client.cancel_model_migration,
        }[action]
        return await _http(step(kb_id))


def _body(kind: type[S], body: dict[str, Any]) -> S:
    """A request body as the client's model; Refused (422, naming the field) when it is not."""
    try:
        return msgspec.convert(body, type=kind)
    except msgspec.ValidationError as error:
        raise _invalid(error) from None


async def _http(call: Awaitable[msgspec.Struct]) -> dict[str, Any]:
    """Await a client call; its answer as JSON, its refusal as Refused, no answer as
    Unreachable."""
    from kbgate_client import ProblemError, TransportError

    try:
        return _json(await call)
    except ProblemError as error:
        problem = msgspec.to_builtins(error.problem)
        raise Refused(error.status, problem) from None
    except TransportError as error:
        raise Unreachable(f"no gateway answered: {error}") from None


class EmbeddedGateway:
    """The embedded data dir's use cases in this process (see the module docstring)."""

    def __init__(
        self,
        *,
        knowledge: Knowledge,
        planning: Planning,
        retrieval: Retrieval,
        workspaces: WorkspaceSettings,
        deletions: Deletions,
        workspace: Principal | None,
        migrations: Migrations | None = None,
    ) -> None:
        """The use cases the commands run, and the workspace they act in (None: platform
        operations only)."""
        self._migrations = migrations
        self._knowledge = knowledge
        self._planning = planning
        self._retrieval = retrieval
        self._workspaces = workspaces
        self._deletions = deletions
        self._workspace = workspace

    async def create_org(self, org_id: str) -> dict[str, Any]:
        from gateway.admin import provisioning
        from gateway.http.provisioning_schemas import CreateOrg, OrgOut
        from ingest.index import org_collection

        data = _strict(CreateOrg, {"org_id": org_id})
        org = await self._core(
            provisioning.create_org(self._knowledge.store, self._knowledge.index, data.org_id)
        )
        collection = org_collection(org.org_id)
        return _json(OrgOut(org_id=org.org_id, created_at=org.created_at, collection=collection))

    async def create_workspace(
        self, org_id: str, tenant_id: str, created_at: str | None
    ) -> dict[str, Any]:
        from gateway.admin import provisioning
        from gateway.http.provisioning_schemas import CreateWorkspace, WorkspaceOut

        body = {"tenant_id": tenant_id, **({"created_at": created_at} if created_at else {})}
        data = _strict(CreateWorkspace, body)
        workspace = await self._core(
            provisioning.create_workspace(
                self._knowledge.store, org_id, data.tenant_id, data.created_at
            )
        )
        return _json(
            WorkspaceOut(
                tenant_id=workspace.tenant_id,
                org_id=workspace.org_id,
                created_at=workspace.created_at,
            )
        )

    async def delete_workspace(self, org_id: str, tenant_id: str) -> dict[str, Any]:
        from gateway.admin import lifecycle
        from gateway.admin.provisioning import PLATFORM
        from gateway.http.routes.provisioning import workspace_deleted_out

        removal = await self._core(
            lifecycle.delete_workspace(self._deletions, org_id, tenant_id, PLATFORM)
        )
        return _json(workspace_deleted_out(org_id, tenant_id, removal))

    async def delete_org(self, org_id: str) -> dict[str, Any]:
        from gateway.admin import lifecycle
        from gateway.admin.provisioning import PLATFORM
        from gateway.http.routes.provisioning import org_deleted_out

        done = await self._core(lifecycle.delete_org(self._deletions, org_id, PLATFORM))
        return _json(org_deleted_out(org_id, done))

    async def create_key(self, body: dict[str, Any]) -> dict[str, Any]:
        from gateway.admin import provisioning
        from gateway.http.key_schemas import CreateKey, KeyOut

        data = _strict(CreateKey, body)
        secret, record = await self._core(
            provisioning.create_key(
                self._knowledge.store,
                org_id=data.org_id,
                tenant_id=data.tenant_id,
                roles=data.roles,
                clearance=data.clearance,
                expires_at=data.expires_at,
                ttl_s=data.ttl_s,
            )
        )
        return _json(
            KeyOut(
                key=secret,
                key_id=record.key_id,
                org_id=record.org_id,
                tenant_id=record.tenant_id,
                roles=record.roles,
                clearance=record.clearance,
                created_at=record.created_at,
                expires_at=record.expires_at,
            )
        )

    async def list_keys(self, org_id: str | None, tenant_id: str | None) -> dict[str, Any]:
        from gateway.admin import keys
        from gateway.admin.provisioning import PLATFORM
        from gateway.http.key_schemas import KeyList
        from gateway.http.routes.keys import key_info

        found = await self._core(keys.list_keys(self._knowledge.store, PLATFORM, org_id, tenant_id))
        return _json(KeyList(keys=[key_info(key) for key in found]))

    async def revoke_key(self, key_id: str) -> dict[str, Any]:
        from gateway.admin import keys
        from gateway.admin.provisioning import PLATFORM
        from gateway.http.key_schemas import RevokedOut

        knowledge = self._knowledge
        revoked = await self._core(
            keys.revoke_key(
                knowledge.store, knowledge.settings, knowledge.telemetry, PLATFORM, key_id
            )
        )
        return _json(RevokedOut(key_id=revoked.key_id, revoked=True))

    async def list_knowledge_bases(self) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.knowledge_schemas import KnowledgeBaseList
        from gateway.http.routes.knowledge import knowledge_base_out

        found = await self._core(knowledge.knowledge_bases(self._knowledge.store, self._admin()))
        listed = [await knowledge_base_out(self._planning, self._admin(), kb) for kb in found]
        return _json(KnowledgeBaseList(knowledge_bases=listed))

    async def get_knowledge_base(self, kb_id: str) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.routes.knowledge import knowledge_base_out

        kb = await self._core(
            knowledge.knowledge_base_of(self._knowledge.store, self._admin(), kb_id)
        )
        return _json(await knowledge_base_out(self._planning, self._admin(), kb))

    async def knowledge_base_stats(self, kb_id: str) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.knowledge_schemas import StatsOut

        documents, passages, held_back = await self._core(
            knowledge.knowledge_base_stats(
                self._knowledge.store, self._knowledge.index, self._admin(), kb_id
            )
        )
        return _json(StatsOut(documents=documents, passages=passages, held_back=held_back))

    async def put_knowledge_base(self, kb_id: str, body: dict[str, Any]) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.bodies import knowledge_base_settings
        from gateway.http.knowledge_schemas import PutKnowledgeBase
        from gateway.http.routes.knowledge import knowledge_base_out

        data = _strict(PutKnowledgeBase, body)
        kb, _ = await self._core(
            knowledge.put_knowledge_base(
                self._knowledge,
                self._admin(),
                kb_id,
                name=data.name,
                storage=data.storage,
                settings=knowledge_base_settings(data),
            )
        )
        return _json(await knowledge_base_out(self._planning, self._admin(), kb))

    async def delete_knowledge_base(self, kb_id: str) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.knowledge_schemas import KnowledgeBaseDeletedOut, KnowledgeBaseRemoved

        removal = await self._core(
            knowledge.delete_knowledge_base(self._knowledge, self._admin(), kb_id)
        )
        removed = KnowledgeBaseRemoved(
            passages=removal.passages,
            documents=removal.documents,
            agents_detached=removal.agents_detached,
        )
        return _json(KnowledgeBaseDeletedOut(kb_id=kb_id, deleted=removed))

    async def list_agents(self) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.knowledge_schemas import AgentList
        from gateway.http.routes.knowledge import agent_out

        found = await self._core(knowledge.agents(self._knowledge.store, self._admin()))
        listed = [
            await agent_out(self._knowledge.store, self._knowledge.config, self._admin(), agent)
            for agent in found
        ]
        return _json(AgentList(agents=listed))

    async def get_agent(self, agent_id: str) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.routes.knowledge import agent_out

        agent = await self._core(knowledge.agent_of(self._knowledge.store, self._admin(), agent_id))
        return _json(
            await agent_out(self._knowledge.store, self._knowledge.config, self._admin(), agent)
        )

    async def put_agent(self, agent_id: str, body: dict[str, Any]) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.bodies import agent_settings
        from gateway.http.knowledge_schemas import PutAgent
        from gateway.http.routes.knowledge import agent_out

        data = _strict(PutAgent, body)
        agent, _ = await self._core(
            knowledge.put_agent(
                self._knowledge,
                self._admin(),
                agent_id,
                data.knowledge_base_ids,
                agent_settings(data),
            )
        )
        return _json(
            await agent_out(self._knowledge.store, self._knowledge.config, self._admin(), agent)
        )

    async def delete_agent(self, agent_id: str) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.knowledge_schemas import AgentDeletedOut

        agent = await self._core(knowledge.delete_agent(self._knowledge, self._admin(), agent_id))
        return _json(AgentDeletedOut(agent_id=agent.agent_id, deleted=True))

    async def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        from gateway.http.retrieval_schemas import RetrieveIn
        from gateway.http.routes.retrieval import context_budget, retrieve_out
        from gateway.retrieval import turn
        from gateway.retrieval.plan import settle_lines

        data = _strict(RetrieveIn, body)
        # a one-off process: its only turn counts, so the KBs' lines are measured first
        await self._core(settle_lines(self._planning, self._admin(), data.agent_id))
        result = await self._core(
            turn.retrieve(
                self._retrieval,
                self._admin(),
                data.agent_id,
                data.question,
                data.variations,
                asks=turn.TurnAsks(
                    filter=data.filter, as_of=data.as_of, budget=context_budget(data.budget)
                ),
            )
        )
        return _json(retrieve_out(result))

    async def workspace_settings(self) -> dict[str, Any]:
        from gateway.admin import workspace
        from gateway.http.routes.workspace import workspace_settings_out

        found = await self._core(workspace.workspace_of(self._workspaces.store, self._admin()))
        return _json(workspace_settings_out(self._workspaces, found))

    async def change_workspace_settings(self, body: dict[str, Any]) -> dict[str, Any]:
        from gateway.admin import workspace
        from gateway.http.bodies import settings_changes
        from gateway.http.routes.workspace import workspace_settings_out
        from gateway.http.workspace_schemas import PatchWorkspaceSettings

        changes = settings_changes(_strict(PatchWorkspaceSettings, body))
        updated = await self._core(
            workspace.change_settings(self._workspaces, self._admin(), changes)
        )
        return _json(workspace_settings_out(self._workspaces, updated))

    async def settings_history(self) -> dict[str, Any]:
        from gateway.admin import workspace
        from gateway.http.routes.workspace import history_out

        changes = await self._core(workspace.history(self._workspaces.store, self._admin()))
        return _json(history_out(changes))

    async def workspace_changes(self, kind: str, object_id: str | None) -> dict[str, Any]:
        from gateway.admin import knowledge
        from gateway.http.routes.workspace import admin_changes_out

        changes = await self._core(
            knowledge.admin_history(
                self._knowledge.store, self._admin(), kind=kind, object_id=object_id
            )
        )
        return _json(admin_changes_out(changes))

    async def model_migration(
        self, kb_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A migration's action in this process; a job started here runs while the command
        does (`--watch`), and a `kbgate serve` on the data dir resumes it."""
        from gateway.admin import migration as admin
        from gateway.http.migration_schemas import StartMigration, SwitchMigration
        from gateway.http.routes.migration import migration_out

        migrations = self._migrations
        if migrations is None:  # pragma: no cover - `of` always gives it
            raise Refused(503, {"detail": "no migrations here"})
        principal, given = self._admin(), body or {}
        if action == "start":
            start = _strict(StartMigration, given)
            found = await self._core(
                admin.start_migration(
                    migrations,
                    principal,
                    kb_id,
                    start.model,
                    switch_when_not_worse_by=start.switch_when_not_worse_by,
                )
            )
        elif action == "switch":
            data = _strict(SwitchMigration, given)
            found = await self._core(
                admin.switch(
                    migrations,
                    principal,
                    kb_id,
                    override=data.override,
                    max_ndcg_drop=data.max_ndcg_drop,
                )
            )
        elif action == "show":
            found = await self._core(admin.migration_of(migrations.store, principal, kb_id))
        else:
            step = {
                "validate": admin.start_validation,
                "rollback": admin.roll_back,
                "retire": admin.retire,
                "cancel": admin.cancel_migration,
            }[action]
            found = await self._core(step(migrations, principal, kb_id))
        return _json(await migration_out(migrations, found))

    def _admin(self) -> Principal:
        if self._workspace is None:
            raise Refused(422, {"detail": "pass --tenant: the workspace to act in"})
        return self._workspace

    async def _core(self, call: Awaitable[T]) -> T:
        """Await a core function; its refusal as the API's problem details."""
        from gateway.errors import GatewayError
        from gateway.http.problems import gateway_problem

        try:
            return await call
        except GatewayError as error:
            problem = gateway_problem(error)
            extra = problem.extra if isinstance(problem.extra, dict) else {}
            raise Refused(problem.status_code, {"detail": problem.detail, **extra}) from None


def _strict(kind: type[S], body: dict[str, Any]) -> S:
    """The request body as the API decodes it (strictly); 422 naming the field otherwise."""
    try:
        return msgspec.convert(body, type=kind, strict=True)
    except msgspec.ValidationError as error:
        raise _invalid(error) from None


def _invalid(error: msgspec.ValidationError) -> Refused:
    """A body that is not the schema, refused as the API refuses it (422 naming the field)."""
    message = str(error)
    field = message.rsplit("`$.", 1)[1].rstrip("`") if "`$." in message else None
    detail = message.split(" - at ", maxsplit=1)[0]
    return Refused(422, {"detail": detail, "field": field})


def _json(answer: msgspec.Struct) -> dict[str, Any]:
    return dict(msgspec.to_builtins(answer))


@asynccontextmanager
async def embedded_gateway(
    data_dir: Path | None, tenant_id: str | None, purpose: str
) -> AsyncIterator[EmbeddedGateway]:
    """The embedded data dir's services in this process, the data dir held meanwhile;
    Unreachable when it is in use (a gateway serving it) or, with `tenant_id`, when the
    workspace does not exist."""
    from gateway.access.auth import Principal
    from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir
    from gateway.runtime.services import build_services
    from gateway.telemetry import Telemetry, build_logger
    from ingest.payload import Classification
    from settings.config import load_config
    from settings.records import Role

    config = load_config(os.environ, data_dir=data_dir)
    try:
        lock = hold_data_dir(config, purpose)
    except DataDirInUseError as error:
        raise Unreachable(str(error)) from None
    services = await build_services(config, Telemetry(build_logger("WARNING", sys.stderr)))
    try:
        workspace = None
        if tenant_id is not None:
            found = await services.store.get_workspace(tenant_id)
            if found is None:
                raise Unreachable(f"no workspace {tenant_id!r} in {config.data_dir}")
            workspace = Principal(
                key_id=CLI_KEY_ID,
                roles=frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE}),
                org_id=found.org_id,
                tenant_id=found.tenant_id,
                clearance=Classification.RESTRICTED,
            )
        yield EmbeddedGateway(
            knowledge=services.knowledge,
            planning=services.planning,
            retrieval=services.retrieval,
            workspaces=services.workspaces,
            deletions=services.deletions,
            workspace=workspace,
            migrations=services.migrations,
        )
    finally:
        await services.close()
        if lock is not None:
            lock.release()
        close = getattr(services.embedder, "close", None)
        if callable(close):
            close()
