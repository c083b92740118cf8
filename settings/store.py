"""The SettingsStore port: records and settings, embedded (SQLite) or deployed (Redis).

Both adapters (`settings.stores.sqlite.store.SqliteStore`, `settings.stores.redis.store.RedisStore`)
pass the same contract tests and follow the same rules (`settings.store_rules`). All
methods are coroutines; the SQLite adapter runs its statements off the event loop.

Ids chosen by tenants (KB, agent, document) are always looked up together with
the tenant id, so two workspaces may both own a KB called `kb`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from settings.golden import Evaluation, GoldenSet, MeasuredLines
from settings.migration import ModelMigration
from settings.records import (
    AdminChange,
    Agent,
    ApiKey,
    DeletionRecord,
    KeyEvent,
    KnowledgeBase,
    Org,
    SettingChange,
    TurnRecord,
    Workspace,
)


class StoreError(RuntimeError):
    """Base class of store failures."""


class AlreadyExistsError(StoreError):
    """A record with that id exists (org, workspace or key)."""


class NotFoundError(StoreError):
    """The record to change does not exist (for the caller's tenant)."""


class NotEmptyError(StoreError):
    """The org to delete still has workspaces."""


class StoreUnavailableError(StoreError):
    """The backing service did not answer in time, or refused."""


class TurnRecords(Protocol):
    """The part of the store the retrieval turn and citation checks use: turn records."""

    async def put_turn(self, turn: TurnRecord, ttl_s: int) -> None: ...

    async def get_turn(self, tenant_id: str, turn_id: str) -> TurnRecord | None: ...


class LinesStore(Protocol):
    """The part of the store the off-topic lines use (`gateway.retrieval.off_topic_line`)."""

    async def put_measured_lines(self, lines: MeasuredLines) -> None: ...

    async def get_measured_lines(
        self, tenant_id: str, kb_id: str, scope: str
    ) -> MeasuredLines | None: ...


class SettingsStore(Protocol):
    """Where orgs, workspaces, KBs, agents, keys, audit history and turns are kept."""

    # organizations and workspaces
    async def create_org(self, org: Org) -> None:
        """Raises AlreadyExistsError if the org id is taken."""

    async def get_org(self, org_id: str) -> Org | None: ...

    async def create_workspace(self, workspace: Workspace) -> None:
        """Raises AlreadyExistsError if the tenant id is taken in any org, ignoring case (so
        two workspaces never differ only in case), NotFoundError if the org does not exist."""

    async def get_workspace(self, tenant_id: str) -> Workspace | None: ...

    async def pseudonym_key(self, tenant_id: str) -> bytes | None:
        """The workspace's pseudonym key (`store_rules.PSEUDONYM_KEY_BYTES` random bytes,
        made with the workspace, removed with it); None when there is no such workspace.

        A workspace stored without one gets one here, written only if it still has none,
        so every replica reads the same key. The key is kept beside the Workspace record,
        never in it: no API answer, export or log holds it."""

    async def list_workspaces(self, org_id: str) -> list[Workspace]:
        """The org's workspaces, ordered by tenant id."""

    # deletion: mark first, then remove; a marked id stays taken until removed
    async def mark_org_deleting(self, org_id: str) -> Org | None:
        """Set the org's state to `deleting` (None, nothing written: no such org)."""

    async def mark_workspace_deleting(self, tenant_id: str) -> Workspace | None:
        """Set the workspace's state to `deleting` (None, nothing written: no such
        workspace)."""

    async def delete_workspace(self, tenant_id: str) -> bool:
        """Remove the workspace record, its pseudonym key, its settings, admin and key
        histories (every KeyEvent of the tenant id) and whatever KBs, agents and held-back
        counters it still has; False when there was no such workspace. Keys and turn
        records are removed by their own methods. A workspace created again with the id
        starts with none of it."""

    async def delete_org(self, org_id: str) -> bool:
        """Remove the org record; False when there was none. NotEmptyError while the org
        still has a workspace."""

    async def pending_deletions(self) -> tuple[list[Org], list[Workspace]]:
        """Orgs and workspaces marked `deleting` (deletions not completed), each ordered
        by id."""

    async def record_deletion(self, record: DeletionRecord) -> None:
        """Append the audit record of a completed deletion."""

    async def deletion_history(self) -> list[DeletionRecord]:
        """Every completed deletion's audit record, oldest first."""

    async def update_workspace_settings(
        self, tenant_id: str, changes: Mapping[str, Any], *, key_id: str, at: str
    ) -> Workspace:
        """Apply changes and record one SettingChange per changed key, atomically.

        A value of None removes the stored setting (back to its default).
        Raises NotFoundError if the workspace does not exist.
        """

    async def settings_history(self, tenant_id: str) -> list[SettingChange]:
        """Changes of one workspace, oldest first."""

    # knowledge bases and agents
    async def put_knowledge_base(self, kb: KnowledgeBase) -> bool:
        """Create or replace; True when it was created. NotFoundError if the workspace is
        unknown."""

    async def get_knowledge_base(self, tenant_id: str, kb_id: str) -> KnowledgeBase | None: ...

    async def list_knowledge_bases(self, tenant_id: str) -> list[KnowledgeBase]: ...

    async def put_agent(self, agent: Agent) -> bool:
        """Create or replace; True when it was created. NotFoundError if the workspace is
        unknown."""

    async def get_agent(self, tenant_id: str, agent_id: str) -> Agent | None: ...

    async def list_agents(self, tenant_id: str) -> list[Agent]: ...

    async def delete_knowledge_base(self, tenant_id: str, kb_id: str) -> bool:
        """Remove the KB record and its held-back counter; False when there was none."""

    async def delete_agent(self, tenant_id: str, agent_id: str) -> bool:
        """Remove the agent record; False when there was none."""

    async def record_admin_change(self, change: AdminChange) -> None:
        """Append one change of a KB or agent to its workspace's history."""

    async def admin_history(self, tenant_id: str) -> list[AdminChange]:
        """KB and agent changes of one workspace, oldest first."""

    # golden sets and evaluations (`settings.golden`); removed by `delete_calibration`,
    # which deleting a KB or a workspace calls first
    async def put_golden_set(self, golden: GoldenSet) -> None:
        """Create or replace the KB's golden set. NotFoundError if the workspace is unknown."""

    async def get_golden_set(self, tenant_id: str, kb_id: str) -> GoldenSet | None: ...

    async def start_evaluation(self, evaluation: Evaluation, *, lease_s: float) -> str | None:
        """Store a new running evaluation and take the workspace's evaluation lease for
        `lease_s` seconds; None when stored. While another evaluation of the workspace holds
        the lease, nothing is stored and that evaluation's id is returned. The KB keeps its
        newest `EVALUATIONS_KEPT` evaluations. NotFoundError if the workspace is unknown."""

    async def update_evaluation(self, evaluation: Evaluation, *, lease_s: float) -> bool:
        """Replace a stored evaluation: a running one renews the lease it holds, a finished
        one gives it back. False (nothing written) when it no longer exists."""

    async def get_evaluation(self, tenant_id: str, evaluation_id: str) -> Evaluation | None:
        """The tenant's evaluation (another tenant's: None)."""

    async def list_evaluations(self, tenant_id: str, kb_id: str) -> list[Evaluation]:
        """The KB's evaluations, newest first."""

    async def delete_calibration(self, tenant_id: str, kb_id: str | None = None) -> int:
        """Remove the KB's golden set, evaluations, measured lines and model migration (with
        None, those of every KB of the tenant) and give back the lease of a running
        evaluation; returns how many golden sets and evaluations went."""

    # a KB's model migration (`settings.migration`), removed by `delete_calibration`
    async def put_migration(self, migration: ModelMigration) -> bool:
        """Create or replace the KB's migration; False (nothing written) when the
        workspace is unknown."""

    async def get_migration(self, tenant_id: str, kb_id: str) -> ModelMigration | None:
        """The tenant's KB's migration (another tenant's: None)."""

    async def building_migrations(self) -> list[ModelMigration]:
        """Every migration still building, in any workspace: what a start resumes."""

    async def put_measured_lines(self, lines: MeasuredLines) -> None:
        """Keep the KB's lines for their Scope, replacing earlier ones; nothing when the
        workspace is unknown (it was deleted while they were measured)."""

    async def get_measured_lines(
        self, tenant_id: str, kb_id: str, scope: str
    ) -> MeasuredLines | None:
        """The KB's lines last kept for `scope` (another tenant's: None)."""

    async def append_settings_history(
        self, tenant_id: str, changes: Sequence[SettingChange]
    ) -> None:
        """Append changes stored elsewhere (KB settings applied from an evaluation) to the
        workspace's settings history."""

    # held-back counters (documents screened out at ingest)
    async def add_held_back(self, tenant_id: str, kb_id: str, count: int = 1) -> int:
        """Increment and return the KB's held-back count."""

    async def held_back(self, tenant_id: str, kb_id: str) -> int: ...

    # credentials
    async def create_api_key(self, key: ApiKey, event: KeyEvent | None = None) -> None:
        """Raises AlreadyExistsError on a duplicate key id or hash.

        `event`, when given, is appended to the key history in the same write.
        """

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None: ...

    async def get_api_key(self, key_id: str) -> ApiKey | None:
        """A credential by its id (None when unknown or revoked)."""

    async def list_api_keys(self) -> list[ApiKey]:
        """Every stored key, ordered by id, with `last_used_at` filled in."""

    async def revoke_api_key(self, key_id: str, event: KeyEvent | None = None) -> ApiKey | None:
        """Delete the key (its hash no longer finds it) and append `event`, in one write.

        Returns the removed record; None (and nothing written) when there was none.
        """

    async def record_key_use(self, key_id: str, at: str) -> None:
        """Remember when a key was last used (a revoked key's use is ignored)."""

    async def key_history(self) -> list[KeyEvent]:
        """Every key creation and revocation, oldest first."""

    # turn records, kept for `ttl_s` seconds
    async def put_turn(self, turn: TurnRecord, ttl_s: int) -> None: ...

    async def get_turn(self, tenant_id: str, turn_id: str) -> TurnRecord | None:
        """The tenant's turn if it exists and has not expired (another tenant's: None)."""

    async def delete_turns(self, tenant_id: str) -> int:
        """Remove every turn record of the tenant; returns how many."""

    async def purge_expired_turns(self) -> int:
        """Remove turn records past their time now; returns how many (0 where the store
        expires them itself)."""

    # retention
    async def purge_settings_history(self, before: str) -> int:
        """Remove every workspace's settings changes made before `before` (ISO 8601,
        UTC); returns how many."""

    async def purge_admin_history(self, before: str) -> int:
        """Remove every workspace's KB and agent changes made before `before` (ISO 8601,
        UTC); returns how many."""

    # operations
    async def ping(self) -> None:
        """Raise StoreUnavailableError when the store cannot answer."""

    async def close(self) -> None: ...
