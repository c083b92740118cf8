"""A KB's model migration: start, progress, validate, switch, roll back, retire, cancel
(admin role, own workspace only)."""

from __future__ import annotations

from litestar import Controller, Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody

from gateway.access.auth import Principal
from gateway.admin import migration as admin
from gateway.admin.knowledge import knowledge_base_of
from gateway.admin.migration import Migrations
from gateway.admin.migration_figures import validation_of
from gateway.http.dependencies import Injected
from gateway.http.migration_schemas import (
    MigrationOut,
    MigrationProgressOut,
    MigrationStepOut,
    StartMigration,
    SwitchMigration,
    VectorSetOut,
)
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.security import requires
from settings.migration import ModelMigration
from settings.records import Role

AnyRequest = Request[Principal, str, State]
MIGRATION = "/knowledge-bases/{kb_id:str}/model-migration"


async def migration_out(migrations: Migrations, migration: ModelMigration) -> MigrationOut:
    kb = await migrations.store.get_knowledge_base(migration.tenant_id, migration.kb_id)
    models = migrations.models
    answering = models.named(kb.embedding_model if kb is not None else "")
    kept = [migration.source_model, migration.target_model] if migration.both_sets else [answering]
    return MigrationOut(
        migration_id=migration.migration_id,
        kb_id=migration.kb_id,
        status=migration.status,
        source_model=migration.source_model,
        target_model=migration.target_model,
        created_at=migration.created_at,
        updated_at=migration.updated_at,
        key_id=migration.key_id,
        switch_when_not_worse_by=migration.switch_when_not_worse_by,
        progress=MigrationProgressOut(
            done=migration.done, total=migration.total, rate=migration.rate
        ),
        error=migration.error,
        validation=validation_of(migration),
        vector_sets=[
            VectorSetOut(model=model, vector=models.vector(model), answering=model == answering)
            for model in kept
        ],
        steps=[
            MigrationStepOut(at=step.at, key_id=step.key_id, action=step.action)
            for step in migration.steps
        ],
    )


class MigrationController(Controller):
    path = "/v1"
    guards = [requires(Role.ADMIN)]  # noqa: RUF012 — Litestar configuration
    tags = ["model migration"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @post(
        MIGRATION,
        status_code=202,
        operation_id="startModelMigration",
        summary="Embed the KB's passages with another model beside its vectors, in the "
        "background; poll the answer",
        responses={
            202: ResponseSpec(data_container=MigrationOut, description="Accepted"),
            **problems(*KEYED, *BODY, 404, 409),
        },
    )
    async def start(
        self,
        request: AnyRequest,
        migrations: Injected[Migrations],
        kb_id: FromPath[str],
        data: JSONBody[StartMigration],
    ) -> Response[MigrationOut]:
        found = await admin.start_migration(
            migrations,
            request.user,
            kb_id,
            data.model,
            switch_when_not_worse_by=data.switch_when_not_worse_by,
        )
        body = await migration_out(migrations, found)
        location = f"/v1/knowledge-bases/{kb_id}/model-migration"
        return Response(body, status_code=202, headers={"Location": location})

    @get(
        MIGRATION,
        operation_id="getModelMigration",
        summary="The KB's model migration: progress, validation, vector sets, steps",
        responses=problems(*KEYED, 404),
    )
    async def get_migration(
        self, request: AnyRequest, migrations: Injected[Migrations], kb_id: FromPath[str]
    ) -> MigrationOut:
        found = await admin.migration_of(migrations.store, request.user, kb_id)
        return await migration_out(migrations, found)

    @post(
        MIGRATION + "/validate",
        status_code=202,
        operation_id="validateModelMigration",
        summary="Run the KB's golden set on both vector sets in the background",
        responses={
            202: ResponseSpec(data_container=MigrationOut, description="Accepted"),
            **problems(*KEYED, 404, 409),
        },
    )
    async def validate(
        self, request: AnyRequest, migrations: Injected[Migrations], kb_id: FromPath[str]
    ) -> Response[MigrationOut]:
        found = await admin.start_validation(migrations, request.user, kb_id)
        return Response(await migration_out(migrations, found), status_code=202)

    @post(
        MIGRATION + "/switch",
        status_code=200,
        operation_id="switchModelMigration",
        summary="Make the KB answer from the new vectors (the old ones are kept)",
        responses=problems(*KEYED, *BODY, 404, 409),
    )
    async def switch(
        self,
        request: AnyRequest,
        migrations: Injected[Migrations],
        kb_id: FromPath[str],
        data: JSONBody[SwitchMigration],
    ) -> MigrationOut:
        found = await admin.switch(
            migrations,
            request.user,
            kb_id,
            override=data.override,
            max_ndcg_drop=data.max_ndcg_drop,
        )
        return await migration_out(migrations, found)

    @post(
        MIGRATION + "/rollback",
        status_code=200,
        operation_id="rollBackModelMigration",
        summary="Make the KB answer from the old vectors again",
        responses=problems(*KEYED, 404, 409),
    )
    async def roll_back(
        self, request: AnyRequest, migrations: Injected[Migrations], kb_id: FromPath[str]
    ) -> MigrationOut:
        found = await admin.roll_back(migrations, request.user, kb_id)
        return await migration_out(migrations, found)

    @post(
        MIGRATION + "/retire",
        status_code=200,
        operation_id="retireModelMigration",
        summary="Remove the vector set the KB does not answer from; the migration ends",
        responses=problems(*KEYED, 404, 409),
    )
    async def retire(
        self, request: AnyRequest, migrations: Injected[Migrations], kb_id: FromPath[str]
    ) -> MigrationOut:
        found = await admin.retire(migrations, request.user, kb_id)
        return await migration_out(migrations, found)

    @delete(
        MIGRATION,
        status_code=200,
        operation_id="cancelModelMigration",
        summary="Stop a migration not switched yet; its new vectors are removed",
        responses=problems(*KEYED, 404, 409),
    )
    async def cancel(
        self, request: AnyRequest, migrations: Injected[Migrations], kb_id: FromPath[str]
    ) -> MigrationOut:
        await knowledge_base_of(migrations.store, request.user, kb_id)
        found = await admin.cancel_migration(migrations, request.user, kb_id)
        return await migration_out(migrations, found)
