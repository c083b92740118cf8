"""A knowledge base's move to another dense model, without downtime or a blind switch.

Build beside: starting a migration gives the KB's collection a second named vector set
for the target model (`dense_<slug>`, `ingest.index.dense_vector_name`) and a background
job embeds every passage of the KB with it, page by page, on the expensive-work pool in
the workspace's share and on the model's passage runner at background priority; turns
keep answering from the vectors the KB's record names (`KnowledgeBase.embedding_model`),
and document writes embed new passages with both models while both sets are kept
(`gateway.admin.knowledge.write_target`). The job needs no cursor to resume: the points
still lacking the new vector are its work, found again after a restart
(`resume_migrations`), and a pass ends only once every passage of the KB has it.

Validate: the KB's golden set runs through a full evaluation on each vector set
(`gateway.calibration.evaluation`, the same measurements and recommendation), and the
migration keeps both sides' figures: nDCG@10, recall, abstention, recommended floors.

Switch, roll back, retire: switching writes the target model into the KB's record (the
next turn reads it within the settings staleness bound, at once on this replica) and
keeps the old vectors, so rolling back is the same write the other way; retiring removes
the vector set the KB does not answer from, and ends the migration. A KB without a
finished validation switches only with an explicit override. Every step is in the KB's
history (`AdminChange`, action `model_migration_<step>`) and in the migration's own steps,
with the acting key's id.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from gateway.access.auth import Principal, principal_of
from gateway.access.expensive import ExpensiveWork
from gateway.admin.knowledge import knowledge_base_of, record_change, target_of
from gateway.admin.migration_figures import Validation, figures_on, loaded, validation_of
from gateway.admin.migration_pages import Progress, embed_page
from gateway.background import BackgroundTasks
from gateway.calibration.evaluation import Evaluator
from gateway.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidInputError,
    NotFoundError,
)
from gateway.telemetry import Telemetry
from ingest.embedder.embedding import ModelUnavailableError
from ingest.embedder.models import MAX_MODEL_ID, DenseModels
from ingest.index import DENSE_VECTOR, Index, IndexUnavailableError
from ingest.sync import Target
from settings.cache import CachedSettings
from settings.migration import MigrationStatus, MigrationStep, ModelMigration
from settings.records import KnowledgeBase
from settings.store import SettingsStore, StoreUnavailableError

#: passages read, embedded and written per unit of the background job
PAGE = 32
#: after a dependency fault the job waits this long, then goes on where it was
_RETRY_S = 5.0
_TASK = "model_migration"


@dataclass(frozen=True, slots=True)
class Migrations:
    """What a KB's model migration uses: the KB and migration records in the store, the
    settings cache a switch invalidates, the index holding both vector sets, the models,
    the expensive-work pool the embedding runs on, the background tasks its job and its
    validation run as, the evaluator the validation runs, and counts."""

    store: SettingsStore
    settings: CachedSettings
    index: Index
    models: DenseModels
    expensive: ExpensiveWork
    background: BackgroundTasks
    evaluator: Evaluator
    telemetry: Telemetry


_replace = msgspec.structs.replace


def _now() -> str:
    return datetime.now(UTC).isoformat()


def task_key(tenant_id: str, kb_id: str, what: str) -> tuple[str, str, str, str]:
    return (_TASK, tenant_id, kb_id, what)


def of_workspace(tenant_id: str, kb_id: str | None = None) -> Callable[[Hashable], bool]:
    """A predicate picking the workspace's (or one KB's) migration tasks."""

    def chosen(key: Hashable) -> bool:
        return (
            isinstance(key, tuple)
            and key[:2] == (_TASK, tenant_id)
            and (kb_id is None or key[2] == kb_id)
        )

    return chosen


# ---- reading --------------------------------------------------------------------------


async def migration_of(store: SettingsStore, principal: Principal, kb_id: str) -> ModelMigration:
    """The caller's KB's migration; NotFoundError when the KB is unknown or has none."""
    kb = await knowledge_base_of(store, principal, kb_id)
    found = await store.get_migration(principal.tenant_id, kb.kb_id)
    if found is None:
        raise NotFoundError("this knowledge base has no model migration", field="migration")
    return found


# ---- start and cancel -------------------------------------------------------------------


async def start_migration(
    migrations: Migrations,
    principal: Principal,
    kb_id: str,
    target_model: str,
    *,
    switch_when_not_worse_by: float | None = None,
) -> ModelMigration:
    """Start embedding the KB's passages with `target_model` beside its vectors, in the
    background. InvalidInputError (`model`) for a model this deployment cannot load offline
    or the one the KB answers from; ConflictError while another migration of the KB keeps
    two vector sets (a failed one with the same target is resumed instead). With
    `switch_when_not_worse_by`, once built it validates on the golden set as `principal`
    and switches when the new set's nDCG@10 is not lower by more (`_by_policy`)."""
    if switch_when_not_worse_by is not None and not 0.0 <= switch_when_not_worse_by <= 1.0:
        raise InvalidInputError("must be between 0 and 1", field="switch_when_not_worse_by")
    kb = await knowledge_base_of(migrations.store, principal, kb_id)
    models = migrations.models
    if not target_model.strip() or len(target_model) > MAX_MODEL_ID:
        raise InvalidInputError(f"must be 1..{MAX_MODEL_ID} characters", field="model")
    source, target = models.named(kb.embedding_model), models.named(target_model)
    if source == target:
        raise InvalidInputError("the knowledge base already answers from it", field="model")
    embedder = await loaded(models, target)
    existing = await migrations.store.get_migration(principal.tenant_id, kb.kb_id)
    if existing is not None and existing.both_sets:
        resumable = existing.status is MigrationStatus.FAILED and existing.target_model == target
        if not resumable:
            raise ConflictError(
                f"a migration to {existing.target_model!r} is {existing.status.value}: "
                "retire or cancel it first",
                field="migration",
            )
    vector = models.vector(target)
    if vector != DENSE_VECTOR:
        await migrations.index.add_dense_vector(
            target_of(kb).collection, vector, embedder.dense_dim
        )
    at = _now()
    if existing is not None and existing.both_sets:
        migration = _stepped(existing, principal, "resumed", MigrationStatus.BUILDING, at)
        migration = _replace(migration, error=None)
    else:
        migration = ModelMigration(
            migration_id="mig_" + secrets.token_urlsafe(12),
            tenant_id=principal.tenant_id,
            kb_id=kb.kb_id,
            source_model=source,
            target_model=target,
            key_id=principal.key_id,
            created_at=at,
            updated_at=at,
            steps=[MigrationStep(at=at, key_id=principal.key_id, action="started")],
            switch_when_not_worse_by=switch_when_not_worse_by,
        )
    await _save(migrations.store, migration)
    await record_change(migrations.store, principal, kb.kb_id, "model_migration_started")
    _run_job(migrations, migration)
    migrations.telemetry.count("model_migrations_started")
    return migration


async def cancel_migration(
    migrations: Migrations, principal: Principal, kb_id: str
) -> ModelMigration:
    """Stop a migration before it switched: its job stops and the new vectors go.
    ConflictError once the KB answers from the new vectors (roll back first)."""
    migration = await migration_of(migrations.store, principal, kb_id)
    allowed = {MigrationStatus.BUILDING, MigrationStatus.BUILT, MigrationStatus.FAILED}
    if migration.status not in allowed:
        raise ConflictError(
            f"the migration is {migration.status.value}: only one not switched can be cancelled",
            field="migration",
        )
    migrations.background.cancel_where(of_workspace(principal.tenant_id, kb_id))
    kb = await knowledge_base_of(migrations.store, principal, kb_id)
    await _drop_set(migrations, kb, migration.target_model)
    migration = _stepped(migration, principal, "cancelled", MigrationStatus.CANCELLED, _now())
    await _save(migrations.store, migration)
    await record_change(migrations.store, principal, kb.kb_id, "model_migration_cancelled")
    return migration


async def resume_migrations(migrations: Migrations) -> int:
    """Start again the job of every migration left building (a restart): each finds the
    passages still lacking the new vectors and goes on. Returns how many."""
    resumed = 0
    for migration in await migrations.store.building_migrations():
        key = task_key(migration.tenant_id, migration.kb_id, "build")
        if not migrations.background.running(key):
            _run_job(migrations, migration)
            resumed += 1
    if resumed:
        migrations.telemetry.log.info("model_migrations_resumed", count=resumed)
    return resumed


# ---- the background job ------------------------------------------------------------------


def _run_job(migrations: Migrations, migration: ModelMigration) -> None:
    key = task_key(migration.tenant_id, migration.kb_id, "build")
    migrations.background.cancel_where(lambda found: found == key)
    migrations.background.start(key, _build(migrations, migration))


async def _build(migrations: Migrations, migration: ModelMigration) -> None:
    """Embed the KB's passages that lack the target's vectors until none does; retry after
    a dependency fault; stop when the migration is no longer building (or is gone)."""
    while True:
        try:
            await _build_pass(migrations, migration)
        except (IndexUnavailableError, StoreUnavailableError, DependencyUnavailableError):
            migrations.telemetry.count("model_migration_retries")
            await asyncio.sleep(_RETRY_S)
        except (ModelUnavailableError, InvalidInputError) as error:
            await _fail(migrations, migration, f"model unavailable: {type(error).__name__}")
            return
        else:
            return


async def _build_pass(migrations: Migrations, started: ModelMigration) -> None:
    store, index = migrations.store, migrations.index
    kb = await store.get_knowledge_base(started.tenant_id, started.kb_id)
    current = await store.get_migration(started.tenant_id, started.kb_id)
    if kb is None or current is None or current.migration_id != started.migration_id:
        return
    target = target_of(kb)
    scope = target.write_scope()
    vector = migrations.models.vector(current.target_model)
    embedder = await loaded(migrations.models, current.target_model)
    progress = Progress(current)
    progress.total = await index.count(target.collection, scope)
    progress.done = await index.count_vector(target.collection, scope, vector)
    offset: str | None = None
    while True:
        latest = await store.get_migration(started.tenant_id, started.kb_id)
        if latest is None or latest.migration_id != started.migration_id:
            return
        if latest.status is not MigrationStatus.BUILDING:
            return
        page, offset = await index.missing_vector_page(
            target.collection, scope, vector, offset, PAGE
        )
        if page:
            vectors = await migrations.expensive.run(
                kb.tenant_id,
                functools.partial(embed_page, embedder, page, kb.tenant_id),
                kind="migration",
                wait=True,
            )
            written = await index.set_dense_vectors(target.collection, scope, vector, vectors)
            progress.embedded(written)
            await progress.maybe_save(store, latest)
        if offset is None:
            # Passages written behind the pass (before the writers embedded both) may
            # still lack the vectors: the KB is built only once none does.
            progress.total = await index.count(target.collection, scope)
            progress.done = await index.count_vector(target.collection, scope, vector)
            if progress.done >= progress.total:
                built = _replace(
                    progress.apply(latest),
                    status=MigrationStatus.BUILT,
                    steps=[*latest.steps, MigrationStep(at=_now(), key_id="", action="built")],
                )
                await _save(store, built)
                migrations.telemetry.count("model_migrations_built")
                if built.switch_when_not_worse_by is not None:
                    await _by_policy(migrations, built)
                return


async def _fail(migrations: Migrations, migration: ModelMigration, reason: str) -> None:
    latest = await migrations.store.get_migration(migration.tenant_id, migration.kb_id)
    if latest is None or latest.migration_id != migration.migration_id:
        return
    failed = _replace(latest, status=MigrationStatus.FAILED, error=reason, updated_at=_now())
    await _save(migrations.store, failed)
    migrations.telemetry.count("model_migrations_failed")


# ---- validation -------------------------------------------------------------------------


async def _by_policy(migrations: Migrations, migration: ModelMigration) -> None:
    """A built migration started with a switch policy: validated as the key that started
    it (its roles and clearance as they are now); a step says why when it cannot be (the
    key revoked, no golden set)."""
    store = migrations.store
    key = await store.get_api_key(migration.key_id)
    golden = await store.get_golden_set(migration.tenant_id, migration.kb_id)
    reason = "key_revoked" if key is None else ("no_golden_set" if golden is None else None)
    if key is None or reason is not None:
        step = MigrationStep(at=_now(), key_id="", action=f"policy_skipped_{reason}")
        await _save(store, _replace(migration, steps=[*migration.steps, step]))
        return
    await start_validation(migrations, principal_of(key), migration.kb_id)


async def start_validation(
    migrations: Migrations, principal: Principal, kb_id: str
) -> ModelMigration:
    """Run the KB's golden set on both vector sets in the background. ConflictError until
    the new vectors are complete, without a golden set, or while one runs."""
    migration = await migration_of(migrations.store, principal, kb_id)
    kb = await knowledge_base_of(migrations.store, principal, kb_id)
    usable = {MigrationStatus.BUILT, MigrationStatus.SWITCHED, MigrationStatus.ROLLED_BACK}
    if migration.status not in usable:
        raise ConflictError(
            f"the migration is {migration.status.value}: validation needs both vector sets "
            "complete",
            field="migration",
        )
    golden = await migrations.store.get_golden_set(principal.tenant_id, kb.kb_id)
    if golden is None:
        raise ConflictError(
            "this knowledge base has no golden set: PUT one first", field="golden_set"
        )
    key = task_key(principal.tenant_id, kb.kb_id, "validate")
    if migrations.background.running(key):
        raise ConflictError("a validation of this migration is running", field="validation")
    running = Validation(status="running", started_at=_now(), key_id=principal.key_id)
    migration = _replace(
        _stepped(migration, principal, "validation_started", migration.status, _now()),
        validation=msgspec.to_builtins(running),
    )
    await _save(migrations.store, migration)
    migrations.background.start(key, _validate(migrations, principal, kb, migration, running))
    return migration


async def _validate(
    migrations: Migrations,
    principal: Principal,
    kb: KnowledgeBase,
    migration: ModelMigration,
    running: Validation,
) -> None:
    golden = await migrations.store.get_golden_set(kb.tenant_id, kb.kb_id)
    if golden is None:
        return
    try:
        old, new = [
            await figures_on(
                migrations.models, migrations.evaluator, principal, kb, golden=golden, model=model
            )
            for model in (migration.source_model, migration.target_model)
        ]
        done = _replace(
            running,
            status="done",
            finished_at=_now(),
            old=old,
            new=new,
            ndcg_10_change=round(new.ndcg_10 - old.ndcg_10, 4),
        )
    except asyncio.CancelledError:
        raise
    except Exception as error:  # recorded, never raised into the background
        done = _replace(running, status="failed", finished_at=_now(), error=type(error).__name__)
    latest = await migrations.store.get_migration(kb.tenant_id, kb.kb_id)
    if latest is None or latest.migration_id != migration.migration_id:
        return
    step = MigrationStep(at=_now(), key_id=principal.key_id, action=f"validation_{done.status}")
    validated = _replace(latest, validation=msgspec.to_builtins(done), steps=[*latest.steps, step])
    await _save(migrations.store, validated)
    policy = validated.switch_when_not_worse_by
    if policy is None or validated.status is not MigrationStatus.BUILT or done.status != "done":
        return
    try:
        await switch(
            migrations, principal, kb.kb_id, max_ndcg_drop=policy, action="switched_by_policy"
        )
    except ConflictError:
        kept = await migrations.store.get_migration(kb.tenant_id, kb.kb_id)
        if kept is not None:
            step = MigrationStep(at=_now(), key_id=principal.key_id, action="policy_kept_old")
            await _save(migrations.store, _replace(kept, steps=[*kept.steps, step]))


# ---- switch, roll back, retire ----------------------------------------------------------


async def switch(
    migrations: Migrations,
    principal: Principal,
    kb_id: str,
    *,
    override: bool = False,
    max_ndcg_drop: float | None = None,
    action: str = "switched",
) -> ModelMigration:
    """Make the KB answer from the new vectors (the old ones stay). ConflictError until
    they are complete; without a finished validation (no golden set, or not run) unless
    `override`; and when `max_ndcg_drop` is given and the new set's nDCG@10 is below the
    old one's by more."""
    migration = await migration_of(migrations.store, principal, kb_id)
    if migration.status not in (MigrationStatus.BUILT, MigrationStatus.ROLLED_BACK):
        raise ConflictError(
            f"the migration is {migration.status.value}: only complete vectors can be switched to",
            field="migration",
        )
    validation = validation_of(migration)
    validated = validation is not None and validation.status == "done"
    if not validated and not override:
        raise ConflictError(
            "no finished validation on the golden set: validate first, or switch with "
            "override: true",
            field="validation",
        )
    if max_ndcg_drop is not None and validation is not None and validation.status == "done":
        change = validation.ndcg_10_change or 0.0
        if change < -max_ndcg_drop:
            raise ConflictError(
                f"the new vectors' nDCG@10 is {-change:.4f} below the old ones', more than "
                f"{max_ndcg_drop:g}",
                field="max_ndcg_drop",
            )
    await _require_complete(migrations, principal, migration)
    action = "switched_with_override" if not validated else action
    return await _answer_from(
        migrations,
        principal,
        migration,
        migration.target_model,
        status=MigrationStatus.SWITCHED,
        action=action,
    )


async def _require_complete(
    migrations: Migrations, principal: Principal, migration: ModelMigration
) -> None:
    """ConflictError, and the job started again, when some passage of the KB lacks the
    new vectors (a write that began before the migration landed after it was built)."""
    kb = await knowledge_base_of(migrations.store, principal, migration.kb_id)
    target = target_of(kb)
    scope = target.write_scope()
    vector = migrations.models.vector(migration.target_model)
    total = await migrations.index.count(target.collection, scope)
    done = await migrations.index.count_vector(target.collection, scope, vector)
    if done >= total:
        return
    building = _replace(
        _stepped(migration, principal, "building_again", MigrationStatus.BUILDING, _now()),
        done=done,
        total=total,
    )
    await _save(migrations.store, building)
    _run_job(migrations, building)
    raise ConflictError(
        f"{total - done} passages still lack the new vectors: building them, switch again "
        "once the migration is built",
        field="migration",
    )


async def roll_back(migrations: Migrations, principal: Principal, kb_id: str) -> ModelMigration:
    """Make the KB answer from the old vectors again (the new ones stay)."""
    migration = await migration_of(migrations.store, principal, kb_id)
    if migration.status is not MigrationStatus.SWITCHED:
        raise ConflictError(
            f"the migration is {migration.status.value}: only a switched one rolls back",
            field="migration",
        )
    return await _answer_from(
        migrations,
        principal,
        migration,
        migration.source_model,
        status=MigrationStatus.ROLLED_BACK,
        action="rolled_back",
    )


async def retire(migrations: Migrations, principal: Principal, kb_id: str) -> ModelMigration:
    """Remove the vector set the KB does not answer from, and end the migration: the old
    one after a switch, the new one otherwise (a migration given up)."""
    migration = await migration_of(migrations.store, principal, kb_id)
    kept = {MigrationStatus.BUILT, MigrationStatus.SWITCHED, MigrationStatus.ROLLED_BACK}
    if migration.status not in kept:
        raise ConflictError(
            f"the migration is {migration.status.value}: nothing to retire (cancel one "
            "that is building)",
            field="migration",
        )
    kb = await knowledge_base_of(migrations.store, principal, kb_id)
    answering = migrations.models.named(kb.embedding_model)
    retired = (
        migration.source_model if answering == migration.target_model else migration.target_model
    )
    await _drop_set(migrations, kb, retired)
    migration = _stepped(migration, principal, "retired", MigrationStatus.RETIRED, _now())
    await _save(migrations.store, migration)
    await record_change(migrations.store, principal, kb.kb_id, "model_migration_retired")
    migrations.telemetry.count("model_migrations_retired")
    return migration


async def _answer_from(
    migrations: Migrations,
    principal: Principal,
    migration: ModelMigration,
    model: str,
    *,
    status: MigrationStatus,
    action: str,
) -> ModelMigration:
    kb = await knowledge_base_of(migrations.store, principal, migration.kb_id)
    await loaded(migrations.models, model)  # the next turn's questions need it
    changed = msgspec.structs.replace(kb, embedding_model=migrations.models.own(model))
    await migrations.store.put_knowledge_base(changed)
    migrations.settings.invalidate(principal.tenant_id)
    migration = _stepped(migration, principal, action, status, _now())
    await _save(migrations.store, migration)
    await record_change(migrations.store, principal, kb.kb_id, f"model_migration_{action}")
    migrations.telemetry.count(f"model_migrations_{action}")
    return migration


async def _drop_set(migrations: Migrations, kb: KnowledgeBase, model: str) -> int:
    target: Target = target_of(kb)
    vector = migrations.models.vector(model)
    return await migrations.index.drop_dense_vectors(
        target.collection, target.write_scope(), vector
    )


# ---- helpers ----------------------------------------------------------------------------


def _stepped(
    migration: ModelMigration,
    principal: Principal,
    action: str,
    status: MigrationStatus,
    at: str,
) -> ModelMigration:
    step = MigrationStep(at=at, key_id=principal.key_id, action=action)
    return _replace(migration, status=status, updated_at=at, steps=[*migration.steps, step])


async def _save(store: SettingsStore, migration: ModelMigration) -> None:
    await store.put_migration(migration)
